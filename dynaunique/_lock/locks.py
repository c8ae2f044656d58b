"""The lock key scheme: its constants, the one spelling of numbers, the injective encoding of a
value into a lock key and its decoding, lock items, a record's primary key and the locks its
stored values require (over the class's template, ``ModelInfo``), what a write does to a lock
(:class:`LockChange`). Pure, no I/O: the writes that put and delete locks are
:mod:`dynaunique._write.writes`'.

A lock's hash key is ``UNIQ#<LOCK_NAME>#<encoded value>``. The encoding is injective:

* a string is kept as it is, with ``\\`` written ``\\\\`` and ``#`` written ``\\#``, so plain
  short strings stay readable (``UNIQ#EMAIL#ada@lovelace.io``);
* every other type is tagged with a backslash and a letter, which no encoded string can begin
  with: ``\\n`` a number in canonical decimal (``1 == 1.0 == 1.00`` → ``\\n1``), ``\\b`` binary
  (base64), ``\\t``/``\\f`` booleans;
* the fields of a composite value are joined with a bare ``#``, which no component contains;
* a key longer than DynamoDB's 2048-byte limit keeps ``\\h`` + SHA-256 of the encoded value, and
  a ``hashed`` constraint keeps ``\\k`` + HMAC-SHA256 under the lock secret. No component starts
  with ``\\h`` or ``\\k``, so a hash can never equal a plain value.

Lock names are ``[A-Za-z0-9_.-]+`` (no ``#``), so a value can never reach another lock name's
namespace. ``UNIQ#~`` is reserved for dynaunique's own system items (the migrations ledger).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Context, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import attrs

from dynaunique._lock.kinds import Kind
from dynaunique.errors import InvalidValueError, format_value

if TYPE_CHECKING:
    from dynaunique._lock.items import BoundConstraint, ModelInfo

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
#: On a multi-Region strong consistency table, the protocol's marks (``_write.mrsc``): the token
#: of the operation that put the lock, its pending intent, and when it was put.
MRSC_TOKEN_ATTR = "mrsc_token"
MRSC_PENDING_ATTR = "mrsc_pending"
MRSC_AT_ATTR = "mrsc_at"
LOCK_ATTRIBUTES = (OWNER_ATTR, MODEL_ATTR, CONSTRAINT_ATTR, VALUE_ATTR, SECRET_ID_ATTR,
                   CREATED_ATTR, MRSC_TOKEN_ATTR, MRSC_PENDING_ATTR, MRSC_AT_ATTR)

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


# --- lock names, numbers, strings ----------------------------------------------------------------


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


def is_reserved_key(value: Any) -> bool:
    """True when a record's hash key value would fall in dynaunique's reserved namespace."""
    return isinstance(value, str) and value.startswith(RESERVED_PREFIX)


# --- a value into a key --------------------------------------------------------------------------


Typed = dict[str, Any]
#: A record's primary key as DynamoDB values: ``{"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}``.
TypedKey = dict[str, Any]


def _escape(text: str, hashed: bool) -> str:
    if not (text.isascii() or is_utf8(text)):
        raise InvalidValueError(f"{format_value(text, hashed=hashed)} is not valid UTF-8 (it "
                                "holds a lone surrogate); DynamoDB cannot store it")
    return text.replace("\\", "\\\\").replace("#", "\\#")


def encode_component(value: Any, *, hashed: bool = False) -> str:
    """Encode one (already normalized) value; see the module docstring for the scheme.

    ``hashed``: the value is a hashed constraint's, which an error must not show.
    """
    if isinstance(value, str):
        return _escape(value, hashed)
    if isinstance(value, bool):
        return "\\t" if value else "\\f"
    if isinstance(value, (int, float, Decimal)):
        return "\\n" + canonical_number(value, hashed=hashed)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\b" + base64.b64encode(bytes(value)).decode("ascii")
    raise InvalidValueError(
        f"cannot take a unique lock on a {type(value).__name__} "
        f"({format_value(value, hashed=hashed)}): use strings, numbers, binary or booleans"
    )


def encode_value(values: Sequence[Any], *, hashed: bool = False) -> str:
    """Encode a constraint's (normalized) field values, one per field, joined by ``#``."""
    if not values:
        raise ValueError("a lock needs at least one value")
    return "#".join(encode_component(v, hashed=hashed) for v in values)


