"""Deterministic simulation: every interleaving of a few clients' calls, explored.

Each logical client runs a short list of operations on one small model (``SimAccount``: one
unique ``email``) through the very generators ``save()``/``delete()``/``get_by_unique()`` hand
to the sync and async drivers (``dynaunique._flush.flush_steps`` on a unit of one,
``_du_get_by_unique_steps``). The scheduler answers each request from one
:class:`~simulation.memory.MemoryDynamoDB` and decides, request by request, whose turn it is.
The exploration is breadth first over "which client sends its next request", with state hashing
(the database, and each client's position and local knowledge) to prune: every reachable state
is visited once, and the first violation found comes with a shortest schedule reaching it.

After every request the invariants are checked on the database: no value held by two live
records, no lock without a live holder requiring it, no live record without its lock.

    python -m tests.simulation.explore --clients 2 --ops 3 --values 3 [--mutant NAME]
                                        [--random N --seed S] [--list-mutants]

The last line reads ``explored N states, V violations``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import botocore.exceptions

import dynaunique._transaction as transaction_module
import dynaunique._writes as writes_module
from dynaunique._connection import Request, Sleep
from dynaunique._flush import Op, OpKind, Unit, flush_steps
from dynaunique.errors import DynauniqueError, UniqueViolation

from .memory import MemoryDynamoDB
from .mutants import MUTANTS, patched
from .world import SimAccount, new_memory, violations

# --- operations and clients ----------------------------------------------------------------------


@attrs.frozen
class Action:
    """One call a client makes: ``save`` (a new object or its loaded copy, with ``value``),
    ``delete`` (its loaded copy, else a never-loaded object), ``get`` (get_by_unique)."""

    kind: str
    record: str = ""
    value: str = ""

    def __str__(self) -> str:
        if self.kind == "get":
            return f"get_by_unique(email={self.value!r})"
        if self.kind == "save":
            return f"save {self.record} email={self.value!r}"
        return f"delete {self.record}"


class Client:
    """One logical client: its actions, the objects it holds, its call in progress."""

    def __init__(self, index: int, actions: Sequence[Action]) -> None:
        self.index = index
        self.actions = list(actions)
        self.next_action = 0
        self.held: dict[str, SimAccount] = {}
        self.steps: Any = None
        self.pending: Request | None = None
        self.answers: list[str] = []
        self.outcomes: list[str] = []
        self.tokens = 0

    @property
    def done(self) -> bool:
        return self.pending is None and self.next_action >= len(self.actions)

    def _start(self, action: Action) -> Any:
        if action.kind == "get":
            return SimAccount._du_get_by_unique_steps("email", action.value, {})
        obj = self.held.get(action.record)
        if obj is None:
            obj = SimAccount(pk=action.record)
            if action.kind == "save":
                self.held[action.record] = obj
        kind = OpKind.SAVE
        if action.kind == "save":
            obj.email = action.value
        else:
            kind = OpKind.DELETE
        unit = Unit()
        unit.add(Op(obj, kind))
        return flush_steps(unit)

    def advance(self, answer: Any = None, error: Exception | None = None) -> None:
        """Feed the pending request's answer (or error) and run to the next request."""
        _running.append(self)
        try:
            self._advance(answer, error)
        finally:
            _running.pop()

    def _advance(self, answer: Any, error: Exception | None) -> None:
        first = self.steps is None
        while True:
            if self.steps is None:
                if self.next_action >= len(self.actions):
                    self.pending = None
                    return
                self.steps = self._start(self.actions[self.next_action])
                self.answers = []
                first = True
            try:
                if first:
                    step = next(self.steps)
                elif error is not None:
                    step = self.steps.throw(error)
                else:
                    step = self.steps.send(answer)
                while isinstance(step, Sleep):
                    step = self.steps.send(None)
            except StopIteration as stop:
                self._finish(stop.value, None)
            except (DynauniqueError, SimAccount.DoesNotExist) as exc:
                self._finish(None, exc)
            else:
                self.pending = step
                return
            first, answer, error = True, None, None

    def _finish(self, value: Any, exc: Exception | None) -> None:
        action = self.actions[self.next_action]
        if exc is None:
            if action.kind == "get":
                self.held[value.pk] = value
            elif action.kind == "delete":
                self.held.pop(action.record, None)
            self.outcomes.append(f"{action}: ok")
        else:
            self.outcomes.append(f"{action}: {type(exc).__name__}")
            if isinstance(exc, UniqueViolation):
                self.outcomes[-1] += f" (held by {exc.owner})"
        self.steps = None
        self.pending = None
        self.next_action += 1

    def key(self) -> tuple[Any, ...]:
        """What the client's future behaviour depends on (for state hashing)."""
        held = tuple(sorted((rec, repr(sorted((obj._du_loaded or {}).items())), obj.email)
                            for rec, obj in self.held.items()))
        return (self.next_action, held, tuple(self.answers), self.tokens)


# --- the simulation's setting ------------------------------------------------------------------


