"""Deterministic simulation: every interleaving of a few clients' calls, explored.

Each logical client runs a short list of calls (``tests.simulation.workloads``) through the very
generators the sync and async drivers run. The scheduler answers each request from one
:class:`~simulation.memory.MemoryDynamoDB` and decides, request by request, whose turn it is —
and, while ``--lost K`` allows, whether a write is applied and its answer lost on the way back
(the client then resends, with the same token), and, while ``--faults N`` allows (default 1),
whether a request meets a conflict, throttling or unprocessed batch keys (:data:`FAULTS`; the
retry loop backs off — never really sleeping — and retries). The exploration is breadth first
over those choices, with state hashing (the database and its tokens, each client's position,
objects and answers, and what the call checks below remember) to prune: every reachable state
is visited once (``search.Search``: each transition computed once, no schedule replayed), and
the first violation found comes with a shortest schedule reaching it.

Checked after every request, on the database: no value held by two live records, no live
record without its lock, and — once every client is done — no lock without a live holder
requiring it (an orphan refuses no write: the write that meets it takes it over). Checked
when a call ends: it ended in success or an expected error; a success's effect is visible
(when no other client wrote since the call's last write); a ``UniqueViolation`` names a record
that held the value at some state during the call (the history of holders per value is kept
per call), as does a ``get_by_unique`` that returned a record; a lookup that found nothing saw
the value free (or held by another model) at some state during the call.

    python -m tests.simulation.explore --clients 2 --ops 3 --values 3 [--mutant NAME]
                                        [--random N --seed S] [--lost K] [--faults N]
                                        [--scenario NAME] [--time] [--list-mutants]

The last line reads ``explored N states, V violations``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import attrs
import botocore.exceptions

import dynaunique._write.render as render_module
import dynaunique._write.writes as writes_module
from dynaunique._transport.connection import DEFAULT_POLICY, Request
from dynaunique.errors import UniqueViolation

from .blocking import handing_off
from .memory import Fault, MemoryDynamoDB
from .mutants import MUTANTS, patched
from .workloads import (
    DEFAULT_SCENARIOS,
    EXPECTED_ERRORS,
    REPLICATED,
    SCENARIOS,
    SEEDS,
    Action,
    Client,
    random_workload,
    running_client,
    workloads,
)
from .world import TABLE, Held, Problem, analyse, new_memory

__all__ = ["DEFAULT_SCENARIOS", "MUTANTS", "Action", "Call", "explore", "explore_all", "main",
           "replay", "simulation", "workloads"]

# --- the simulation's setting ------------------------------------------------------------------


def _token_outside(original: Any) -> Any:
    """A ClientRequestToken unique to one call of one client, the same in every replay, inside
    a simulated client's call; the library's own token elsewhere."""
    def token(request: Any, encoded: Any = None) -> str:
        client = running_client()
        if client is None:
            return str(original(request, encoded))
        client.tokens += 1
        return f"sim-c{client.index}-a{client.next_action}-t{client.tokens}"
    return token


@contextlib.contextmanager
def simulation(mutant: str | None = None) -> Iterator[None]:
    """The run-time setting of a simulation: lock timestamps fixed and tokens named after the
    call that made them (so equal states hash alike, and every replay is the same), and the
    mutant, if any, switched on."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(writes_module, "now", lambda _: lambda: "SIMULATED"))
        stack.enter_context(patched(render_module, "new_token", _token_outside))
        stack.enter_context(handing_off())
        if mutant is not None:
            if mutant not in MUTANTS:
                raise SystemExit(f"unknown mutant {mutant!r}; --list-mutants names them")
            stack.enter_context(MUTANTS[mutant][1]())
        _analysed.clear()
        yield
        _analysed.clear()


#: analyse() of each database state met (by its snapshot): replays meet the same states often.
_analysed: dict[Any, tuple[list[Problem], dict[Held, set[str]]]] = {}


def _analyse(memory: MemoryDynamoDB, snapshot: Any
             ) -> tuple[list[Problem], dict[Held, set[str]]]:
    result = _analysed.get(snapshot)
    if result is None:
        result = _analysed[snapshot] = analyse(memory)
    return result


# --- the world -----------------------------------------------------------------------------------

