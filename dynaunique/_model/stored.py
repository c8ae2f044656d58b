"""Values as DynamoDB will store them: an object's item, or one field's value, checked first.

Locks derive from what is stored, never from the python value, and a value DynamoDB would
refuse (``True`` or ``"12abc"`` in a number, an ``int`` in a string, NaN, a string that is not
valid UTF-8 — a lone surrogate, anywhere in the item) is an :class:`InvalidValueError` naming
the field before anything is sent; the message shows the value through
:func:`~dynaunique.errors.format_value`, so a hashed constraint's value never appears. A
``str`` given to a binary attribute is stored as its UTF-8 bytes (as the wire would carry it),
so its lock is those bytes'.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pynamodb.exceptions import AttributeNullError

from dynaunique._locks import is_utf8
from dynaunique.errors import InvalidValueError, format_value

_NOT_UTF8 = "it is not valid UTF-8 (it holds a lone surrogate)"


def stored_problem(raw: Mapping[str, Any]) -> str | None:
    """Why DynamoDB would refuse this serialized value (None: it would not); ``"binary text"``
    for a ``str`` in a binary value, which the wire carries as its UTF-8 bytes. The reason
    never quotes the value (the caller shows it, or hides a hashed one)."""
    if "S" in raw:
        text = raw["S"]
        if not isinstance(text, str):
            return f"a string must be a str, not {type(text).__name__}"
        return None if text.isascii() or is_utf8(text) else _NOT_UTF8
    if "N" in raw:
        number = raw["N"]
        try:
            finite = isinstance(number, str) and Decimal(number).is_finite()
        except ArithmeticError:
            finite = False
        return None if finite else "it is not a finite number"
    if "B" in raw:
        value = raw["B"]
        if isinstance(value, str):
            return "binary text" if is_utf8(value) else _NOT_UTF8
        return None if isinstance(value, (bytes, bytearray)) else (
            f"binary must be bytes, not {type(value).__name__}")
    if "BOOL" in raw:
        return None if isinstance(raw["BOOL"], bool) else (
            f"a boolean must be a bool, not {type(raw['BOOL']).__name__}")
    return None if _all_utf8(raw) else _NOT_UTF8


def _all_utf8(raw: Mapping[str, Any]) -> bool:
    """Whether every string of a serialized value — inside sets, lists and maps too, map keys
    included — is valid UTF-8: DynamoDB refuses the whole item otherwise. One pass, no
    recursion; an ASCII string costs one ``isascii``."""
    pending = [raw]
    while pending:
        for kind, content in pending.pop().items():
            if kind == "S":
                if isinstance(content, str) and not (content.isascii() or is_utf8(content)):
                    return False
            elif kind == "L":
                pending.extend(e for e in content if isinstance(e, Mapping))
            elif kind == "M":
                for name, element in content.items():
                    if isinstance(name, str) and not (name.isascii() or is_utf8(name)):
                        return False
                    if isinstance(element, Mapping):
                        pending.append(element)
            elif kind == "SS" and not all(
                    t.isascii() or is_utf8(t) for t in content if isinstance(t, str)):
                return False
    return True


def _hashed(model: Any, field: str) -> bool:
    """Whether ``field`` of ``model`` is (part of) a hashed constraint: no message shows it."""
    info = getattr(model, "_du_info", None)
    return info is not None and field in info.hashed_fields


def _refusal(model: Any, field: str, value: Any, attribute: Any,
             problem: str) -> InvalidValueError:
    """The error for a value of ``model.field`` that cannot be stored: one message, the value
    shown by :func:`~dynaunique.errors.format_value` (a hashed constraint's: never)."""
    return InvalidValueError(
        f"{model.__name__}.{field} = {format_value(value, hashed=_hashed(model, field))} "
        f"cannot be stored as a {type(attribute).__name__}: {problem}"
    )


def _serialize_problem(model: Any, field: str, inner: Exception) -> str:
    """What the attribute said when it refused a value; only the error's type for a hashed
    field (the attribute's message may quote the value)."""
    return type(inner).__name__ if _hashed(model, field) else str(inner)


def serialize_checked(obj: Any) -> dict[str, Any]:
    """``obj`` (a model instance) as the item DynamoDB will store, every value checked.

    :raises InvalidValueError: a value its attribute cannot serialize, or serializes to
        something DynamoDB would refuse.
    """
    model = type(obj)
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
                error = _refusal(model, field, value, attribute,
                                 _serialize_problem(model, field, inner))
                # A hashed value's refusal is not chained to PynamoDB's, which may quote it.
                raise error from (None if _hashed(model, field) else exc)
        raise
    for field, attribute in obj.get_attributes().items():
        raw = item.get(attribute.attr_name)
        if raw is not None:
            problem = stored_problem(raw)
            if problem == "binary text":
                raw["B"] = raw["B"].encode("utf-8")
            elif problem is not None:
                raise _refusal(model, field, getattr(obj, field, None), attribute, problem)
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
        error = _refusal(model, field, value, attribute, _serialize_problem(model, field, exc))
        raise error from (None if _hashed(model, field) else exc)
    problem = stored_problem({attribute.attr_type: serialized})
    if problem == "binary text":
        serialized = serialized.encode("utf-8")
    elif problem is not None:
        raise _refusal(model, field, value, attribute, problem)
    return attribute.deserialize(serialized)