def lock_key(name: str, values: Sequence[Any], *, secret: bytes | None = None) -> str:
    """The hash key of the lock that protects ``values`` under lock name ``name``.

    With ``secret`` the key holds HMAC-SHA256 of the encoded value (a ``hashed`` constraint);
    otherwise the encoded value itself, or its SHA-256 when the key would exceed 2048 bytes.
    """
    return _keyed(lock_prefix(name), encode_value(values, hashed=secret is not None), secret)


def lock_prefix(name: str) -> str:
    """What every key of lock name ``name`` starts with: ``UNIQ#<name>#``."""
    return f"{RESERVED_PREFIX}{name}#"


def _keyed(prefix: str, encoded: str, secret: bytes | None) -> str:
    # The key of an encoded value: its HMAC for a hashed constraint, its SHA-256 when too long.
    if secret is not None:
        digest = hmac.new(secret, encoded.encode("utf-8"), hashlib.sha256).hexdigest()
        return prefix + SECRET_HASH_TAG + digest
    key = prefix + encoded
    if len(key) > MAX_HASH_KEY_BYTES // 4 and len(key.encode("utf-8")) > MAX_HASH_KEY_BYTES:
        return prefix + LENGTH_HASH_TAG + hashlib.sha256(encoded.encode("utf-8")).hexdigest()
    return key


def secret_id(secret: bytes) -> str:
    """The fingerprint of a lock secret that hashed locks carry: 16 hex digits.

    The first 8 bytes of HMAC-SHA256 keyed with the secret over a fixed message no encoded value
    can be. It names the secret without revealing it: telling two secrets apart takes the
    secret, and checking a guess costs what checking it against any hashed lock key costs.
    """
    return hmac.new(secret, _SECRET_ID_MESSAGE, hashlib.sha256).digest()[:SECRET_ID_BYTES].hex()


# --- a key read back -----------------------------------------------------------------------------


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


# --- lock items ----------------------------------------------------------------------------------


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


