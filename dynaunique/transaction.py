"""Send a Plan to DynamoDB and map every failure back to the write that caused it.

``render(plan)`` builds the request (pure: TransactItems in plan order, so slot *i* of
``CancellationReasons`` is ``plan.writes[i]``; PynamoDB's own ``TransactWrite`` reorders items, so
it is not used). ``execute(plan, connection)`` sends it as ONE request through
:func:`dynaunique.connection.send` (the one boundary and retry loop): one ``ClientRequestToken``
per call, reused by every resend. A failed condition is never retried here and nothing is ever
sent after it: the refusal becomes one dynaunique error, except that after an ambiguous failure
(or when repeating a call whose outcome was unknown) a record slot that already holds exactly
this call's write proves the earlier attempt landed, whole — that is success.
``execute_steps`` is that logic without I/O, which ``execute`` drives synchronously and
``dynaunique.aio`` under asyncio.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from pynamodb.connection import Connection

from dynaunique.connection import DEFAULT_POLICY, Refused, RetryPolicy, Steps, run, send_steps
from dynaunique.errors import (
    ConcurrentModificationError,
    ConditionCheckFailedError,
    DynauniqueError,
    ForeignLockError,
    TransactionTooLargeError,
    UniqueViolation,
)
from dynaunique.locks import OWNER_ATTR, untyped
from dynaunique.observe import HASHED, emit
from dynaunique.observe import write_logger as _log
from dynaunique.unit_of_work import (
    Absent,
    ConditionCheck,
    Expression,
    Guard,
    HeldBy,
    LockDelete,
    LockPut,
    Plan,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Typed,
    Unchanged,
    Write,
)

MAX_ITEMS = 100
MAX_BYTES = 4 * 1024 * 1024


# --- rendering (pure) ----------------------------------------------------------------------------


class _Placeholders:
    """Allocates ``#gN`` names and ``:gN`` values for one request item."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Typed] = {}
        self._by_attr: dict[str, str] = {}

    def name(self, attr: str) -> str:
        placeholder = self._by_attr.get(attr)
        if placeholder is None:
            placeholder = self._by_attr[attr] = f"#g{len(self.names)}"
            self.names[placeholder] = attr
        return placeholder

    def value(self, typed_value: Typed) -> str:
        placeholder = f":g{len(self.values)}"
        self.values[placeholder] = typed_value
        return placeholder


def _guard_text(guard: Guard, hash_attr: str, ph: _Placeholders) -> str:
    if isinstance(guard, Absent):
        return f"attribute_not_exists({ph.name(hash_attr)})"
    if isinstance(guard, Unchanged):
        parts = [f"attribute_exists({ph.name(hash_attr)})"]
        for attr, expected in guard.expected:
            if expected is None:
                parts.append(f"attribute_not_exists({ph.name(attr)})")
            else:
                parts.append(f"{ph.name(attr)} = {ph.value(expected)}")
        return " AND ".join(parts)
    # HeldBy: missing, or owned by one of the owners (compared key attribute by key attribute).
    alternatives = [f"attribute_not_exists({ph.name(hash_attr)})"]
    for owner in guard.owners:
        terms = [
            f"{ph.name(OWNER_ATTR)}.{ph.name(attr)} = {ph.value(value)}"
            for attr, value in owner.items()
        ]
        alternatives.append("(" + " AND ".join(terms) + ")")
    return " OR ".join(alternatives)


@lru_cache(maxsize=512)
def _held_by_template(
    hash_attr: str, shapes: tuple[tuple[str, ...], ...]
) -> tuple[str, tuple[tuple[str, str], ...]]:
    # Every lock write of a table has the same guard but for the owner values: render it once
    # per shape (exactly as _guard_text would), then only fill the values in.
    ph = _Placeholders()
    owners = tuple({attr: {"S": ""} for attr in shape} for shape in shapes)
    text = _guard_text(HeldBy(owners), hash_attr, ph)
    return text, tuple(ph.names.items())


def _held_by(op: dict[str, Any], guard: HeldBy, hash_attr: str) -> dict[str, Any]:
    text, names = _held_by_template(hash_attr, tuple(tuple(o) for o in guard.owners))
    values = [value for owner in guard.owners for value in owner.values()]
    op["ConditionExpression"] = text
    op["ExpressionAttributeNames"] = dict(names)
    op["ExpressionAttributeValues"] = {f":g{i}": value for i, value in enumerate(values)}
    return op


def _condition(parts: list[str]) -> str | None:
    parts = [p for p in parts if p]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({p})" for p in parts)


