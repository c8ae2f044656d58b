"""The models of the Model tests (tables prefixed model_): accounts with two unique fields, the
same with a version attribute, and sessions with a TTL."""

from __future__ import annotations

from typing import Any

from dynaunique import Model, normalizers
from dynaunique.attributes import (
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from support.declare import declare, pk_attr, sk_attr


def _account_fields() -> dict[str, Any]:
    """The fields Account and VAccount share, as fresh attributes (a class owns its
    attributes)."""
    return {"pk": pk_attr(), "sk": sk_attr("PROFILE"),
            "email": UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True),
            "username": UnicodeAttribute(unique=True, lock_name="HANDLE", null=True),
            "name": UnicodeAttribute(null=True)}


Account = declare("Account", "model_accounts", **_account_fields(),
                  logins=NumberAttribute(null=True))

# The same shape with a VersionAttribute: "unchanged since loaded" is the version.
VAccount = declare("VAccount", "model_vaccounts", **_account_fields(), version=VersionAttribute())


class Session(Model):
    """A record with a TTL: its lock expires with it."""

    class Meta:
        table_name = "model_sessions"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    token = UnicodeAttribute(unique=True)
    expires = TTLAttribute(null=True)


MODELS: list[type[Model]] = [Account, VAccount, Session]


ACCOUNT_MODELS: list[type[Model]] = [Account, VAccount]

