"""The flush's branch for a multi-Region strong consistency (MRSC) table: the protocol without
transactions (:mod:`dynaunique._write.mrsc`), driven through the one boundary.

DynamoDB refuses ``TransactWriteItems`` on an MRSC table, so where the flush would send a
plan as one transaction it drives one :class:`~dynaunique._write.mrsc.Write` instead, built
from the very plan (:func:`protocol_steps`): the record write is the planned one as the
renderer writes it (its guard on the state the plan was made from — a loaded copy's snapshot,
so a stale copy still fails — and the caller's condition), its target the record after it,
and each lock item the one lock builder's (``_writes.lock_puts``) plus the protocol's marks.
Each request goes through the one retry loop (``_connection.exchange_steps``); a record write
is retried or resent only within its lease (``until``). What the machine ends with becomes the
flush's outcomes: ``written`` / ``unchanged`` succeed, ``taken`` is the ``UniqueViolation``
naming the holder, ``conflict`` the failed record guard the flush settles as always, ``busy``
(a pending intent within its grace period) and ``expired`` (the lease ended first) are
:class:`Again`: the flush backs off and plans again, within its one retry budget.

A unit of more than one record (or with a condition check) cannot be atomic without
transactions: refused before anything is sent (:func:`refuse_unit`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import attrs
from pynamodb.connection import Connection

from dynaunique._lock.items import claim, key_of, plain_key, stored_locks
from dynaunique._lock.locks import OWNER_ATTR, lock_primary_key
from dynaunique._model.binding import table_models
from dynaunique._transport.answers import Refused, error_for, retryable
from dynaunique._transport.connection import RetryPolicy, Steps, exchange_steps
from dynaunique._write import mrsc
from dynaunique._write.plan import Plan
from dynaunique._write.render import render_write
from dynaunique._write.state import Stored
from dynaunique._write.transaction import failures_error
from dynaunique._write.writes import (
    LockPut,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Stamp,
    Write,
    lock_puts,
)
from dynaunique.errors import (
    ConcurrentModificationError,
    ConfigurationError,
    DynauniqueError,
    OutcomeUnknownError,
    UnreachableError,
    UnsupportedOperationError,
    format_value,
)

#: ``Meta`` settings of the protocol's two durations (seconds): every writer of a table must
#: use the same (docs/global-tables.md, "Strong consistency (MRSC)").
LEASE_SETTING = "mrsc_lease_seconds"
GRACE_SETTING = "mrsc_grace_seconds"

_OPERATIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}


@attrs.frozen
class Again:
    """The protocol met a pending intent within its grace period (``busy``), or its lease ended
    before the record write (``expired``): nothing of it is left; plan and send again after a
    back-off. ``error`` is what the caller sees when the retries run out."""

    error: ConcurrentModificationError


def timing_of(model: Any) -> mrsc.Timing:
    """The protocol's durations for ``model``: ``Meta.mrsc_lease_seconds`` and
    ``Meta.mrsc_grace_seconds``, else :class:`~dynaunique._write.mrsc.Timing`'s defaults.

    :raises ConfigurationError: the lease is not positive, not shorter than the grace, or
        longer than the default (the audit judges with the default grace period).
    """
    meta = model.Meta
    default = mrsc.Timing()
    lease = getattr(meta, LEASE_SETTING, None)
    grace = getattr(meta, GRACE_SETTING, None)
    timing = mrsc.Timing(lease=default.lease if lease is None else float(lease),
                         grace=default.grace if grace is None else float(grace))
    if not 0 < timing.lease < timing.grace:
        raise ConfigurationError(
            f"{model.__name__}.Meta: {LEASE_SETTING} ({timing.lease}) must be positive and "
            f"shorter than {GRACE_SETTING} ({timing.grace})")
    if timing.lease > default.lease:
        # check, repair and the stream guard judge intents with the default grace period: a
        # longer lease would let them delete the intent of a writer still within it.
        raise ConfigurationError(
            f"{model.__name__}.Meta: {LEASE_SETTING} ({timing.lease}) may not be longer than "
            f"{default.lease:g} s: check, repair and the stream guard judge intents with a "
            f"{default.grace:g} s grace period")
    return timing


def refuse_unit(count: int, checks: int) -> None:
    """Refuse a unit of ``count`` records and ``checks`` condition checks on an MRSC table
    unless it is one record: no atomicity without transactions. Nothing was sent."""
    if count > 1 or checks:
        raise UnsupportedOperationError(
            "atomic() cannot write several records (or check conditions) on a multi-Region "
            "strong consistency table: DynamoDB refuses transactions there, and without one "
            "the writes would not be atomic; nothing was sent. Write each record on its own "
            "(docs/global-tables.md)")


def locks_for(cls: Any, key: Mapping[str, Any], target: Mapping[str, Any] | None,
              stamp: Stamp) -> mrsc.LocksFor:
    """The lock items an item of ``cls``'s table requires, by lock key, as the one lock builder
    writes them: ``target`` and the record at ``key`` are ``cls``'s own; any other item is
    judged as the record of the model that claims it (``_items.claim``: on a mixed table, a
    lock's owner may be another model's record)."""
    models = [m for m in table_models(cls._du_info.table) if m._du_info is not None]

    def required(item: Mapping[str, Any] | None) -> Mapping[str, mrsc.Item]:
        if item is None:
            return {}
        own = item is target or key_of(cls._du_info.key_attributes, item) == key
        model, problem = (cls, None) if own else claim(models, item, prefer=cls)
        if problem is not None:
            raise DynauniqueError(f"{cls.__name__}: a lock's owner cannot be judged: {problem}")
        if model is None or not model._du_info.constraints:
            return {}
        info = model._du_info
        owner = key_of(info.key_attributes, item)
        assert owner is not None   # claimed: its key attributes are there
        puts = lock_puts(info, stored_locks(model, item).values(), owner, dict(item),
                         created=stamp)
        return {put.lock.key: render_write(put)[1]["Item"] for put in puts}

    return required


def protocol_op(ops: Mapping[int, Any], records: Mapping[int, Write | None],
                stored: Mapping[int, Stored], plan: Plan) -> tuple[Any, Write, Stored] | None:
    """(model, record write, its stored state) of a unit's one op whose ``plan`` would be a
    transaction (None: the plan is one plain conditional write, sent as on any table)."""
    if not plan.is_transaction:
        return None
    ((ident, record),) = records.items()
    assert record is not None   # a transaction: the op writes its record
    return type(ops[ident].obj), record, stored[ident]


def machine_for(op_model: Any, record: Write, stored: Stored, timing: mrsc.Timing) -> mrsc.Write:
    """The protocol's machine for the planned ``record`` write, planned from ``stored``: past
    its record read (the plan's basis is the record as read, or the loaded snapshot)."""
    assert isinstance(record, (RecordPut, RecordUpdate, RecordDelete))
    if isinstance(record, RecordUpdate) and record.predicted is None:
        raise UnsupportedOperationError(
            f"{record.model}: this update's result cannot be known before it is sent, and a "
            "multi-Region strong consistency table is written by putting the locks of the "
            "result first; assign the values and save() instead")
    target = (record.item if isinstance(record, RecordPut)
              else record.predicted if isinstance(record, RecordUpdate) else None)
    kind, params = render_write(record)
    sent = (_OPERATIONS[kind], {**params, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    info = op_model._du_info
    machine = mrsc.Write(
        record.table, dict(record.key), target, uuid.uuid4().hex,
        locks_for(op_model, record.key, target, Stamp()),
        lambda key: lock_primary_key(info.key_attributes, key), (), timing, sent=sent)
    read = {"Item": stored.item} if stored.item is not None else {}
    return machine.answered(time.time(), read, None)


def drive_steps(machine: mrsc.Write, connection: Connection, policy: RetryPolicy
                ) -> Steps[tuple[mrsc.Write, mrsc.Met | None, Any]]:
    """Send ``machine``'s requests until it is done: (the machine, the lock met that ended it
    ``taken`` or ``busy`` (else None), the record a refused record write returned)."""
    met: mrsc.Met | None = None
    current: Any = None
    while True:
        now = time.time()
        machine = machine.advance(now)
        request = machine.request(now)
        if request is None:
            return machine, met, current
        operation, params = request
        writing = machine.phase == "write"
        until = (machine.at + machine.timing.lease
                 if writing and machine.at is not None else None)
        try:
            got = yield from exchange_steps(connection, operation, params, policy=policy,
                                            until=until)
        except (OutcomeUnknownError, UnreachableError) as exc:
            if until is not None:   # resent while its lease lasts, else read again (or undone)
                machine = machine.lost() if isinstance(exc, OutcomeUnknownError) else machine
                continue
            if not writing:   # (no lease: a record write the flush's settle remembers)
                yield from _abandon_steps(machine, connection, policy)
            raise
        except DynauniqueError:
            if not writing:   # (a record write's earlier attempt may have applied)
                yield from _abandon_steps(machine, connection, policy)
            raise
        now = time.time()
        if isinstance(got, Refused):
            if got.code != "ConditionalCheckFailedException":
                if writing and retryable(got):   # its lease ended: not resent
                    machine = machine.lost() if got.ambiguous else machine
                    continue
                if not (writing and got.ambiguous):   # nothing of it applied
                    yield from _abandon_steps(machine, connection, policy)
                raise error_for(got, operation, params)
            refused = {"Item": got.response["Item"]} if "Item" in got.response else {}
            if writing:
                current = refused.get("Item")
            before = machine
            machine = machine.answered(now, None, refused)
        else:
            before = machine
            machine = machine.answered(now, got.data, None)
        if before.phase == "owner" and machine.outcome in ("taken", "busy"):
            met = before.met


def _abandon_steps(machine: mrsc.Write, connection: Connection,
                   policy: RetryPolicy) -> Steps[None]:
    """Before the caller's error is raised: release the intents ``machine`` may have put
    (``mrsc.Write.abandon``), or their grace period would keep their values busy. Best effort:
    a release that fails too is left (the intent is settled after its grace period)."""
    machine = machine.abandon()
    now = time.time()
    while (request := machine.request(now)) is not None:
        try:
            got = yield from exchange_steps(connection, *request, policy=policy)
        except DynauniqueError:
            return
        if isinstance(got, Refused) and got.code != "ConditionalCheckFailedException":
            return
        machine = machine.answered(now, None, None)


def _lock_put(model: Any, machine: mrsc.Write, key: str) -> LockPut:
    """The lock put of ``key`` that ``machine``'s target requires (one of its new locks: the
    target's, as ``locks_for`` built them)."""
    assert machine.target is not None   # a new lock: the record is written, not deleted
    info = model._du_info
    (ref,) = [r for r in stored_locks(model, machine.target).values() if r.key == key]
    return lock_puts(info, [ref], dict(machine.key), machine.target)[0]


def protocol_steps(model: Any, record: Write, stored: Stored, connection: Connection,
                   policy: RetryPolicy) -> Steps[dict[str, Any] | Again]:
    """Write ``record`` (the op's planned record write, planned from ``stored``) by the
    protocol: DynamoDB's (empty) response, or :class:`Again`; raises the flush's errors."""
    machine = machine_for(model, record, stored, timing_of(model))
    machine, met, current = yield from drive_steps(machine, connection, policy)
    outcome = machine.outcome
    if outcome in ("written", "unchanged"):
        return {}
    if outcome == "conflict":
        raise failures_error([(record, current)])
    if outcome in ("taken", "busy") and met is not None:
        put = _lock_put(model, machine, met.key)
        if outcome == "taken":
            raise failures_error([(put, {OWNER_ATTR: {"M": met.owner_key()}})])
        return Again(ConcurrentModificationError(
            f"{put.model} {', '.join(put.lock.fields)} "
            f"{format_value(put.lock.value, hashed=put.lock.hashed)} is being written by another "
            f"record ({plain_key(met.owner_key())}) whose write may still "
            "complete; try again", model=put.model))
    return Again(ConcurrentModificationError(
        f"{record.model}: the write's lease ended before its record write was sent (requests "
        "too slow, or a clock step); nothing of it is left; try again", model=record.model))


#: What a listing shows for a value known only once the protocol reads it.
AS_READ = "<as read>"


def listing(model: Any, record: Write, stored: Stored) -> dict[str, Any]:
    """What the protocol sends for ``record`` when nothing contends, in order: what a dry run
    and ``atomic().explain()`` show on an MRSC table (``Protocol``, ``Requests``). The token
    and times are this listing's own; an old lock's token is shown as :data:`AS_READ`."""
    machine = machine_for(model, record, stored, timing_of(model))
    hash_attr = next(iter(machine.key))
    requests: list[dict[str, Any]] = []
    now = time.time()
    while (request := machine.request(now)) is not None:
        operation, params = request
        values = params.get("ExpressionAttributeValues", {})
        if operation == "DeleteItem" and {"S": AS_READ} in values.values():   # its time too
            params = {**params, "ExpressionAttributeValues": {
                name: {"N": AS_READ} if "N" in value else value for name, value in values.items()}}
        requests.append({"Operation": operation, **params})
        answer: dict[str, Any] = {}
        if machine.phase == "seek":   # the old lock, as this record's write left it
            lock = machine.locks_for(machine.record)[params["Key"][hash_attr]["S"]]
            answer = {"Item": {**lock, mrsc.TOKEN_ATTR: {"S": AS_READ},
                               mrsc.AT_ATTR: {"N": "0"}}}
        elif machine.phase == "judge" and machine.target is not None:
            answer = {"Item": machine.target}
        machine = machine.answered(now, answer, None)
    return {"Protocol": "MRSC", "Requests": requests}
