"""Models on a table with a NEW_AND_OLD_IMAGES stream, for the stream guard's tests (the CLI
imports this module by its dotted name): an account with a plain, a case-folded and a hashed
lock, and a note — a model without constraints — in the same table."""

from __future__ import annotations

from typing import Any

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute

TABLE = "stream_accounts"


class StreamAccount(Model):
    """An email (case-insensitive), a handle and a hashed phone."""

    class Meta:
        table_name = TABLE
        stream_view_type = "NEW_AND_OLD_IMAGES"
        lock_secret = "stream-test-secret"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    username = UnicodeAttribute(null=True, unique=True, lock_name="HANDLE")
    phone = UnicodeAttribute(null=True, unique=True, hashed=True)


class StreamNote(Model):
    """A note beside the accounts: no constraint, so no lock; its ``email`` is not unique."""

    class Meta:
        table_name = TABLE
        stream_view_type = "NEW_AND_OLD_IMAGES"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="NOTE")
    body = UnicodeAttribute()
    email = UnicodeAttribute(null=True)


MODELS = [StreamAccount, StreamNote]


def account_key(pk: str) -> dict[str, Any]:
    """The typed primary key of an account record."""
    return {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}


def lock_pk(key: str) -> dict[str, Any]:
    """The typed primary key of a lock item."""
    return {"PK": {"S": key}, "SK": {"S": "LOCK"}}
