"""Send a Plan to DynamoDB and map every failure back to the write that caused it.

:mod:`dynaunique._render` builds the request (slot *i* of ``CancellationReasons`` is
``plan.writes[i]``). ``execute(plan, connection)`` sends it as ONE request through
:func:`dynaunique._connection.send` (the one boundary and retry loop): one ``ClientRequestToken``
per call, reused by every resend. A failed condition is never retried here and nothing is ever
sent after it: the refusal becomes one dynaunique error, except that after an ambiguous failure
(or when repeating a call whose outcome was unknown) a record slot that already holds exactly
this call's write proves the earlier attempt landed, whole — that is success.
``execute_steps`` is that logic without I/O, which ``execute`` drives synchronously and
``dynaunique.aio`` under asyncio.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from pynamodb.connection import Connection

from dynaunique._connection import DEFAULT_POLICY, Refused, RetryPolicy, Steps, run, send_steps
from dynaunique._locks import OWNER_ATTR, untyped
from dynaunique._plan import Plan
from dynaunique._render import outgoing, render
from dynaunique._state import same_item
from dynaunique._writes import (
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

# --- executing -----------------------------------------------------------------------------------


def _is_own(write: Write, current: Mapping[str, Any] | None) -> bool:
    """Whether a failed slot only shows this call's own earlier, applied attempt."""
    if isinstance(write, RecordPut):
        return same_item(current, write.item)
    if isinstance(write, RecordDelete):
        return current is None
    if isinstance(write, RecordUpdate):
        return write.predicted is not None and same_item(current, write.predicted)
    return False


def _earlier_attempt_applied(plan: Plan, failures: list[tuple[Write, Mapping[str, Any] | None]],
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


def _resend_is_safe(plan: Plan) -> bool:
    """Whether resending after an ambiguous failure can neither apply twice nor mislead.

    An update whose result cannot be predicted (``add``, arithmetic, ``if_not_exists``…) may
    apply twice when unguarded, and when guarded its resend fails without a way to tell this
    call's own write from someone else's: it is never resent.
    """
    return not any(isinstance(w, RecordUpdate) and w.predicted is None for w in plan.writes)


def _holder(current: Mapping[str, Any] | None) -> str:
    owner = (current or {}).get(OWNER_ATTR)
    return str(untyped(owner)) if owner is not None else "another record"


def _plain(key: Mapping[str, Any]) -> dict[str, Any]:
    return {k: untyped(v) for k, v in key.items()}


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


def _error_for(failures: list[tuple[Write, Mapping[str, Any] | None]]) -> DynauniqueError:
    """Turn the failed slots of one attempt into the one error the caller sees."""
    for write, current in failures:
        if isinstance(write, (RecordPut, RecordUpdate, RecordDelete)):
            if write.guard is None:
                message = condition_failed(write.model, _plain(write.key))
            elif isinstance(write, RecordPut) and write.create and current is not None:
                message = (f"{write.model} {_plain(write.key)} already exists; load it (get) "
                           "and save the loaded copy")
            elif current is None:
                message = (f"{write.model} {_plain(write.key)} no longer exists (deleted since "
                           "this copy was loaded)")
            else:
                message = (f"{write.model} {_plain(write.key)} was modified since this copy "
                           "was loaded (or a condition you gave did not hold); reload and retry")
            return ConcurrentModificationError(
                message, model=write.model, key=_plain(write.key), current=current, write=write
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
                f"condition check failed: {write.label}", model=write.model, key=_plain(write.key)
            )
    return DynauniqueError("the transaction was cancelled for an unknown reason")




def _failures(plan: Plan, response: Mapping[str, Any]
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


def refusal(refused: Refused) -> DynauniqueError:
    """Any refusal that is not a failed condition (of a write, or of a lookup's read)."""
    code, message = refused.code, refused.message
    if code == "IdempotentParameterMismatchException":
        return DynauniqueError(
            "DynamoDB refused a resend: its ClientRequestToken was used within the last 10 "
            f"minutes for a different request ({message}); nothing of this call was applied"
        )
    if code == "TransactionCanceledException":
        reasons = refused.response.get("CancellationReasons") or []
        detail = "; ".join(
            f"item {i}: {r.get('Code')} {r.get('Message', '')}".strip()
            for i, r in enumerate(reasons) if r.get("Code") not in (None, "None")
        )
        return DynauniqueError(f"DynamoDB cancelled the transaction: {detail}")
    return DynauniqueError(f"DynamoDB refused the request: {code}: {message}")


def execute_steps(plan: Plan, connection: Connection, *,
                  policy: RetryPolicy = DEFAULT_POLICY,
                  repeats: Collection[Write] = (),
                  request: Mapping[str, Any] | None = None) -> Steps[dict[str, Any]]:
    """The logic of :func:`execute`, without I/O (see ``dynaunique._connection.Steps``).

    ``request``: the plan's :func:`~dynaunique._render.render`, when the caller has it already.
    """
    resend_safe = _resend_is_safe(plan)
    operation, params = outgoing(plan, render(plan) if request is None else request)
    try:
        return (yield from send_steps(connection, operation, params, policy=policy,
                                      resend_safe=resend_safe))
    except Refused as refused:
        failures = _failures(plan, refused.response)
        if failures is None:
            raise refusal(refused) from refused.error
        if refused.ambiguous and _earlier_attempt_applied(plan, failures, lambda write: True):
            return {}
        if repeats and _earlier_attempt_applied(plan, failures,
                                                lambda write: write in repeats):
            return {}
        raise _error_for(failures) from refused.error


def execute(plan: Plan, connection: Connection, *, policy: RetryPolicy = DEFAULT_POLICY,
            sleep: Callable[[float], None] = time.sleep,
            repeats: Collection[Write] = ()) -> dict[str, Any]:
    """Send ``plan`` as one request and return DynamoDB's response; raise the mapped error.

    Nothing but resends of this very request (same body, same token) is ever sent. ``repeats``:
    record writes that repeat a call whose outcome was unknown (``OutcomeUnknownError``); like a
    resend after an ambiguous failure, finding such a record already in place is success.
    """
    return run(execute_steps(plan, connection, policy=policy, repeats=repeats), sleep=sleep)
