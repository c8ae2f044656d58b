"""An in-memory DynamoDB, exact for what dynaunique sends, loud about anything else.

**What it answers.** Every request the library (and PynamoDB under it) sends, as DynamoDB
answers it: PutItem, UpdateItem, DeleteItem (``ReturnValues`` ``ALL_OLD``/``ALL_NEW``,
``ReturnValuesOnConditionCheckFailure=ALL_OLD``), GetItem, TransactWriteItems (Put, Update,
Delete, ConditionCheck: all or nothing, one ``CancellationReasons`` slot per item with ``Code``,
``Message`` and, for ``ALL_OLD``, ``Item``; ``ClientRequestToken`` idempotency: a repeat of a
successful token with the same request within :data:`TOKEN_WINDOW` seconds of the model's clock
gets the first answer without applying again, with another request an
``IdempotentParameterMismatchException``; a cancelled request does not use its token up),
TransactGetItems, BatchGetItem, BatchWriteItem, Query and Scan with their pages (``Limit``,
``ExclusiveStartKey``/``LastEvaluatedKey``, ``Segment``/``TotalSegments``, ``FilterExpression``,
``ProjectionExpression``, ``Select=COUNT``), and the table requests tests send (CreateTable,
DescribeTable, DeleteTable, ListTables, UpdateTimeToLive). Expressions: :mod:`.memory_expr`
(conditions, projections) and :mod:`.memory_update` (update expressions); reads and table
requests: :mod:`.memory_reads`.

**Numbers** are stored as DynamoDB stores them, without insignificant zeros (``"1.0"`` is
``"1"``; :mod:`dynaunique.testing._numbers`, which the local server applies too).

**Its order.** A scan returns items sorted by hash key then range key (numbers as numbers), a
segment is the first byte of the MD5 of the hash key's text modulo ``TotalSegments``: the local
server's (moto's) order, so pages agree request by request on the recorded corpus. DynamoDB's
own order is its hash order; the library relies on neither.

**Refusals** are raised as botocore's ``ClientError`` with the response botocore parses from the
real service. Anything not modelled (another operation or parameter, a function in an
expression that is not listed) raises :class:`Unsupported`: never a silent wrong answer.

**Purity.** The model holds only its tables, items, used tokens and a logical clock (seconds,
advanced only by :meth:`MemoryDynamoDB.advance`): the same requests give the same answers and
the same :meth:`~MemoryDynamoDB.snapshot` (which the explorer hashes). Each request is applied
atomically, so every state between two requests is one DynamoDB could be in.

**Faults** (the scheduler chooses them; nothing is random here). ``answer(request, fault)`` or
``handle(operation, params, fault=...)`` with a :class:`Fault`:

- ``Fault.conflict(slot)``: a TransactWriteItems is cancelled with ``TransactionConflict`` in
  CancellationReasons slot ``slot`` (the others ``None``), nothing applied, the token not used;
  any other write is refused with ``TransactionConflictException``;
- ``Fault.cancel(code, slot)``: the same with another reason code (``ThrottlingError``,
  ``ProvisionedThroughputExceeded``);
- ``Fault.refuse(code)``: the request is refused before it is applied —
  ``ProvisionedThroughputExceededException``, ``ThrottlingException``,
  ``RequestLimitExceeded`` (HTTP 400) or ``InternalServerError`` (HTTP 500);
- ``Fault.unprocessed(keep)``: a BatchGetItem / BatchWriteItem processes only its first
  ``keep`` keys (in request order) and returns the rest as ``UnprocessedKeys`` /
  ``UnprocessedItems``.

"The write applied but its answer was lost" is not a fault of the model: the scheduler applies
the request (``answer``) and hands the client a connection error instead of the answer.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from dynaunique.testing._numbers import NUMBER_OPERATIONS, canonical_request

from . import memory_reads
from .memory_expr import (
    Expressions,
    Item,
    Unsupported,
    client_error,
    holds,
    normal,
    ordered,
    parse_condition,
    same_value,
    validation,
)
from .memory_update import apply_update, parse_update

__all__ = ["TOKEN_WINDOW", "Fault", "Item", "MemoryDynamoDB", "Unsupported", "client_error",
           "condition_holds", "same_value"]

#: Seconds a successful ClientRequestToken is remembered (DynamoDB: 10 minutes).
TOKEN_WINDOW = 600.0

_TRANSACT_KINDS = ("Put", "Update", "Delete", "ConditionCheck")
_CONDITION_FAILED = "The conditional request failed"
_REFUSALS = {"ProvisionedThroughputExceededException": 400, "ThrottlingException": 400,
             "RequestLimitExceeded": 400, "InternalServerError": 500,
             "TransactionConflictException": 400}


@dataclass(frozen=True)
class Fault:
    """An answer the scheduler chooses instead of the normal one (see the module docstring)."""

    kind: str            # "cancel", "refuse" or "unprocessed"
    code: str = ""
    slot: int = 0
    keep: int = 0

    @classmethod
    def conflict(cls, slot: int = 0) -> Fault:
        return cls("cancel", "TransactionConflict", slot=slot)

    @classmethod
    def cancel(cls, code: str, slot: int = 0) -> Fault:
        return cls("cancel", code, slot=slot)

    @classmethod
    def refuse(cls, code: str) -> Fault:
        if code not in _REFUSALS:
            raise ValueError(f"not a modelled refusal: {code!r} (one of {sorted(_REFUSALS)})")
        return cls("refuse", code)

    @classmethod
    def unprocessed(cls, keep: int = 0) -> Fault:
        return cls("unprocessed", keep=keep)


class _Request(Protocol):
    operation: str
    params: Mapping[str, Any]


_ATOMS = (str, bytes, int, float, bool, type(None))


def plain_copy(value: Any) -> Any:
    """``copy.deepcopy`` of request and item data (dicts, lists, strings, bytes, numbers), a few
    times cheaper: the model copies every request and every item it hands out. Anything else is
    deep-copied."""
    kind = type(value)
    if kind is dict:
        return {k: plain_copy(v) for k, v in value.items()}
    if kind is list:
        return [plain_copy(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def condition_holds(params: Mapping[str, Any], item: Item | None) -> bool:
    """Whether ``params``' ``ConditionExpression`` (none: true) holds on ``item``."""
    text = params.get("ConditionExpression")
    return True if text is None else holds(parse_condition(text, Expressions(params)), item)


