"""The MRSC protocol (``dynaunique._write.mrsc``) explored: every interleaving of a few clients, a
crash between any two requests, and the lease running out at any point.

The database is one :class:`~.memory.MemoryDynamoDB` (an MRSC table is one strongly consistent
database) that refuses ``TransactWriteItems`` and ``TransactGetItems`` as DynamoDB does there.
Each client runs a list of operations — ``("put", record, value)`` (create, or change the
record's unique ``email``) and ``("delete", record)`` — each through a ``_mrsc.Write`` machine,
its requests answered by the model one at a time. The scheduler chooses, at each state:

- which client's next request is answered;
- (while ``crashes`` allows) that a client stops forever before its next request;
- (while ``ticks`` allows) that the clock moves one lease on: every intent put before is past
  its grace period, and its writer, if it has not sent its record write yet, never will (the
  lease's promise, which the model takes as given: ``lease`` = ``grace`` = 1 tick).

Checked after every request (the safety invariants, ``world.analyse``): no value held by two
records, no record without its lock owned by it. Checked once every client that did not crash
is done: without a crash, no pending intent is left; then ``repair`` settles each lock
(``_mrsc.Settle``, every grace period passed), after which there is no orphan lock and no
pending intent either. (Without a crash, an orphan may be left: a writer whose old lock was
another writer's pending intent at the time leaves it, as the library leaves an orphan to the
next write that meets it and to ``repair``.)
The search is breadth first over interned states (database snapshot, each client's machine,
clock, budgets), so every reachable state is met once; the first violation comes with a
shortest schedule.

    python -m tests.simulation.mrsc [--clients 2] [--ops 2] [--values 2] [--crashes 1]
                                    [--ticks 1] [--mutant NAME] [--list-mutants]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

import dynaunique._write.mrsc as mrsc
from dynaunique._lock.items import locks_of
from dynaunique._lock.locks import RESERVED_PREFIX
from dynaunique._write.render import render_write
from dynaunique._write.writes import lock_put

from .memory import MemoryDynamoDB
from .memory_expr import validation
from .mutants import patched
from .world import TABLE, SimAccount, analyse, new_memory

TIMING = mrsc.Timing(lease=1.0, grace=1.0)
_REFUSED = frozenset({"TransactWriteItems", "TransactGetItems"})
_SAFETY = frozenset({"duplicate", "missing", "claim"})

Op = tuple[Any, ...]

# --- the library's items ------------------------------------------------------------------------

_locks_memo: dict[str, dict[str, Any]] = {}


def locks_for(item: Mapping[str, Any] | None) -> Mapping[str, dict[str, Any]]:
    """The lock items ``item`` (a ``SimAccount`` record) requires, as the library builds them."""
    if item is None:
        return {}
    text = json.dumps(item, sort_keys=True)
    hit = _locks_memo.get(text)
    if hit is None:
        info = SimAccount._du_info
        assert info is not None
        owner = {"PK": item["PK"], "SK": item["SK"]}
        hit = {}
        for ref in locks_of(info, SimAccount._du_lock_inputs(dict(item))).values():
            _, params = render_write(lock_put(info, ref, owner, dict(item)))
            hit[ref.key] = params["Item"]
        _locks_memo[text] = hit
    return hit


def lock_key(key: str) -> dict[str, Any]:
    return {"PK": {"S": key}, "SK": {"S": "LOCK"}}


def record(pk: str, email: str | None) -> dict[str, Any] | None:
    return None if email is None else {"PK": {"S": pk}, "SK": {"S": "PROFILE"},
                                       "email": {"S": email}}


class _Reader:
    """A client that writes no record (``repair``): no lease, and a lost answer changes nothing
    (each of its writes, resent, is conditioned on what it read)."""

    def advance(self, now: float) -> Any:
        return self

    def lost(self) -> Any:
        return self


def _scan() -> tuple[str, dict[str, Any]]:
    return "Scan", {"TableName": TABLE, "ConsistentRead": True}


@attrs.frozen
class Repair(_Reader):
    """``repair`` (or the stream guard) run beside the writers: one consistent Scan, then each
    lock met settled by ``_mrsc.Settle`` at the clock of the moment — the same interface as
    ``_mrsc.Write`` for the scheduler."""

    phase: str = "scan"
    locks: tuple[mrsc.Met, ...] = ()
    index: int = 0
    rule: mrsc.Settle | None = None
    outcome: str = ""

    def key_text(self) -> tuple[Any, ...]:
        rule = None if self.rule is None else (self.rule.met, self.rule.verdict, self.rule.done)
        return (self.phase, self.locks, self.index, rule)

    def request(self, now: float) -> tuple[str, dict[str, Any]] | None:
        if self.phase == "scan":
            return _scan()
        return None if self.rule is None else self.rule.request()

    def answered(self, now: float, answer: Any, refused: Any) -> Repair:
        if self.phase == "scan":
            found = tuple(met for item in answer["Items"]
                          if item["PK"]["S"].startswith(RESERVED_PREFIX)
                          for met in [mrsc.Met.of(item, "PK")] if met is not None)
            return attrs.evolve(self, phase="settle", locks=found, index=-1)._next()
        assert self.rule is not None
        rule = self.rule.answered(now, answer)
        return attrs.evolve(self, rule=rule)._next() if rule.done else attrs.evolve(
            self, rule=rule)

    def _next(self) -> Repair:
        index = self.index + 1
        if index >= len(self.locks):
            return attrs.evolve(self, phase="done", rule=None, outcome="settled")
        met = self.locks[index]
        return attrs.evolve(self, index=index, rule=mrsc.Settle(
            TABLE, met, lock_key(met.key), locks_for, TIMING))


@attrs.frozen
class Mend(_Reader):
    """``repair`` writing the locks records hold their values without, beside the writers: one
    consistent Scan; for each lock key exactly one record requires, a missing lock is written
    and a lock whose owner is judged free (read, ``_mrsc.judge``) handed over — each by
    ``_mrsc.Claim`` (intent put, the record read again, the mark cleared or the intent
    released); then every lock settled as :class:`Repair` does. The scheduler's interface."""

    token: str
    phase: str = "scan"
    #: (record pk, lock key, the lock item it requires as JSON, the lock met or None)
    wanted: tuple[tuple[str, str, str, mrsc.Met | None], ...] = ()
    index: int = 0
    claim: mrsc.Claim | None = None
    settle: Repair | None = None
    outcome: str = ""

    def key_text(self) -> tuple[Any, ...]:
        return (self.phase, self.wanted, self.index,
                None if self.claim is None else self.claim.key_text(),
                None if self.settle is None else self.settle.key_text(), self.outcome)

    def request(self, now: float) -> tuple[str, dict[str, Any]] | None:
        if self.phase == "scan":
            return _scan()
        if self.phase == "owner":
            met = self.wanted[self.index][3]
            assert met is not None
            return "GetItem", {"TableName": TABLE, "Key": met.owner_key(), "ConsistentRead": True}
        if self.phase == "claim":
            assert self.claim is not None
            return self.claim.request(now)
        if self.phase == "settle":
            assert self.settle is not None
            return self.settle.request(now)
        return None

    def answered(self, now: float, answer: Any, refused: Any) -> Mend:
        if self.phase == "scan":
            return attrs.evolve(self, wanted=_wanted(answer["Items"]), index=-1)._next()
        if self.phase == "owner":
            met = self.wanted[self.index][3]
            assert met is not None
            verdict = mrsc.judge(met, (answer or {}).get("Item"), locks_for, now, TIMING)
            return self._claim() if verdict is mrsc.Verdict.FREE else self._next()
        if self.phase == "claim":
            assert self.claim is not None
            claim = self.claim.answered(now, answer, refused)
            return self._next() if claim.phase == "done" else attrs.evolve(self, claim=claim)
        assert self.settle is not None
        settle = self.settle.answered(now, answer, refused)
        if settle.phase == "done":
            return attrs.evolve(self, phase="done", settle=None, outcome="mended")
        return attrs.evolve(self, settle=settle)

    def _next(self) -> Mend:
        index = self.index + 1
        if index >= len(self.wanted):
            return attrs.evolve(self, phase="settle", claim=None, settle=Repair())
        at = attrs.evolve(self, index=index, claim=None)
        return at._claim() if self.wanted[index][3] is None else attrs.evolve(at, phase="owner")

    def _claim(self) -> Mend:
        pk, key, lock_json, met = self.wanted[self.index]
        holder = {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}
        lock = json.loads(lock_json)
        claim = mrsc.Claim(TABLE, holder, lock, f"{self.token}m{self.index}", locks_for,
                           lock_key(key), met)
        return attrs.evolve(self, phase="claim", claim=claim)


