"""An in-memory DynamoDB, exact for what dynaunique sends, loud about anything else.

It answers the requests the write path and the unique lookup send — PutItem, UpdateItem (SET and
REMOVE of plain values), DeleteItem, GetItem and TransactWriteItems (Put, Update, Delete,
ConditionCheck) — with DynamoDB's answers: condition expressions of the forms
``dynaunique._render`` writes (``attribute_exists``/``attribute_not_exists``, ``=``, ``<>``,
``AND``/``OR``/``NOT``, parentheses, dotted paths into maps), a transaction applied all or
nothing with one ``CancellationReasons`` slot per item (the item itself with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``), ``ClientRequestToken`` idempotency (a repeat
of a successful token with the same request succeeds without applying again; with another
request it is an ``IdempotentParameterMismatchException``), and a failed single write's
``ConditionalCheckFailedException`` with the old item for ``ALL_OLD``.

Refusals are raised as botocore's ``ClientError`` with the response shape botocore parses from
the real service. Anything it does not model (another operation, a function such as
``begins_with`` or ``size``, an update action other than SET/REMOVE of a value) raises
:class:`Unsupported`: never a silent wrong answer.

Each request is applied atomically, so every state between two requests is one DynamoDB could be
in; the model does not simulate transaction conflicts, throttling or latency.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import botocore.exceptions

Item = dict[str, Any]


class Unsupported(Exception):
    """The request uses something the in-memory model does not implement."""


def client_error(operation: str, code: str, message: str, **extra: Any) -> Exception:
    """The ``ClientError`` botocore raises for DynamoDB's refusal ``code``."""
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message},
                                "ResponseMetadata": {"HTTPStatusCode": 400}, **extra}
    return botocore.exceptions.ClientError(response, operation)


# --- values --------------------------------------------------------------------------------------


def _normal(value: Any) -> Any:
    """A typed value in a form where equal DynamoDB values are equal Python values."""
    if not isinstance(value, Mapping) or len(value) != 1:
        raise Unsupported(f"not a typed value: {value!r}")
    (kind, inner), = value.items()
    if kind == "N":
        return ("N", Decimal(inner).normalize())
    if kind == "M":
        return ("M", tuple(sorted((k, _normal(v)) for k, v in inner.items())))
    if kind == "L":
        return ("L", tuple(_normal(v) for v in inner))
    if kind in ("SS", "BS"):
        return (kind, frozenset(inner))
    if kind == "NS":
        return (kind, frozenset(Decimal(n).normalize() for n in inner))
    if kind == "B" and isinstance(inner, str):
        import base64

        return ("B", base64.b64decode(inner))
    return (kind, inner)


def same_value(a: Any, b: Any) -> bool:
    """DynamoDB's ``=`` on two typed values."""
    return bool(_normal(a) == _normal(b))