def key_ident(key: Mapping[str, Any], names: list[str]) -> str:
    """The identity of a key: its attributes' normal values, as text."""
    return json.dumps([[n, str(normal(key[n]))] for n in names])


class MemoryDynamoDB:
    """Tables of items, each request applied atomically. ``tables``: name → (hash, range)."""

    def __init__(self, tables: Mapping[str, tuple[str, str | None]] | None = None) -> None:
        self.schemas: dict[str, tuple[str, str | None]] = dict(tables or {})
        self.items: dict[str, dict[str, Item]] = {name: {} for name in self.schemas}
        #: Table descriptions beyond the key (attribute types, billing, TTL), for DescribeTable.
        self.tables: dict[str, dict[str, Any]] = {}
        #: Successful transaction tokens: token → (digest of the request, time, its answer).
        self.tokens: dict[str, tuple[str, float, dict[str, Any]]] = {}
        #: The logical clock, in seconds (only :meth:`advance` moves it).
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass (tokens older than :data:`TOKEN_WINDOW` are forgotten)."""
        self.now += seconds

    # --- keys

    def schema(self, operation: str, table: str) -> tuple[str, str | None]:
        if table not in self.schemas:
            raise client_error(operation, "ResourceNotFoundException",
                               "Requested resource not found")
        return self.schemas[table]

    def key_names(self, operation: str, table: str) -> list[str]:
        hash_attr, range_attr = self.schema(operation, table)
        return [hash_attr] + ([range_attr] if range_attr else [])

    def key(self, operation: str, table: str, source: Mapping[str, Any], *,
            exact: bool = False) -> tuple[str, Item]:
        """(identity, key) of the item ``source`` (an item, or a key if ``exact``) names."""
        names = self.key_names(operation, table)
        if any(n not in source for n in names) or (exact and len(source) != len(names)):
            raise validation("The provided key element does not match the schema")
        types = self.tables.get(table, {}).get("types", {})
        for n in names:
            (kind, inner), = source[n].items()
            if n in types and kind != types[n]:
                raise validation(f"One or more parameter values were invalid: Type mismatch "
                                 f"for key {n} expected: {types[n]} actual: {kind}")
            if kind in ("S", "B") and inner == "":
                raise validation("One or more parameter values are not valid. The AttributeValue "
                                 "for a key attribute cannot contain an empty string value.")
        key = {n: source[n] for n in names}
        return key_ident(key, names), key

    def sort_key(self, table: str, item: Item) -> tuple[Any, ...]:
        """Where ``item`` comes in a scan of ``table`` (the local server's order)."""
        return tuple(ordered(item[n]) for n in self.key_names("Scan", table))

    def get(self, table: str, key: Mapping[str, Any]) -> Item | None:
        """The stored item at ``key`` (a copy), or None."""
        ident, _ = self.key("GetItem", table, key)
        item = self.items[table].get(ident)
        return plain_copy(item) if item is not None else None

    def snapshot(self) -> tuple[Any, ...]:
        """The whole state as a hashable value (for state hashing): items and live tokens."""
        items = tuple((table, tuple(sorted(
            (ident, json.dumps(item, sort_keys=True)) for ident, item in stored.items())))
            for table, stored in sorted(self.items.items()))
        tokens = tuple(sorted((t, d) for t, (d, at, _) in self.tokens.items()
                              if self.now - at < TOKEN_WINDOW))
        return items, tokens

    # --- requests

    def answer(self, request: _Request, fault: Fault | None = None) -> dict[str, Any]:
        """Answer ``request`` (anything with ``operation`` and ``params``, e.g. the library's
        ``Request``), or the answer ``fault`` chooses."""
        return self.handle(request.operation, request.params, fault=fault)

    def handle(self, operation: str, params: Mapping[str, Any],
               fault: Fault | None = None) -> dict[str, Any]:
        """Answer one request as DynamoDB does (raising its ``ClientError`` on a refusal)."""
        params = plain_copy(dict(params))
        if operation in NUMBER_OPERATIONS:   # "1.0" is stored as "1", as DynamoDB stores it
            params = canonical_request(params)
        handler = _HANDLERS.get(operation)
        if handler is None:
            raise Unsupported(f"operation {operation} is not modelled")
        unknown = set(params) - _KNOWN_PARAMS[operation]
        if unknown:
            raise Unsupported(f"{operation} parameters {sorted(unknown)} are not modelled")
        if fault is not None and fault.kind == "refuse":
            raise client_error(operation, fault.code, f"injected {fault.code}",
                               status=_REFUSALS[fault.code])
        if fault is not None and fault.kind == "cancel" and operation != "TransactWriteItems":
            if operation not in ("PutItem", "UpdateItem", "DeleteItem"):
                raise ValueError(f"{fault} does not apply to {operation}")
            raise client_error(operation, "TransactionConflictException",
                               "Transaction is ongoing for the item")
        if fault is not None and fault.kind == "unprocessed" and operation not in (
                "BatchGetItem", "BatchWriteItem"):
            raise ValueError(f"{fault} does not apply to {operation}")
        try:
            return dict(handler(self, params, fault))
        except Exception as exc:
            response = getattr(exc, "response", None)
            if response is not None and getattr(exc, "operation_name", "") == "":
                raise client_error(operation, response["Error"]["Code"],
                                   response["Error"]["Message"],
                                   **{k: v for k, v in response.items()
                                      if k not in ("Error", "ResponseMetadata")}) from None
            raise

    # --- writes

    def planned(self, operation: str, kind: str, params: Mapping[str, Any],
                placeholders: Expressions) -> tuple[str, Item | None, Callable[[], Item | None]]:
        """(item id, the item now, the item after the write — None: deleted/none — computed
        once its condition held: an update's path errors come after a failed condition)."""
        table = params["TableName"]
        if kind == "Put":
            item = params["Item"]
            ident, _ = self.key(operation, table, item)
            _check_values(item)
            return ident, self.items[table].get(ident), lambda: plain_copy(item)
        ident, key = self.key(operation, table, params["Key"], exact=True)
        old = self.items[table].get(ident)
        if kind == "Update":
            actions = parse_update(params, placeholders, key)

            def updated() -> Item:
                new = apply_update(actions, old, key)
                _check_values(new)
                return new

            return ident, old, updated
        return ident, old, (lambda: None) if kind == "Delete" else (lambda: plain_copy(old))

    def store(self, table: str, ident: str, new: Item | None) -> None:
        if new is None:
            self.items[table].pop(ident, None)
        else:
            self.items[table][ident] = new


def _check_values(item: Mapping[str, Any]) -> None:
    for value in item.values():
        (kind, inner), = value.items()
        if kind in ("SS", "NS", "BS") and not inner:
            raise validation("One or more parameter values were invalid: An string set  may not "
                             "be empty")
        if kind in ("SS", "NS", "BS") and len({normal({kind: [m]}) for m in inner}) != len(inner):
            raise validation("Input collection contains duplicates")


def _condition(params: Mapping[str, Any], placeholders: Expressions, item: Item | None) -> bool:
    text = params.get("ConditionExpression")
    result = True if text is None else holds(parse_condition(text, placeholders), item)
    placeholders.check_all_used()
    return result


def _single(db: MemoryDynamoDB, operation: str, kind: str, params: dict[str, Any]) -> Any:
    table = params["TableName"]
    placeholders = Expressions(params)
    ident, old, after = db.planned(operation, kind, params, placeholders)
    if not _condition(params, placeholders, old):
        extra = ({"Item": plain_copy(old)} if old is not None and params.get(
            "ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else {})
        raise client_error(operation, "ConditionalCheckFailedException", _CONDITION_FAILED,
                           **extra)
    returns = params.get("ReturnValues", "NONE")
    if returns not in ("NONE", "ALL_OLD") and not (kind == "Update" and returns == "ALL_NEW"):
        raise Unsupported(f"{operation} ReturnValues={returns} is not modelled")
    new = after()
    db.store(table, ident, new)
    if returns == "ALL_NEW":
        return {"Attributes": plain_copy(new)}
    if returns == "ALL_OLD" and old is not None:
        return {"Attributes": plain_copy(old)}
    return {}


def _put(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    return _single(db, "PutItem", "Put", params)


def _update(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    return _single(db, "UpdateItem", "Update", params)


def _delete(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    return _single(db, "DeleteItem", "Delete", params)


_NOT_COMPARED = ("ClientRequestToken", "ReturnConsumedCapacity", "ReturnItemCollectionMetrics")


def _transact_write(db: MemoryDynamoDB, params: dict[str, Any], fault: Fault | None) -> Any:
    operation = "TransactWriteItems"
    token = params.get("ClientRequestToken")
    compared = {k: v for k, v in params.items() if k not in _NOT_COMPARED}
    digest = hashlib.sha256(json.dumps(compared, sort_keys=True).encode()).hexdigest()
    db.tokens = {t: e for t, e in db.tokens.items() if db.now - e[1] < TOKEN_WINDOW}
    if token is not None and token in db.tokens:
        if db.tokens[token][0] != digest:
            raise client_error(operation, "IdempotentParameterMismatchException",
                               "Request parameters do not match the original request for this "
                               "ClientRequestToken")
        return copy.deepcopy(db.tokens[token][2])
    entries = params["TransactItems"]
    if not entries or len(entries) > 100:
        raise validation("1 validation error detected: Value at 'transactItems' failed to "
                         "satisfy constraint: Member must have length less than or equal to 100")
    planned = []
    seen = set()
    for entry in entries:
        if len(entry) != 1 or next(iter(entry)) not in _TRANSACT_KINDS:
            raise Unsupported(f"transaction item {list(entry)} is not modelled")
        (kind, body), = entry.items()
        unknown = set(body) - _KNOWN_PARAMS[f"Transact{kind}"]
        if unknown:
            raise Unsupported(f"{kind} parameters {sorted(unknown)} are not modelled")
        placeholders = Expressions(body)
        ident, old, after = db.planned(operation, kind, body, placeholders)
        if kind == "ConditionCheck" and "ConditionExpression" not in body:
            raise validation("The ConditionCheck action requires a ConditionExpression")
        if (body["TableName"], ident) in seen:
            raise validation("Transaction request cannot include multiple operations on one item")
        seen.add((body["TableName"], ident))
        planned.append((kind, body, placeholders, ident, old, after))
    reasons = []
    for _kind, body, placeholders, _ident, old, _new in planned:
        if _condition(body, placeholders, old):
            reasons.append({"Code": "None"})
            continue
        reason: dict[str, Any] = {"Code": "ConditionalCheckFailed", "Message": _CONDITION_FAILED}
        if old is not None and body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
            reason["Item"] = plain_copy(old)
        reasons.append(reason)
    if fault is not None and fault.kind == "cancel":
        if not 0 <= fault.slot < len(planned):
            raise ValueError(f"{fault}: no slot {fault.slot} in {len(planned)} items")
        reasons = [{"Code": "None"} for _ in planned]
        message = {"TransactionConflict": "Transaction is ongoing for the item"}.get(
            fault.code, f"injected {fault.code}")
        reasons[fault.slot] = {"Code": fault.code, "Message": message}
    if any(r["Code"] != "None" for r in reasons):
        codes = ", ".join(r["Code"] for r in reasons)
        raise client_error(operation, "TransactionCanceledException",
                           f"Transaction cancelled, please refer cancellation reasons for "
                           f"specific reasons [{codes}]", CancellationReasons=reasons)
    written = [(body["TableName"], ident, after()) for kind, body, _p, ident, _old, after in planned
               if kind != "ConditionCheck"]   # every update computed before any is stored
    for table, ident, new in written:
        db.store(table, ident, new)
    if token is not None:
        db.tokens[token] = (digest, db.now, {})
    return {}


_HANDLERS = {"PutItem": _put, "UpdateItem": _update, "DeleteItem": _delete,
             "TransactWriteItems": _transact_write, **memory_reads.HANDLERS}

_COMMON = {"TableName", "ConditionExpression", "ExpressionAttributeNames",
           "ExpressionAttributeValues", "ReturnConsumedCapacity"}
_TRANSACT = _COMMON - {"ReturnConsumedCapacity"} | {"ReturnValuesOnConditionCheckFailure"}
_KNOWN_PARAMS: dict[str, set[str]] = {
    "PutItem": _COMMON | {"Item", "ReturnValuesOnConditionCheckFailure", "ReturnValues"},
    "UpdateItem": _COMMON | {"Key", "UpdateExpression", "ReturnValues",
                             "ReturnValuesOnConditionCheckFailure"},
    "DeleteItem": _COMMON | {"Key", "ReturnValuesOnConditionCheckFailure", "ReturnValues"},
    "TransactWriteItems": {"TransactItems", "ClientRequestToken", "ReturnConsumedCapacity"},
    "TransactPut": _TRANSACT | {"Item"},
    "TransactUpdate": _TRANSACT | {"Key", "UpdateExpression"},
    "TransactDelete": _TRANSACT | {"Key"},
    "TransactConditionCheck": _TRANSACT | {"Key"},
    **memory_reads.KNOWN_PARAMS,
}
