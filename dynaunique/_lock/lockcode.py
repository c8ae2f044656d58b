"""The lock key scheme's shared words: its constants, the one spelling of numbers, typed lock
values, keys read back (decoded, split) and what a write does to a lock (:class:`LockChange`).
Pure, no I/O; :mod:`dynaunique._lock.locks` builds keys and lock writes with them (and re-exports
every name here, the names its callers know).
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from decimal import Context, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import attrs

from dynaunique._lock.kinds import Kind
from dynaunique.errors import InvalidValueError, format_value

if TYPE_CHECKING:
    from dynaunique._lock.locks import LockRef

#: Every item whose hash key starts with this belongs to dynaunique, never to a model.
RESERVED_PREFIX = "UNIQ#"
#: dynaunique's system items (ledger, leases) live under this prefix; no lock name starts with ~.
SYSTEM_PREFIX = "UNIQ#~"
#: The range key of a lock item, for tables that have a range key.
LOCK_SORT_KEY = "LOCK"
#: DynamoDB's limit on a partition key value, in UTF-8 bytes.
MAX_HASH_KEY_BYTES = 2048

#: The lock item's own attributes (besides the table's key attributes and the TTL attribute).
OWNER_ATTR = "owner"
MODEL_ATTR = "model"
CONSTRAINT_ATTR = "constraint"
VALUE_ATTR = "value"
#: A hashed lock's fingerprint of the secret that made its key (:func:`secret_id`).
SECRET_ID_ATTR = "secret_id"
CREATED_ATTR = "created"
LOCK_ATTRIBUTES = (OWNER_ATTR, MODEL_ATTR, CONSTRAINT_ATTR, VALUE_ATTR, SECRET_ID_ATTR,
                   CREATED_ATTR)

# DynamoDB keeps 38 significant digits and exponents from -130 to +125; the default decimal
# context (28 digits) would round distinct numbers onto one lock.
_EXACT = Context(prec=200, Emax=999_999, Emin=-999_999)
_LOCK_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
LENGTH_HASH_TAG = "\\h"
SECRET_HASH_TAG = "\\k"
# What a secret's fingerprint is the HMAC of. It starts with a backslash and a letter no
# encoding uses as a tag (``\\s``), so it is no encoded value: a fingerprint never equals (a
# prefix of) the digest in any lock key.
_SECRET_ID_MESSAGE = b"\\sdynaunique-secret-id"
#: Bytes of the HMAC a fingerprint keeps (written as twice as many hex digits).
SECRET_ID_BYTES = 8


def validate_lock_name(name: str) -> str:
    """Return ``name`` if it can be a lock name, else raise ``ValueError`` saying why."""
    if not isinstance(name, str) or not _LOCK_NAME.match(name):
        raise ValueError(
            f"lock name {name!r} is not allowed: use 1-200 characters among letters, digits, "
            "'_', '.' and '-' (a '#' would let values reach another lock's namespace)"
        )
    return name


def canonical_number(value: Any, *, hashed: bool = False) -> str:
    """The one decimal spelling of a number: ``1``, ``1.0`` and ``Decimal('1.00')`` → ``'1'``.

    ``hashed``: the value is a hashed constraint's, which an error must not show.
    """
    if isinstance(value, bool):
        raise InvalidValueError("a boolean is not a number here")
    shown = format_value(value, hashed=hashed)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(f"{shown} cannot be stored in DynamoDB")
        number = Decimal(repr(value))
    else:
        try:
            number = Decimal(value)
        except (InvalidOperation, TypeError, ValueError) as exc:
            raise InvalidValueError(f"{shown} is not a number") from exc
    if not number.is_finite():
        raise InvalidValueError(f"{shown} cannot be stored in DynamoDB")
    if number == 0:
        return "0"
    return format(number.normalize(_EXACT), "f")


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (holds no lone surrogate), as DynamoDB requires
    of every string. Costs one ``isascii`` for ASCII text."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def decode_value(encoded: str) -> tuple[Any, ...] | None:
    """The inverse of :func:`encode_value`: the values a lock key's value part encodes.

    None when the key keeps a digest instead (a ``hashed`` constraint, or a value too long for a
    key), or when it is not an encoding this module makes (a lock written around the library).
    Numbers come back as ``int`` when integral, else ``Decimal``.
    """
    if encoded.startswith((LENGTH_HASH_TAG, SECRET_HASH_TAG)):
        return None
    parts: list[tuple[str | None, str]] = []
    current: list[str] = []
    tag: str | None = None
    i = 0
    while i < len(encoded):
        char = encoded[i]
        if char == "\\":
            following = encoded[i + 1:i + 2]
            if following in ("\\", "#"):
                current.append(following)
            elif following in ("n", "b", "t", "f") and not current and tag is None:
                tag = following
            else:
                return None
            i += 2
            continue
        if char == "#":
            parts.append((tag, "".join(current)))
            current, tag = [], None
        else:
            current.append(char)
        i += 1
    parts.append((tag, "".join(current)))
    try:
        return tuple(_decoded(t, text) for t, text in parts)
    except (ValueError, ArithmeticError):
        return None


def _decoded(tag: str | None, text: str) -> Any:
    if tag is None:
        return text
    if tag in ("t", "f"):
        if text:
            raise ValueError("a boolean carries nothing after its tag")
        return tag == "t"
    if tag == "b":
        return base64.b64decode(text.encode("ascii"), validate=True)
    number = Decimal(text)
    if not number.is_finite():
        raise ValueError("not a finite number")
    return int(number) if number == number.to_integral_value() else number


def split_lock_key(key: str) -> tuple[str, str] | None:
    """``UNIQ#EMAIL#ada@x.io`` → ``("EMAIL", "ada@x.io")``; ``None`` for a non-lock key."""
    if not key.startswith(RESERVED_PREFIX) or key.startswith(SYSTEM_PREFIX):
        return None
    rest = key[len(RESERVED_PREFIX):]
    name, sep, encoded = rest.partition("#")
    if not sep:
        return None
    return name, encoded


