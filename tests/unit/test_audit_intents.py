"""The audit's judgement of the MRSC protocol's pending intents (dynaunique/audit/_intents.py):
the protocol's own rule (``_write.mrsc.judge``) at an exact ``now``, the finding it makes, the
scan's suspects and the repair it plans. Pure: items built by hand, exact values, no server."""

from __future__ import annotations

from typing import Any

import pytest

import dynaunique._write.mrsc as mrsc
from dynaunique.audit._check import _suspect
from dynaunique.audit._intents import TIMING, locks_for, settle_rule
from dynaunique.audit._judge import _judge
from dynaunique.audit._plan import RepairAction, _action, remedy
from dynaunique.audit._stored import _lock_info
from unit.test_audit_kinds import TABLE, key, lock, member, read

AT = 1_000.0
LOCK_KEY = "UNIQ#ACTIVE_EMAIL#ada@x.io"


def intent(owner: str, *, pending: bool = True, token: str = "T1") -> dict[str, Any]:
    marks = {mrsc.TOKEN_ATTR: {"S": token}, mrsc.AT_ATTR: {"N": repr(AT)}}
    if pending:
        marks[mrsc.PENDING_ATTR] = {"S": token}
    return lock(LOCK_KEY, owner, constraint={"S": "ACTIVE_EMAIL"}, value={"S": "ada@x.io"},
                **marks)


def judged(lock_item: dict[str, Any], owner: dict[str, Any] | None, now: float) -> Any:
    return _judge(TABLE, LOCK_KEY, lock_item, [read("M#1", owner)], now=now)


HOLDS = member("M#1", email={"S": "Ada@x.io"})
MOVED = member("M#1", email={"S": "bob@x.io"})


def test_the_durations_are_the_writers_own() -> None:
    assert (TIMING.lease, TIMING.grace) == (10.0, 30.0) == (mrsc.Timing().lease,
                                                            mrsc.Timing().grace)


def test_locks_for_builds_the_owner_s_locks_with_the_one_builder() -> None:
    locks = locks_for(TABLE)(HOLDS)
    assert list(locks) == [LOCK_KEY]
    assert {k: v for k, v in locks[LOCK_KEY].items() if k != "created"} == {
        "PK": {"S": LOCK_KEY}, "SK": {"S": "LOCK"}, "owner": {"M": key("M#1")},
        "model": {"S": "Member"}, "constraint": {"S": "ACTIVE_EMAIL"},
        "value": {"S": "ada@x.io"}}
    assert locks_for(TABLE)(None) == {} and locks_for(TABLE)(MOVED).keys() == {
        "UNIQ#ACTIVE_EMAIL#bob@x.io"}


@pytest.mark.parametrize("owner", [None, MOVED], ids=["gone", "moved on"])
def test_an_intent_within_its_grace_period_is_a_write_in_flight(owner: Any) -> None:
    found = judged(intent("M#1"), owner, AT + 10)
    assert (found.kind, found.owner_state, found.repairable) == ("pending", None, False)
    assert found.detail == "a write in flight (10 s of a 30 s grace period)"
    assert found.message == ("lock ACTIVE_EMAIL 'ada@x.io' is M#1 / MEMBER's pending intent, "
                             "10 s old: a write in flight, not an orphan before its 30 s grace "
                             "period ends")
    assert judged(intent("M#1"), owner, AT + 29.999).kind == "pending"
    assert remedy(found).startswith("nothing: a write in flight; after its 30 s grace period")
    assert found.to_dict()["intent"] == {"token": "T1", "pending": True, "at": AT}


@pytest.mark.parametrize(("owner", "state", "detail"), [
    (None, "gone", "its owner does not exist"),
    (MOVED, "changed", "its owner no longer holds it (its ACTIVE_EMAIL is now 'bob@x.io')")])
def test_an_intent_past_its_grace_period_its_owner_not_holding_it_is_an_orphan(
        owner: Any, state: str, detail: str) -> None:
    found = judged(intent("M#1"), owner, AT + 30)   # now >= at + grace
    assert (found.kind, found.owner_state, found.repairable) == ("orphan", state, True)
    assert found.detail == f"{detail}; a pending intent past its 30 s grace period"


@pytest.mark.parametrize("now", [AT + 1, AT + 3_600])
def test_an_intent_its_owner_holds_is_confirmable_at_any_time(now: float) -> None:
    found = judged(intent("M#1"), HOLDS, now)
    assert (found.kind, found.repairable, found.detail) == (
        "confirmable", True, "its owner holds it; still marked pending")
    assert found.message == (f"M#1 / MEMBER holds ACTIVE_EMAIL 'ada@x.io' and its lock is still "
                             f"a pending intent ({now - AT:.0f} s old): repair clears the mark")