#: The client whose call is running (its calls' tokens are named after it and the call).
_running: list[Client] = []


def _token(request: Any, encoded: Any = None) -> str:
    """A ClientRequestToken unique to one call of one client, the same in every replay."""
    client = _running[-1]
    client.tokens += 1
    return f"sim-c{client.index}-a{client.next_action}-t{client.tokens}"


def _token_outside(original: Any) -> Any:
    """:func:`_token` inside a simulated client's call, the library's own token elsewhere."""
    def token(request: Any, encoded: Any = None) -> str:
        return _token(request, encoded) if _running else str(original(request, encoded))
    return token


@contextlib.contextmanager
def simulation(mutant: str | None = None) -> Iterator[None]:
    """The run-time setting of a simulation: lock timestamps fixed and tokens named after the
    call that made them (so equal states hash alike, and every replay is the same), and the
    mutant, if any, switched on."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(writes_module, "now", lambda _: lambda: "SIMULATED"))
        stack.enter_context(patched(transaction_module, "new_token", _token_outside))
        if mutant is not None:
            if mutant not in MUTANTS:
                raise SystemExit(f"unknown mutant {mutant!r}; --list-mutants names them")
            stack.enter_context(MUTANTS[mutant][1]())
        yield


# --- workloads -----------------------------------------------------------------------------------


def workloads(clients: int, ops: int, values: int) -> list[list[list[Action]]]:
    """The workloads explored for a configuration: each client ``ops`` actions over the records
    R0.. and the values v0.. (taken ``values`` at a time), in every rotation of the values."""
    names = [f"v{i}" for i in range(values)]
    result = []
    for shift in range(values):
        def value(i: int, shift: int = shift) -> str:
            return names[(i + shift) % values]
        plan = []
        for c in range(clients):
            own, other = f"R{c}", f"R{(c + 1) % clients}"
            menu = [Action("save", own, value(c)),          # a create
                    Action("save", own, value(c + 1)),      # change the unique value
                    Action("delete", other),                # a never-loaded delete
                    Action("get", value=value(c + 2)),      # load whoever holds a value
                    Action("save", other, value(c)),        # a copy got by get: maybe stale
                    Action("delete", own)]
            plan.append(menu[:ops] if ops <= len(menu) else
                        [menu[i % len(menu)] for i in range(ops)])
        result.append(plan)
    return result


def random_workload(rng: random.Random, clients: int, ops: int, values: int) -> list[list[Action]]:
    """A random workload: each action a save, delete or get on R0.. with values v0.."""
    names = [f"v{i}" for i in range(values)]
    records = [f"R{i}" for i in range(clients)]
    plan = []
    for _ in range(clients):
        actions = []
        for _ in range(ops):
            kind = rng.choice(["save", "save", "delete", "get"])
            actions.append(Action(kind, "" if kind == "get" else rng.choice(records),
                                  "" if kind == "delete" else rng.choice(names)))
        plan.append(actions)
    return plan


# --- exploration ---------------------------------------------------------------------------------


@attrs.define
class World:
    """The database and the clients after a schedule (a sequence of client indices)."""

    memory: MemoryDynamoDB
    clients: list[Client]
    #: How many answers may still be lost after the request was applied.
    lost: int = 0
    log: list[str] = attrs.field(factory=list)

    def key(self) -> tuple[Any, ...]:
        return (self.memory.snapshot(), tuple(c.key() for c in self.clients), self.lost)

    def runnable(self) -> list[Step]:
        """The next steps possible: each waiting client's request answered, and (while answers
        may be lost) each waiting write applied with its answer lost."""
        steps: list[Step] = []
        for c in self.clients:
            if c.pending is None:
                continue
            steps.append(c.index)
            if self.lost and c.pending.operation != "GetItem":
                steps.append(-1 - c.index)
        return steps

    def step(self, step: Step) -> None:
        index = step if step >= 0 else -1 - step
        client = self.clients[index]
        request = client.pending
        assert request is not None
        try:
            answer: Any = self.memory.handle(request.operation, request.params)
        except Exception as exc:
            if not hasattr(exc, "response"):
                raise
            if step < 0:
                self._lose(client, request, _refusal(exc.response))
                return
            client.answers.append(repr(exc.response))
            self.log.append(f"client {index}: {describe(request)} -> "
                            f"{_refusal(exc.response)}")
            outcomes = len(client.outcomes)
            client.advance(error=exc)
        else:
            if step < 0:
                self._lose(client, request, "ok")
                return
            client.answers.append(repr(sorted(answer.items())))
            self.log.append(f"client {index}: {describe(request)} -> ok")
            outcomes = len(client.outcomes)
            client.advance(answer=answer)
        for outcome in client.outcomes[outcomes:]:
            self.log.append(f"client {index}: {outcome}")

    def _lose(self, client: Client, request: Request, result: str) -> None:
        """The request was applied (``result``), then its answer lost on the way back."""
        self.lost -= 1
        client.answers.append("lost")
        self.log.append(f"client {client.index}: {describe(request)} -> {result}, ANSWER LOST")
        outcomes = len(client.outcomes)
        client.advance(error=botocore.exceptions.ConnectionClosedError(
            endpoint_url="http://simulation.invalid"))
        for outcome in client.outcomes[outcomes:]:
            self.log.append(f"client {client.index}: {outcome}")


def describe(request: Request) -> str:
    """One line for a request: the operation and, per item, its kind and key."""
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
    return f"{request.operation} {key.get('PK', {}).get('S')}"


def _refusal(response: dict[str, Any]) -> str:
    code = response["Error"]["Code"]
    reasons = response.get("CancellationReasons")
    if reasons:
        code += " [" + ", ".join(r["Code"] for r in reasons) + "]"
    return code


#: A scheduling choice: client ``i`` gets its answer (``i``), or its write is applied and the
#: answer lost (``-1 - i``).
Step = int


def replay(workload: Sequence[Sequence[Action]], schedule: Sequence[Step], *,
           lost: int = 0) -> World:
    """The world after running ``schedule`` from the start of ``workload``."""
    world = World(new_memory(), [Client(i, actions) for i, actions in enumerate(workload)],
                  lost)
    for client in world.clients:
        client.advance()
    for index in schedule:
        world.step(index)
    return world


@attrs.define
class Found:
    """A violation and the shortest schedule reaching it."""

    workload: Sequence[Sequence[Action]]
    schedule: tuple[Step, ...]
    problems: list[str]
    lost: int = 0

    def trace(self) -> str:
        world = replay(self.workload, (), lost=self.lost)
        lines = ["workload:"]
        lines += [f"  client {i}: " + "; ".join(map(str, actions))
                  for i, actions in enumerate(self.workload)]
        lines.append(f"counterexample ({len(self.schedule)} requests, each applied "
                     "atomically, in this order):")
        for n, index in enumerate(self.schedule, start=1):
            before = len(world.log)
            world.step(index)
            lines += [f"  {n}. {world.log[before]}"]
            lines += [f"     {entry}" for entry in world.log[before + 1:]]
        lines += [f"  VIOLATION: {p}" for p in self.problems]
        return "\n".join(lines)


def explore(workload: Sequence[Sequence[Action]], *, lost: int = 0,
            limit: int = 1) -> tuple[int, list[Found]]:
    """Every state reachable from ``workload``, breadth first, with up to ``lost`` answers lost
    after their request applied; (states, violations found — at most ``limit``, each with a
    shortest schedule)."""
    seen: set[Any] = set()
    start = replay(workload, (), lost=lost)
    # Each entry: a schedule and who may step after it (known from its replay).
    queue: deque[tuple[tuple[Step, ...], list[Step]]] = deque([((), start.runnable())])
    seen.add(start.key())
    states = 1
    found: list[Found] = []
    while queue:
        schedule, runnable = queue.popleft()
        for index in runnable:
            child = (*schedule, index)
            world = replay(workload, child, lost=lost)
            key = world.key()
            if key in seen:
                continue
            seen.add(key)
            states += 1
            problems = violations(world.memory)
            if problems:
                found.append(Found(workload, child, problems, lost))
                if len(found) >= limit:
                    return states, found
                continue
            queue.append((child, world.runnable()))
    return states, found


def random_runs(rng: random.Random, runs: int, clients: int, ops: int, values: int, *,
                lost: int = 0) -> tuple[int, list[Found]]:
    """``runs`` random workloads, each under one random schedule (with up to ``lost``
    answers lost after their write applied)."""
    states, found = 0, []
    for _ in range(runs):
        workload = random_workload(rng, clients, ops, values)
        world = replay(workload, (), lost=lost)
        schedule: list[Step] = []
        while world.runnable():
            index = rng.choice(world.runnable())
            schedule.append(index)
            world.step(index)
            states += 1
            problems = violations(world.memory)
            if problems:
                found.append(Found(workload, tuple(schedule), problems, lost))
                break
    return states, found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.explore",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--ops", type=int, default=3)
    parser.add_argument("--values", type=int, default=3)
    parser.add_argument("--mutant", default=None)
    parser.add_argument("--random", type=int, default=0, metavar="N",
                        help="N random workloads and schedules instead of exhaustive search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lost", type=int, default=0, metavar="K",
                        help="also explore up to K answers lost after their write applied")
    parser.add_argument("--list-mutants", action="store_true")
    args = parser.parse_args(argv)
    if args.list_mutants:
        for name, (what, _) in MUTANTS.items():
            print(f"{name}: {what}")
        return 0
    with simulation(args.mutant):
        if args.random:
            states, found = random_runs(random.Random(args.seed), args.random, args.clients,
                                        args.ops, args.values, lost=args.lost)
        else:
            states, found = 0, []
            for workload in workloads(args.clients, args.ops, args.values):
                n, more = explore(workload, lost=args.lost)
                states += n
                found += more
        for item in found[:1]:
            print(item.trace())
    print(f"explored {states} states, {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
