"""The explorer's breadth-first search over abstract states, without replaying schedules.

A state of a simulation is (the database, each client's position, what each call's checks
remember, the budgets left). The old search rebuilt every state by replaying its whole schedule
from the start — every request re-planned by the library, re-answered by the model — so a state
at depth d cost d steps. Here every piece of a state is interned once and every transition is
computed once:

- **a database state** is a number: its :meth:`~.memory.MemoryDynamoDB.snapshot` interned, with
  its items kept (the model never changes a stored item in place, so a state is restored by
  copying two dicts) and its ``analyse`` computed once;
- **a client's position** (:class:`Seat`) is a number: its ``Client.key()`` interned — what its
  future depends on, the very key the old search hashed —, with its pending request. A client is
  a deterministic machine of the answers it is fed, so "client at position p is fed answer a"
  is computed once (``Machines.move``): by a live client at p kept from an earlier move, else
  one rebuilt by feeding it the answers that first reached p;
- **a request answered** — (database, position, fault) — is computed once (``Databases.apply``);
- **a call's checks** (``explore.Call``) are interned, and "call c sees database d" computed once.

So a state costs a few dictionary lookups, and the library and the model run once per distinct
transition. The states, their order and the keys are exactly the old search's (a test compares
the two on small configurations); the first violation found is replayed with the real
``World`` to print its trace, and must come out the same.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import botocore.exceptions

from .explore import (
    _READS,
    Call,
    Found,
    Step,
    decode,
    fault_of,
    judge,
    runnable,
)
from .memory import Fault, MemoryDynamoDB
from .workloads import SEEDS, Action, Client
from .world import Problem, analyse, new_memory

#: Requests that never change the database (its snapshot need not be taken again).
_PURE = _READS | {"TransactGetItems"}


@attrs.define(eq=False)
class Seat:
    """A client's position: interned ``sid``, its request waiting (None: done), its call."""

    index: int
    sid: int
    pending: Any
    action: Action | None
    #: The answers that first reached this position, (answer, error, token) each: to rebuild it.
    path: tuple[tuple[Any, Any, str], ...]


class Machines:
    """The clients of one workload as deterministic machines: each move computed once."""

    #: What makes client ``index`` of the workload (replicas.py binds clients to regions).
    client: Callable[[int, Sequence[Action]], Client] = Client

    def __init__(self, workload: Sequence[Sequence[Action]]) -> None:
        self.workload = workload
        self.ids: dict[tuple[int, Any], int] = {}
        #: Per position, a live client standing there (taken by the next move from it).
        self.live: dict[int, Client] = {}
        self.moves: dict[tuple[int, str], tuple[Seat, list[tuple[Any, ...]]]] = {}
        self.rebuilt = 0
        self.ended: list[tuple[Any, ...]] = []

    def _seat(self, client: Client, path: tuple[tuple[Any, Any, str], ...]
              ) -> tuple[Seat, list[tuple[Any, ...]]]:
        key = (client.index, client.key())
        sid = self.ids.setdefault(key, len(self.ids))
        self.live.setdefault(sid, client)
        outcomes = client.outcomes[len(client.outcomes) - len(client.finished):]
        finished = [(*f, o) for f, o in zip(client.finished, outcomes, strict=True)]
        self.ended.extend(finished)   # kept alive: the judge's memo is keyed by their ids
        return Seat(client.index, sid, client.pending, client.action, path), finished

    def start(self, index: int) -> tuple[Seat, list[tuple[Any, ...]]]:
        client = self.client(index, self.workload[index])
        client.advance()
        return self._seat(client, ())

    def move(self, seat: Seat, answer: Any, error: Any, token: str
             ) -> tuple[Seat, list[tuple[Any, ...]]]:
        memo = (seat.sid, token)
        hit = self.moves.get(memo)
        if hit is None:
            client = self.live.pop(seat.sid, None) or self._rebuild(seat)
            client.answers.append(token)
            client.advance(answer=copy.deepcopy(answer), error=copy.deepcopy(error))
            hit = self.moves[memo] = self._seat(client, (*seat.path, (answer, error, token)))
        return hit

    def _rebuild(self, seat: Seat) -> Client:
        self.rebuilt += 1
        client = self.client(seat.index, self.workload[seat.index])
        client.advance()
        for answer, error, token in seat.path:
            client.answers.append(token)
            client.advance(answer=copy.deepcopy(answer), error=copy.deepcopy(error))
        return client


