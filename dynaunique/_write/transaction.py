"""A refused write request mapped back to the write that caused it, and a failed guard settled.

:mod:`dynaunique._write.render` builds the request (slot *i* of ``CancellationReasons`` is
``plan.writes[i]``); ``dynaunique._write.flush.execute_steps`` sends it as ONE request. A failed
condition is never retried and nothing is ever sent after it: the refusal becomes one
dynaunique error (:func:`failures_error`), except that after an ambiguous failure (or when repeating
a call whose outcome was unknown) a record slot that already holds exactly this call's write
proves the earlier attempt landed, whole — that is success (:func:`earlier_attempt_applied`).
A failed record guard of a flush is settled here (:func:`settle_record_steps`): the op's next state
where a replan is safe by construction, else None (the caller's error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dynaunique._lock.items import plain_key
from dynaunique._lock.locks import OWNER_ATTR, untyped
from dynaunique._transport.connection import Steps
from dynaunique._write.mixed import judge, meets, same_model
from dynaunique._write.plan import Plan
from dynaunique._write.state import Op, OpKind, Stored, holds, loaded_for_key, may_adopt, same_item
from dynaunique._write.writes import (
    RECORD_WRITES,
    ConditionCheck,
    LockDelete,
    LockPut,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Write,
)
from dynaunique.errors import (
    ConcurrentModificationError,
    ConditionCheckFailedError,
    DynauniqueError,
    ForeignLockError,
    UniqueViolation,
    format_value,
)
from dynaunique.observe import HASHED, emit
from dynaunique.observe import write_logger as _log

# --- a refusal, slot by slot --------------------------------------------------------------------


def _is_own(write: Write, current: Mapping[str, Any] | None) -> bool:
    """Whether a failed slot only shows this call's own earlier, applied attempt."""
    if isinstance(write, RecordPut):
        return same_item(current, write.item)
    if isinstance(write, RecordDelete):
        return current is None
    if isinstance(write, RecordUpdate):
        return write.predicted is not None and same_item(current, write.predicted)
    return False


def earlier_attempt_applied(plan: Plan,
                            failures: list[tuple[Write, Mapping[str, Any] | None]],
                            mine: Callable[[Write], bool]) -> bool:
    """Did an earlier attempt of this very call land (``mine``: the record writes that may)?

    A transaction lands whole or not at all, so record slots that fail only because each record
    already holds exactly what this call writes prove the earlier attempt landed — whatever the
    lock slots say now (another record may since have taken a value this call freed). With no
    record slot failing, every failure is a lock slot: a real conflict. And every guarded record
    slot must fail: each is guarded on the state before this call's write, so had the attempt
    landed none could pass. A record slot that passes proves it did not land, and another writer
    merely left the failing records as this call would have (the simulation found a swap
    reported done that way, nothing of it applied).
    """
    records = _record_failures(failures)
    failed = {id(w) for w, _ in records}
    if any(isinstance(w, RECORD_WRITES) and w.guard is not None and id(w) not in failed
           for w in plan.writes):
        return False
    return bool(records) and all(mine(w) and _is_own(w, c) for w, c in records)


def _record_failures(
    failures: list[tuple[Write, Mapping[str, Any] | None]],
) -> list[tuple[Write, Mapping[str, Any] | None]]:
    return [(w, c) for w, c in failures if isinstance(w, (RecordPut, RecordUpdate, RecordDelete))]


def _holder(current: Mapping[str, Any] | None) -> str:
    owner = (current or {}).get(OWNER_ATTR)
    return str(untyped(owner)) if owner is not None else "another record"


def _owner_of(current: Mapping[str, Any] | None) -> dict[str, Any] | None:
    owner = (current or {}).get(OWNER_ATTR)
    plain = untyped(owner) if isinstance(owner, Mapping) and owner else None
    return dict(plain) if isinstance(plain, Mapping) else None