#: A scheduling choice: client ``i`` gets its answer (``i``), its write is applied and the
#: answer lost (``-1 - i``), or its request meets a fault (``(i, name)``, :data:`FAULTS`).
Step = int | tuple[int, str]

#: The faults the scheduler may choose at a request, each spending one of the run's ``faults``
#: budget; none applies anything (DynamoDB's own answers, as the retry loop sees them):
#: ``conflict`` — a write meets another transaction (a single write refused with
#: ``TransactionConflictException``, a transaction cancelled with a ``TransactionConflict``
#: reason in its first slot); ``throttle`` — a single request refused with
#: ``ProvisionedThroughputExceededException``, a transaction cancelled with a
#: ``ThrottlingError`` reason; ``unprocessedK`` — a BatchGetItem / BatchWriteItem processes its
#: first K keys only and returns the rest unprocessed (K = 0 .. keys - 1). One code each: the
#: retry loop treats every code of ``dynaunique._transport.connection.RETRYABLE`` alike
#: (``ThrottlingException`` as ``ProvisionedThroughputExceededException``), so another code
#: would only add states.
FAULTS = ("conflict", "throttle", "unprocessed")
_SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})


def fault_choices(request: Request) -> list[str]:
    """The faults the scheduler may choose for ``request`` (see :data:`FAULTS`)."""
    operation = request.operation
    names = (["conflict"] if operation in _SINGLE_WRITES or operation == "TransactWriteItems"
             else []) + ["throttle"]
    if operation == "BatchGetItem":
        size = sum(len(r["Keys"]) for r in request.params["RequestItems"].values())
        names += [f"unprocessed{k}" for k in range(size)]
    elif operation == "BatchWriteItem":
        size = sum(len(w) for w in request.params["RequestItems"].values())
        names += [f"unprocessed{k}" for k in range(size)]
    return names


def fault_of(name: str, request: Request) -> Fault:
    """The model's :class:`~.memory.Fault` a scheduled fault ``name`` stands for."""
    transaction = request.operation == "TransactWriteItems"
    if name == "conflict":
        return Fault.conflict(0)
    if name == "throttle":
        return (Fault.cancel("ThrottlingError", 0) if transaction
                else Fault.refuse("ProvisionedThroughputExceededException"))
    assert name.startswith("unprocessed"), name
    return Fault.unprocessed(int(name[len("unprocessed"):]))


def decode(step: Step) -> tuple[int, str]:
    """(the client a step is about, ``""`` — answered —, ``"lost"`` or a fault's name)."""
    if isinstance(step, tuple):
        return step
    return (step, "") if step >= 0 else (-1 - step, "lost")


@attrs.define
class Call:
    """What the checks of a client's call in progress remember."""

    #: Per value, the records that held it at some state since the call began ("": nobody).
    history: dict[Held, set[str]] = attrs.field(factory=dict)
    #: Whether another client changed the database since this call's last write (or start).
    others_wrote: bool = False
    #: Whether the call has seen its first state (a value first met later was free before).
    started: bool = False
    #: Whether no other client changed the database since the call began.
    quiet: bool = True

    def see(self, holders: dict[Held, set[str]]) -> None:
        if not self.started:
            self.started = True
            self.history = {value: set(now) for value, now in holders.items()}
            return
        for value, seen in self.history.items():
            seen.update(holders.get(value) or {""})
        for value, now in holders.items():
            if value not in self.history:
                self.history[value] = set(now) | {""}

    def key(self) -> tuple[Any, ...]:
        return (tuple(sorted((v, tuple(sorted(s))) for v, s in self.history.items())),
                self.others_wrote, self.started, self.quiet)