def test_a_cleared_intent_is_judged_as_any_lock() -> None:
    assert judged(intent("M#1", pending=False), HOLDS, AT + 1) is None
    orphan = judged(intent("M#1", pending=False), None, AT + 1)   # at once: no mark, no grace
    assert (orphan.kind, orphan.detail) == ("orphan", "its owner does not exist")
    assert orphan.to_dict()["intent"] == {"token": "T1", "pending": False, "at": AT}
    plain = judged(lock(LOCK_KEY, "M#1", constraint={"S": "ACTIVE_EMAIL"}), None, AT)
    assert "intent" not in plain.to_dict()   # a lock the protocol did not write: as before


def test_two_holders_are_a_duplicate_whatever_the_intent() -> None:
    found = _judge(TABLE, LOCK_KEY, intent("M#1"),
                   [read("M#1", HOLDS), read("M#2", member("M#2", email={"S": "ada@X.io"}))],
                   now=AT + 1)
    assert found is not None and found.kind == "duplicate"


def test_the_scan_reads_every_intent_even_one_its_owner_holds() -> None:
    info = _lock_info(TABLE, intent("M#1"))
    assert _suspect(TABLE, info, [key("M#1")]) is None
    assert _suspect(TABLE, info, [key("M#1")], intent=True) == [key("M#1"), key("M#1")]


def _planned(found: Any) -> RepairAction:
    action = _action(TABLE, found, ())
    assert action is not None and action.settle is not None and not action.plan.writes
    return action


def test_repair_plans_the_protocol_s_conditional_writes_never_a_transaction() -> None:
    confirm = _planned(judged(intent("M#1"), HOLDS, AT + 1))
    assert confirm.kind == "confirm_intent"
    assert confirm.request() == {"UpdateItem": {
        "TableName": "audit_unit_members", "Key": {"PK": {"S": LOCK_KEY}, "SK": {"S": "LOCK"}},
        "UpdateExpression": "REMOVE #n1", "ConditionExpression": "#n0 = :v0",
        "ExpressionAttributeNames": {"#n0": "mrsc_token", "#n1": "mrsc_pending"},
        "ExpressionAttributeValues": {":v0": {"S": "T1"}}}}
    assert confirm.description == ("clear the pending mark, if M#1 / MEMBER still holds the "
                                   "value and the lock still carries token T1")
    delete = _planned(judged(intent("M#1"), None, AT + 31))
    assert delete.kind == "delete_orphan"
    assert delete.request() == {"DeleteItem": {
        "TableName": "audit_unit_members", "Key": {"PK": {"S": LOCK_KEY}, "SK": {"S": "LOCK"}},
        "ConditionExpression": "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2",
        "ExpressionAttributeNames": {"#n0": "mrsc_token", "#n1": "owner", "#n2": "mrsc_at"},
        "ExpressionAttributeValues": {":v0": {"S": "T1"}, ":v1": {"M": key("M#1")},
                                      ":v2": {"N": repr(AT)}}}}
    # A lock the protocol wrote and cleared, orphaned at step 5: settled too.
    assert _planned(judged(intent("M#1", pending=False), None, AT + 1)).kind == "delete_orphan"
    assert _action(TABLE, judged(intent("M#1"), None, AT + 1), ()) is None   # pending: left


def test_the_rule_settle_reads_the_owner_first() -> None:
    rule = settle_rule(TABLE, intent("M#1"))
    assert rule.request() == ("GetItem", {"TableName": "audit_unit_members", "Key": key("M#1"),
                                          "ConsistentRead": True})
    assert rule.answered(AT + 1, {}).verdict == "wait"
    assert rule.answered(AT + 30, {}).verdict == "free"
    assert rule.answered(AT + 1, {"Item": HOLDS}).verdict == "confirm"


def test_an_intent_beside_a_record_holding_its_value_without_a_lock_is_left_for_a_person(
) -> None:
    other = read("M#2", member("M#2", email={"S": "ADA@x.io"}))   # written around the library
    found = _judge(TABLE, LOCK_KEY, intent("M#1"), [read("M#1", None), other], now=AT + 1)
    assert found is not None
    assert (found.kind, found.owner_state, found.detail) == (
        "foreign_owner", "gone",
        "lock names M#1 / MEMBER: its owner does not exist; a pending intent within its 30 s "
        "grace period")
    assert _action(TABLE, found, ()) is None
    assert remedy(found).startswith("the lock is the MRSC protocol's and another record holds")
