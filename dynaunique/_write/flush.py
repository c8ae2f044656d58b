"""Flush a unit of work: collect → plan → render → send → settle → finish, ONE request a try.

Every write of a model with constraints, or on a table that holds locks, goes through
:func:`flush`: a ``save()``, ``delete()`` or ``update()`` outside ``atomic()`` is a unit of one;
``atomic()`` collects a unit and flushes it when its block ends. :func:`flush_steps` reads as
the steps, as SQLAlchemy's ``Session.flush``:

1. collect (:func:`collect_steps`): each op's stored state, one
   :class:`~dynaunique._write.state.Stored` — its snapshot, or for an object never loaded whose plan
   needs it one consistent read;
2. plan (:func:`plan_unit`): each op by the one planner (``_record.plan`` → ``_plan``, pure,
   calling no method of the model), the unit's plans merged into one;
3. render and send it as one request (:func:`send_steps`): each record write guarded on the
   state it was planned from, each lock write on its owner;
4. settle a refusal (:func:`settle_steps`): a decision, replan from a new basis or raise —
   an object this flush read itself (or never loaded) adopts the state DynamoDB returned, a
   lock another record holds is left out, an orphan met is taken over (``_heal``); a stale
   copy the caller loaded is never "repaired" behind its back (``ConcurrentModificationError``);
5. finish, only after success: each object's new snapshot (``_state.finish_steps``).

No request after the first relies on what an earlier request saw: each is planned from the
state it guards on, so another writer acting between two requests makes it fail, not err.
The steps yield each read and write and receive their answers (no I/O): :func:`flush` drives
them synchronously, ``dynaunique.aio`` under asyncio."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import attrs
from pynamodb.connection import Connection

from dynaunique._transport import regions as _regions
from dynaunique._transport.answers import Ok, error_for
from dynaunique._transport.connection import (
    DEFAULT_POLICY,
    RetryPolicy,
    Sleep,
    Steps,
    exchange_steps,
    run,
    sending_for,
    sending_for_models,
)
from dynaunique._write import writes as _writes
from dynaunique._write.heal import LocksMet, heal_steps, healed, met_locks
from dynaunique._write.mixed import judge
from dynaunique._write.plan import Plan, merge
from dynaunique._write.record import needs_stored
from dynaunique._write.record import plan as plan_op
from dynaunique._write.render import outgoing, render, render_checked
from dynaunique._write.state import Basis, Op, OpKind, Stored, finish_steps, loaded_for_key
from dynaunique._write.strong import Again, listing, protocol_op, protocol_steps, refuse_unit
from dynaunique._write.transaction import (
    earlier_attempt_applied,
    failures_error,
    failures_of,
    settle_record_steps,
)
from dynaunique._write.writes import (
    ConditionCheck,
    RecordUpdate,
    Write,
)
from dynaunique.errors import (
    ConcurrentModificationError,
    DynauniqueError,
    ForeignLockError,
    Operation,
    OutcomeUnknownError,
    for_operation,
)
from dynaunique.observe import emit, stats, traced
from dynaunique.observe import write_logger as _log

#: The one retry budget of a write that meets a record (or lock) that keeps changing: how many
#: times a flush plans and sends, a lookup follows a moved lock, the audit's repair re-reads
#: and retries an action, and the migrations' backfill re-settles one lock.
MAX_ATTEMPTS = 4


@attrs.define(eq=False)
class Flushed:
    """What a flush planned, sent (``request``: rendered once, without its token) and got back."""

    plan: Plan
    response: dict[str, Any]
    #: The record write of each op (by ``id(obj)``), None for an op that had nothing to do.
    records: dict[int, Write | None]
    request: dict[str, Any] | None = None
    #: On an MRSC table, what :func:`~dynaunique._write.strong.listing` lists (made when asked).
    protocol: tuple[Any, ...] | None = None

    def sent(self) -> dict[str, Any] | None:
        """The request sent (on an MRSC table, the protocol's requests when nothing contends:
        ``_strong.listing``, made only here, for a dry run or ``explain()``)."""
        return listing(*self.protocol) if self.protocol is not None else self.request

    def shown(self) -> dict[str, Any]:
        """What a dry run returns: the request it would send."""
        sent = self.sent()
        return sent if sent is not None else render_checked(self.plan)


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


def flush_one(op: Op, *, dry_run: bool = False) -> Flushed:
    """A write call outside ``atomic()``: a unit of one, flushed at once, traced and named as
    the call (its errors are also PynamoDB's PutError/DeleteError/UpdateError)."""
    unit = Unit()
    unit.add(op)
    with traced(type(op.obj).__name__, op.kind.value), as_operation(op.kind.value):
        return run(flush_steps(unit, dry_run=dry_run, sending=sending_for(type(op.obj))))


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


def flush(unit: Unit, *, dry_run: bool = False) -> Flushed:
    """Plan ``unit`` and send it as one request (see the module docstring for the steps).

    ``dry_run=True`` plans and returns without sending any write (an object never loaded whose
    plan needs its stored state is still read).
    """
    return run(flush_steps(unit, dry_run=dry_run))


def flush_steps(unit: Unit, *, dry_run: bool = False,
                sending: tuple[Connection, RetryPolicy] | None = None) -> Steps[Flushed]:
    """:func:`flush` without I/O: yields its reads and its write, receives their answers.
    ``sending``: the unit's connection and retry policy, when the caller knows them."""
    connection, policy = sending if sending is not None else _connection(unit)
    # A multi-Region strong consistency table: each plan goes by the protocol (`_strong`).
    strong = any(_regions.strong(type(op.obj).Meta) for op in unit.ops.values())
    if strong:
        refuse_unit(len(unit.ops), len(unit.checks))
    basis = yield from collect_steps(unit)
    again: Again | None = None
    for tried in range(MAX_ATTEMPTS):
        if again is not None:   # a pending intent met, or a lease ended: back off
            yield Sleep(policy.delay(tried + 3))
        attempt = plan_unit(unit, basis)
        # On an MRSC table, a plan that would be a transaction goes by the protocol.
        protocol = protocol_op(unit.ops, attempt.records, basis.stored,
                               attempt.plan) if strong else None
        request = None
        if dry_run:
            return Flushed(attempt.plan, {}, attempt.records, protocol=protocol)
        response = {}
        if attempt.plan.writes:
            try:
                if protocol is not None:
                    sent = yield from protocol_steps(*protocol, connection, policy)
                    if isinstance(sent, Again):
                        again = sent
                        continue
                    response = sent
                else:
                    request = render(attempt.plan)
                    response = yield from send_steps(unit, attempt, request, connection, policy)
            except (LocksMet, ConcurrentModificationError, OutcomeUnknownError) as exc:
                decision = yield from settle_steps(unit, attempt, basis, exc, connection, policy)
                if isinstance(decision, Raise):   # the refusal itself: its cause stays its own
                    raise decision.error  # noqa: B904
                basis = decision.basis
                continue
        for ident, op in unit.ops.items():
            yield from finish_steps(op, attempt.records[ident], response)
        if basis.takeovers:
            healed(attempt.plan)
        return Flushed(attempt.plan, response, attempt.records, request, protocol)
    gave_up = again.error if again is not None else ConcurrentModificationError(
        "the records of this write kept changing while it was retried; try again",
        model=type(next(iter(unit.ops.values())).obj).__name__ if unit.ops else "",
    )
    _log_stale(gave_up)
    raise gave_up


def collect_steps(unit: Unit) -> Steps[Basis]:
    """Each op's stored state: its snapshot, or for an object never loaded whose plan needs
    it one consistent read; judged before anything is sent — refused if it holds another
    model's locks, else the write is guarded on exactly it (no request fails only to return
    what is known)."""
    stored: dict[int, Stored] = {}
    for ident, op in unit.ops.items():
        loaded = loaded_for_key(op.obj)
        fresh = loaded is None and op.kind is not OpKind.SAVE and needs_stored(op)
        if fresh:
            loaded = yield from op.obj._du_read_steps()
        if loaded is not None:
            judge(op, loaded)
        stored[ident] = Stored(loaded, fresh=fresh, judged=loaded)
    return Basis(stored)


@attrs.frozen
class Attempt:
    """One attempt of a flush: the unit's plan and the record write of each op (by
    ``id(obj)``; None: nothing to do)."""

    plan: Plan
    records: dict[int, Write | None]


def plan_unit(unit: Unit, basis: Basis) -> Attempt:
    """Plan every op of ``unit`` from ``basis`` (each from its own :class:`Stored`) and merge
    the plans into one, as DynamoDB needs it."""
    records: dict[int, Write | None] = {}
    plans = []
    now = _writes.Stamp()   # every lock of the unit: one `created`
    for ident, op in unit.ops.items():
        plan = plan_op(op, basis.stored[ident], now)
        records[ident] = plan.writes[0] if plan is not None and plan.writes else None
        if plan is not None:
            plans.append(plan)
    # One object's plan is as DynamoDB needs it (no item twice); a unit's is merged.
    plan = plans[0] if len(plans) == 1 and not unit.checks else merge(plans, unit.checks)
    if basis.foreign:
        plan = plan.without_deletes(basis.foreign)
    if basis.takeovers:
        plan = plan.taking_over(basis.takeovers)
    st = stats()
    if st is not None:
        st.plan = plan
    return Attempt(plan, records)


def send_steps(unit: Unit, attempt: Attempt, request: dict[str, Any], connection: Connection,
               policy: RetryPolicy) -> Steps[dict[str, Any]]:
    """Send ``attempt``'s ``request`` (its plan rendered) as one request: DynamoDB's response,
    or the refusal as an error for :func:`settle_steps`."""
    # Record writes repeating a call whose outcome was unknown.
    repeats = [w for i, w in attempt.records.items()
               if w is not None and unit.ops[i].obj._du_state.unknown == w]
    return (yield from execute_steps(attempt.plan, connection, policy=policy, heal=True,
                                     repeats=repeats, request=request,
                                     sent=outgoing(attempt.plan, request)))


@attrs.frozen
class Replan:
    """Settled: send again, planned from ``basis``."""

    basis: Basis


@attrs.frozen
class Raise:
    """Settled: the caller sees ``error``."""

    error: DynauniqueError


def settle_steps(unit: Unit, attempt: Attempt, basis: Basis,
                 exc: LocksMet | ConcurrentModificationError | OutcomeUnknownError,
                 connection: Connection, policy: RetryPolicy) -> Steps[Replan | Raise]:
    """A refused (or unanswered) attempt → the decision: replan from a new basis, or raise.

    Locks other records hold: an orphan is taken over next (``_heal``; a lock its owner holds
    raises its ``UniqueViolation`` here). A lock another record holds that this unit would
    delete was never its to delete: left out. A failed record guard: replanned where that is
    safe by construction (``_transaction.settle_record_steps``), else the caller's error. An unknown
    outcome: each object remembers its write, so that repeating the call recognises it.
    """
    if isinstance(exc, LocksMet):
        takeovers = yield from heal_steps(exc, attempt.plan, basis.takeovers, connection, policy)
        return Replan(attrs.evolve(basis, takeovers=takeovers))
    if isinstance(exc, OutcomeUnknownError):
        for ident, write in attempt.records.items():
            if write is not None:
                unit.ops[ident].obj._du_state.unknown = write
        return Raise(exc)
    if isinstance(exc, ForeignLockError):
        # The next request carries every record guard again.
        for key in exc.lock_keys:
            emit(_log, logging.INFO, "foreign_lock_skipped",
                 f"{exc.model}: leaving the lock {key} to the record that holds it and "
                 "writing again without deleting it", model=exc.model, lock_key=key)
        return Replan(attrs.evolve(basis, foreign=basis.foreign | set(exc.lock_keys)))
    settled = yield from settle_record_steps(unit.ops, attempt.records, exc, basis.stored)
    if settled is None:
        _log_stale(exc)
        return Raise(exc)
    ident, state = settled
    return Replan(attrs.evolve(basis, stored={**basis.stored, ident: state}))


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
    """:func:`execute` without I/O (``dynaunique._transport.connection.Steps``). ``request``: the
    plan's
    :func:`~dynaunique._write.render.render`, ``sent`` its ``outgoing``, when the caller has them;
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
