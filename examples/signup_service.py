"""A signup service: accounts whose email and handle are unique, as a web handler would use them.

Run it: ``python examples/signup_service.py`` (the embedded local server; ``--endpoint URL``, or
``AWS_ENDPOINT_URL_DYNAMODB=URL``, for another DynamoDB). The functions are what an HTTP layer would
call; each returns a status code and a body, and turns dynaunique's errors into answers a form can
show.
"""

from __future__ import annotations

import uuid
from typing import Any

from _local import connected

from dynaunique import ConcurrentModificationError, Model, UniqueViolation, normalizers
from dynaunique.attributes import UnicodeAttribute


class Account(Model):
    """One account: its key is an id, never the email (so the email can change)."""

    class Meta:
        table_name = "example-signup-accounts"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    handle = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    name = UnicodeAttribute()


def signup(form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """Create an account; 409 with the field of each taken value if one is taken."""
    account = Account(pk=f"ACCT#{uuid.uuid4().hex[:8]}", email=form["email"],
                      handle=form["handle"], name=form["name"])
    try:
        account.save()
    except UniqueViolation as taken:
        return 409, {"errors": {field: "is already taken"
                                for violation in taken.violations for field in violation.fields}}
    return 201, {"id": account.pk}


def change_email(account_id: str, email: str) -> tuple[int, dict[str, Any]]:
    """Move an account to a new email: the old one is free the moment this commits."""
    try:
        account = Account.get(account_id, consistent_read=True)
    except Account.DoesNotExist:
        return 404, {"detail": "no such account"}
    account.email = email
    try:
        account.save()
    except UniqueViolation:
        return 409, {"errors": {"email": "is already taken"}}
    except ConcurrentModificationError:
        return 409, {"detail": "the account changed meanwhile: reload and retry"}
    return 200, {"id": account.pk, "email": account.email}


def find(email: str) -> tuple[int, dict[str, Any]]:
    """The account holding an email (one strongly consistent lookup, whatever the case)."""
    try:
        account = Account.get_by_unique("email", email)
    except Account.DoesNotExist:
        return 404, {"detail": "no such account"}
    return 200, {"id": account.pk, "handle": account.handle}


def main() -> None:
    with connected(__doc__.splitlines()[0], Account):
        status, ada = signup({"email": "Ada@Lovelace.io", "handle": "ada", "name": "Ada"})
        print("signup ada:", status)
        print("signup with ADA@lovelace.io and handle ADA:",
              *signup({"email": "ADA@lovelace.io", "handle": "ADA", "name": "Impostor"}))
        status, grace = signup({"email": "grace@hopper.io", "handle": "grace", "name": "Grace"})
        print("signup grace:", status)
        print("grace takes ada's email:", *change_email(grace["id"], "ada@lovelace.io"))
        print("ada moves:", change_email(ada["id"], "ada@analytical.engine")[0])
        print("grace takes the freed email:", change_email(grace["id"], "ada@lovelace.io")[0])
        print("find ADA@LOVELACE.IO is grace:", find("ADA@LOVELACE.IO")[1]["id"] == grace["id"])
        print("find grace@hopper.io:", find("grace@hopper.io")[0])
        print("records:", Account.count())


if __name__ == "__main__":
    main()
