"""update(actions) against the local server: plain updates stay one UpdateItem, constrained
ones move their locks in one transaction."""

from __future__ import annotations

from typing import Any

import pytest

from dynaunique import (
    ConcurrentModificationError,
    UniqueViolation,
    UnsupportedOperationError,
)

from .declared import Account, Wire, assert_consistent, lock_owners, tables, transact_keys

# --- update(actions) -----------------------------------------------------------------------------


def saved_account(wire: Wire) -> Account:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="ada@x.io", handle="ada", score=7, visits=0)
    account.save()
    wire.clear()
    return account


def test_update_of_a_plain_field_is_one_update_item(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.nickname.set("Countess"), Account.visits.add(1)])
    assert wire.sent == ["UpdateItem"]
    assert account.nickname == "Countess"
    assert account.visits == 1
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_setting_a_constrained_field_moves_its_lock_in_one_transaction(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.email.set("ADA@Analytical.Engine")])
    assert wire.sent == ["TransactWriteItems"]
    request = wire.last("TransactWriteItems")
    assert sorted(transact_keys(request)) == [
        ("Delete", "UNIQ#EMAIL#ada@x.io"),
        ("Put", "UNIQ#EMAIL#ada@analytical.engine"),
        ("Update", "ACCT#1"),
    ]
    assert account.email == "ADA@Analytical.Engine"
    assert lock_owners(Account)["UNIQ#EMAIL#ada@analytical.engine"] == {"PK": "ACCT#1"}
    assert "UNIQ#EMAIL#ada@x.io" not in lock_owners(Account)
    assert_consistent(Account)


def test_update_removing_a_constrained_field_deletes_its_lock(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.handle.remove()])
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#HANDLE#ada"), ("Update", "ACCT#1")]
    assert account.attribute_values.get("handle") is None
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_onto_a_taken_value_raises_and_changes_nothing(wire: Wire) -> None:
    account = saved_account(wire)
    Account(pk="ACCT#2", email="bob@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        account.update([Account.email.set("BOB@x.io"), Account.nickname.set("x")])
    assert caught.value.owner == {"PK": "ACCT#2"}
    stored = Account.get("ACCT#1")
    assert stored.email == "ada@x.io"
    assert stored.attribute_values.get("nickname") is None
    assert_consistent(Account)


def test_update_keeps_the_callers_condition_next_to_the_lock_moves(wire: Wire) -> None:
    account = saved_account(wire)
    with pytest.raises(ConcurrentModificationError):
        account.update([Account.email.set("new@x.io")], condition=Account.nickname.exists())
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    wire.clear()
    account.update([Account.email.set("new@x.io")], condition=Account.nickname.does_not_exist())
    assert wire.sent == ["TransactWriteItems"]
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#new@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_from_a_stale_copy_moves_no_lock(wire: Wire) -> None:
    account = saved_account(wire)
    other = Account.get("ACCT#1")
    other.email = "other@x.io"
    other.save()
    with pytest.raises(ConcurrentModificationError):
        account.update([Account.email.set("mine@x.io")])
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#other@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_of_a_never_loaded_object_reads_it_first(wire: Wire) -> None:
    saved_account(wire)
    stranger = Account(pk="ACCT#1")
    stranger.update([Account.handle.set("lovelace")])
    assert wire.sent == ["GetItem", "TransactWriteItems"]
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#lovelace",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


@pytest.mark.parametrize("make_action", [
    lambda: Account.score.add(1),
    lambda: Account.score.set(Account.score + 1),
    lambda: Account.email.set(Account.nickname),
    lambda: Account.handle.set(Account.handle | "anon"),
])
def test_update_with_an_unknowable_result_on_a_constrained_field_is_refused(
        wire: Wire, make_action: Any) -> None:
    account = saved_account(wire)
    with pytest.raises(UnsupportedOperationError) as caught:
        account.update([make_action()])
    assert "save()" in str(caught.value)
    assert wire.writes() == []
    stored = Account.get("ACCT#1")
    assert (stored.email, stored.handle, stored.score) == ("ada@x.io", "ada", 7)
    assert_consistent(Account)
