"""Sizes as DynamoDB counts them: an attribute value, an item, a transaction's items. Pure.

DynamoDB's documented rules ("Item sizes and formats" in its developer guide): an item's size is
the sum of its attribute names' UTF-8 bytes and its values' sizes; a string counts its UTF-8
bytes, a binary its raw bytes, a number 1 byte per two significant digits plus 1 (leading and
trailing zeroes trimmed), a boolean or a null 1 byte, a set the sum of its elements, and a list
or a map 3 bytes plus 1 byte per element plus the elements (a map's keys count as names).

One set of functions for both sides: the library's 4 MB guard (:mod:`dynaunique._write.render`) and
the local server's 400 KB and 4 MB limits (:mod:`dynaunique.testing._server_rules`). Values come as
botocore takes them (binary as bytes) or as the wire carries them (binary as base64 text).
Imports only the standard library.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

#: DynamoDB's limit on one item.
MAX_ITEM_BYTES = 400 * 1024
#: DynamoDB's limit on the items of one ``TransactWriteItems``.
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
#: DynamoDB's limit on the actions of one ``TransactWriteItems``.
MAX_TRANSACTION_ACTIONS = 100


def number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 (leading and trailing zeroes do not count)."""
    mantissa = text.strip().lstrip("+-").lower().split("e")[0].replace(".", "")
    digits = mantissa.strip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def binary_size(value: str | bytes | bytearray) -> int:
    """The raw bytes of a binary value: ``bytes`` as they are, base64 text decoded."""
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value.encode("utf-8"))


def attribute_value_size(value: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for one attribute value, e.g. ``{"S": "abc"}`` → 3."""
    (kind, content), = value.items()
    if kind == "S":
        return len(content.encode("utf-8", "surrogatepass"))
    if kind == "N":
        return number_size(content)
    if kind == "B":
        return binary_size(content)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(element.encode("utf-8", "surrogatepass")) for element in content)
    if kind == "NS":
        return sum(number_size(element) for element in content)
    if kind == "BS":
        return sum(binary_size(element) for element in content)
    if kind == "L":
        return 3 + sum(1 + attribute_value_size(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + item_size_entry(name, element) for name, element in content.items())
    raise ValueError(f"unknown attribute value type {kind!r}")


def item_size_entry(name: str, value: Mapping[str, Any]) -> int:
    """One attribute's share of an item's size: its name's UTF-8 bytes plus its value's size."""
    return len(name.encode("utf-8", "surrogatepass")) + attribute_value_size(value)


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size as DynamoDB counts it against the 400 KB limit."""
    return sum(item_size_entry(name, value) for name, value in item.items())


def transaction_size(actions: Iterable[Mapping[str, Mapping[str, Any]]]) -> int:
    """What one ``TransactWriteItems`` counts against its 4 MB: the sum of its items' sizes.

    A ``Put`` counts the item it writes; an ``Update``, ``Delete`` or ``ConditionCheck`` the key
    that names its item (DynamoDB documents the limit as "the aggregate size of the items" and
    says no more of the items it only names).
    """
    total = 0
    for action in actions:
        for kind, operation in action.items():
            total += item_size(operation.get("Item") or {} if kind == "Put"
                               else operation.get("Key") or {})
    return total