def _log_violation(violation: UniqueViolation, lock_key: str) -> None:
    """The ``unique_violation`` event (INFO: a normal outcome) — the value of a ``hashed``
    constraint replaced by :data:`~dynaunique.observe.HASHED`; its lock key holds a digest."""
    value = HASHED if violation.hashed else violation.value
    emit(_log, logging.INFO, "unique_violation",
         f"unique violation: {violation.model} {', '.join(violation.fields)} "
         f"{format_value(violation.value, hashed=violation.hashed)} is held by "
         f"{violation.owner if violation.owner is not None else 'another record'}",
         model=violation.model, constraint=violation.constraint,
         fields=list(violation.fields), hashed=violation.hashed,
         value=list(value) if isinstance(value, tuple) else value,
         lock_key=lock_key, holder=violation.owner)


def condition_failed(model: str, key: Mapping[str, Any]) -> str:
    """The message of a write that carries no guard of dynaunique's own whose condition failed:
    only the caller's ``condition=`` (or the version) can have."""
    return (f"{model} {dict(key)}: the condition of this write did not hold (a condition you "
            "gave, or the version)")


def failures_error(failures: list[tuple[Write, Mapping[str, Any] | None]]) -> DynauniqueError:
    """Turn the failed slots of one attempt into the one error the caller sees."""
    for write, current in failures:
        if isinstance(write, (RecordPut, RecordUpdate, RecordDelete)):
            if write.guard is None:
                message = condition_failed(write.model, plain_key(write.key))
            elif isinstance(write, RecordPut) and write.create and current is not None:
                message = (f"{write.model} {plain_key(write.key)} already exists; load it (get) "
                           "and save the loaded copy")
            elif current is None:
                message = (f"{write.model} {plain_key(write.key)} no longer exists (deleted since "
                           "this copy was loaded)")
            else:
                message = (f"{write.model} {plain_key(write.key)} was modified since this copy "
                           "was loaded (or a condition you gave did not hold); reload and retry")
            return ConcurrentModificationError(
                message, model=write.model, key=plain_key(write.key), current=current, write=write
            )
    violations = []
    for write, current in failures:
        if isinstance(write, LockPut):
            violation = UniqueViolation(
                model=write.model,
                fields=write.lock.fields,
                constraint=write.lock.constraint,
                value=write.lock.value,
                # A lock written around the library may name its owner in another shape.
                owner=_owner_of(current),
                hashed=write.lock.hashed,
            )
            violations.append(violation)
            _log_violation(violation, write.lock.key)
    if violations:
        first = violations[0]
        return first.with_violations(violations) if len(violations) > 1 else first
    foreign = [(w, c) for w, c in failures if isinstance(w, LockDelete)]
    if foreign:
        # The record is as loaded (its slot passed), yet another record holds a lock this
        # record's values imply: a duplicate from before the constraint existed, or drift.
        # That lock was never this record's; the caller replans without deleting it.
        for w, c in foreign:
            emit(_log, logging.WARNING, "drift_detected",
                 f"drift: the lock {w.lock.key} of {w.model} {', '.join(w.lock.fields)} is held "
                 f"by {_holder(c)}, not by the record being written",
                 model=w.model, constraint=w.lock.constraint, lock_key=w.lock.key,
                 holder=_owner_of(c))
        return ForeignLockError(
            "; ".join(
                f"the lock on {', '.join(w.lock.fields)} {w.lock.shown} "
                f"is held by {_holder(c)}, not by this {w.model}" for w, c in foreign
            ) + " (a duplicate: `dynaunique check` reports these)",
            model=foreign[0][0].model,
            lock_keys=tuple(w.lock.key for w, _ in foreign),
        )
    for write, _ in failures:
        if isinstance(write, ConditionCheck):
            return ConditionCheckFailedError(
                f"condition check failed: {write.label}", model=write.model,
                key=plain_key(write.key))
    return DynauniqueError("the transaction was cancelled for an unknown reason")




def failures_of(plan: Plan, response: Mapping[str, Any]
              ) -> list[tuple[Write, Mapping[str, Any] | None]] | None:
    """The failed conditions of a refused request, slot by slot (None: not a failed condition)."""
    code = response.get("Error", {}).get("Code", "")
    if code == "ConditionalCheckFailedException" and not plan.is_transaction:
        return [(plan.writes[0], response.get("Item"))]
    if code != "TransactionCanceledException":
        return None
    reasons = response.get("CancellationReasons") or []
    failures = [(write, reason.get("Item"))
                for write, reason in zip(plan.writes, reasons, strict=False)
                if reason.get("Code") == "ConditionalCheckFailed"]
    return failures or None


