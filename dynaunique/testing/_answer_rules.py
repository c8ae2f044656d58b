"""DynamoDB's answers where moto's differ in their words or miss a field, mended by the local
server after moto answered (:mod:`dynaunique.testing._server_rules`).

- moto prefixes ``1 validation error detected:`` to messages DynamoDB sends bare (an unused
  expression name or value, an empty update expression, an empty set), and answers a key that
  does not match the table's schema with ``Validation Exception``: the message is put back as
  DynamoDB words it (as recorded by the public conformance suite, ``conformance/emulator.py``);
- ``ReturnItemCollectionMetrics: SIZE`` on a table with a local secondary index gets
  ``ItemCollectionMetrics`` (the item collection's key and a size estimate range), which moto
  never returns.

Each is tested on its own in ``tests/unit/test_local_server_rules.py``. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["Describe", "amend", "reworded"]

#: A table's description (DescribeTable's ``Table``), ``None`` when it does not exist.
Describe = Callable[[str], "dict[str, Any] | None"]

_BARE = re.compile(r"^1 validation error detected: (?=Value provided in ExpressionAttribute"
                   r"|Invalid UpdateExpression: The expression can not be empty"
                   r"|One or more parameter values were invalid: An \w+ set  may not be empty)")
_EXACT = {"Validation Exception": "The provided key element does not match the schema"}
_COLLECTION_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
#: What DynamoDB reports for an item collection far below its 10 GB limit.
SIZE_ESTIMATE = [0.0, 1.0]


def reworded(message: str) -> str:
    """``message`` (moto's) as DynamoDB words it."""
    return _EXACT.get(message) or _BARE.sub("", message)


def _reword(body: bytes) -> bytes | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    for field in ("message", "Message"):
        message = answer.get(field)
        if isinstance(message, str) and reworded(message) != message:
            answer[field] = reworded(message)
            return json.dumps(answer).encode("utf-8")
    return None


def _collection_metrics(request: dict[str, Any], body: bytes, describe: Describe) -> bytes | None:
    table = describe(str(request.get("TableName")))
    if not table or not table.get("LocalSecondaryIndexes"):
        return None
    hash_key = next(e["AttributeName"] for e in table["KeySchema"] if e["KeyType"] == "HASH")
    value = (request.get("Item") or request.get("Key") or {}).get(hash_key)
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        return None
    if value is None or not isinstance(answer, dict) or "ItemCollectionMetrics" in answer:
        return None
    answer["ItemCollectionMetrics"] = {"ItemCollectionKey": {hash_key: value},
                                       "SizeEstimateRangeGB": SIZE_ESTIMATE}
    return json.dumps(answer).encode("utf-8")


def amend(operation: str, request: dict[str, Any], status: str, body: bytes,
          describe: Describe) -> bytes | None:
    """The body DynamoDB would answer in place of moto's ``body``; ``None`` to keep it."""
    if status.startswith("400"):
        return _reword(body)
    if (status.startswith("200") and operation in _COLLECTION_OPERATIONS
            and request.get("ReturnItemCollectionMetrics") == "SIZE"):
        return _collection_metrics(request, body, describe)
    return None
