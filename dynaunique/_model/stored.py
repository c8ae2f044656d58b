"""Values as DynamoDB will store them: an object's item, or one field's value, checked first.

Locks derive from what is stored, never from the python value, and a value DynamoDB would
refuse (``True`` or ``"12abc"`` in a number, an ``int`` in a string, NaN) is an
:class:`InvalidValueError` naming the field before anything is sent. A ``str`` given to a binary
attribute is stored as its UTF-8 bytes (as the wire would carry it), so its lock is those
bytes'.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pynamodb.exceptions import AttributeNullError

from dynaunique.errors import InvalidValueError


def stored_problem(raw: Mapping[str, Any]) -> str | None:
    """Why DynamoDB would refuse this serialized scalar (None: it would not); ``"binary text"``
    for a ``str`` in a binary value, which the wire carries as its UTF-8 bytes."""
    if "S" in raw:
        return None if isinstance(raw["S"], str) else f"a string must be a str, not {raw['S']!r}"
    if "N" in raw:
        number = raw["N"]
        try:
            finite = isinstance(number, str) and Decimal(number).is_finite()
        except ArithmeticError:
            finite = False
        return None if finite else f"{number!r} is not a finite number"
    if "B" in raw:
        value = raw["B"]
        if isinstance(value, str):
            return "binary text"
        return None if isinstance(value, (bytes, bytearray)) else f"{value!r} is not binary"
    if "BOOL" in raw:
        return None if isinstance(raw["BOOL"], bool) else f"{raw['BOOL']!r} is not a boolean"
    return None


def serialize_checked(obj: Any) -> dict[str, Any]:
    """``obj`` (a model instance) as the item DynamoDB will store, every value checked.

    :raises InvalidValueError: a value its attribute cannot serialize, or serializes to
        something DynamoDB would refuse.
    """
    try:
        item: dict[str, Any] = obj.serialize(null_check=True)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, AttributeNullError):
            raise
        for field, attribute in obj.get_attributes().items():
            value = getattr(obj, field, None)
            if value is None:
                continue
            try:
                attribute.serialize(value)
            except Exception as inner:
                raise InvalidValueError(
                    f"{type(obj).__name__}.{field} = {value!r} cannot be stored as a "
                    f"{type(attribute).__name__}: {inner}"
                ) from exc
        raise
    for field, attribute in obj.get_attributes().items():
        raw = item.get(attribute.attr_name)
        if raw is not None:
            problem = stored_problem(raw)
            if problem == "binary text":
                raw["B"] = raw["B"].encode("utf-8")
            elif problem is not None:
                raise InvalidValueError(
                    f"{type(obj).__name__}.{field} = {getattr(obj, field, None)!r} cannot "
                    f"be stored as a {type(attribute).__name__}: {problem}"
                )
    return item


def as_stored(model: Any, field: str, value: Any) -> Any:
    """``value`` of ``model.field`` as the attribute stores and loads it back (locks derive
    from that)."""
    if value is None:
        return None
    attribute = model.get_attributes()[field]
    try:
        serialized = attribute.serialize(value)
    except Exception as exc:
        raise InvalidValueError(f"{model.__name__}.{field}: {value!r} cannot be stored as a "
                                f"{type(attribute).__name__}: {exc}") from exc
    problem = stored_problem({attribute.attr_type: serialized})
    if problem == "binary text":
        serialized = serialized.encode("utf-8")
    elif problem is not None:
        raise InvalidValueError(f"{model.__name__}.{field}: {value!r} cannot be stored as a "
                                f"{type(attribute).__name__}: {problem}")
    return attribute.deserialize(serialized)
