"""DynamoDB's spelling of numbers, which the local server applies to what it is sent.

DynamoDB stores a number without its insignificant zeros: ``{"N": "1.0"}`` is stored, returned
and keyed as ``{"N": "1"}``, ``"1.50"`` as ``"1.5"``, ``"1E+2"`` as ``"100"``, ``"-0"`` as
``"0"``. moto keeps the text it was sent (so ``"1"`` and ``"1.0"`` would be two keys), and
PynamoDB sends a float as ``"1.0"``: the local server canonicalizes every number (``N``, and
members of ``NS``, inside maps and lists too) in the items, keys, start keys and expression
values of a request before moto sees it. A number that is not one (moto refuses it) or has more
than 38 significant digits (DynamoDB refuses it) is left as sent. Standard library only, and
deliberately not :func:`dynaunique._lock.locks.canonical_number`: the server must not share the
library's spelling, or a mistake in it would agree with itself.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal, InvalidOperation
from typing import Any

__all__ = ["NUMBER_OPERATIONS", "canonical_request", "spelled"]

#: The operations whose requests carry typed values.
NUMBER_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "GetItem",
                               "TransactWriteItems", "TransactGetItems", "BatchWriteItem",
                               "BatchGetItem", "Query", "Scan"})
_FIELDS = ("Item", "Key", "ExpressionAttributeValues", "ExclusiveStartKey")
_WIDE = Context(prec=200, Emax=999_999, Emin=-999_999)
# A body without a number in it is not parsed: `"N":"` or `"NS":[` (JSON, any spacing).
_HAS_NUMBER = re.compile(rb'"NS?"\s*:\s*[\["]')


def might_hold_numbers(body: bytes) -> bool:
    return _HAS_NUMBER.search(body) is not None


def spelled(text: str) -> str:
    """``text`` (a number) as DynamoDB stores it; anything else unchanged."""
    try:
        number = Decimal(text)
    except (InvalidOperation, TypeError, ValueError):
        return text
    if not number.is_finite():
        return text
    if number == 0:
        return "0"
    normal = number.normalize(_WIDE)
    return text if len(normal.as_tuple().digits) > 38 else format(normal, "f")


def _value(value: Any) -> Any:
    if not isinstance(value, dict) or len(value) != 1:
        return value
    (kind, inner), = value.items()
    if kind == "N" and isinstance(inner, str):
        return {"N": spelled(inner)}
    if kind == "NS" and isinstance(inner, list):
        return {"NS": [spelled(n) if isinstance(n, str) else n for n in inner]}
    if kind == "M" and isinstance(inner, dict):
        return {"M": {k: _value(v) for k, v in inner.items()}}
    if kind == "L" and isinstance(inner, list):
        return {"L": [_value(v) for v in inner]}
    return value


def _attributes(values: Any) -> Any:
    return {k: _value(v) for k, v in values.items()} if isinstance(values, dict) else values


def _body(body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    out = dict(body)
    for field in _FIELDS:
        if field in out:
            out[field] = _attributes(out[field])
    if isinstance(out.get("Keys"), list):
        out["Keys"] = [_attributes(key) for key in out["Keys"]]
    return out


def canonical_request(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with every number of its typed values spelled as DynamoDB stores it."""
    out: dict[str, Any] = dict(_body(request))
    if isinstance(out.get("TransactItems"), list):
        out["TransactItems"] = [{kind: _body(body) for kind, body in entry.items()}
                                if isinstance(entry, dict) else entry
                                for entry in out["TransactItems"]]
    items = out.get("RequestItems")
    if isinstance(items, dict):
        out["RequestItems"] = {
            table: ([{kind: _body(body) for kind, body in write.items()}
                     if isinstance(write, dict) else write for write in requests]
                    if isinstance(requests, list) else _body(requests))
            for table, requests in items.items()}
    return out