@attrs.define
class World:
    """The database and the clients after a schedule (a sequence of :data:`Step`)."""

    memory: MemoryDynamoDB
    clients: list[Client]
    #: How many answers may still be lost after the request was applied.
    lost: int = 0
    #: How many faults (:data:`FAULTS`) the scheduler may still choose.
    faults: int = 0
    log: list[str] = attrs.field(factory=list)
    calls: list[Call] = attrs.field(factory=list)
    #: What the calls that ended got wrong (the database's invariants are checked apart).
    problems: list[str] = attrs.field(factory=list)
    snapshot: Any = None
    #: The database's problems at the start (a drift scenario's): only new ones are violations.
    baseline: frozenset[tuple[str, ...]] = frozenset()

    def start(self, seed: Callable[[MemoryDynamoDB], None] | None = None) -> None:
        if seed is not None:
            seed(self.memory)
        self.snapshot = self.memory.snapshot()
        problems, holders = _analyse(self.memory, self.snapshot)
        self.baseline = frozenset(ident for ident, _ in problems)
        self.calls = [Call() for _ in self.clients]
        for client in self.clients:
            client.advance()
            self.calls[client.index].see(holders)
            self._ended(client, holders)

    def key(self) -> tuple[Any, ...]:
        return (self.snapshot, tuple(sorted(self.memory.tokens)),
                tuple(c.key() for c in self.clients), tuple(c.key() for c in self.calls),
                self.lost, self.faults)

    def violations(self) -> list[str]:
        # An orphan lock refuses no write (the write that meets it takes it over: issue 36),
        # so one is a violation only once every client is done: a backfill's lock put for a
        # record that moved is an orphan until its verification deletes it. A write refused
        # by an orphan is caught by the call checks (a UniqueViolation naming a non-holder).
        done = all(client.done for client in self.clients)
        return [text for ident, text in _analyse(self.memory, self.snapshot)[0]
                if not self._inherited(ident) and (done or ident[0] != "orphan")] + self.problems

    def _inherited(self, ident: tuple[str, ...]) -> bool:
        """Whether a problem comes from how the database started: one it had then, or a
        duplicate of a value no lock protected then (a record the application may still
        meet; a backfill reports it, a repair leaves it to a person)."""
        return ident in self.baseline or (ident[0] == "duplicate" and any(
            b[0] == "missing" and b[2] == ident[1] for b in self.baseline))

    def runnable(self) -> list[Step]:
        """The next steps possible: each waiting client's request answered, (while answers
        may be lost) each waiting write applied with its answer lost, and (while the fault
        budget lasts) each waiting request meeting each fault it may meet."""
        return runnable(self.clients, self.lost, self.faults)

    def step(self, step: Step) -> None:
        index, kind = decode(step)
        client = self.clients[index]
        request = client.pending
        assert request is not None
        answer: Any = None
        error: Exception | None = None
        fault = fault_of(kind, request) if kind not in ("", "lost") else None
        backoffs = client.backoffs
        try:
            answer = self.memory.handle(request.operation, request.params, fault=fault)
            result = "ok"
        except Exception as exc:
            if not hasattr(exc, "response"):
                raise
            error, result = exc, _refusal(exc.response)
        if request.operation not in _READS:
            snapshot = self.memory.snapshot()
            if snapshot != self.snapshot:
                self.snapshot = snapshot
                for other, call in enumerate(self.calls):
                    if other != index:
                        call.others_wrote, call.quiet = True, False
                self.calls[index].others_wrote = False
        _, holders = _analyse(self.memory, self.snapshot)
        self._seen(holders)
        if fault is not None:
            self.faults -= 1
            result += f" (INJECTED {kind})"
        if kind == "lost":
            self.lost -= 1
            client.answers.append("lost")
            self.log.append(f"client {index}: {describe(request)} -> {result}, ANSWER LOST")
            error = botocore.exceptions.ConnectionClosedError(
                endpoint_url="http://simulation.invalid")
        else:
            client.answers.append(repr(error.response) if error is not None  # type: ignore
                                  else repr(sorted(answer.items())))
            self.log.append(f"client {index}: {describe(request)} -> {result}")
        client.advance(answer=answer, error=error)
        if client.backoffs > backoffs:
            self.log.append(f"client {index}: backs off (not slept) and retries")
        self._ended(client, holders)

    def _seen(self, holders: dict[Held, set[str]]) -> None:
        """Every call in progress sees the database now (replicas.py: each its own replica)."""
        for call in self.calls:
            call.see(holders)

    def _ended(self, client: Client, holders: dict[Held, set[str]]) -> None:
        """Check the calls of ``client`` that just ended; the next one starts now."""
        outcomes = client.outcomes[len(client.outcomes) - len(client.finished):]
        for (action, value, exc), outcome in zip(client.finished, outcomes, strict=True):
            self.log.append(f"client {client.index}: {outcome}")
            self.problems += [f"client {client.index}, {action}: {p}" for p in
                              self._judge(action, value, exc, self.calls[client.index])]
            self.calls[client.index] = Call()
            self.calls[client.index].see(holders)

    def _judge(self, action: Action, value: Any, exc: Exception | None, call: Call) -> list[str]:
        """What is wrong with how a call ended (empty: nothing): :func:`judge` here."""
        return judge(action, value, exc, call, self.memory,
                     _analyse(self.memory, self.snapshot)[0])