def _wanted(items: Sequence[Mapping[str, Any]]
            ) -> tuple[tuple[str, str, str, mrsc.Met | None], ...]:
    """What a Mend writes, from one scan: each lock key exactly one record requires, whose lock
    is missing (met None) or names another owner (the lock met)."""
    locks = {i["PK"]["S"]: i for i in items if i["PK"]["S"].startswith(RESERVED_PREFIX)}
    requirers: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        if not item["PK"]["S"].startswith(RESERVED_PREFIX):
            for key in locks_for(item):
                requirers.setdefault(key, []).append(item)
    wanted = []
    for key, holders in sorted(requirers.items()):
        if len(holders) != 1:
            continue   # a duplicate: a person decides
        pk = holders[0]["PK"]["S"]
        met = mrsc.Met.of(locks.get(key), "PK")
        if met is not None and met.owner == json.dumps(
                {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}, sort_keys=True):
            continue   # held (or its own intent): nothing to write
        wanted.append((pk, key, json.dumps(locks_for(holders[0])[key], sort_keys=True), met))
    return tuple(wanted)


def writer(op: Op, token: str) -> Any:
    """The protocol's machine for one operation."""
    if op[0] == "repair":
        return Repair()
    if op[0] == "mend":
        return Mend(token)
    pk = op[1]
    target = record(pk, op[2] if op[0] == "put" else None)
    return mrsc.Write(TABLE, {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}, target, token,
                      locks_for, lock_key, ("email",), TIMING)