# --- expressions ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(<>|=|\(|\)|,|\.|#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*)")
_KEYWORDS = {"AND", "OR", "NOT"}
_FUNCTIONS = {"attribute_exists", "attribute_not_exists"}


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise Unsupported(f"cannot read expression {text!r} at {text[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


class _Condition:
    """A condition expression parsed into nested tuples, evaluated on an item (or None)."""

    def __init__(self, text: str, names: Mapping[str, str], values: Mapping[str, Any]) -> None:
        self.names, self.values = names, values
        self.tokens = _tokens(text)
        self.pos = 0
        self.tree = self._or()
        if self.pos != len(self.tokens):
            raise Unsupported(f"trailing tokens in {text!r}: {self.tokens[self.pos:]}")

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None or (expected is not None and token.upper() != expected.upper()):
            raise Unsupported(f"expected {expected!r}, got {token!r} in {self.tokens}")
        self.pos += 1
        return token

    def _or(self) -> Any:
        node = self._and()
        while (self._peek() or "").upper() == "OR":
            self._take()
            node = ("or", node, self._and())
        return node

    def _and(self) -> Any:
        node = self._not()
        while (self._peek() or "").upper() == "AND":
            self._take()
            node = ("and", node, self._not())
        return node

    def _not(self) -> Any:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            return ("not", self._not())
        return self._comparison()

    def _comparison(self) -> Any:
        token = self._peek()
        if token == "(":
            self._take("(")
            node = self._or()
            self._take(")")
            return node
        if token is not None and token[0].isalpha() and token.upper() not in _KEYWORDS:
            if token not in _FUNCTIONS:
                raise Unsupported(f"function {token!r} is not modelled")
            self._take()
            self._take("(")
            path = self._path()
            self._take(")")
            return (token, path)
        left = self._operand()
        op = self._take()
        if op not in ("=", "<>"):
            raise Unsupported(f"comparison {op!r} is not modelled")
        return (op, left, self._operand())

    def _path(self) -> tuple[str, ...]:
        parts = [self._name(self._take())]
        while self._peek() == ".":
            self._take(".")
            parts.append(self._name(self._take()))
        return tuple(parts)

    def _name(self, token: str) -> str:
        if not token.startswith("#"):
            raise Unsupported(f"attribute names must be placeholders, got {token!r}")
        if token not in self.names:
            raise client_error("", "ValidationException", f"undefined name {token}")
        return self.names[token]

    def _operand(self) -> Any:
        token = self._peek()
        if token is not None and token.startswith(":"):
            self._take()
            if token not in self.values:
                raise client_error("", "ValidationException", f"undefined value {token}")
            return ("value", self.values[token])
        return ("path", self._path())

    def holds(self, item: Item | None) -> bool:
        return bool(self._eval(self.tree, item or {}))

    def _eval(self, node: Any, item: Item) -> Any:
        kind = node[0]
        if kind == "or":
            return self._eval(node[1], item) or self._eval(node[2], item)
        if kind == "and":
            return self._eval(node[1], item) and self._eval(node[2], item)
        if kind == "not":
            return not self._eval(node[1], item)
        if kind == "attribute_exists":
            return resolve(item, node[1]) is not None
        if kind == "attribute_not_exists":
            return resolve(item, node[1]) is None
        left, right = self._value(node[1], item), self._value(node[2], item)
        if left is None or right is None:
            if kind == "<>":
                raise Unsupported("<> with a missing attribute is not modelled")
            return False   # `=` with a missing attribute is false
        equal = same_value(left, right)
        return equal if kind == "=" else not equal

    def _value(self, operand: Any, item: Item) -> Any:
        return operand[1] if operand[0] == "value" else resolve(item, operand[1])


def resolve(item: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The typed value at ``path`` (attribute, then map keys), or None."""
    value: Any = item.get(path[0])
    for part in path[1:]:
        if not isinstance(value, Mapping) or "M" not in value:
            return None
        value = value["M"].get(part)
    return value


def condition_holds(params: Mapping[str, Any], item: Item | None) -> bool:
    """Whether ``params``' ``ConditionExpression`` (none: true) holds on ``item``."""
    text = params.get("ConditionExpression")
    if text is None:
        return True
    return _Condition(text, params.get("ExpressionAttributeNames") or {},
                      params.get("ExpressionAttributeValues") or {}).holds(item)


def apply_update(params: Mapping[str, Any], item: Item | None, key: Item) -> Item:
    """``params``' ``UpdateExpression`` applied to ``item`` (a missing item starts as its key)."""
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    new = copy.deepcopy(item) if item is not None else copy.deepcopy(dict(key))
    tokens = _tokens(params["UpdateExpression"])
    pos = 0
    clause = None
    while pos < len(tokens):
        token = tokens[pos]
        if token.upper() in ("SET", "REMOVE"):
            clause = token.upper()
            pos += 1
            continue
        if token == ",":
            pos += 1
            continue
        if not token.startswith("#") or (pos + 1 < len(tokens) and tokens[pos + 1] == "."):
            raise Unsupported(f"update expression {params['UpdateExpression']!r} is not modelled")
        name = names[token]
        if name in key:
            raise client_error("UpdateItem", "ValidationException",
                               "Cannot update attribute of the key")
        if clause == "REMOVE":
            new.pop(name, None)
            pos += 1
        elif clause == "SET":
            if tokens[pos + 1:pos + 2] != ["="] or not tokens[pos + 2].startswith(":") or (
                    pos + 3 < len(tokens) and tokens[pos + 3] not in (",",)
                    and tokens[pos + 3].upper() not in ("SET", "REMOVE")):
                raise Unsupported(
                    f"update expression {params['UpdateExpression']!r} is not modelled")
            new[name] = copy.deepcopy(values[tokens[pos + 2]])
            pos += 3
        else:
            raise Unsupported(f"update expression {params['UpdateExpression']!r} is not modelled")
    return new


# --- the database --------------------------------------------------------------------------------

_TRANSACT_KINDS = ("Put", "Update", "Delete", "ConditionCheck")
_CONDITION_FAILED = "The conditional request failed"


class MemoryDynamoDB:
    """Tables of items, each request applied atomically. ``tables``: name → (hash, range)."""

    def __init__(self, tables: Mapping[str, tuple[str, str | None]]) -> None:
        self.schemas = dict(tables)
        self.items: dict[str, dict[str, Item]] = {name: {} for name in tables}
        #: Successful transaction tokens: token → the request it was used for.
        self.tokens: dict[str, str] = {}

    # --- keys

    def _schema(self, operation: str, table: str) -> tuple[str, str | None]:
        if table not in self.schemas:
            raise client_error(operation, "ResourceNotFoundException",
                               "Requested resource not found")
        return self.schemas[table]

    def _key(self, operation: str, table: str, source: Mapping[str, Any]) -> tuple[str, Item]:
        hash_attr, range_attr = self._schema(operation, table)
        names = [hash_attr] + ([range_attr] if range_attr else [])
        missing = [n for n in names if n not in source]
        if missing:
            raise client_error(operation, "ValidationException",
                               "One of the required keys was not given a value")
        key = {n: source[n] for n in names}
        return json.dumps([[n, _normal_json(key[n])] for n in names]), key

    def get(self, table: str, key: Mapping[str, Any]) -> Item | None:
        """The stored item at ``key`` (a copy), or None."""
        ident, _ = self._key("GetItem", table, key)
        item = self.items[table].get(ident)
        return copy.deepcopy(item) if item is not None else None

    def snapshot(self) -> tuple[Any, ...]:
        """The whole state as a hashable value (for state hashing)."""
        return tuple((table, tuple(sorted(
            (ident, json.dumps(item, sort_keys=True)) for ident, item in items.items())))
            for table, items in sorted(self.items.items()))

    # --- requests

    def handle(self, operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one request as DynamoDB does (raising its ``ClientError`` on a refusal)."""
        params = copy.deepcopy(dict(params))
        handler = getattr(self, f"_op_{operation}", None)
        if handler is None:
            raise Unsupported(f"operation {operation} is not modelled")
        known = _KNOWN_PARAMS.get(operation, set())
        unknown = set(params) - known
        if unknown:
            raise Unsupported(f"{operation} parameters {sorted(unknown)} are not modelled")
        return dict(handler(params))

    def _op_GetItem(self, params: dict[str, Any]) -> dict[str, Any]:
        item = self.get(params["TableName"], params["Key"])
        return {"Item": item} if item is not None else {}

    def _single(self, operation: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        table = params["TableName"]
        ident, _, new = self._planned(operation, kind, params)
        old = self.items[table].get(ident)
        if not condition_holds(params, old):
            extra = ({"Item": copy.deepcopy(old)} if old is not None and params.get(
                "ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else {})
            raise client_error(operation, "ConditionalCheckFailedException", _CONDITION_FAILED,
                               **extra)
        self._store(table, ident, new)
        if kind == "Update" and params.get("ReturnValues") == "ALL_NEW":
            return {"Attributes": copy.deepcopy(new)}
        if params.get("ReturnValues", "NONE") not in ("NONE", "ALL_NEW"):
            raise Unsupported(f"ReturnValues={params['ReturnValues']} is not modelled")
        return {}

    def _planned(self, operation: str, kind: str,
                 params: Mapping[str, Any]) -> tuple[str, Item, Item | None]:
        """(item id, key, the item after the write — None: deleted/untouched by a check)."""
        table = params["TableName"]
        if kind == "Put":
            ident, key = self._key(operation, table, params["Item"])
            return ident, key, copy.deepcopy(params["Item"])
        ident, key = self._key(operation, table, params["Key"])
        if len(params["Key"]) != len(key):
            raise client_error(operation, "ValidationException",
                               "The provided key element does not match the schema")
        old = self.items[table].get(ident)
        if kind == "Update":
            return ident, key, apply_update(params, old, key)
        if kind == "Delete":
            return ident, key, None
        return ident, key, copy.deepcopy(old)   # ConditionCheck: unchanged

    def _store(self, table: str, ident: str, new: Item | None) -> None:
        if new is None:
            self.items[table].pop(ident, None)
        else:
            self.items[table][ident] = new

    def _op_PutItem(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._single("PutItem", "Put", params)

    def _op_UpdateItem(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._single("UpdateItem", "Update", params)

    def _op_DeleteItem(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._single("DeleteItem", "Delete", params)

    def _op_TransactWriteItems(self, params: dict[str, Any]) -> dict[str, Any]:
        operation = "TransactWriteItems"
        token = params.get("ClientRequestToken")
        body = json.dumps(params["TransactItems"], sort_keys=True)
        if token is not None and token in self.tokens:
            if self.tokens[token] != body:
                raise client_error(operation, "IdempotentParameterMismatchException",
                                   "The request uses the same client token as a previous, but "
                                   "non-identical request.")
            return {}
        planned = []
        seen = set()
        for entry in params["TransactItems"]:
            if len(entry) != 1 or next(iter(entry)) not in _TRANSACT_KINDS:
                raise Unsupported(f"transaction item {list(entry)} is not modelled")
            (kind, body_params), = entry.items()
            unknown = set(body_params) - _KNOWN_PARAMS[f"Transact{kind}"]
            if unknown:
                raise Unsupported(f"{kind} parameters {sorted(unknown)} are not modelled")
            ident, _, new = self._planned(operation, kind, body_params)
            if (body_params["TableName"], ident) in seen:
                raise client_error(operation, "ValidationException",
                                   "Transaction request cannot include multiple operations on "
                                   "one item")
            seen.add((body_params["TableName"], ident))
            planned.append((kind, body_params, ident, new))
        reasons = []
        for _kind, body_params, ident, _new in planned:
            old = self.items[body_params["TableName"]].get(ident)
            if condition_holds(body_params, old):
                reasons.append({"Code": "None"})
                continue
            reason: dict[str, Any] = {"Code": "ConditionalCheckFailed",
                                      "Message": _CONDITION_FAILED}
            if old is not None and body_params.get(
                    "ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                reason["Item"] = copy.deepcopy(old)
            reasons.append(reason)
        if any(r["Code"] != "None" for r in reasons):
            codes = ", ".join(r["Code"] for r in reasons)
            raise client_error(operation, "TransactionCanceledException",
                               f"Transaction cancelled, please refer cancellation reasons for "
                               f"specific reasons [{codes}]", CancellationReasons=reasons)
        for kind, body_params, ident, new in planned:
            if kind != "ConditionCheck":
                self._store(body_params["TableName"], ident, new)
        if token is not None:
            self.tokens[token] = body
        return {}


def _normal_json(value: Any) -> Any:
    kind, inner = _normal(value)
    return [kind, str(inner)]


_COMMON = {"TableName", "ConditionExpression", "ExpressionAttributeNames",
           "ExpressionAttributeValues", "ReturnConsumedCapacity"}
_KNOWN_PARAMS: dict[str, set[str]] = {
    "GetItem": {"TableName", "Key", "ConsistentRead", "ReturnConsumedCapacity"},
    "PutItem": _COMMON | {"Item", "ReturnValuesOnConditionCheckFailure", "ReturnValues"},
    "UpdateItem": _COMMON | {"Key", "UpdateExpression", "ReturnValues",
                             "ReturnValuesOnConditionCheckFailure"},
    "DeleteItem": _COMMON | {"Key", "ReturnValuesOnConditionCheckFailure", "ReturnValues"},
    "TransactWriteItems": {"TransactItems", "ClientRequestToken", "ReturnConsumedCapacity"},
    "TransactPut": _COMMON - {"ReturnConsumedCapacity"} | {"Item",
                                                           "ReturnValuesOnConditionCheckFailure"},
    "TransactUpdate": _COMMON - {"ReturnConsumedCapacity"} | {
        "Key", "UpdateExpression", "ReturnValuesOnConditionCheckFailure"},
    "TransactDelete": _COMMON - {"ReturnConsumedCapacity"} | {
        "Key", "ReturnValuesOnConditionCheckFailure"},
    "TransactConditionCheck": _COMMON - {"ReturnConsumedCapacity"} | {
        "Key", "ReturnValuesOnConditionCheckFailure"},
}