def _with_expressions(op: dict[str, Any], ph: _Placeholders, condition: str | None,
                      extra: Expression | None) -> dict[str, Any]:
    names = dict(ph.names)
    values = dict(ph.values)
    if extra is not None:
        names.update(extra.names)
        values.update(extra.values)
    if condition is not None:
        op["ConditionExpression"] = condition
    if names:
        op["ExpressionAttributeNames"] = names
    if values:
        op["ExpressionAttributeValues"] = values
    return op


def _hash_attr(key: Mapping[str, Any]) -> str:
    # Keys are built hash attribute first.
    return next(iter(key))


def _guarded(write: RecordPut | RecordUpdate | RecordDelete | ConditionCheck,
             ph: _Placeholders) -> str | None:
    # The write's guard and the caller's own condition, both required.
    user = write.condition.text if write.condition is not None else ""
    guard = _guard_text(write.guard, _hash_attr(write.key), ph) if write.guard else ""
    return _condition([guard, user])


def render_write(write: Write) -> tuple[str, dict[str, Any]]:
    """One write as (operation, parameters): ``("Put", {"TableName": ..., "Item": ...})``."""
    ph = _Placeholders()
    if isinstance(write, RecordPut):
        op: dict[str, Any] = {"TableName": write.table, "Item": write.item}
        return "Put", _with_expressions(op, ph, _guarded(write, ph), write.condition)
    if isinstance(write, RecordUpdate):
        op = {"TableName": write.table, "Key": write.key, "UpdateExpression": write.update.text}
        op = _with_expressions(op, ph, _guarded(write, ph), write.condition)
        if write.update.names:
            op.setdefault("ExpressionAttributeNames", {}).update(write.update.names)
        if write.update.values:
            op.setdefault("ExpressionAttributeValues", {}).update(write.update.values)
        return "Update", op
    if isinstance(write, RecordDelete):
        op = {"TableName": write.table, "Key": write.key}
        return "Delete", _with_expressions(op, ph, _guarded(write, ph), write.condition)
    if isinstance(write, LockPut):
        op = {"TableName": write.table, "Item": write.item}
        return "Put", _held_by(op, write.guard, _hash_attr(write.key))
    if isinstance(write, LockDelete):
        op = {"TableName": write.table, "Key": write.key}
        return "Delete", _held_by(op, write.guard, _hash_attr(write.key))
    op = {"TableName": write.table, "Key": write.key}
    return "ConditionCheck", _with_expressions(op, ph, _guarded(write, ph), write.condition)


def render(plan: Plan) -> dict[str, Any]:
    """The request ``plan`` is sent as, without its per-call ``ClientRequestToken``.

    A transaction renders as ``{"TransactItems": [...]}``; a plan that is one record write
    renders as that single request's parameters plus ``"Operation"``
    (``PutItem``/``UpdateItem``/``DeleteItem``). Every request asks for its consumed capacity,
    as PynamoDB's connection does.
    """
    if not plan.is_transaction:
        kind, params = render_write(plan.writes[0])
        operation = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}[kind]
        params = {"Operation": operation, **params}
        if not plan.pynamodb:
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        if operation == "UpdateItem":
            params["ReturnValues"] = "ALL_NEW"
        params["ReturnConsumedCapacity"] = "TOTAL"
        return params
    items = []
    for write in plan.writes:
        kind, params = render_write(write)
        if kind != "ConditionCheck":
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        items.append({kind: params})
    return {"TransactItems": items, "ReturnConsumedCapacity": "TOTAL"}


def render_checked(plan: Plan) -> dict[str, Any]:
    """:func:`render`, refusing (as a real send would) a transaction over DynamoDB's limits."""
    request = render(plan)
    check_size(request)
    return request


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot render {type(value).__name__}")


def to_json(request: Mapping[str, Any]) -> str:
    """The request as indented JSON (binary values base64-encoded, as the wire carries them)."""
    return json.dumps(request, indent=2, ensure_ascii=False, default=_json_default)


def encode(request: Mapping[str, Any]) -> bytes:
    """The request as bytes its size and its digest are taken from (``marshal``).

    The strings and binary values are there as UTF-8 and raw bytes, plus a few bytes per value:
    close to DynamoDB's own accounting of a transaction's size (JSON would count ``\\uXXXX``
    escapes and base64). It is deterministic within a process, all a token digest needs, and
    costs a fifth of ``repr`` and a seventh of JSON on every save's path.
    """
    # Version 2: no back-references, so a value repeated in several items counts each time.
    return marshal.dumps(dict(request), 2)


