"""The demo's cast: the README's ``Account`` model bound to a demo table, and who signs up."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dynaunique import normalizers
from dynaunique.attributes import UnicodeAttribute
from dynaunique.constraints import UniqueConstraint
from dynaunique.model import Model

if TYPE_CHECKING:
    from dynaunique._transport.endpoint import Target

ADA_KEY = "ACCT#a1f9c3"
ADA_EMAIL = "ada@lovelace.io"
ADA_NEW_EMAIL = "ada@analytical.engine"
#: The second signup: ada's email in other case, from another account.
IMPOSTOR_KEY = "ACCT#7c2d10"
IMPOSTOR_EMAIL = "ADA@Lovelace.IO"
#: The account that takes ada's old email once she has changed it.
GRACE_KEY = "ACCT#9b2e71"
#: Every account's range key (the README's model has one).
PROFILE = "PROFILE"

# One class per run: the table name is part of a model's plan.
if TYPE_CHECKING:

    class DemoAccount(Model):
        """What the type checker knows of the class :func:`account_model` builds."""

        pk: str
        sk: str
        email: str
        username: str
        tenant: str
        slug: str


def account_model(table: str, target: Target) -> type[DemoAccount]:
    """The README's ``Account``, bound to ``table`` on ``target``."""

    class Account(Model):
        class Meta:
            table_name = table
            host = target.endpoint
            region = target.region
            aws_access_key_id = target.credentials[0] if target.credentials else None
            aws_secret_access_key = target.credentials[1] if target.credentials else None
            constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")]

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default=PROFILE)
        email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
        username = UnicodeAttribute(unique=True, lock_name="HANDLE")
        tenant = UnicodeAttribute()
        slug = UnicodeAttribute()

    return cast("type[DemoAccount]", Account)
