"""Flush a unit of work: plan every object, send ONE request, settle, then update object state.

Every write of a model with constraints, or on a table that holds locks, goes through
:func:`flush`: a ``save()``, ``delete()`` or ``update()`` outside ``atomic()`` is a unit of one;
``atomic()`` collects a unit and flushes it when its block ends. The steps, as SQLAlchemy's
``Session.flush``:

1. know each object's stored state — its snapshot (``dynaunique._state``), or for an object
   never loaded whose plan needs it (a delete, an update of a lock input) one consistent read;
2. build each object's Record (``dynaunique._record``), plan it (pure: ``dynaunique._plan``),
   and merge a unit's plans into one — calling no method of the model;
3. send it as one request (:func:`execute_steps`, refusals mapped by ``_transaction``): each
   record write in it is guarded on the state it was planned from, each lock write on its owner;
4. when a guard failed (``_transaction.settle_steps``), replan only where a fresh plan is safe
   by construction — an object this flush read itself (or never loaded) adopts the state
   DynamoDB returned, a lock another record holds is left out, an orphan lock met is taken
   over (``_heal``) — and send again, every write guarded anew; a stale copy the caller
   loaded is never "repaired" behind its back: that is a ``ConcurrentModificationError``;
5. only after success, update each object's snapshot (``dynaunique._state.finish_steps``).

No request after the first relies on what an earlier request saw: each is planned from the
state it guards on, so another writer acting between two requests makes it fail, not err.
:func:`flush_steps` is all of this without I/O, yielding each read and write and receiving
their answers: :func:`flush` drives it synchronously, ``dynaunique.aio`` under asyncio.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs
from pynamodb.connection import Connection

from dynaunique import _writes, observe
from dynaunique._answers import Ok, error_for
from dynaunique._connection import (
    DEFAULT_POLICY,
    RetryPolicy,
    Steps,
    exchange_steps,
    run,
    sending_for,
    sending_for_models,
)
from dynaunique._heal import LocksMet, heal_steps, healed, met_locks
from dynaunique._model.mixed import judge, others_guard
from dynaunique._plan import Plan, merge
from dynaunique._record import needs_stored
from dynaunique._record import plan as plan_op
from dynaunique._render import outgoing, render
from dynaunique._state import Op, OpKind, finish_steps, loaded_for_key
from dynaunique._transaction import (
    earlier_attempt_applied,
    failures_error,
    failures_of,
    settle_steps,
)
from dynaunique._writes import (
    RECORD_WRITES,
    Absent,
    ConditionCheck,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Write,
)
from dynaunique.errors import (
    ConcurrentModificationError,
    DynauniqueError,
    ForeignLockError,
    Operation,
    OutcomeUnknownError,
    UnsupportedOperationError,
    for_operation,
)
from dynaunique.observe import emit, stats, traced
from dynaunique.observe import write_logger as _log

#: How many times one flush plans and sends before giving up on a record that keeps changing.
MAX_ATTEMPTS = 4


@attrs.define(eq=False)
class Flushed:
    """What a flush planned, sent (``request``: rendered once, without its token) and got back."""

    plan: Plan
    response: dict[str, Any]
    #: The record write of each op (by ``id(obj)``), None for an op that had nothing to do.
    records: dict[int, Write | None]
    request: dict[str, Any] | None = None


@attrs.define(eq=False)
class Unit:
    """The objects and condition checks of one unit of work, in first-touched order."""

    ops: dict[int, Op] = attrs.field(factory=dict)
    checks: list[ConditionCheck] = attrs.field(factory=list)
    #: The models of the condition checks: they, too, decide which endpoint gets the unit.
    check_models: list[Any] = attrs.field(factory=list)

    def add(self, op: Op) -> None:
        """Record ``op``; an object keeps only its last operation."""
        self.ops[id(op.obj)] = op

    def savepoint(self) -> tuple[dict[int, Op], int]:
        """What the unit holds now, to roll back to with :meth:`rollback`."""
        return dict(self.ops), len(self.checks)

    def rollback(self, savepoint: tuple[dict[int, Op], int]) -> None:
        """Drop what was added since ``savepoint``."""
        ops, checks = savepoint
        self.ops = dict(ops)
        del self.checks[checks:]
        del self.check_models[checks:]


# --- the current unit (atomic) --------------------------------------------------------------------

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("dynaunique_atomic", default=None)


def current_unit() -> Any:
    """The open ``atomic()`` block this thread or task is inside, if any.

    A block belongs to the asyncio task that opened it. Another task that sees it (a task
    started inside the block copies the context: ``asyncio.gather(a.asave(), ...)``,
    ``asyncio.to_thread``) may not write into it: that would race the block's end. It gets an
    ``UnsupportedOperationError`` rather than a write outside the transaction it expects.
    """
    unit = _own_unit()
    if unit is None and _current.get() is not None and not _current.get().closed:
        raise UnsupportedOperationError(
            "this atomic() block belongs to another asyncio task (or thread); await asave() / "
            "adelete() in the task that opened it — asyncio.gather() runs each coroutine in a "
            "task of its own"
        )
    return unit


def _own_unit() -> Any:
    """The open ``atomic()`` block of this context if this task opened it, else None."""
    unit = _current.get()
    if unit is None or unit.closed or unit.task is not running_task():
        return None
    return unit


def running_task() -> object | None:
    """The asyncio task running this code (None outside a running event loop)."""
    # asyncio is not imported here: a program that never imported it runs no event loop.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        task: object | None = asyncio.current_task()
    except RuntimeError:
        return None
    return task


@contextmanager
def as_operation(operation: Operation) -> Iterator[None]:
    """A dynaunique error leaving this block is also PynamoDB's error for ``operation``
    (``PutError``, ``DeleteError``, ``UpdateError``, ``TransactWriteError``): one place for
    both senders."""
    try:
        yield
    except DynauniqueError as exc:
        for_operation(exc, operation)
        raise


@contextmanager
def collecting(block: Any) -> Iterator[None]:
    """Make ``block`` the current unit of this context while the ``with`` body runs."""
    token = _current.set(block)
    try:
        yield
    finally:
        _current.reset(token)


def collect(obj: Any, kind: OpKind, condition: Any, add_version_condition: bool) -> bool:
    """Inside ``atomic()``: hand this save or delete to the current unit (True); else False."""
    unit = current_unit()
    if unit is None:
        return False
    add = unit.add_save if kind is OpKind.SAVE else unit.add_delete
    add(obj, condition, add_version_condition)
    return True


def flush_one(op: Op, *, dry_run: bool = False) -> Flushed:
    """A write call outside ``atomic()``: a unit of one, flushed at once, traced and named as
    the call (its errors are also PynamoDB's PutError/DeleteError/UpdateError)."""
    unit = Unit()
    unit.add(op)
    # observe.traced's check on its own names, made here: an untraced write makes no call
    # into observe (issue #26's straight path).
    provider = observe._tracer_provider
    untraced = provider is None or isinstance(provider(), observe._UNSET_PROVIDER)
    with observe._UNTRACED if untraced else observe._span(type(op.obj).__name__, op.kind.value):
        try:
            # One object, one endpoint: its connection is known before the steps start, asked
            # in the same excursion into _connection that runs them.
            sending = sending_for(type(op.obj))
            return run(flush_steps(unit, dry_run=dry_run, sending=sending))
        except DynauniqueError as exc:   # as_operation, without a call on success
            for_operation(exc, op.kind.value)
            raise


async def aflush_one(op: Op) -> Flushed:
    """:func:`flush_one` under asyncio: the same flush, driven by ``dynaunique.aio``."""
    from dynaunique.aio import arun  # only an async caller needs the async client

    unit = Unit()
    unit.add(op)
    with traced(type(op.obj).__name__, op.kind.value), as_operation(op.kind.value):
        return await arun(flush_steps(unit, sending=sending_for(type(op.obj))))


# --- flushing ------------------------------------------------------------------------------------


def _connection(unit: Unit) -> Any:
    models = dict.fromkeys(type(op.obj) for op in unit.ops.values())
    models.update(dict.fromkeys(unit.check_models))
    return sending_for_models(list(models))


def _guard_others(op: Op, plan: Plan, write: RecordPut | RecordUpdate | RecordDelete,
                  judged: Mapping[str, Any] | None) -> Plan:
    """``plan`` with its record ``write`` (not a create's) guarded off other models' locks
    (``_model.mixed``); a table only its model uses needs no such guard."""
    others = others_guard(op, judged, write.guard)
    if others is None:
        return plan
    # The item is judged from what DynamoDB returns with a failed guard: ALL_OLD is asked for.
    return attrs.evolve(plan, writes=(attrs.evolve(write, others=others), *plan.writes[1:]),
                        pynamodb=False)


def flush(unit: Unit, *, dry_run: bool = False) -> Flushed:
    """Plan ``unit`` and send it as one request (see the module docstring for the steps).

    ``dry_run=True`` plans and returns without sending any write (an object never loaded whose
    plan needs its stored state is still read).
    """
    return run(flush_steps(unit, dry_run=dry_run))


def flush_steps(unit: Unit, *, dry_run: bool = False,  # noqa: C901, PLR0912, PLR0915  # issue 39's planner work splits it into its steps
                sending: tuple[Connection, RetryPolicy] | None = None) -> Steps[Flushed]:
    """:func:`flush` without I/O: yields its reads and its write, receives their answers.
    ``sending``: the unit's connection and retry policy, when the caller knows them."""
    connection, policy = sending if sending is not None else _connection(unit)
    # The stored state each op is planned from; `fresh`: found by this flush, not the caller.
    stored: dict[int, dict[str, Any] | None] = {}
    fresh: set[int] = set()
    done: set[int] = set()
    # The item each op met and judged to hold no lock of another model (_model.mixed).
    judged: dict[int, dict[str, Any] | None] = {}
    for ident, op in unit.ops.items():
        loaded = loaded_for_key(op.obj)
        if loaded is None and op.kind is not OpKind.SAVE and needs_stored(op):
            loaded = yield from op.obj._du_read_steps()
            fresh.add(ident)
        if loaded is not None:
            # Judged before anything is sent: refused if it holds another model's locks, else
            # the write is guarded on exactly it (no request fails only to return what is known).
            judge(op, loaded)
        judged[ident] = loaded
        stored[ident] = loaded
    foreign: set[str] = set()
    takeovers: dict[str, _writes.Takeover] = {}   # orphan locks met, by key (_heal)
    for _ in range(MAX_ATTEMPTS):
        records: dict[int, Write | None] = {}
        plans = []
        now = _writes.Stamp()   # every lock of the unit: one `created`
        for ident, op in unit.ops.items():
            if ident in done or (op.kind is OpKind.DELETE and stored[ident] is None
                                 and ident in fresh):
                records[ident] = None   # deleting what does not exist: nothing to do
                continue
            plan = plan_op(op, stored[ident], now)
            write = plan.writes[0] if plan.writes else None
            if isinstance(write, RECORD_WRITES) and not isinstance(write.guard, Absent):
                # A create needs no guard off other models' locks: the item must not exist.
                plan = _guard_others(op, plan, write, judged.get(ident))
                write = plan.writes[0]
            records[ident] = write
            plans.append(plan)
        # One object's plan is as DynamoDB needs it (no item twice); a unit's is merged.
        plan = plans[0] if len(plans) == 1 and not unit.checks else merge(plans, unit.checks)
        if foreign:
            plan = plan.without_deletes(foreign)
        if takeovers:
            plan = plan.taking_over(takeovers)
        st = stats()
        if st is not None:
            st.plan = plan
        if dry_run:
            return Flushed(plan, {}, records)
        response: dict[str, Any] = {}
        request = None
        if plan.writes:
            repeats = []   # record writes repeating a call whose outcome was unknown
            for i, w in records.items():
                if w is not None and unit.ops[i].obj._du_state.unknown == w:
                    repeats.append(w)
            request = render(plan)
            sent = outgoing(plan, request)   # rendered once: what is sent, and its token
            try:
                response = yield from execute_steps(plan, connection, policy=policy, heal=True,
                                                    repeats=repeats, request=request, sent=sent)
            except LocksMet as exc:   # other records' locks: orphans are taken over next
                yield from heal_steps(exc, plan, takeovers, connection, policy)
                continue
            except ForeignLockError as exc:
                # Locks another record holds were never this unit's to delete: leave them.
                # The next request carries every record guard again.
                foreign.update(exc.lock_keys)
                for key in exc.lock_keys:
                    emit(_log, logging.INFO, "foreign_lock_skipped",
                         f"{exc.model}: leaving the lock {key} to the record that holds it and "
                         "writing again without deleting it", model=exc.model, lock_key=key)
                continue
            except ConcurrentModificationError as exc:
                if not (yield from settle_steps(unit.ops, records, exc, stored, fresh, done,
                                                judged)):
                    _log_stale(exc)
                    raise
                continue
            except OutcomeUnknownError:
                for ident, write in records.items():
                    if write is not None:
                        unit.ops[ident].obj._du_state.unknown = write
                raise
        for ident, op in unit.ops.items():
            yield from finish_steps(op, records[ident], response)
        if takeovers:
            healed(plan)
        return Flushed(plan, response, records, request)
    gave_up = ConcurrentModificationError(
        "the records of this write kept changing while it was retried; try again",
        model=type(next(iter(unit.ops.values())).obj).__name__ if unit.ops else "",
    )
    _log_stale(gave_up)
    raise gave_up


def _resend_is_safe(plan: Plan) -> bool:
    """Whether resending after an ambiguous failure can neither apply twice nor mislead: an
    update whose result cannot be predicted (``add``, ``if_not_exists``…) is never resent."""
    for write in plan.writes:
        if isinstance(write, RecordUpdate) and write.predicted is None:
            return False
    return True


def execute_steps(plan: Plan, connection: Connection, *,
                  policy: RetryPolicy = DEFAULT_POLICY,
                  repeats: Collection[Write] = (),
                  request: Mapping[str, Any] | None = None,
                  sent: tuple[str, dict[str, Any]] | None = None,
                  heal: bool = False) -> Steps[dict[str, Any]]:
    """:func:`execute` without I/O (``dynaunique._connection.Steps``). ``request``: the plan's
    :func:`~dynaunique._render.render`, ``sent`` its ``outgoing``, when the caller has them;
    ``heal``: a refusal by other records' locks only is ``_heal.LocksMet``, for the flush."""
    resend_safe = _resend_is_safe(plan)
    if sent is None:
        sent = outgoing(plan, render(plan) if request is None else request)
    operation, params = sent
    answer = yield from exchange_steps(connection, operation, params, policy=policy,
                                       resend_safe=resend_safe)
    if isinstance(answer, Ok):
        return answer.data
    failures = failures_of(plan, answer.response)
    if failures is None:
        raise error_for(answer, operation, params)
    if answer.ambiguous and earlier_attempt_applied(plan, failures, lambda write: True):
        return {}
    if repeats and earlier_attempt_applied(plan, failures, lambda write: write in repeats):
        return {}
    if heal and met_locks(failures):
        raise LocksMet(failures) from answer.cause
    raise failures_error(failures) from answer.cause


def execute(plan: Plan, connection: Connection, *, policy: RetryPolicy = DEFAULT_POLICY,
            sleep: Callable[[float], None] = time.sleep,
            repeats: Collection[Write] = ()) -> dict[str, Any]:
    """Send ``plan`` as one request and return DynamoDB's response; raise the mapped error.

    Nothing but resends of this very request (same body, same token) is ever sent. ``repeats``:
    record writes that repeat a call whose outcome was unknown (``OutcomeUnknownError``); like a
    resend after an ambiguous failure, finding such a record already in place is success.
    """
    return run(execute_steps(plan, connection, policy=policy, repeats=repeats), sleep=sleep)


def _log_stale(exc: ConcurrentModificationError) -> None:
    """The ``stale_write_refused`` event (INFO: a normal outcome of optimistic concurrency)."""
    emit(_log, logging.INFO, "stale_write_refused",
         f"stale write refused: {exc.model} {exc.key if exc.key is not None else ''} changed "
         "since it was loaded", model=exc.model, key=exc.key)