def is_reserved_key(value: Any) -> bool:
    """True when a record's hash key value would fall in dynaunique's reserved namespace."""
    return isinstance(value, str) and value.startswith(RESERVED_PREFIX)


def typed(value: Any) -> dict[str, Any]:
    """A python value as a DynamoDB attribute value (the lock's ``value`` attribute)."""
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, (int, float, Decimal)):
        return {"N": canonical_number(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"B": bytes(value)}
    if isinstance(value, tuple):
        return {"L": [typed(v) for v in value]}
    raise InvalidValueError(f"cannot store a {type(value).__name__} in a lock")


def untyped(value: Mapping[str, Any]) -> Any:
    """The inverse of :func:`typed` (for display and audit)."""
    (kind, raw), = value.items()
    if kind == "S":
        return raw
    if kind == "BOOL":
        return bool(raw)
    if kind == "N":
        number = Decimal(raw)
        return int(number) if number == number.to_integral_value() else number
    if kind == "B":
        return raw
    if kind == "L":
        return tuple(untyped(v) for v in raw)
    if kind == "M":
        return {k: untyped(v) for k, v in raw.items()}
    if kind == "NULL":
        return None
    return raw


class ChangeKind(Kind):
    """What a write does to one constraint's lock."""

    ADDED = "added"
    REMOVED = "removed"
    MOVED = "moved"
    UNCHANGED = "unchanged"


@attrs.frozen
class LockChange:
    """The history of one constraint's lock across a write: old and new (either may be None)."""

    constraint: str
    old: LockRef | None
    new: LockRef | None

    @property
    def kind(self) -> ChangeKind:
        """Added, removed, moved (a new key) or unchanged."""
        if self.old is None:
            return ChangeKind.ADDED if self.new is not None else ChangeKind.UNCHANGED
        if self.new is None:
            return ChangeKind.REMOVED
        return ChangeKind.UNCHANGED if self.old.key == self.new.key else ChangeKind.MOVED