class Stored(Protocol):
    """What a call's check reads of the database: one item (a copy), or None."""

    def get(self, table: str, key: Any) -> Any: ...


def judge(action: Action, value: Any, exc: Exception | None, call: Call, memory: Stored,
          problems: list[Problem]) -> list[str]:
    """What is wrong with how a call ended (empty: nothing), in the database ``memory`` (whose
    problems ``analyse`` found to be ``problems``)."""
    if exc is not None and not isinstance(exc, EXPECTED_ERRORS):
        return [f"ended with an unexpected {type(exc).__name__}: {exc}"]
    if isinstance(exc, UniqueViolation):
        wrong = []
        for v in exc.violations:
            pk = (v.owner or {}).get("PK")
            held = call.history.get((v.constraint, str(v.value)), set())
            if pk not in held and not _same_unit(action, pk, v.value):
                wrong.append(f"UniqueViolation names {v.owner} as holding {v.value!r}, "
                             f"but during the call it was held by {_shown(held)}")
        return wrong
    if action.kind == "get":
        seen = call.history.get(("EMAIL", action.value.lower()), {""})
        if exc is None and value.pk not in seen:
            return [f"returned {value.pk}, which never held the value during the call "
                    f"(held by {_shown(seen)})"]
        if exc is not None and "" not in seen and not any(p.startswith("T") for p in seen):
            return [f"found nothing, but the value was held all along by {_shown(seen)}"]
        return []
    if action.kind in ("backfill", "repair"):
        return _healed(action, value, problems) if exc is None and call.quiet else []
    if exc is not None or call.others_wrote:
        return []
    return _effect(action, memory)


def _healed(action: Action, result: Any, problems: list[Problem]) -> list[str]:
    """A backfill or repair no other client wrote during: every lock is right now, but for
    the duplicates (a backfill reports them, a repair leaves them to a person) and — after a
    backfill — orphans (a fill deletes those its own puts made, checked when every client is
    done; others are the audit's, or the next write's to take over)."""
    if action.kind == "repair" and not result.ok:
        return []
    duplicated = {ident[1] for ident, _ in problems if ident[0] == "duplicate"}
    return [f"ended, yet {text}" for ident, text in problems
            if ident[0] != "duplicate" and not (ident[0] == "missing"
                                                and ident[2] in duplicated)
            and not (action.kind == "backfill" and ident[0] == "orphan")]


def _effect(action: Action, memory: Stored) -> list[str]:
    """What a successful write should have left, that the database does not show."""
    expected: list[tuple[str, str | None, str]] = []
    field = {"account": "email", "team": "contact", "note": "text"}[action.model]
    stored = action.value.lower() if action.model == "account" else action.value
    if action.kind == "delete":
        expected.append((action.record, None, ""))
    elif action.kind == "swap":
        expected += [(action.record, field, stored), (action.other, field,
                                                      action.value2.lower())]
    else:
        expected.append((action.record, field, stored))
    wrong = []
    for pk, name, want in expected:
        item = memory.get(TABLE, {"PK": {"S": pk}, "SK": {"S": "PROFILE"}})
        if name is None:
            if item is not None:
                wrong.append(f"succeeded, yet {pk} still exists")
        elif item is None or item.get(name) != {"S": want}:
            wrong.append(f"succeeded, yet {pk} is {item} (not {name}={want!r})")
    return wrong


def _same_unit(action: Action, pk: str | None, value: Any) -> bool:
    """Whether ``pk`` is another record of the same ``atomic()`` taking ``value``: two records
    of one unit taking one value is a ``UniqueViolation`` naming the first, before anything is
    sent (``_plan.merge``)."""
    if action.kind != "swap":
        return False
    taking = {action.record: action.value.lower(), action.other: action.value2.lower()}
    return pk in taking and taking[pk] == str(value) and list(taking.values()).count(
        str(value)) > 1


