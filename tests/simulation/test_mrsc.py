"""The MRSC protocol (``dynaunique._write.mrsc``) breaks no invariant under every interleaving, a
crash between any two requests and a lease running out anywhere; each mutant is caught.

The default run explores the hand-made scenarios (about 5 seconds) and catches every mutant;
``-m exhaustive`` explores every workload of 2 clients × 2 operations × 2 values, each client on
its own record, and the scenarios with a lost answer (about 25 seconds); ``-m slow`` the
workloads with both clients on one record, with two ticks of the clock, with a lost answer, and
every 2 × 2 × 3 workload (docs/global-tables.md has the state counts; the run with ``repair``
beside the writers, ``python -m tests.simulation.mrsc --repairer``, takes about 4 CPU minutes
and is not a test).
"""

from __future__ import annotations

import json

import pytest

import dynaunique._write.mrsc as mrsc

from .memory import MemoryDynamoDB
from .mrsc import (
    MUTANTS,
    SCENARIOS,
    TIMING,
    explore_all,
    explore_scenario,
    handle,
    lock_key,
    locks_for,
    main,
    mutant,
    record,
)
from .world import TABLE, new_memory

# --- the pure steps, exact ------------------------------------------------------------------------

_R0 = {"PK": {"S": "R0"}, "SK": {"S": "PROFILE"}}


def _met(pending: bool, at: float = 0.0, owner: str = "R0") -> mrsc.Met:
    return mrsc.Met("UNIQ#EMAIL#v0", json.dumps({"PK": {"S": owner}, "SK": {"S": "PROFILE"}},
                                                 sort_keys=True), "t1", pending, at)


@pytest.mark.parametrize(("pending", "holder", "now", "verdict"), [
    (False, "v0", 0.0, mrsc.Verdict.LIVE),
    (True, "v0", 0.0, mrsc.Verdict.CONFIRM),
    (False, "v1", 0.0, mrsc.Verdict.FREE),       # a held lock whose owner moved: an orphan
    (False, None, 0.0, mrsc.Verdict.FREE),       # ... or whose owner is gone
    (True, "v1", 0.5, mrsc.Verdict.WAIT),        # its writer may still write
    (True, None, 0.999, mrsc.Verdict.WAIT),
    (True, None, 1.0, mrsc.Verdict.FREE),        # past its grace period
])
def test_judge(pending: bool, holder: str | None, now: float, verdict: mrsc.Verdict) -> None:
    owner = record("R0", holder) if holder else None
    assert mrsc.judge(_met(pending), owner, locks_for, now, TIMING) is verdict


def test_the_requests_carry_their_conditions() -> None:
    lock = {"PK": {"S": "UNIQ#EMAIL#v0"}, "SK": {"S": "LOCK"}}
    new = mrsc.intent_put(TABLE, lock, "t2", 3.0, None)
    assert new["ConditionExpression"] == "attribute_not_exists(#n0)"
    assert new["Item"][mrsc.PENDING_ATTR] == {"S": "t2"}
    assert new["Item"][mrsc.AT_ATTR] == {"N": "3.0"}
    taking = mrsc.intent_put(TABLE, lock, "t2", 3.0, _met(True))
    assert taking["ConditionExpression"] == "#n0 = :v0 AND #n1 = :v1"
    assert taking["ExpressionAttributeValues"] == {":v0": {"S": "t1"}, ":v1": {"M": _R0}}
    assert mrsc.release(TABLE, lock, _met(False))["ExpressionAttributeNames"] == {
        "#n0": mrsc.TOKEN_ATTR, "#n1": "owner"}
    clear = mrsc.intent_clear(TABLE, lock, "t2")
    assert (clear["UpdateExpression"], clear["ConditionExpression"]) == ("REMOVE #n1", "#n0 = :v0")
    operation, params = mrsc.record_write(TABLE, _R0, record("R0", "v0"), None, ("email",))
    assert operation == "DeleteItem"
    assert params["ConditionExpression"] == "attribute_exists(#n0) AND #n1 = :v1"
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_one_write_runs_alone_as_documented() -> None:
    # R0 moves from v0 to v1: read, intent put, record write, intent cleared, old lock found,
    # its owner read, the old lock released — seven single-item requests, no transaction.
    memory = new_memory()
    for item in (record("R0", "v0"), *locks_for(record("R0", "v0")).values()):
        memory.handle("PutItem", {"TableName": TABLE, "Item": {
            **item, mrsc.TOKEN_ATTR: {"S": "t0"}}})
    machine = mrsc.Write(TABLE, _R0, record("R0", "v1"), "t1", locks_for, lock_key,
                         ("email",), TIMING)
    sent = []
    while (request := machine.advance(0.0).request(0.0)) is not None:
        sent.append(f"{request[0]} {(request[1].get('Key') or request[1]['Item'])['PK']['S']}")
        answer, refused = handle(memory, *request)
        machine = machine.answered(0.0, answer, refused)
    assert sent == ["GetItem R0", "PutItem UNIQ#EMAIL#v1", "PutItem R0",
                    "UpdateItem UNIQ#EMAIL#v1", "GetItem UNIQ#EMAIL#v0", "GetItem R0",
                    "DeleteItem UNIQ#EMAIL#v0"]
    assert machine.outcome == "written"
    stored = memory.items[TABLE]
    assert sorted(i["PK"]["S"] for i in stored.values()) == ["R0", "UNIQ#EMAIL#v1"]
    assert all(mrsc.PENDING_ATTR not in i for i in stored.values())