class Databases:
    """The database states met, interned, and each request's answer on each, computed once."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.states: list[tuple[dict[str, dict[str, Any]], dict[str, Any]]] = []
        self.analysed: list[tuple[list[Problem], dict[Any, set[str]]]] = []
        self.applied: dict[tuple[int, int, str], tuple[Any, Any, str, int]] = {}
        self._empty = new_memory()

    def intern(self, memory: MemoryDynamoDB) -> int:
        snapshot = memory.snapshot()
        db = self.ids.get(snapshot)
        if db is None:
            db = self.ids[snapshot] = len(self.states)
            self.states.append(({t: dict(i) for t, i in memory.items.items()},
                                dict(memory.tokens)))
            self.analysed.append(analyse(memory))
        return db

    def memory(self, db: int) -> MemoryDynamoDB:
        """A database in state ``db`` (its own: changing it changes no interned state)."""
        items, tokens = self.states[db]
        memory = MemoryDynamoDB(self._empty.schemas)
        memory.items = {t: dict(i) for t, i in items.items()}
        memory.tokens = dict(tokens)
        return memory

    def apply(self, db: int, seat: Seat, kind: str) -> tuple[Any, Any, str, int]:
        """(answer, error, the client's record of it — ``Client.answers`` —, the database
        after) of ``seat``'s request in ``db`` with the fault ``kind`` (``""``: none)."""
        memo = (db, seat.sid, kind)
        hit = self.applied.get(memo)
        if hit is None:
            request = seat.pending
            fault: Fault | None = fault_of(kind, request) if kind else None
            memory = self.memory(db)
            answer: Any = None
            error: Any = None
            try:
                answer = memory.handle(request.operation, request.params, fault=fault)
                token = repr(sorted(answer.items()))
            except Exception as exc:
                if not hasattr(exc, "response"):
                    raise
                error = exc
                token = repr(exc.response)
            after = db if request.operation in _PURE else self.intern(memory)
            hit = self.applied[memo] = (answer, error, token, after)
        return hit


@attrs.define(eq=False)
class Node:
    """A state of the search."""

    db: int
    seats: tuple[Seat, ...]
    calls: tuple[int, ...]
    lost: int
    faults: int
    problems: tuple[str, ...]
    #: How it was reached: (the parent's trail, the step), or None for the start.
    trail: Any = None

    def key(self) -> tuple[Any, ...]:
        return (self.db, tuple(s.sid for s in self.seats), self.calls, self.lost, self.faults)

    def schedule(self) -> tuple[Step, ...]:
        steps: list[Step] = []
        trail = self.trail
        while trail is not None:
            trail, step = trail
            steps.append(step)
        return tuple(reversed(steps))


