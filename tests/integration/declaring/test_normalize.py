"""normalize= (a callable, a mapping per field) against the local server: values compare
normalized."""

from __future__ import annotations

import pytest

from dynaunique import (
    UniqueViolation,
)

from .declared import Account, Folder, Wire, assert_consistent, lock_items, lock_owners, tables

# --- normalize -----------------------------------------------------------------------------------


def test_normalize_callable_compares_normalized_values(wire: Wire) -> None:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="Ada@Lovelace.IO")
    account.save()
    with pytest.raises(UniqueViolation) as caught:
        Account(pk="ACCT#2", email="ada@LOVELACE.io").save()
    assert caught.value.value == "ada@lovelace.io"
    wire.clear()
    account.email = "ADA@lovelace.io"   # the same value after normalization: no lock change
    account.save()
    assert wire.sent == ["PutItem"]
    assert lock_owners(Account) == {"UNIQ#EMAIL#ada@lovelace.io": {"PK": "ACCT#1"}}
    assert lock_items(Account)["UNIQ#EMAIL#ada@lovelace.io"]["value"] == {"S": "ada@lovelace.io"}
    assert_consistent(Account)


def test_normalize_mapping_applies_per_field(wire: Wire) -> None:
    tables(wire, Folder)
    Folder(pk="F#1", tenant="Acme", name="Docs").save()
    with pytest.raises(UniqueViolation):
        Folder(pk="F#2", tenant="Acme", name="DOCS").save()
    Folder(pk="F#3", tenant="acme", name="Docs").save()   # tenants compare exactly
    assert lock_owners(Folder) == {
        "UNIQ#TENANT_FOLDER#Acme#docs": {"PK": "F#1"},
        "UNIQ#TENANT_FOLDER#acme#docs": {"PK": "F#3"},
    }
    assert_consistent(Folder)
