"""normalize= (a callable, a mapping per field) against the local server: values compare
normalized."""

from __future__ import annotations

from typing import Any

import pytest
from support.declare import declare, pk_attr
from support.invariants import assert_clean

from dynaunique import (
    UniqueViolation,
    audit,
    normalizers,
)
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint

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


# --- a normalizer whose results change: the audit moves the locks ------------------------------


def strip_then_nfkc_casefold_once(value: Any) -> Any:
    """compose(strip, nfkc_casefold) as it was before it applied its chain until it settled."""
    return normalizers.nfkc_casefold(normalizers.strip(value))


def test_after_a_normalizer_changes_check_finds_and_repair_moves_the_locks(
        dynaunique_db: str) -> None:
    """The upgrade path the changelog describes for compose(strip, nfkc_casefold): a value
    starting with a spacing accent was locked with a leading space, which it no longer is."""
    before = declare("Handle", "decl_relock", pk=pk_attr(), handle=UnicodeAttribute(
        unique=True, normalize=strip_then_nfkc_casefold_once))
    use_endpoint(dynaunique_db, before)
    create_tables(before)
    before(pk="H#1", handle="\u00b4a").save()
    before(pk="H#2", handle="ada").save()
    assert sorted(lock_owners(before)) == ["UNIQ#HANDLE# \u0301a", "UNIQ#HANDLE#ada"]

    after = declare("Handle", "decl_relock", pk=pk_attr(), handle=UnicodeAttribute(
        unique=True, normalize=normalizers.compose(normalizers.strip, normalizers.nfkc_casefold)))
    use_endpoint(dynaunique_db, after)
    report = audit.check([after])
    assert sorted((f.kind, f.lock_key, f.owner_state) for f in report.findings) == [
        ("missing", "UNIQ#HANDLE#\u0301a", None),
        ("orphan", "UNIQ#HANDLE# \u0301a", "changed")]
    result = audit.apply_repair(audit.plan_repair(report))
    assert result.ok
    assert audit.check([after]).clean
    assert lock_owners(after) == {"UNIQ#HANDLE#\u0301a": {"PK": "H#1"},
                                  "UNIQ#HANDLE#ada": {"PK": "H#2"}}
    assert after.get_by_unique("handle", " \u00b4a").pk == "H#1"
    assert_clean([after], dynaunique_db)