class Search:
    """The exhaustive search of one workload (see the module docstring)."""

    def __init__(self, workload: Sequence[Sequence[Action]], *, lost: int = 0, faults: int = 0,
                 scenario: str = "") -> None:
        self.workload, self.lost, self.faults, self.scenario = workload, lost, faults, scenario
        self.machines = Machines(workload)
        self.dbs = Databases()
        self.call_ids: dict[Any, int] = {}
        self.call_list: list[Call] = []
        self.seen_by: dict[tuple[int, int], int] = {}
        self.judged: dict[tuple[int, int, int], list[str]] = {}
        self.baseline: frozenset[tuple[str, ...]] = frozenset()

    # --- calls

    def _call(self, call: Call) -> int:
        key = call.key()
        cid = self.call_ids.get(key)
        if cid is None:
            cid = self.call_ids[key] = len(self.call_list)
            self.call_list.append(call)
        return cid

    def _see(self, cid: int, db: int) -> int:
        memo = (cid, db)
        hit = self.seen_by.get(memo)
        if hit is None:
            call = self.call_list[cid]
            seeing = Call(history={v: set(s) for v, s in call.history.items()},
                          others_wrote=call.others_wrote, started=call.started,
                          quiet=call.quiet)
            seeing.see(self.dbs.analysed[db][1])
            hit = self.seen_by[memo] = self._call(seeing)
        return hit

    def _flagged(self, cid: int, others_wrote: bool, quiet: bool) -> int:
        call = self.call_list[cid]
        if call.others_wrote == others_wrote and call.quiet == quiet:
            return cid
        return self._call(attrs.evolve(call, history={v: set(s) for v, s in call.history.items()},
                                       others_wrote=others_wrote, quiet=quiet))

    # --- states

    def start(self) -> Node:
        memory = new_memory()
        seed = SEEDS.get(self.scenario)
        if seed is not None:
            seed(memory)
        db = self.dbs.intern(memory)
        self.baseline = frozenset(ident for ident, _ in self.dbs.analysed[db][0])
        fresh = self._see(self._call(Call()), db)
        seats, calls, problems = [], [], []
        for index in range(len(self.workload)):
            seat, finished = self.machines.start(index)
            seats.append(seat)
            cid = fresh
            for ended in finished:
                problems += self._judged(index, ended, cid, db)
                cid = fresh
            calls.append(cid)
        return Node(db, tuple(seats), tuple(calls), self.lost, self.faults, tuple(problems))

    def _judged(self, index: int, ended: tuple[Any, ...], cid: int, db: int) -> list[str]:
        """What is wrong with how the call ``ended`` — (action, value, error, outcome), kept
        alive by the machines' memo — as the call ``cid`` saw it, in the database ``db``."""
        memo = (id(ended), cid, db)
        hit = self.judged.get(memo)
        if hit is None:
            action, value, exc, _ = ended
            memory_of: Callable[[], MemoryDynamoDB] = lambda: self.dbs.memory(db)  # noqa: E731
            problems = judge(action, value, exc, self.call_list[cid], _Lazy(memory_of),
                             self.dbs.analysed[db][0])
            hit = self.judged[memo] = [f"client {index}, {action}: {p}" for p in problems]
        return hit

    def violations(self, node: Node) -> list[str]:
        # As World.violations: an orphan lock is a violation only once every client is done
        # (it refuses no write; a backfill's lock for a record that moved is one until its
        # verification deletes it).
        done = all(seat.pending is None for seat in node.seats)
        return [text for ident, text in self.dbs.analysed[node.db][0]
                if not self._inherited(ident) and (done or ident[0] != "orphan")
                ] + list(node.problems)

    def _inherited(self, ident: tuple[str, ...]) -> bool:
        return ident in self.baseline or (ident[0] == "duplicate" and any(
            b[0] == "missing" and b[2] == ident[1] for b in self.baseline))

    def runnable(self, node: Node) -> list[Step]:
        return runnable(node.seats, node.lost, node.faults)

    def child(self, node: Node, step: Step, ended: list[bool] | None = None) -> Node:
        """The state after ``step`` from ``node`` (``ended`` gets True if a call ended)."""
        index, kind = decode(step)
        seat = node.seats[index]
        answer, error, token, db = self.dbs.apply(node.db, seat,
                                                  "" if kind == "lost" else kind)
        calls = list(node.calls)
        if db != node.db:
            for other, cid in enumerate(calls):
                if other != index:
                    calls[other] = self._flagged(cid, True, False)
            calls[index] = self._flagged(calls[index], False, self.call_list[calls[index]].quiet)
        calls = [self._see(cid, self._view(db, i)) for i, cid in enumerate(calls)]
        lost, faults = node.lost, node.faults
        if kind == "lost":
            lost -= 1
            token = "lost"
            answer, error = None, botocore.exceptions.ConnectionClosedError(
                endpoint_url="http://simulation.invalid")
        elif kind:
            faults -= 1
        moved, finished = self.machines.move(seat, answer, error, token)
        problems = list(node.problems)
        if finished:
            if ended is not None:
                ended.append(True)
            fresh = self._see(self._call(Call()), self._view(db, index))
            for ended in finished:
                problems += self._judged(index, ended, calls[index], self._view(db, index))
                calls[index] = fresh
        seats = (*node.seats[:index], moved, *node.seats[index + 1:])
        return Node(db, seats, tuple(calls), lost, faults, tuple(problems), (node.trail, step))

    def _view(self, db: int, index: int) -> int:
        """The database state client ``index``'s calls see in state ``db`` (replicas.py: the
        replica of the region its requests go to)."""
        return db

    def canonical(self, node: Node) -> tuple[Any, ...]:
        """``node``'s key as the replaying ``explore.World.key()`` reads (for the tests)."""
        snapshots = {db: snapshot for snapshot, db in self.dbs.ids.items()}
        clients = {sid: key for (_, key), sid in self.machines.ids.items()}
        items = snapshots[node.db]
        tokens = tuple(sorted(self.dbs.states[node.db][1]))
        return (items, tokens, tuple(clients[s.sid] for s in node.seats),
                tuple(self.call_list[cid].key() for cid in node.calls), node.lost, node.faults)

    def run(self, limit: int = 1, visit: Callable[[Node], None] | None = None
            ) -> tuple[int, list[Found]]:
        """Every state, breadth first: (states, violations found — at most ``limit``);
        ``visit`` is called with each state met the first time."""
        start = self.start()
        if visit is not None:
            visit(start)
        seen = {start.key()}
        found: list[Found] = []
        if self.violations(start):
            return 1, [self._found(start)]
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for step in self.runnable(node):
                child = self.child(node, step)
                key = child.key()
                if key in seen:
                    continue
                seen.add(key)
                if self.met(child, found, visit):
                    queue.append(child)
                elif len(found) >= limit:
                    return len(seen), found
        return len(seen), found

    def met(self, node: Node, found: list[Found], visit: Callable[[Node], None] | None) -> bool:
        """A state met the first time: told to ``visit``, and whether to expand it (False: it
        breaks an invariant, added to ``found``)."""
        if visit is not None:
            visit(node)
        if self.violations(node):
            found.append(self._found(node))
            return False
        return True

    def _found(self, node: Node) -> Found:
        return Found(self.workload, node.schedule(), self.violations(node), self.lost,
                     self.scenario, self.faults)


class _Lazy:
    """A database restored only when a check reads it (most calls' checks never do)."""

    def __init__(self, restore: Callable[[], MemoryDynamoDB]) -> None:
        self._restore = restore
        self._memory: MemoryDynamoDB | None = None

    def get(self, table: str, key: Any) -> Any:
        if self._memory is None:
            self._memory = self._restore()
        return self._memory.get(table, key)
