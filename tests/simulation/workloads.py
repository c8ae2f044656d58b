"""What the simulated clients do: their calls, each run through the library's own generators.

Every call is the sans-IO generator the sync and async drivers run
(``dynaunique._transport.connection .run`` and ``dynaunique.aio.arun``), built exactly as
``Model.save()``/``delete()``/ ``update()``/``get_by_unique()`` and ``atomic()`` build it —
``flush_steps`` on a unit of one, or on the unit ``Atomic.add_save`` collects, and
``_du_get_by_unique_steps`` — never a re-implementation of the library's logic. :class:`Client`
holds one client's objects (a copy it loaded stays loaded, and may go stale) and runs its calls one
after the other; the scheduler (``explore.World``) answers each request it yields.

The workloads of a configuration are a few scenarios, each a menu of calls per client cut to
``ops`` calls, over the records ``R0``.. (``T0``.. for teams) and the values ``v0``.. (taken
modulo ``values``, so fewer values make the clients collide more).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from pynamodb.exceptions import DoesNotExist

from dynaunique._model.calls import check_update, update_op
from dynaunique._transport.answers import answer_of
from dynaunique._transport.connection import Request, Sleep
from dynaunique._write.atomic import Atomic
from dynaunique._write.flush import Unit, flush_steps
from dynaunique._write.state import Op, OpKind
from dynaunique.errors import (
    ConcurrentModificationError,
    DynauniqueError,
    OtherModelRecordError,
    UniqueViolation,
)
from dynaunique.model import pynamodb_writes

from .blocking import backfill, blocking_steps, repair
from .memory import MemoryDynamoDB
from .world import (
    MODELS,
    TABLE,
    SimAccount,
    SimNote,
    SimTeam,
    seed_broken,
    seed_drift,
    seed_orphans,
    seed_unlocked,
)

_MODELS: dict[str, Any] = {"account": SimAccount, "team": SimTeam, "note": SimNote}
#: The field each model's save sets (SimNote's is not unique).
_FIELDS = {"account": "email", "team": "contact", "note": "text"}


@attrs.frozen
class Action:
    """One call of a client.

    ``kind``: ``save``, ``update`` (``update([field.set(value)])``), ``delete``,
    ``get`` (``SimAccount.get_by_unique("email", value)``), ``swap`` (in ``atomic()``:
    ``record`` takes ``value``, ``other`` takes ``value2``), ``backfill`` (a migration's fill
    of ``SimAccount``'s constraint, one page), ``repair`` (check, plan and apply a repair).
    ``model``: ``account``, ``team`` or ``note``. A save, update or delete works on the client's
    loaded copy of the record when it holds one, else on a never-loaded object.
    """

    kind: str
    record: str = ""
    value: str = ""
    model: str = "account"
    other: str = ""
    value2: str = ""

    def __str__(self) -> str:
        name = {"account": "", "team": "team ", "note": "note "}[self.model]
        if self.kind == "get":
            return f"get_by_unique(email={self.value!r})"
        if self.kind == "backfill":
            return "backfill SimAccount.EMAIL (one page)"
        if self.kind == "repair":
            return "repair (check, plan, apply)"
        if self.kind == "swap":
            return (f"atomic(): {self.record} email={self.value!r}, "
                    f"{self.other} email={self.value2!r}")
        if self.kind == "delete":
            return f"delete {name}{self.record}"
        verb = "save" if self.kind == "save" else "update"
        return f"{verb} {name}{self.record} {_FIELDS[self.model]}={self.value!r}"


#: The errors a call may end with (anything else is a violation): a refused write, a lookup
#: or a never-loaded update that found nothing.
EXPECTED_ERRORS = (UniqueViolation, ConcurrentModificationError, OtherModelRecordError,
                   DoesNotExist)


class Client:
    """One logical client: its actions, the objects it holds, its call in progress."""

    def __init__(self, index: int, actions: Sequence[Action]) -> None:
        self.index = index
        self.actions = list(actions)
        self.next_action = 0
        self.held: dict[tuple[str, str], Any] = {}
        self.steps: Any = None
        self.pending: Request | None = None
        self.answers: list[str] = []
        self.outcomes: list[str] = []
        self.tokens = 0
        #: Backoffs the retry loop took (``Sleep`` steps, gone straight on from: never slept).
        self.backoffs = 0
        #: What the last finished call returned or raised: (action, result, error).
        self.finished: list[tuple[Action, Any, Exception | None]] = []

    @property
    def done(self) -> bool:
        return self.pending is None and self.next_action >= len(self.actions)

    @property
    def action(self) -> Action | None:
        return self.actions[self.next_action] if self.next_action < len(self.actions) else None

    def _obj(self, model: str, record: str) -> Any:
        obj = self.held.get((model, record))
        if obj is None:
            obj = _MODELS[model](pk=record)
            self.held[(model, record)] = obj
        return obj

    def _start(self, action: Action) -> Any:
        if action.kind == "get":
            return SimAccount._du_get_by_unique_steps("email", action.value, {})
        if action.kind == "backfill":
            return blocking_steps(lambda: backfill(MODELS, SimAccount, TABLE))
        if action.kind == "repair":
            return blocking_steps(lambda: repair(MODELS))
        if action.kind == "swap":
            a, b = self._obj("account", action.record), self._obj("account", action.other)
            a.email, b.email = action.value, action.value2
            block = Atomic()   # what `with atomic(): a.save(); b.save()` collects
            block.add_save(a, None, True)
            block.add_save(b, None, True)
            return flush_steps(block.unit)
        obj = self._obj(action.model, action.record)
        assert not pynamodb_writes(obj), "every simulated write goes through the flush"
        field = _FIELDS[action.model]
        if action.kind == "save":
            setattr(obj, field, action.value)
            op = Op(obj, OpKind.SAVE)
        elif action.kind == "update":
            actions = [getattr(type(obj), field).set(action.value)]
            check_update(actions)
            op = update_op(obj, actions, None, True)
        else:
            op = Op(obj, OpKind.DELETE)
        unit = Unit()
        unit.add(op)
        return flush_steps(unit)

    def advance(self, answer: Any = None, error: Exception | None = None) -> None:
        """Feed the pending request's answer (or error) and run to the next request; a call
        that ends starts the next one (see :attr:`finished`)."""
        _running.append(self)
        try:
            self._advance(answer, error)
        finally:
            _running.pop()

    def _advance(self, answer: Any, error: Exception | None) -> None:
        self.finished = []
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
                    step = self.steps.send(answer_of(error))  # the drivers' vocabulary
                else:
                    step = self.steps.send(answer)
                while isinstance(step, Sleep):
                    self.backoffs += 1
                    step = self.steps.send(None)
            except StopIteration as stop:
                self._finish(stop.value, None)
            except (DynauniqueError, DoesNotExist) as exc:
                self._finish(None, exc)
            else:
                self.pending = step
                return
            first, answer, error = True, None, None

    def _finish(self, value: Any, exc: Exception | None) -> None:
        action = self.actions[self.next_action]
        if exc is None:
            if action.kind == "get":
                self.held[("account", value.pk)] = value
            elif action.kind == "delete":
                self.held.pop((action.model, action.record), None)
            shown = {"get": lambda: f" -> {value.pk}",
                     "backfill": lambda: f" ({len(value.conflicts)} conflicts)",
                     "repair": lambda: " (" + ", ".join(
                         f"{o.status}" for o in value.outcomes) + f"; {len(value.unfixable)} "
                         "unfixable)"}.get(action.kind, lambda: "")()
            self.outcomes.append(f"{action}: ok{shown}")
        else:
            self.outcomes.append(f"{action}: {type(exc).__name__}")
            if isinstance(exc, UniqueViolation):
                self.outcomes[-1] += f" (held by {exc.owner})"
        self.finished.append((action, value, exc))
        self.steps = None
        self.pending = None
        self.next_action += 1

    def key(self) -> tuple[Any, ...]:
        """What the client's future behaviour depends on (for state hashing)."""
        held = tuple(sorted(
            (name, repr(sorted((obj._du_loaded or {}).items())),
             repr(sorted(obj.serialize(null_check=False).items())),
             obj._du_state.unknown is not None)
            for name, obj in self.held.items()))
        return (self.next_action, held, tuple(self.answers), self.tokens)


#: The client whose call is running (its calls' tokens are named after it and the call).
_running: list[Client] = []


def running_client() -> Client | None:
    """The client whose call is running now, if any."""
    return _running[-1] if _running else None


# --- workloads -----------------------------------------------------------------------------------


def _menus(c: int, clients: int, values: int) -> dict[str, list[Action]]:
    """Client ``c``'s menu of calls in each scenario."""
    def v(i: int) -> str:
        return f"v{i % values}"
    own, other = f"R{c}", f"R{(c + 1) % clients}"
    team = f"T{c}"
    return {
        # creates, unique changes, never-loaded deletes, lookups, a copy got by a lookup.
        "basic": [Action("save", own, v(c)), Action("save", own, v(c + 1)),
                  Action("delete", other), Action("get", value=v(c + 2)),
                  Action("save", other, v(c)), Action("delete", own)],
        # update(actions) of the unique field: on a loaded copy, then a never-loaded one.
        "update": [Action("save", own, v(c)), Action("update", own, v(c + 1)),
                   Action("update", other, v(c)), Action("delete", own)],
        # two records exchanging their values in one atomic() (loaded or never-loaded copies),
        # with a value in python form ("V1" stored as "v1").
        "swap": [Action("save", own, v(c) if c % 2 == 0 else v(c).upper()),
                 Action("get", value=v(c + 1)),
                 Action("swap", own, v(c + 1), other=other, value2=v(c)),
                 Action("delete", other)],
        # copies of one record loaded by several clients, saved in turn (stale copies).
        "stale": ([Action("save", "R0", v(0)), Action("get", value=v(0)),
                   Action("save", "R0", v(1))] if c == 0 else
                  [Action("get", value=v(0)), Action("save", "R0", v(1)),
                   Action("save", "R0", v(c + 1))]),
        # the mixed table: a team sharing the lock name, a note (no constraint) written over
        # and deleting an account's key.
        "mixed": [Action("save", team, v(c), model="team"), Action("save", own, v(c + 1)),
                  Action("save", other, "note", model="note"),
                  Action("delete", own, model="note"), Action("delete", team, model="team")],
        # drift (seed_drift): R0 and R1 both hold v0, the lock names R1; neither's writes may
        # take the lock from the other, nor delete it.
        "drift": ([Action("delete", "R0"), Action("save", "R0", v(1)), Action("delete", "R0")]
                  if c % 2 == 0 else
                  [Action("save", "R1", v(2)), Action("delete", "R1"), Action("save", "R1", v(0))]),
        # a migration's backfill (seed_unlocked: R0 holds v0, R1 v1, no lock) while the
        # application, its constraint already live, moves and takes those values.
        "backfill": ([Action("backfill"), Action("save", "R0", v(1)), Action("backfill")]
                     if c % 2 == 0 else
                     [Action("save", "R0", v(2)), Action("save", "R1", v(0)),
                      Action("delete", "R0")]),
        # planted orphans (seed_orphans: the lock of v1 names R1, which holds v9; the lock of
        # v2 names R2, which is gone; R0 holds v0, unlocked) beside the backfill: saves meet
        # the orphans and take them over, two at once for one, and R1 moves back to v1.
        "orphans": ([Action("save", "R3", v(2)), Action("backfill"), Action("save", "R0", v(1))]
                    if c % 2 == 0 else
                    [Action("save", "R4", v(2)), Action("save", "R1", v(1)),
                     Action("delete", "R3")]),
        # dynaunique repair (seed_broken: a missing lock, an orphan, a foreign owner) while the
        # application writes the records it repairs.
        "repair": ([Action("repair"), Action("save", "R2", v(0)), Action("repair")]
                   if c % 2 == 0 else
                   [Action("save", "R1", v(1)), Action("save", "R0", v(2)),
                    Action("delete", "R2")]),
        # a global table (replicas.py): client c writes from region c % 2; both take one value
        # (without the home region: the double grant), then move, delete the other's record.
        "regions": [Action("save", own, v(0)), Action("save", own, v(c + 1)),
                    Action("delete", other), Action("get", value=v(c + 1)),
                    Action("save", other, v(c))],
    }


#: Every scenario (``--scenario`` picks some).
SCENARIOS = ("basic", "update", "swap", "stale", "mixed", "drift", "repair", "backfill",
             "orphans")
#: The scenarios an exhaustive configuration explores by default: all but ``backfill`` and
#: ``orphans``, which tests/simulation/test_explore.py explores on their own
#: (``--scenario backfill``, ``--scenario orphans``).
DEFAULT_SCENARIOS = SCENARIOS[:-2]
#: The scenarios of a global table's replicas (tests/simulation/replicas.py: explored by its
#: ``ReplicatedSearch``, on their own: ``--scenario regions``).
REPLICATED = ("regions",)
SCENARIOS += REPLICATED
#: How a scenario's database starts (none: empty).
SEEDS: dict[str, Callable[[MemoryDynamoDB], None]] = {
    "drift": seed_drift, "backfill": seed_unlocked, "repair": seed_broken,
    "orphans": seed_orphans}


def workloads(clients: int, ops: int, values: int,
              scenarios: Sequence[str] = DEFAULT_SCENARIOS) -> list[tuple[str, list[list[Action]]]]:
    """The workloads explored for a configuration: each scenario's menus cut (or cycled) to
    ``ops`` calls per client."""
    result = []
    for name in scenarios:
        plan = []
        for c in range(clients):
            menu = _menus(c, clients, values)[name]
            plan.append(menu[:ops] if ops <= len(menu) else
                        [menu[i % len(menu)] for i in range(ops)])
        result.append((name, plan))
    return result


def random_workload(rng: random.Random, clients: int, ops: int,
                    values: int) -> list[list[Action]]:
    """A random workload: each call any kind, on R0.. (T0.. for teams) with values v0.."""
    names = [f"v{i}" for i in range(values)]
    records = [f"R{i}" for i in range(clients)]
    plan = []
    for _ in range(clients):
        actions = []
        for _ in range(ops):
            kind = rng.choice(["save", "save", "update", "delete", "get", "swap", "team",
                               "note"])
            value = rng.choice(names)
            if rng.random() < 0.2:
                value = value.upper()
            if kind == "get":
                actions.append(Action("get", value=value.lower()))
            elif kind == "swap":
                a, b = rng.sample(records, 2) if len(records) > 1 else (records[0], "R9")
                actions.append(Action("swap", a, value, other=b, value2=rng.choice(names)))
            elif kind == "team":
                actions.append(Action(rng.choice(["save", "delete"]), f"T{rng.randrange(2)}",
                                      value.lower(), model="team"))
            elif kind == "note":
                actions.append(Action(rng.choice(["save", "delete"]), rng.choice(records),
                                      "note", model="note"))
            else:
                actions.append(Action(kind, rng.choice(records),
                                      "" if kind == "delete" else value))
        plan.append(actions)
    return plan
