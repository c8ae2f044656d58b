"""Render a Plan as the exact request DynamoDB receives, check its size, and make its token.

Pure: no I/O. ``render(plan)`` keeps the plan's order — TransactItems in plan order, so slot
*i* of ``CancellationReasons`` is ``plan.writes[i]`` (PynamoDB's own ``TransactWrite``
reorders items, so it is not used). Each guard is rendered here and nowhere else.
"""

from __future__ import annotations

import json
import marshal
import os
import secrets
import threading
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from dynaunique._lock.locks import OWNER_ATTR, Typed
from dynaunique._lock.sizes import MAX_TRANSACTION_ACTIONS, MAX_TRANSACTION_BYTES, transaction_size
from dynaunique._write.plan import Plan
from dynaunique._write.writes import (
    Absent,
    ConditionCheck,
    Expression,
    Guard,
    HeldBy,
    Lacking,
    LockDelete,
    LockPut,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Shaped,
    Unchanged,
    Write,
)
from dynaunique.errors import TransactionTooLargeError

MAX_ITEMS = MAX_TRANSACTION_ACTIONS
MAX_BYTES = MAX_TRANSACTION_BYTES


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
    if isinstance(guard, Lacking):
        terms = [" OR ".join(f"attribute_not_exists({ph.name(a)})" for a in group)
                 if group else f"attribute_not_exists({ph.name(hash_attr)})"
                 for group in guard.groups]
        return " AND ".join(f"({t})" if " OR " in t and len(terms) > 1 else t for t in terms)
    if isinstance(guard, Shaped):
        parts = [f"attribute_exists({ph.name(hash_attr)})"]
        parts += [f"{ph.name(a)} = {ph.value(v)}" for a, v in guard.equal]
        parts += [f"attribute_exists({ph.name(a)})" for a in guard.present]
        parts += [f"attribute_not_exists({ph.name(a)})" for a in guard.absent]
        return " AND ".join(parts)
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
    if values:   # none for "missing" alone (a backfill's put)
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
    others = getattr(write, "others", None)
    other = _guard_text(others, _hash_attr(write.key), ph) if others is not None else ""
    return _condition([guard, other, user])


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
    if isinstance(write, (LockPut, LockDelete)):
        kind = "Put" if isinstance(write, LockPut) else "Delete"
        op = ({"TableName": write.table, "Item": write.item} if isinstance(write, LockPut)
              else {"TableName": write.table, "Key": write.key})
        if isinstance(write.guard, Shaped):   # exactly the lock met (a takeover, a verification)
            text = _guard_text(write.guard, _hash_attr(write.key), ph)
            return kind, _with_expressions(op, ph, text, None)
        return kind, _held_by(op, write.guard, _hash_attr(write.key))
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


def outgoing(plan: Plan, request: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``plan``'s rendered ``request`` as it is sent: (operation, parameters). A transaction is
    size-checked and gets its call's one ``ClientRequestToken``; a single write names its
    operation."""
    if plan.is_transaction:
        encoded = encode(request)
        check_size(request, encoded)
        return "TransactWriteItems", {**request, "ClientRequestToken": new_token(request,
                                                                                 encoded)}
    params = dict(request)
    return params.pop("Operation"), params


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
    """The request as indented JSON (binary values base64-encoded, as the wire carries them).

    For what a dry run returns: ``print(dynaunique.to_json(obj.save(dry_run=True)))``.
    """
    return json.dumps(request, indent=2, ensure_ascii=False, default=_json_default)


def encode(request: Mapping[str, Any]) -> bytes:
    """The request as bytes its digest is taken from, and a bound on its size (``marshal``).

    Every name and value of every item is there, strings as UTF-8 and binary values as raw
    bytes, each with a header of its own: never fewer bytes than DynamoDB counts for the items
    (:func:`check_size` relies on it). It is deterministic within a process, all a token digest
    needs, and costs a fifth of ``repr`` and a seventh of JSON on every save's path.
    """
    # Version 2: no back-references, so a value repeated in several items counts each time, and
    # no short forms of strings: each carries a 5-byte header.
    return marshal.dumps(dict(request), 2)


def check_size(request: Mapping[str, Any], encoded: bytes | None = None) -> None:
    """Refuse a transaction over DynamoDB's limits before anything is sent: more than 100
    actions, or more than 4 MB of items counted as DynamoDB counts them
    (:func:`dynaunique._lock.sizes.transaction_size`).

    ``encoded`` (the request's :func:`encode`) bounds that count from above — it holds every
    name and value of every item, each with at least as many bytes as DynamoDB counts for it,
    and more besides — so a transaction whose encoding fits in 4 MB is not counted at all.
    """
    items = request.get("TransactItems")
    if items is None:
        return
    if len(items) <= MAX_ITEMS:
        bound = len(encoded if encoded is not None else encode(request))
        if bound <= MAX_BYTES:
            return
    size = transaction_size(items)
    if len(items) > MAX_ITEMS or size > MAX_BYTES:
        raise TransactionTooLargeError(len(items), size, MAX_ITEMS, MAX_BYTES)


def new_token(request: Mapping[str, Any], encoded: bytes | None = None) -> str:
    """A ClientRequestToken for one logical call: unique, 36 characters (DynamoDB's limit).

    ``<24 hex digits: this process's random prefix>-<11 hex digits: a counter>``. The prefix is
    96 random bits drawn when the module is imported and again in the child after a ``fork``,
    so two processes (on any machines) share one with probability about n² / 2⁹⁷; the counter
    makes every call of one process different (wrapping draws a new prefix). A token must never
    name two different calls within DynamoDB's 10-minute window — a genuine create → delete →
    create of the same values would look like a resend — and it need not say anything about
    the request: it is made once per call and reused by that call's resends. ``request`` and
    ``encoded`` are not read (the token once hashed them; the signature stays for its callers).
    """
    global _counter
    with _token_lock:
        _counter += 1
        if _counter >= _COUNTER_END:
            _new_prefix()
            _counter = 1
        count = _counter
        prefix = _prefix
    return f"{prefix}-{count:011x}"


#: The counter's 11 hex digits.
_COUNTER_END = 16 ** 11
_token_lock = threading.Lock()
_prefix = ""
_counter = 0


def _new_prefix() -> None:
    global _prefix, _counter
    _prefix = secrets.token_hex(12)
    _counter = 0


def _after_fork() -> None:
    # A forked child must not repeat its parent's tokens, nor inherit a lock held at the fork.
    global _token_lock
    _token_lock = threading.Lock()
    _new_prefix()


_new_prefix()
os.register_at_fork(after_in_child=_after_fork)