def _shown(holders: set[str]) -> list[str]:
    return sorted(h or "nobody" for h in holders)


_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


def describe(request: Request) -> str:
    """One line for a request: the operation and, per item, its kind, key and guard."""
    params = request.params
    if request.operation == "TransactWriteItems":
        parts = []
        for entry in params["TransactItems"]:
            (kind, body), = entry.items()
            key = body.get("Key") or body.get("Item") or {}
            guard = " [guarded]" if "ConditionExpression" in body else " [UNGUARDED]"
            parts.append(f"{kind} {key.get('PK', {}).get('S')}{guard}")
        return "TransactWriteItems(" + "; ".join(parts) + ")"
    key = params.get("Key") or params.get("Item") or {}
    guard = ("" if request.operation in _READS else
             " [guarded]" if "ConditionExpression" in params else " [UNGUARDED]")
    return f"{request.operation} {key.get('PK', {}).get('S')}{guard}"


def _refusal(response: dict[str, Any]) -> str:
    code = str(response["Error"]["Code"])
    reasons = response.get("CancellationReasons")
    if reasons:
        code += " [" + ", ".join(r["Code"] for r in reasons) + "]"
    return code


def runnable(clients: Sequence[Any], lost: int, faults: int) -> list[Step]:
    """The steps possible for ``clients`` (anything with ``index`` and ``pending``) with
    ``lost`` answers that may still be lost and ``faults`` faults that may still be chosen."""
    steps: list[Step] = []
    for c in clients:
        if c.pending is None:
            continue
        steps.append(c.index)
        if lost and c.pending.operation not in _READS:
            steps.append(-1 - c.index)
        if faults:
            steps += [(c.index, name) for name in fault_choices(c.pending)]
    return steps


def replay(workload: Sequence[Sequence[Action]], schedule: Sequence[Step], *,
           lost: int = 0, faults: int = 0, scenario: str = "") -> World:
    """The world after running ``schedule`` from the start of ``workload`` (the database
    seeded as ``scenario``'s starts)."""
    world = World(new_memory(), [Client(i, actions) for i, actions in enumerate(workload)],
                  lost, faults)
    world.start(SEEDS.get(scenario))
    for index in schedule:
        world.step(index)
    return world


# --- exploration ---------------------------------------------------------------------------------


@attrs.define
class Found:
    """A violation and the shortest schedule reaching it."""

    workload: Sequence[Sequence[Action]]
    schedule: tuple[Step, ...]
    problems: list[str]
    lost: int = 0
    scenario: str = ""
    faults: int = 0

    def start(self) -> World:
        """The world the schedule is replayed in, at its start (replicas.py: replicated)."""
        return replay(self.workload, (), lost=self.lost, faults=self.faults,
                      scenario=self.scenario)

    def trace(self) -> str:
        world = self.start()
        lines = [f"workload{f' ({self.scenario})' if self.scenario else ''}:"]
        lines += [f"  client {i}: " + "; ".join(map(str, actions))
                  for i, actions in enumerate(self.workload)]
        lines.append(f"counterexample ({len(self.schedule)} requests, each applied atomically, "
                     "in this order; a shortest one: the search is breadth first, so no "
                     "shorter schedule of this workload breaks an invariant):")
        lines += [f"     {entry}" for entry in world.log]
        for n, index in enumerate(self.schedule, start=1):
            before = len(world.log)
            world.step(index)
            lines += [f"  {n}. {world.log[before]}"]
            lines += [f"     {entry}" for entry in world.log[before + 1:]]
        if world.violations() != self.problems:
            raise AssertionError(f"the search found {self.problems}, its replay "
                                 f"{world.violations()}: a state key misses something")
        lines += [f"  VIOLATION: {p}" for p in self.problems]
        return "\n".join(lines)