def check_size(request: Mapping[str, Any], encoded: bytes | None = None) -> None:
    """Refuse a transaction over DynamoDB's limits before anything is sent."""
    items = request.get("TransactItems")
    if items is None:
        return
    size = len(encoded if encoded is not None else encode(request))
    if len(items) > MAX_ITEMS or size > MAX_BYTES:
        raise TransactionTooLargeError(len(items), size, MAX_ITEMS, MAX_BYTES)


def new_token(request: Mapping[str, Any], encoded: bytes | None = None) -> str:
    """A ClientRequestToken for one logical call: a random part plus the request's digest.

    Content alone would make a genuine create → delete → create of the same values within
    DynamoDB's 10-minute token window look like a resend; the random part prevents that. The
    token is made once per call and reused by its resends, so the digest only has to be
    deterministic within this process.
    """
    digest = hashlib.sha256(encoded if encoded is not None else encode(request)).hexdigest()
    return f"{uuid.uuid4().hex[:12]}-{digest[:23]}"


# --- executing -----------------------------------------------------------------------------------


def _number_normal(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"N"}:
            return {"N": str(Decimal(value["N"]).normalize())}
        return {k: _number_normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_number_normal(v) for v in value]
    return value


def same_item(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two raw items are equal, numbers compared by value."""
    if a is None or b is None:
        return a is b
    return bool(_number_normal(dict(a)) == _number_normal(dict(b)))


def _is_own(write: Write, current: Mapping[str, Any] | None) -> bool:
    """Whether a failed slot only shows this call's own earlier, applied attempt."""
    if isinstance(write, RecordPut):
        return same_item(current, write.item)
    if isinstance(write, RecordDelete):
        return current is None
    if isinstance(write, RecordUpdate):
        return write.predicted is not None and same_item(current, write.predicted)
    return False


def _earlier_attempt_applied(failures: list[tuple[Write, Mapping[str, Any] | None]],
                             mine: Callable[[Write], bool]) -> bool:
    """Did an earlier attempt of this very call land (``mine``: the record writes that may)?

    A transaction lands whole or not at all, so record slots that fail only because each record
    already holds exactly what this call writes prove the earlier attempt landed — whatever the
    lock slots say now (another record may since have taken a value this call freed). With no
    record slot failing, every failure is a lock slot: a real conflict.
    """
    records = _record_failures(failures)
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


def _shown(value: Any, hashed: bool) -> str:
    """A lock's value as messages and events show it: never a ``hashed`` constraint's."""
    return HASHED if hashed else repr(value)


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
         f"{_shown(violation.value, violation.hashed)} is held by "
         f"{violation.owner if violation.owner is not None else 'another record'}",
         model=violation.model, constraint=violation.constraint,
         fields=list(violation.fields), hashed=violation.hashed,
         value=list(value) if isinstance(value, tuple) else value,
         lock_key=lock_key, holder=violation.owner)


def _error_for(failures: list[tuple[Write, Mapping[str, Any] | None]]) -> DynauniqueError:
    """Turn the failed slots of one attempt into the one error the caller sees."""
    for write, current in failures:
        if isinstance(write, (RecordPut, RecordUpdate, RecordDelete)):
            if isinstance(write, RecordPut) and write.create and current is not None:
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
                f"the lock on {', '.join(w.lock.fields)} {_shown(w.lock.value, w.lock.hashed)} "
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


def _refusal(refused: Refused) -> DynauniqueError:
    """Any refusal that is not a failed condition."""
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
                  repeats: Collection[Write] = ()) -> Steps[dict[str, Any]]:
    """The logic of :func:`execute`, without I/O (see ``dynaunique.connection.Steps``)."""
    request = render(plan)
    if plan.is_transaction:
        encoded = encode(request)
        check_size(request, encoded)
        operation = "TransactWriteItems"
        params = {**request, "ClientRequestToken": new_token(request, encoded)}
    else:
        params = dict(request)
        operation = params.pop("Operation")
    try:
        return (yield from send_steps(connection, operation, params, policy=policy,
                                      resend_safe=_resend_is_safe(plan)))
    except Refused as refused:
        failures = _failures(plan, refused.response)
        if failures is None:
            raise _refusal(refused) from refused.error
        if refused.ambiguous and _earlier_attempt_applied(failures, lambda write: True):
            return {}
        if repeats and _earlier_attempt_applied(failures, lambda write: write in repeats):
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