# --- settling a failed record guard (for dynaunique._write.flush) ---------------------------------


def _may_replan(op: Op, exc: ConcurrentModificationError, fresh: bool) -> bool:
    """Whether a failed record guard may be answered by replanning from what DynamoDB returned.

    Yes for an object whose stored state this flush found itself (never loaded by the caller):
    it had no view to be stale. No for a copy the caller loaded: its write was planned from
    what the caller saw, and the caller must see the change (reload and retry).
    """
    write = exc.write
    if isinstance(write, RecordPut) and write.create:
        return may_adopt(op, exc.current)
    return fresh


def _already_gone(op: Op, exc: ConcurrentModificationError) -> bool:
    """A loaded copy's delete whose record no longer exists: done, as in PynamoDB — unless a
    version or a condition was asked for, which a missing record cannot satisfy."""
    return (op.kind is OpKind.DELETE and isinstance(exc.write, RecordDelete)
            and exc.current is None and op.condition is None
            and not (op.add_version_condition and _versioned(op)))


def _versioned(op: Op) -> bool:
    info = getattr(op.obj, "_du_info", None)
    return info is not None and info.version_attr is not None


def settle_record_steps(ops: Mapping[int, Op], records: Mapping[int, Write | None],
                 exc: ConcurrentModificationError,
                 known: Mapping[int, Stored]) -> Steps[tuple[int, Stored] | None]:
    """A record guard of a flush failed: the op whose write it was and the state to plan it
    from next (``Stored.done``: nothing left to do), or None — the caller must see the error.
    ``known``: what the flush knows of each op's record (the state each was planned from)."""
    ident = next((i for i, w in records.items() if w is not None and w is exc.write), None)
    if ident is None:
        return None
    op, state = ops[ident], known[ident]
    others = getattr(exc.write, "others", None)
    # A caller's copy whose record is gone fails its own guard whatever is sent: not re-judged.
    gone = exc.current is None and not state.fresh and not meets(exc.write.guard, None)
    if others is not None and not gone and not holds(others, exc.current):
        # The item is not the one this write was guarded to meet: judge it (refused when it
        # holds another model's locks), then send again guarded on exactly it.
        before = state.judged
        # No longer a record of the model the caller's copy was, or no longer as it was
        # loaded (its own guard fails too): stale, with no request only to learn it.
        stale = (not state.fresh and before is not None and exc.current is not None
                 and not (same_model(type(op.obj), before, exc.current)
                          and meets(exc.write.guard, exc.current)))
        if stale and loaded_for_key(op.obj) is not None:
            # A copy the caller loaded: stale before anything else, even when the item now
            # holds another model's locks — a ConcurrentModificationError (reload and retry).
            return None
        judge(op, exc.current)
        if stale:
            return None
        judged = dict(exc.current) if exc.current is not None else None
        # Found by this flush: planned from what is there now (an update predicted from it, a
        # save's locks diffed against it). Planned from the item first met, a save over a
        # record another model wrote with the same values kept "unchanged" and put no lock.
        return ident, attrs.evolve(state, judged=judged,
                                   item=judged if state.fresh else state.item)
    if _already_gone(op, exc):
        return ident, attrs.evolve(state, done=True)
    if not _may_replan(op, exc, state.fresh):
        return None
    # Adopt the record as DynamoDB returned it with the failure (the next request is guarded on
    # exactly that state); without it, read it.
    current = exc.current if exc.current is not None else (yield from op.obj._du_read_steps())
    if state.fresh and same_item(current, state.item):
        # Nothing moved since this flush read it: what failed is the caller's own condition
        # (or version), which a replan would only fail again.
        return None
    judge(op, current)   # adopt only an item holding no lock this write leaves
    item = dict(current) if current is not None else None
    return ident, Stored(item, fresh=True, judged=item)