def explore(workload: Sequence[Sequence[Action]], *, lost: int = 0, faults: int = 0,
            limit: int = 1, scenario: str = "", sleep_sets: bool = False
            ) -> tuple[int, list[Found]]:
    """Every state reachable from ``workload``, breadth first, with up to ``lost`` answers lost
    after their request applied and up to ``faults`` faults (:data:`FAULTS`); (states,
    violations found — at most ``limit``, each with a shortest schedule). The search is
    ``search.Search``: each transition computed once, no schedule replayed (``sleep_sets``:
    with ``sleep.run``, the same states, fewer transitions)."""
    from . import sleep
    from .search import Search

    kind = Search
    if scenario in REPLICATED:   # a global table's replicas (imported only then: its models)
        if sleep_sets:
            raise SystemExit(f"--sleep-sets does not know the replication steps of {scenario}")
        from .replicas import ReplicatedSearch as kind  # type: ignore[assignment]
    search = kind(workload, lost=lost, faults=faults, scenario=scenario)
    return sleep.run(search, limit) if sleep_sets else search.run(limit)


def explore_all(clients: int, ops: int, values: int, *, lost: int = 0, faults: int = 0,
                scenarios: Sequence[str] = DEFAULT_SCENARIOS, sleep_sets: bool = False
                ) -> tuple[int, list[Found]]:
    """Every scenario of a configuration explored exhaustively: (states, violations)."""
    states, found = 0, []
    for name, workload in workloads(clients, ops, values, scenarios):
        n, more = explore(workload, lost=lost, faults=faults, scenario=name,
                          sleep_sets=sleep_sets)
        states += n
        found += more
    return states, found


def random_runs(rng: random.Random, runs: int, clients: int, ops: int, values: int, *,
                lost: int = 0, faults: int = 0) -> tuple[int, list[Found]]:
    """``runs`` random workloads, each under one random schedule (with up to ``lost``
    answers lost after their write applied and ``faults`` faults)."""
    states, found = 0, []
    for _ in range(runs):
        workload = random_workload(rng, clients, ops, values)
        world = replay(workload, (), lost=lost, faults=faults)
        schedule: list[Step] = []
        states += 1
        while world.runnable() and not world.violations():
            index = rng.choice(world.runnable())
            schedule.append(index)
            world.step(index)
            states += 1
        if world.violations():
            found.append(Found(workload, tuple(schedule), world.violations(), lost, "random",
                               faults))
    return states, found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.explore",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--ops", type=int, default=3)
    parser.add_argument("--values", type=int, default=3)
    parser.add_argument("--mutant", default=None)
    parser.add_argument("--random", type=int, default=0, metavar="N",
                        help="N random workloads and schedules instead of exhaustive search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lost", type=int, default=0, metavar="K",
                        help="also explore up to K answers lost after their write applied")
    parser.add_argument("--faults", type=int, default=1, metavar="N",
                        help="also explore up to N faults per run (default 1; 0: none): "
                             "conflicts, throttling, unprocessed batch keys (see FAULTS)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS,
                        help="explore only this scenario (repeatable; default: all but "
                             "backfill and orphans)")
    parser.add_argument("--sleep-sets", action="store_true",
                        help="skip steps that commute with one just explored (the same states, "
                             "fewer transitions: tests/simulation/sleep.py)")
    parser.add_argument("--time", action="store_true", help="print the seconds taken")
    parser.add_argument("--list-mutants", action="store_true")
    args = parser.parse_args(argv)
    if args.faults > DEFAULT_POLICY.max_conflict_retries:
        # More would let one request's retries run out: the retry loop's documented end (a
        # clear error, nothing applied), which the checks would count as an unexpected error.
        parser.error(f"--faults is at most {DEFAULT_POLICY.max_conflict_retries}, the retry "
                     "loop's limit")
    if args.list_mutants:
        for name, (what, _) in MUTANTS.items():
            print(f"{name}: {what}")
        return 0
    began = time.process_time()
    with simulation(args.mutant):
        if args.random:
            states, found = random_runs(random.Random(args.seed), args.random, args.clients,
                                        args.ops, args.values, lost=args.lost,
                                        faults=args.faults)
        else:
            states, found = explore_all(args.clients, args.ops, args.values, lost=args.lost,
                                        faults=args.faults, sleep_sets=args.sleep_sets,
                                        scenarios=args.scenario or DEFAULT_SCENARIOS)
        for item in found[:1]:
            print(item.trace())
    if args.time:
        print(f"{time.process_time() - began:.1f} CPU seconds")
    print(f"explored {states} states, {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