def test_a_write_past_its_lease_is_not_sent() -> None:
    memory = new_memory()
    machine = mrsc.Write(TABLE, _R0, record("R0", "v0"), "t1", locks_for, lock_key,
                         ("email",), TIMING)
    for _ in range(2):   # the read, the intent put at 0
        request = machine.advance(0.0).request(0.0)
        assert request is not None
        machine = machine.answered(0.0, *handle(memory, *request))
    assert machine.phase == "write" and not machine.writable(1.0)
    late = machine.advance(1.0)
    assert (late.phase, late.outcome) == ("undo", "expired")
    request = late.request(1.0)
    assert request is not None and request[0] == "DeleteItem"
    late = late.answered(1.0, *handle(memory, *request))
    assert late.phase == "done" and memory.items[TABLE] == {}


def _step(machine: mrsc.Write, memory: MemoryDynamoDB, now: float, *, lost: bool = False
          ) -> mrsc.Write:
    """``machine`` after its next request at ``now`` (its answer ``lost``: to be resent)."""
    machine = machine.advance(now)
    request = machine.request(now)
    assert request is not None
    answer, refused = handle(memory, *request)
    return machine.lost() if lost else machine.answered(now, answer, refused)


def test_a_lost_record_write_is_recognised_after_the_lease() -> None:
    # The intent put's answer lost: its resend is refused by its own token, a success. The
    # record write applied, its answer lost; the lease ends before the resend: the record is
    # read again, holds what was written, and the intent is cleared, not released.
    memory = new_memory()
    machine = mrsc.Write(TABLE, _R0, record("R0", "v0"), "t1", locks_for, lock_key,
                         ("email",), TIMING)
    machine = _step(machine, memory, 0.0)                 # the read
    machine = _step(machine, memory, 0.0, lost=True)      # the intent put, answer lost
    assert machine.phase == "put"
    machine = _step(machine, memory, 0.0)                 # resent: refused, by its own token
    assert (machine.phase, machine.at) == ("write", 0.0)
    machine = _step(machine, memory, 0.0, lost=True)      # the record write, answer lost
    assert machine.doubt and machine.advance(1.0).phase == "verify"
    while machine.phase != "done":
        machine = _step(machine, memory, 1.0)
    assert machine.outcome == "written"
    stored = sorted(memory.items[TABLE].values(), key=lambda i: i["PK"]["S"])
    assert [i["PK"]["S"] for i in stored] == ["R0", "UNIQ#EMAIL#v0"]
    assert mrsc.PENDING_ATTR not in stored[1]


@pytest.mark.parametrize(("holder", "now", "sent", "left"), [
    ("v0", 0.0, ["GetItem", "UpdateItem"], {mrsc.TOKEN_ATTR, mrsc.AT_ATTR}),  # live: cleared
    ("v1", 0.5, ["GetItem"], {mrsc.TOKEN_ATTR, mrsc.PENDING_ATTR, mrsc.AT_ATTR}),  # grace: left
    ("v1", 1.0, ["GetItem", "DeleteItem"], None),                   # free: deleted
])
def test_settle(holder: str, now: float, sent: list[str], left: set[str] | None) -> None:
    memory = new_memory()
    memory.handle("PutItem", {"TableName": TABLE, "Item": record("R0", holder)})
    lock = mrsc.intent_put(TABLE, locks_for(record("R0", "v0"))["UNIQ#EMAIL#v0"], "t1", 0.0,
                           None)
    memory.handle("PutItem", lock)
    met = mrsc.Met.of(lock["Item"], "PK")
    assert met is not None
    rule = mrsc.Settle(TABLE, met, lock_key(met.key), locks_for, TIMING)
    operations = []
    while (request := rule.request()) is not None:
        operations.append(request[0])
        rule = rule.answered(now, handle(memory, *request)[0])
    assert operations == sent
    stored = memory.get(TABLE, lock_key(met.key))
    assert (None if stored is None else {k for k in stored if k.startswith("mrsc_")}) == left


