"""The models of the Model tests (tables prefixed model_): accounts with two unique fields, the
same with a version attribute, and sessions with a TTL."""

from __future__ import annotations

from dynaunique import Model, normalizers
from dynaunique.attributes import (
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
    VersionAttribute,
)


class Account(Model):
    class Meta:
        table_name = "model_accounts"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)
    username = UnicodeAttribute(unique=True, lock_name="HANDLE", null=True)
    name = UnicodeAttribute(null=True)
    logins = NumberAttribute(null=True)


class VAccount(Model):
    """The same shape with a VersionAttribute: "unchanged since loaded" is the version."""

    class Meta:
        table_name = "model_vaccounts"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)
    username = UnicodeAttribute(unique=True, lock_name="HANDLE", null=True)
    name = UnicodeAttribute(null=True)
    version = VersionAttribute()


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