def handle(memory: MemoryDynamoDB, operation: str, params: Mapping[str, Any]
           ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(answer, refusal — a ConditionalCheckFailedException's response —) of one request on an
    MRSC table: transactions refused, as DynamoDB refuses them there."""
    if operation in _REFUSED:
        raise validation(f"{operation} is not supported for global tables configured with "
                         f"multi-Region strong consistency (MRSC): table {TABLE}")
    try:
        return memory.handle(operation, params), None
    except Exception as exc:
        response = getattr(exc, "response", None)
        if response is None or response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return None, response


def pending_intents(memory: MemoryDynamoDB) -> list[str]:
    return sorted(item["PK"]["S"] for item in memory.items[TABLE].values()
                  if mrsc.PENDING_ATTR in item)


def repair(memory: MemoryDynamoDB, now: float) -> list[str]:
    """Every lock settled by ``_mrsc.Settle`` at ``now`` (one after the other): the log."""
    log = []
    scanned = memory.handle("Scan", {"TableName": TABLE, "ConsistentRead": True})["Items"]
    for item in scanned:
        if not item["PK"]["S"].startswith(RESERVED_PREFIX):
            continue
        met = mrsc.Met.of(item, "PK")
        assert met is not None
        rule = mrsc.Settle(TABLE, met, lock_key(met.key), locks_for, TIMING)
        while (request := rule.request()) is not None:
            answer, refused = handle(memory, *request)
            log.append(f"repair: {describe(request)} -> {'refused' if refused else 'ok'}")
            rule = rule.answered(now, answer)
    return log


def run(memory: MemoryDynamoDB, machine: Any, now: float) -> Any:
    """``machine`` driven alone to its end at ``now``."""
    while (request := machine.request(now)) is not None:
        machine = machine.answered(now, *handle(memory, *request))
    return machine


def describe(request: tuple[str, Mapping[str, Any]]) -> str:
    operation, params = request
    key = params.get("Key") or params.get("Item") or {}
    extra = ""
    if operation == "PutItem" and key.get("email"):
        extra = f" email={key['email']['S']}"
    elif operation == "PutItem" and mrsc.PENDING_ATTR in key:
        extra = " (pending intent)"
    return f"{operation} {key.get('PK', {}).get('S')}{extra}"


# --- the search ---------------------------------------------------------------------------------


@attrs.frozen
class Seat:
    """A client: its operations, which it is at, its machine (None: done), whether it crashed,
    and what its ended operations came to."""

    index: int
    ops: tuple[Op, ...]
    at: int = 0
    machine: Any = None
    crashed: bool = False
    outcomes: tuple[str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        return (self.at, None if self.machine is None else self.machine.key_text(),
                self.crashed, self.outcomes)

    @property
    def active(self) -> bool:
        return self.machine is not None and not self.crashed

    def next_op(self) -> Seat:
        if self.at >= len(self.ops):
            return attrs.evolve(self, machine=None)
        return attrs.evolve(self, machine=writer(self.ops[self.at], f"c{self.index}o{self.at}"),
                            at=self.at + 1)


Step = tuple[int, str]   # (client, "go" | "crash" | "lost"), or (-1, "tick")


@attrs.define
class Explorer:
    """Breadth-first search over every schedule of one workload (see the module docstring)."""

    workload: Sequence[Sequence[Op]]
    crashes: int = 1
    ticks: int = 1
    seed: Callable[[MemoryDynamoDB], None] | None = None
    lost: int = 0
    dbs: dict[Any, int] = attrs.field(factory=dict)
    states: list[dict[str, Any]] = attrs.field(factory=list)
    problems: list[list[tuple[Any, str]]] = attrs.field(factory=list)
    applied: dict[tuple[int, str], tuple[Any, Any, int]] = attrs.field(factory=dict)

    def intern(self, memory: MemoryDynamoDB) -> int:
        snapshot = memory.snapshot()
        db = self.dbs.get(snapshot)
        if db is None:
            db = self.dbs[snapshot] = len(self.states)
            self.states.append(dict(memory.items[TABLE]))
            found, _ = analyse(memory)
            self.problems.append([(ident, text) for ident, text in found
                                  if ident[0] in _SAFETY])
        return db

    def memory(self, db: int) -> MemoryDynamoDB:
        memory = new_memory()
        memory.items[TABLE] = dict(self.states[db])
        return memory

    def start(self) -> tuple[Any, ...]:
        memory = new_memory()
        if self.seed is not None:
            self.seed(memory)
        seats = tuple(Seat(i, tuple(ops)).next_op() for i, ops in enumerate(self.workload))
        db = self.intern(memory)
        # A seed's drift (a record holding its value without a lock: a write around the
        # library) is no violation while it lasts; once gone, it may not come back.
        drift = frozenset(ident for ident, _ in self.problems[db] if ident[0] == "missing")
        return db, seats, 0, self.crashes, self.ticks, self.lost, drift

    def steps(self, state: tuple[Any, ...]) -> list[Step]:
        _, seats, now, crashes, ticks, lost, _ = state
        out: list[Step] = []
        for seat in seats:
            if seat.active:
                out.append((seat.index, "go"))
                if crashes:
                    out.append((seat.index, "crash"))
                request = seat.machine.advance(float(now)).request(float(now)) if lost else None
                if request is not None and request[0] not in ("GetItem", "Scan"):
                    out.append((seat.index, "lost"))
        if ticks and out:
            out.append((-1, "tick"))
        return out

    def send(self, db: int, request: tuple[str, dict[str, Any]]) -> tuple[Any, Any, int]:
        memo = (db, json.dumps(request, sort_keys=True))
        hit = self.applied.get(memo)
        if hit is None:
            memory = self.memory(db)
            answer, refused = handle(memory, *request)
            after = db if request[0] in ("GetItem", "Scan") else self.intern(memory)
            hit = self.applied[memo] = (answer, refused, after)
        return hit

    def child(self, state: tuple[Any, ...], step: Step, log: list[str] | None = None
              ) -> tuple[Any, ...]:
        db, seats, now, crashes, ticks, lost, drift = state
        index, kind = step
        if kind == "tick":
            if log is not None:
                log.append("the clock moves one lease on: every intent put so far is past "
                           "its grace period")
            return db, seats, now + 1, crashes, ticks - 1, lost, drift
        seat = seats[index]
        assert seat.machine is not None
        if kind == "crash":
            if log is not None:
                log.append(f"client {index} CRASHES (stops forever)")
            seat = attrs.evolve(seat, crashed=True)
            return db, _put(seats, seat), now, crashes - 1, ticks, lost, drift
        machine = seat.machine.advance(float(now))
        request = machine.request(float(now))
        if request is None:   # the lease ended before the record write, nothing to undo
            seat = attrs.evolve(seat, machine=machine)
        elif kind == "lost":
            _, refused, db = self.send(db, request)
            if log is not None:
                log.append(f"client {index}: {describe(request)} -> "
                           f"{'ConditionalCheckFailed' if refused else 'ok'}, ANSWER LOST")
            seat = attrs.evolve(seat, machine=machine.lost())
            return db, _put(seats, seat), now, crashes, ticks, lost - 1, self._left(db, drift)
        else:
            answer, refused, db = self.send(db, request)
            if log is not None:
                log.append(f"client {index}: {describe(request)} -> "
                           f"{'ConditionalCheckFailed' if refused else 'ok'}")
            machine = machine.answered(float(now), answer, refused)
            seat = attrs.evolve(seat, machine=machine)
        if machine.phase == "done":
            if log is not None:
                log.append(f"client {index}: {seat.ops[seat.at - 1]} ends: {machine.outcome}")
            seat = attrs.evolve(seat, outcomes=(*seat.outcomes, machine.outcome)).next_op()
        return db, _put(seats, seat), now, crashes, ticks, lost, self._left(db, drift)

    def _left(self, db: int, drift: frozenset[Any]) -> frozenset[Any]:
        """The seed's drift still there in ``db``."""
        return drift & {ident for ident, _ in self.problems[db]} if drift else drift

    def _unexcused(self, found: list[tuple[Any, str]], drift: frozenset[Any]) -> list[str]:
        """The problems the seed's drift does not excuse: the drift itself, and a value it
        holds without its lock taken by another record too (a duplicate it let in)."""
        drifted = {ident[2] for ident in drift}
        return [text for ident, text in found if ident not in drift
                and not (ident[0] == "duplicate" and ident[1] in drifted)]

    def verdict(self, state: tuple[Any, ...]) -> list[str]:
        """What is wrong in ``state``: its safety problems, and at quiescence what is left."""
        db, seats, now, _, _, _, drift = state
        found = self._unexcused(self.problems[db], drift)
        if found or any(seat.active for seat in seats):
            return found
        memory = self.memory(db)
        crashed = any(seat.crashed for seat in seats)
        left = [] if crashed else [f"once every client is done: lock {key} still carries a "
                                   "pending intent, with no crash" for key in
                                   pending_intents(memory)]
        if drift:   # repair writes the drift's locks too (a Mend, every grace passed)
            run(memory, Mend("final"), float(now) + TIMING.grace + 1)
        repair(memory, float(now) + TIMING.grace + 1)
        problems, _ = analyse(memory)
        still = drift & {ident for ident, _ in problems}
        unexcused = self._unexcused(problems, still)
        return left + [f"after repair: {text}" for text in unexcused] + [
            f"after repair: lock {key} still carries a pending intent"
            for key in pending_intents(memory)]

    def key(self, state: tuple[Any, ...]) -> tuple[Any, ...]:
        db, seats, now, crashes, ticks, lost, drift = state
        return db, tuple(s.key() for s in seats), now, crashes, ticks, lost, drift

    def run(self) -> tuple[int, tuple[Step, ...] | None, list[str]]:
        """(states met, the shortest schedule to a violation or None, its problems)."""
        start = self.start()
        seen = {self.key(start): None}
        queue = deque([(start, ())])
        while queue:
            state, schedule = queue.popleft()
            problems = self.verdict(state)
            if problems:
                return len(seen), schedule, problems
            for step in self.steps(state):
                child = self.child(state, step)
                key = self.key(child)
                if key not in seen:
                    seen[key] = None
                    queue.append((child, (*schedule, step)))
        return len(seen), None, []

    def trace(self, schedule: Sequence[Step]) -> list[str]:
        state = self.start()
        log: list[str] = []
        for step in schedule:
            state = self.child(state, step, log)
        return log


def _put(seats: tuple[Seat, ...], seat: Seat) -> tuple[Seat, ...]:
    return (*seats[:seat.index], seat, *seats[seat.index + 1:])


# --- workloads and mutants ----------------------------------------------------------------------


def seed_held(memory: MemoryDynamoDB) -> None:
    """``R0`` holds ``v0`` with its lock, as the protocol leaves a finished write."""
    item = record("R0", "v0")
    assert item is not None
    memory.handle("PutItem", {"TableName": TABLE, "Item": item})
    (lock,) = locks_for(item).values()
    memory.handle("PutItem", {"TableName": TABLE, "Item": {
        **lock, mrsc.TOKEN_ATTR: {"S": "seed"}, mrsc.AT_ATTR: {"N": "0.0"}}})


def seed_orphan(memory: MemoryDynamoDB) -> None:
    """The lock of ``v1`` names ``R9``, which does not exist (a crash after its intent, past its
    grace period, or a record deleted around the library)."""
    item = record("R9", "v1")
    assert item is not None
    (lock,) = locks_for(item).values()
    memory.handle("PutItem", {"TableName": TABLE, "Item": {
        **lock, mrsc.TOKEN_ATTR: {"S": "seed"}, mrsc.PENDING_ATTR: {"S": "seed"},
        mrsc.AT_ATTR: {"N": "-5.0"}}})


def seed_missing(memory: MemoryDynamoDB) -> None:
    """``R0`` holds ``v0`` without a lock (a write around the library)."""
    memory.handle("PutItem", {"TableName": TABLE, "Item": record("R0", "v0")})


def seed_foreign(memory: MemoryDynamoDB) -> None:
    """``R0`` holds ``v0``, whose lock (cleared, the protocol's) names ``R9``, which does not
    exist (a record deleted around the library, and R0 written around it)."""
    memory.handle("PutItem", {"TableName": TABLE, "Item": record("R0", "v0")})
    item = record("R9", "v0")
    assert item is not None
    (lock,) = locks_for(item).values()
    memory.handle("PutItem", {"TableName": TABLE, "Item": {
        **lock, mrsc.TOKEN_ATTR: {"S": "seed"}, mrsc.AT_ATTR: {"N": "-5.0"}}})


def menu(record_name: str, values: int) -> list[Op]:
    return [("put", record_name, f"v{v}") for v in range(values)] + [("delete", record_name)]


def workloads(clients: int, ops: int, values: int, *, shared: bool = False,
              repairer: bool = False) -> Iterator[tuple[tuple[Op, ...], ...]]:
    """Every workload of ``clients`` clients × ``ops`` operations over ``values`` values: each
    client on its own record ``R<i>`` (``shared``: every client on ``R0``), creates first;
    ``repairer``: one more client runs ``repair`` once, beside them."""
    per_client = []
    for c in range(clients):
        name = "R0" if shared else f"R{c}"
        firsts = [op for op in menu(name, values) if op[0] == "put"]
        rest = list(itertools.product(menu(name, values), repeat=ops - 1))
        per_client.append([(first, *more) for first in firsts for more in rest])
    extra = [((("repair",),),)] if repairer else []
    yield from itertools.product(*per_client, *extra)


SCENARIOS: dict[str, tuple[tuple[tuple[Op, ...], ...], Callable[[MemoryDynamoDB], None] | None]] = {
    # Two records race for values: a create each, then a move onto the other's value.
    "race": (((("put", "R0", "v0"), ("put", "R0", "v1")),
              (("put", "R1", "v1"), ("put", "R1", "v0"))), None),
    # One record moved by two clients, from a finished write (ABA on its old lock).
    "same": (((("put", "R0", "v1"),), (("put", "R0", "v1"), ("put", "R0", "v0"))), seed_held),
    # Two creates meet one orphan (a crashed writer's intent, long past its grace period).
    "orphan": (((("put", "R0", "v1"),), (("put", "R1", "v1"),)), seed_orphan),
    # repair beside a writer that may crash: it must leave a live writer's intent alone.
    "repair": (((("put", "R0", "v0"), ("put", "R0", "v1")), (("repair",), ("repair",))), None),
    # Three clients: a move and two creates over two values.
    "three": (((("put", "R0", "v0"), ("put", "R0", "v1")), (("put", "R1", "v1"),),
               (("put", "R2", "v0"),)), None),
    # A delete beside a create of the freed value.
    "delete": (((("delete", "R0"),), (("put", "R1", "v0"),)), seed_held),
    # repair writing a missing lock (R0 holds v0 without one) beside a writer moving R0 away
    # and back, and a create of the value R0 leaves.
    "mend": (((("put", "R0", "v1"),), (("put", "R1", "v0"),), (("mend",),)), seed_missing),
    # ... and R0 moved away and back (ABA on the missing lock), under exhaustive.
    "mend-back": (((("put", "R0", "v1"), ("put", "R0", "v0")), (("put", "R1", "v0"),),
                   (("mend",),)), seed_missing),
    # repair handing a lock over (its owner R9 gone, R0 holds v0) beside a delete of R0 and a
    # create of v0.
    "hand-over": (((("delete", "R0"),), (("put", "R1", "v0"),), (("mend",),)), seed_foreign),
}


def _mutant_takeover_any() -> Any:
    def wrap(original: Any) -> Any:
        def put(table: str, lock: Any, token: str, now: float, met: Any) -> Any:
            params = original(table, lock, token, now, met)
            if met is not None:
                params["ConditionExpression"] = "attribute_exists(#n0)"
                params["ExpressionAttributeNames"] = {"#n0": "PK"}
                params.pop("ExpressionAttributeValues", None)
            return params
        return put
    return patched(mrsc, "intent_put", wrap)


def _mutant_release_owner_only() -> Any:
    def wrap(original: Any) -> Any:
        def release(table: str, key: Any, met: Any) -> Any:
            params = original(table, key, met)
            params["ConditionExpression"] = "#n1 = :v1"
            params["ExpressionAttributeNames"] = {"#n1": "owner"}
            params["ExpressionAttributeValues"] = {":v1": {"M": met.owner_key()}}
            return params
        return release
    return patched(mrsc, "release", wrap)


def _mutant_no_grace() -> Any:
    def wrap(original: Any) -> Any:
        def judge(met: Any, owner: Any, locks: Any, now: float, timing: Any) -> Any:
            return original(met, owner, locks, now, mrsc.Timing(timing.lease, 0.0))
        return judge
    return patched(mrsc, "judge", wrap)


def _mutant_unmarked() -> Any:
    def wrap(original: Any) -> Any:
        def put(table: str, lock: Any, token: str, now: float, met: Any) -> Any:
            params = original(table, lock, token, now, met)
            params["Item"].pop(mrsc.PENDING_ATTR)
            return params
        return put
    return patched(mrsc, "intent_put", wrap)


def _mutant_no_lease() -> Any:
    return patched(mrsc.Write, "writable", lambda _: lambda self, now: True)


def _mutant_lost_blind() -> Any:
    """The first machine: a lost record write's answer ignored, and an undo releasing every
    intent of the operation, even one the record (written by the lost attempt) requires."""
    @contextlib.contextmanager
    def both() -> Iterator[None]:
        def undo(original: Any) -> Any:
            def blind(self: Any, count: int) -> Any:
                return original(attrs.evolve(self, keep=()), count)
            return blind
        with patched(mrsc.Write, "lost", lambda _: lambda self: self), \
                patched(mrsc.Write, "_undo", undo):
            yield
    return both()


def _claim_request(change: Callable[[Any, dict[str, Any]], None]) -> Any:
    """``_mrsc.Claim.request`` with ``change(claim, params)`` applied to each request."""
    def wrap(original: Any) -> Any:
        def request(self: Any, now: float) -> Any:
            sent = original(self, now)
            if sent is not None:
                change(self, sent[1])
            return sent
        return request
    return patched(mrsc.Claim, "request", wrap)


def _unconditioned(phase: str) -> Callable[[Any, dict[str, Any]], None]:
    def change(claim: Any, params: dict[str, Any]) -> None:
        if claim.phase == phase:
            for name in ("ConditionExpression", "ExpressionAttributeValues"):
                params.pop(name, None)
            params["ExpressionAttributeNames"] = {
                k: v for k, v in params["ExpressionAttributeNames"].items()
                if f"{k} " in params.get("UpdateExpression", "") + " "}
            if not params["ExpressionAttributeNames"]:
                del params["ExpressionAttributeNames"]
    return change


#: name → (what it breaks, patcher, the scenario that catches it).
MUTANTS: dict[str, tuple[str, Callable[[], Any], str]] = {
    "takeover-any": ("a takeover conditioned on the lock existing, not on the exact intent met",
                     _mutant_takeover_any, "orphan"),
    "release-owner-only": ("an old lock deleted under its owner guard alone (no token)",
                           _mutant_release_owner_only, "same"),
    "no-grace": ("a pending intent taken over at once (no grace period)", _mutant_no_grace,
                 "race"),
    "intent-unmarked": ("locks put without the pending mark: the intent cleared before the "
                        "record write", _mutant_unmarked, "race"),
    "no-lease": ("a record write sent after its lease ended", _mutant_no_lease, "race"),
    "claim-blind": ("repair's lock put unconditioned (no attribute_not_exists, no exact "
                    "lock met)", lambda: _claim_request(_unconditioned("put")), "mend"),
    "claim-undo-any": ("repair's intent deleted unconditioned when its record no longer "
                       "requires it", lambda: _claim_request(_unconditioned("undo")),
                       "hand-over"),
    "lost-answer-blind": ("a record write whose answer was lost taken as not applied: its "
                          "intents released (explored with --lost 1)", _mutant_lost_blind,
                          "race"),
}


@contextlib.contextmanager
def mutant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    with MUTANTS[name][1]():
        yield


def explore_scenario(name: str, *, crashes: int = 1, ticks: int = 1, lost: int = 0
                     ) -> tuple[int, list[str]]:
    workload, seed = SCENARIOS[name]
    explorer = Explorer(workload, crashes, ticks, seed, lost)
    states, schedule, problems = explorer.run()
    if schedule is None:
        return states, []
    return states, [f"scenario {name}, workload {workload}:", *explorer.trace(schedule),
                    *[f"VIOLATION: {p}" for p in problems]]


def explore_all(clients: int, ops: int, values: int, *, crashes: int = 1, ticks: int = 1,
                shared: bool = False, repairer: bool = False, lost: int = 0,
                progress: bool = False) -> tuple[int, int, list[str]]:
    """(workloads, states, the first violation's trace — empty: none); ``progress``: one line
    a workload on stderr (so a run stopped by a timeout still says how far it got)."""
    count = states = 0
    began = time.process_time()
    for workload in workloads(clients, ops, values, shared=shared, repairer=repairer):
        count += 1
        explorer = Explorer(workload, crashes, ticks, lost=lost)
        n, schedule, problems = explorer.run()
        states += n
        if progress:
            print(f"workload {count}: {n} states (total {states}, "
                  f"{time.process_time() - began:.1f} CPU s) {workload}", file=sys.stderr,
                  flush=True)
        if schedule is not None:
            return count, states, [f"workload {workload}:", *explorer.trace(schedule),
                                   *[f"VIOLATION: {p}" for p in problems]]
    return count, states, []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.mrsc")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--ops", type=int, default=2)
    parser.add_argument("--values", type=int, default=2)
    parser.add_argument("--crashes", type=int, default=1)
    parser.add_argument("--ticks", type=int, default=1)
    parser.add_argument("--lost", type=int, default=0,
                        help="up to K write requests applied with their answer lost (resent)")
    parser.add_argument("--shared", action="store_true", help="every client on one record")
    parser.add_argument("--repairer", action="store_true",
                        help="one more client runs repair beside the writers")
    parser.add_argument("--progress", action="store_true",
                        help="one line a workload on stderr: its states, the total, CPU s")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--mutant", choices=sorted(MUTANTS))
    parser.add_argument("--list-mutants", action="store_true")
    args = parser.parse_args(argv)
    if args.list_mutants:
        for name, (what, _, scenario) in MUTANTS.items():
            print(f"{name}: {what} (caught by {scenario})")
        return 0
    began = time.process_time()
    with mutant(args.mutant):
        if args.scenario:
            states, trace = explore_scenario(args.scenario, crashes=args.crashes,
                                             ticks=args.ticks, lost=args.lost)
            count = 1
        else:
            count, states, trace = explore_all(args.clients, args.ops, args.values,
                                               crashes=args.crashes, ticks=args.ticks,
                                               shared=args.shared, repairer=args.repairer,
                                               lost=args.lost, progress=args.progress)
    print("\n".join(trace))
    print(f"{time.process_time() - began:.1f} CPU seconds")
    print(f"explored {count} workloads, {states} states, {1 if trace else 0} violations")
    return 1 if trace else 0


if __name__ == "__main__":
    raise SystemExit(main())