def test_transactions_are_refused_as_on_an_mrsc_table() -> None:
    with pytest.raises(Exception, match="not supported for global tables configured with "
                                        "multi-Region strong consistency"):
        handle(new_memory(), "TransactWriteItems", {"TransactItems": []})


# --- the exploration ----------------------------------------------------------------------------

#: Per scenario, the states of its exhaustive exploration (1 crash, 1 tick), and with one lost
#: answer besides.
_STATES = {"race": 4371, "same": 3953, "orphan": 454, "repair": 2445, "delete": 240,
           "three": 13580}
_STATES_LOST = {"race": 16056, "same": 17132, "orphan": 1470, "repair": 8257, "delete": 843,
                "three": 57352}
#: Mutants explored with more than the defaults.
_ARGS = {"lost-answer-blind": ["--lost", "1"]}


def test_every_scenario_is_pinned() -> None:
    assert sorted(_STATES) == sorted(_STATES_LOST) == sorted(SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_scenario_breaks_an_invariant(scenario: str) -> None:
    states, trace = explore_scenario(scenario)
    assert trace == []
    assert states == _STATES[scenario]


@pytest.mark.exhaustive
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_scenario_breaks_an_invariant_with_a_lost_answer(scenario: str) -> None:
    states, trace = explore_scenario(scenario, lost=1)
    assert trace == []
    assert states == _STATES_LOST[scenario]


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_is_caught(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = MUTANTS[name][2]
    assert main(["--scenario", scenario, "--mutant", name, *_ARGS.get(name, [])]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION:" in out and out.strip().endswith("1 violations")


def test_repair_without_a_grace_period_is_caught() -> None:
    # repair beside a live writer: the intent put, repair reads the owner (not yet written),
    # the record written, repair deletes the lock — a record without its lock.
    with mutant("no-grace"):
        _, trace = explore_scenario("repair")
    assert trace[-1] == "VIOLATION: record R0 has no lock UNIQ#EMAIL#v0"


def test_the_mutant_switch_is_undone() -> None:
    with mutant("no-grace"):
        pass
    assert explore_scenario("race")[1] == []


@pytest.mark.exhaustive
def test_every_workload_two_clients_two_ops_two_values() -> None:
    assert explore_all(2, 2, 2) == (36, 85438, [])


@pytest.mark.slow
@pytest.mark.parametrize(("options", "expected"), [
    ({"shared": True}, (36, 290776, [])),   # 288,476 before the lost-answer commit
    ({"ticks": 2}, (36, 232036, [])),
    ({"lost": 1}, (36, 315098, [])),
])
def test_every_workload_larger(options: dict[str, int], expected: tuple[int, int, list[str]]
                               ) -> None:
    assert explore_all(2, 2, 2, **options) == expected  # type: ignore[arg-type]


@pytest.mark.slow
def test_every_workload_two_clients_two_ops_three_values() -> None:
    # ~50 CPU s; 2 × 3 × 2 (324 workloads, 3,185,812 states, ~6 CPU minutes) is not a test:
    # `python -m tests.simulation.mrsc --ops 3` (docs/global-tables.md, "Explored").
    assert explore_all(2, 2, 3) == (144, 382470, [])


def test_progress_prints_one_line_a_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--clients", "1", "--ops", "1", "--values", "2", "--progress"]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert [line.split(" CPU s) ")[1] for line in lines] == [
        "((('put', 'R0', 'v0'),),)", "((('put', 'R0', 'v1'),),)"]
    assert [line.split(", ")[0] for line in lines] == [
        "workload 1: 24 states (total 24", "workload 2: 24 states (total 48"]
    assert captured.out.strip().endswith("explored 2 workloads, 48 states, 0 violations")
