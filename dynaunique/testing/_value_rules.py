"""DynamoDB's rules on the attribute values of a request, which moto does not enforce.

Each rule is one function that raises :class:`Refusal` with DynamoDB's own error type and
message (as recorded against DynamoDB by the public conformance suite, see
``conformance/emulator.py``), and is tested on its own in ``tests/unit/test_local_server_rules.py``:

- a number with more than 38 significant digits, or a magnitude of ``1E+126`` or more or below
  ``1E-130``, anywhere in an item, a key or an expression value;
- an empty string, number or binary set, duplicates in a set, and ``{"NULL": false}``, anywhere in
  an item (nested in maps and lists too).

Standard library only; the local server's middleware (:mod:`dynaunique.testing._server_rules`)
runs them before moto sees the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Context, Decimal, InvalidOperation
from typing import Any

__all__ = ["Refusal", "check_item_values", "check_numbers", "validation"]

_WIDE = Context(prec=200, Emax=999_999, Emin=-999_999)
_TOO_LARGE = Decimal("1E+126")
_SMALLEST = Decimal("1E-130")
_SET_NAMES = {"SS": "string", "NS": "number", "BS": "binary"}  # as DynamoDB words them
_INVALID = "One or more parameter values were invalid: "


class Refusal(Exception):
    """A request DynamoDB would refuse; the server answers HTTP 400 with this code and message
    (and ``extra`` fields in the JSON body, e.g. ``CancellationReasons``)."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


def validation(message: str) -> Refusal:
    """A ``ValidationException`` with ``message``."""
    return Refusal("ValidationException", message)


def _values(value: Any) -> Iterator[tuple[str, Any]]:
    """Every typed value in ``value`` (a typed value), itself first, then nested ones."""
    if not isinstance(value, dict) or len(value) != 1:
        return
    (kind, inner), = value.items()
    yield kind, inner
    if kind == "M" and isinstance(inner, dict):
        for member in inner.values():
            yield from _values(member)
    elif kind == "L" and isinstance(inner, list):
        for member in inner:
            yield from _values(member)


def _attributes(attributes: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(attributes, dict):
        for value in attributes.values():
            yield from _values(value)


def check_number(text: str) -> None:
    """Refuse a number DynamoDB cannot store: 39 significant digits or more, or out of range."""
    try:
        number = Decimal(text)
    except (InvalidOperation, TypeError, ValueError):
        return  # not a number at all: moto refuses it its own way
    if not number.is_finite() or number == 0:
        return
    normal = number.normalize(_WIDE)
    if len(normal.as_tuple().digits) > 38:
        raise validation("Attempting to store more than 38 significant digits in a Number")
    if normal.copy_abs() >= _TOO_LARGE:
        raise validation("Number overflow. Attempting to store a number with magnitude larger "
                         "than supported range")
    if normal.copy_abs() < _SMALLEST:
        raise validation("Number underflow. Attempting to store a number with magnitude smaller "
                         "than supported range")


def check_numbers(attributes: Any) -> None:
    """:func:`check_number` on every number (``N`` and ``NS`` members) of ``attributes``."""
    for kind, inner in _attributes(attributes):
        if kind == "N" and isinstance(inner, str):
            check_number(inner)
        elif kind == "NS" and isinstance(inner, list):
            for member in inner:
                if isinstance(member, str):
                    check_number(member)


def _set_key(kind: str, member: Any) -> Any:
    if kind == "NS":
        try:
            return Decimal(member).normalize(_WIDE)
        except (InvalidOperation, TypeError, ValueError):
            return member
    return member


def check_item_values(item: Any) -> None:
    """Refuse an empty set, a set holding duplicates, or ``NULL`` that is not ``true``, anywhere
    in ``item`` (an item's attributes), as DynamoDB does for an item it is asked to store."""
    for kind, inner in _attributes(item):
        if kind in _SET_NAMES and isinstance(inner, list):
            if not inner and kind == "BS":
                raise validation(f"{_INVALID}Binary sets should not be empty")
            if not inner:
                raise validation(f"{_INVALID}An {_SET_NAMES[kind]} set  may not be empty")
            members = [_set_key(kind, member) for member in inner]
            if len(set(map(str, members))) != len(members):
                raise validation(f"{_INVALID}Input collection [{', '.join(map(str, inner))}] "
                                 "contains duplicates.")
        elif kind == "NULL" and inner is not True:
            raise validation(f"{_INVALID}Null attribute value types must have the value of true")