def lock_item(
    *,
    key_attributes: tuple[str, str | None],
    lock_key_value: str,
    owner: Mapping[str, Mapping[str, Any]],
    model: str,
    constraint: str,
    value: Any,
    hashed: bool,
    created: str,
    ttl: tuple[str, int] | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    """The full DynamoDB item of one lock.

    ``key_attributes`` are the table's hash and range key attribute names; ``owner`` the owning
    record's typed primary key; ``value`` the normalized value (a tuple for composites), left out
    when ``hashed`` so no attribute carries the plaintext; ``ttl`` the record's TTL attribute name
    and epoch seconds, copied so the lock expires with the record; ``secret`` the fingerprint
    (:func:`secret_id`) of the secret a hashed lock's key was made with, in place of the value.
    """
    hash_attr, range_attr = key_attributes
    item: dict[str, Any] = {hash_attr: {"S": lock_key_value}}
    if range_attr is not None:
        item[range_attr] = {"S": LOCK_SORT_KEY}
    item[OWNER_ATTR] = {"M": {k: dict(v) for k, v in owner.items()}}
    item[MODEL_ATTR] = {"S": model}
    item[CONSTRAINT_ATTR] = {"S": constraint}
    if not hashed:
        item[VALUE_ATTR] = {"S": value} if type(value) is str else typed(value)
    elif secret is not None:
        item[SECRET_ID_ATTR] = {"S": secret}
    item[CREATED_ATTR] = {"S": created}
    if ttl is not None:
        item[ttl[0]] = {"N": str(int(ttl[1]))}
    return item


def lock_primary_key(key_attributes: tuple[str, str | None], lock_key_value: str) -> dict[str, Any]:
    """The typed primary key of a lock item."""
    hash_attr, range_attr = key_attributes
    key: dict[str, Any] = {hash_attr: {"S": lock_key_value}}
    if range_attr is not None:
        key[range_attr] = {"S": LOCK_SORT_KEY}
    return key


# --- a record's key and its locks -----------------------------------------------------------------


def record_key(info: ModelInfo, item: Mapping[str, Typed]) -> TypedKey:
    """The typed primary key of a serialized record, checked against the reserved prefix."""
    if info.hash_attr not in item:
        raise InvalidValueError(f"{info.name} has no value for its hash key {info.hash_field!r}")
    key = {info.hash_attr: item[info.hash_attr]}
    text = item[info.hash_attr].get("S")
    if isinstance(text, str) and text.startswith(RESERVED_PREFIX):   # is_reserved_key, inline
        raise InvalidValueError(
            f"{info.name}'s hash key {text!r} starts with 'UNIQ#', which is reserved for "
            "dynaunique's lock items"
        )
    if info.range_attr is not None:
        if info.range_attr not in item:
            raise InvalidValueError(
                f"{info.name} has no value for its range key {info.range_field!r}"
            )
        key[info.range_attr] = item[info.range_attr]
    return key


@attrs.frozen
class LockRef:
    """One lock a record holds (or would hold): its name, key and the value it protects."""

    constraint: str
    fields: tuple[str, ...]
    key: str
    #: The normalized value (a tuple for composite constraints) — shown in errors and locks
    #: through :attr:`shown` only, which hides a hashed constraint's.
    value: Any
    hashed: bool = False

    @property
    def shown(self) -> str:
        """The value as messages and events show it (``<hashed>`` for a hashed constraint)."""
        return format_value(self.value, hashed=self.hashed)

    def __repr__(self) -> str:
        return (f"LockRef(constraint={self.constraint!r}, fields={self.fields!r}, "
                f"key={self.key!r}, value={self.shown}, hashed={self.hashed!r})")


def lock_refs(info: ModelInfo, rows: Sequence[tuple[BoundConstraint, Sequence[Any]]]
              ) -> list[LockRef | None]:
    """The lock of each (constraint, its fields' python values as stored) row, None where a
    value is None — the one derivation of a lock from values (the constraint's condition is not
    evaluated here). Each value goes through its normalizer, its conversion, the encoding and
    the key, with the lock name's prefix and every rule read off the class's template."""
    refs: list[LockRef | None] = []
    for bound, values in rows:
        row = tuple(value if value is None or function is None else function(value)
                    for value, function in zip(values, bound.normalizers, strict=True))
        if None in row:
            refs.append(None)
            continue
        c = bound.constraint
        if not bound.plain:
            row = tuple(conv(v) for conv, v in zip(bound.to_lockable, row, strict=True))
        if c.hashed:
            key = lock_key(c.name, row, secret=info.secret())
        elif len(row) == 1 and type(row[0]) is str:
            key = _keyed(bound.prefix, _escape(row[0], False), None)
        else:
            key = _keyed(bound.prefix, encode_value(row), None)
        # The value as UniqueConstraint.display_value shows it: a scalar for one field.
        refs.append(LockRef(c.name, c.fields, key, row[0] if len(row) == 1 else row, c.hashed))
    return refs


def stored_value(attribute: Any, raw: Mapping[str, Any] | None) -> Any:
    """A field's python value as the item stores it (a missing attribute takes its default,
    as PynamoDB's loading does)."""
    if raw is None or "NULL" in raw:
        default = attribute.default
        return default() if callable(default) else default
    return attribute.deserialize(attribute.get_value(raw))


def stored_lock_refs(info: ModelInfo, item: Mapping[str, Typed]) -> dict[str, LockRef]:
    """The locks ``item`` (as stored) requires, by lock name, for a model whose constraints
    have no condition: each field read off the item (a string attribute's ``S`` as it is, any
    other through its attribute), then :func:`lock_refs`."""
    rows = [(bound, [raw["S"] if text and raw is not None and "S" in raw
                     else stored_value(attribute, raw)
                     for attribute, text, raw in zip(bound.attributes, bound.text,
                                                     map(item.get, bound.attr_names),
                                                     strict=True)])
            for bound in info.constraints]
    return {ref.constraint: ref for ref in lock_refs(info, rows) if ref is not None}


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


def diff_locks(old: Mapping[str, LockRef], new: Mapping[str, LockRef]) -> tuple[LockChange, ...]:
    """One LockChange per lock name present on either side, in a stable order."""
    names = sorted(set(old) | set(new))
    return tuple(LockChange(n, old.get(n), new.get(n)) for n in names)
