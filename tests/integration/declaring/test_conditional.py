"""Conditional constraints against the local server: a lock is held only while its condition
holds, and flips with it in the same transaction."""

from __future__ import annotations

import contextlib

import pytest

from dynaunique import (
    ConcurrentModificationError,
    UniqueViolation,
)

from .declared import Member, Verified, Wire, assert_consistent, lock_owners, tables, transact_keys

# --- conditional constraints ---------------------------------------------------------------------


def test_lock_is_held_only_while_the_condition_is_true(wire: Wire) -> None:
    tables(wire, Member)
    Member(pk="M#1", email="ada@x.io", status="deleted").save()
    Member(pk="M#2", email="ADA@x.io", status="deleted").save()   # inactive: no lock, no clash
    assert lock_owners(Member) == {}
    Member(pk="M#3", email="ada@X.io", status="active").save()
    with pytest.raises(UniqueViolation) as caught:
        Member(pk="M#4", email="Ada@x.io", status="active").save()
    assert caught.value.constraint == "ACTIVE_EMAIL"
    assert caught.value.owner == {"PK": "M#3"}
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#3"}}
    assert_consistent(Member)


def test_flipping_the_condition_off_deletes_the_lock_in_the_same_transaction(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io")
    member.save()
    wire.clear()
    member.status = "deleted"
    member.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#ACTIVE_EMAIL#ada@x.io"), ("Put", "M#1")]
    assert lock_owners(Member) == {}
    assert_consistent(Member)


def test_flipping_the_condition_on_puts_the_lock_in_the_same_transaction(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io", status="invited")
    member.save()
    assert wire.sent == ["PutItem"]
    wire.clear()
    member.status = "active"
    member.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Put", "M#1"), ("Put", "UNIQ#ACTIVE_EMAIL#ada@x.io")]
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#1"}}
    assert_consistent(Member)


def test_restoring_a_soft_deleted_record_whose_value_was_taken_fails(wire: Wire) -> None:
    tables(wire, Member)
    old = Member(pk="M#1", email="ada@x.io")
    old.save()
    old.status = "deleted"
    old.save()
    Member(pk="M#2", email="Ada@X.io").save()   # the value is taken meanwhile
    old.status = "active"
    with pytest.raises(UniqueViolation) as caught:
        old.save()
    assert caught.value.owner == {"PK": "M#2"}
    assert caught.value.fields == ("email",)
    assert Member.get("M#1").status == "deleted"
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#2"}}
    assert_consistent(Member)


def test_condition_flip_by_update_actions_keeps_the_lock_right(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io")
    member.save()
    wire.clear()
    member.update([Member.status.set("deleted")])
    assert wire.sent == ["TransactWriteItems"]
    assert lock_owners(Member) == {}
    member.update([Member.status.set("active")])
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#1"}}
    assert_consistent(Member)


def test_save_evaluates_the_condition_on_the_state_it_writes(wire: Wire) -> None:
    tables(wire, Verified)
    Verified(pk="V#1", email="ada@x.io", status="deleted", verified="yes").save()
    mine = Verified.get("V#1")
    theirs = Verified.get("V#1")
    theirs.verified = "no"
    theirs.save()
    mine.status = "active"
    # A full put writes mine's state, verified="yes" included: the lock is right for it.
    with contextlib.suppress(ConcurrentModificationError):
        mine.save()
    assert_consistent(Verified)


@pytest.mark.parametrize(("believed", "stored"), [("yes", "no"), ("no", "yes")])
def test_update_guards_what_the_condition_reads_on_the_new_state(
        wire: Wire, believed: str, stored: str) -> None:
    tables(wire, Verified)
    Verified(pk="V#1", email="ada@x.io", status="deleted", verified=believed).save()
    mine = Verified.get("V#1")          # its condition read only status (deleted)
    theirs = Verified.get("V#1")
    theirs.verified = stored
    theirs.save()
    # On the new state the condition reads verified too, which mine holds stale.
    with contextlib.suppress(ConcurrentModificationError):
        mine.update([Verified.status.set("active")])
    assert_consistent(Verified)
