"""What a stored item means: a lock as :class:`LockInfo`, a record as its model and its locks.

No I/O: the items come from the reads of :mod:`dynaunique.audit._reads` and single GetItems.
Which loaded model an item is a record of is :func:`dynaunique._lock.items.claim`'s rule.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from dynaunique._lock.items import claim, is_dynaunique_item, locks_of, plain_key
from dynaunique._lock.locks import (
    CREATED_ATTR,
    LOCK_SORT_KEY,
    MODEL_ATTR,
    OWNER_ATTR,
    SECRET_HASH_TAG,
    SECRET_ID_ATTR,
    VALUE_ATTR,
    LockRef,
    TypedKey,
    decode_value,
    split_lock_key,
    untyped,
)
from dynaunique._write import mrsc as _mrsc
from dynaunique.errors import ConfigurationError

from ._tables import _info, _Table


def _printable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate a raw write stored) escaped
    (``\\ud800``), so that a report can always be printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _label(key: Mapping[str, Any] | None) -> str:
    """``ACCT#1 / PROFILE``: a key's values, hash first (``-`` for no key)."""
    if key is None:
        return "-"
    return _printable(" / ".join(str(untyped(v)) for v in key.values()))


def _typed_scalar(value: Any) -> bool:
    """Whether ``value`` is a typed key value (``{"S": "ACCT#1"}``): what an owner map holds."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return False
    (kind, raw), = value.items()
    return kind in ("S", "N", "B") and isinstance(raw, (str, bytes))


def _json_value(value: Any) -> Any:
    """``value`` as JSON can hold it: tuples as lists, decimals as text, bytes as base64."""
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _shown(value: Any) -> str:
    """A value as a table shows it: a composite's parts joined by `` / ``."""
    if isinstance(value, tuple):
        return _printable(" / ".join(str(v) for v in value))
    return _printable(str(value))


@attrs.frozen
class RecordRef:
    """A record by its primary key (typed, as DynamoDB has it) and the model it was read as."""

    table: str
    key: TypedKey
    #: The model class name, or None when no loaded model claims the item.
    model: str | None = None

    @property
    def label(self) -> str:
        """``ACCT#1 / PROFILE``: the key values, hash first."""
        return _label(self.key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"table": self.table, "key": plain_key(self.key), "model": self.model}


@attrs.frozen
class Intent:
    """The marks the MRSC protocol leaves on a lock it wrote (docs/global-tables.md): the
    writer's token, whether it is still a *pending intent* (its record write may still come),
    and when the writer put it, by the writer's clock."""

    token: str
    pending: bool
    #: Epoch seconds (``mrsc_at``), the writer's clock.
    at: float

    @classmethod
    def of(cls, item: Mapping[str, Any] | None) -> Intent | None:
        """The marks of a stored lock item (None: no lock, or one the protocol did not write)."""
        if item is None or _mrsc.TOKEN_ATTR not in item:
            return None
        return cls(str(item[_mrsc.TOKEN_ATTR].get("S", "")), _mrsc.PENDING_ATTR in item,
                   float(item.get(_mrsc.AT_ATTR, {}).get("N", 0)))

    def within(self, grace: float, now: float) -> bool:
        """Whether it is a pending intent whose ``grace`` period has not ended at ``now``."""
        return self.pending and now < self.at + grace

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"token", "pending", "at"}``."""
        return {"token": self.token, "pending": self.pending, "at": self.at}


@attrs.frozen
class LockInfo:
    """One lock item as stored."""

    table: str
    #: The lock's hash key, ``UNIQ#EMAIL#ada@lovelace.io``.
    key: str
    #: The lock name (``EMAIL``) parsed from the key.
    constraint: str
    #: The key's encoded value part (a digest for hashed constraints).
    encoded: str
    #: The normalized value from the lock's ``value`` attribute; None for hashed constraints.
    value: Any
    hashed: bool
    #: The model that wrote the lock (its ``model`` attribute).
    model: str | None
    #: The owning record's typed primary key, or None when the lock has no owner.
    owner: TypedKey | None
    created: str | None
    #: The TTL copied from the record (epoch seconds), when its model has one.
    expires: int | None
    #: A hashed lock's fingerprint of the secret that made its key (None: written before locks
    #: carried one, or not hashed).
    secret_id: str | None = None
    #: The MRSC protocol's marks, on a lock it wrote (None otherwise).
    intent: Intent | None = None

    @property
    def owner_label(self) -> str:
        """The owner's key values, ``ACCT#1 / PROFILE``."""
        return _label(self.owner)

    @property
    def shown_value(self) -> str:
        """The value as a table shows it: ``hashed`` when the lock keeps only a digest."""
        return "hashed" if self.hashed else _shown(self.value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "table": self.table, "key": self.key, "constraint": self.constraint,
            "value": _json_value(self.value), "hashed": self.hashed, "model": self.model,
            "owner": _json_value(plain_key(self.owner) if self.owner is not None else None),
            "created": self.created, "expires": self.expires, "secret_id": self.secret_id,
            **({"intent": self.intent.to_dict()} if self.intent is not None else {}),
        }


@attrs.frozen
class _Record:
    """A record as read: exists or not, and which lock keys its current values require."""

    ref: RecordRef
    exists: bool
    #: The raw item (kept only for records read to confirm a finding; None after a scan).
    item: dict[str, Any] | None = attrs.field(eq=False, repr=False)
    #: lock key → LockRef; None when the locks cannot be computed (see ``problem``).
    requires: dict[str, LockRef] | None = attrs.field(eq=False)
    #: Why ``requires`` is None: None for an item no loaded model claims.
    problem: str | None = None
    #: The stored attributes the constraints' conditions read to decide ``requires`` (only for
    #: records read with their item): a repair's guard keeps them unchanged too.
    condition_reads: frozenset[str] = attrs.field(default=frozenset(), eq=False, repr=False)


def _absent(table: _Table, key: TypedKey) -> _Record:
    """A record that does not exist (or that no loaded model claims): it requires no lock."""
    return _Record(RecordRef(table.name, key, None), False, None, {})


def _interpret(table: _Table, key: TypedKey, item: dict[str, Any] | None,
               *, keep_item: bool) -> _Record:
    """The record ``item`` (read under ``key``) is, and the locks its values require."""
    if item is None:
        return _absent(table, key)
    kept = item if keep_item else None
    try:
        model, problem = claim(table.models, item)
    except ConfigurationError:
        raise
    except Exception as exc:  # e.g. a Meta.is_record hook that cannot read this item
        return _Record(RecordRef(table.name, key, None), True, kept, None,
                       _printable(f"no model can tell whether it is its record: "
                                  f"{type(exc).__name__}: {exc}"))
    if model is None and problem is None:
        # Not a record of any loaded model (Meta.is_record said so): nothing of it to check.
        return _absent(table, key)
    if model is None:
        return _Record(RecordRef(table.name, key, None), True, kept, None, problem)
    ref = RecordRef(table.name, key, model.__name__)
    reads: set[str] = set()
    try:
        locks = locks_of(_info(model), model.from_raw_data(dict(item)),
                         reads if keep_item else None)
    except ConfigurationError:
        raise  # e.g. no secret for a hashed constraint: nothing can be checked
    except Exception as exc:  # a value written around the library that it cannot read
        return _Record(ref, True, kept, None,
                       _printable(f"{model.__name__} cannot compute its locks: {exc}"))
    return _Record(ref, True, kept, {lock.key: lock for lock in locks.values()},
                   condition_reads=frozenset(reads))


def _value_in_key(encoded: str) -> Any:
    values = decode_value(encoded)
    if values is None:
        return None
    return values[0] if len(values) == 1 else values


def _lock_info(table: _Table, item: Mapping[str, Any]) -> LockInfo:
    """A stored lock item as :class:`LockInfo` (lenient: a malformed field reads as None)."""
    key = str(item[table.hash_attr].get("S", ""))
    parsed = split_lock_key(key)
    name, encoded = parsed if parsed is not None else ("", key)
    owner = item.get(OWNER_ATTR, {}).get("M")
    expires = None
    if table.ttl_attr is not None and table.ttl_attr in item:
        try:
            expires = int(Decimal(item[table.ttl_attr].get("N", "")))
        except (InvalidOperation, ValueError):
            expires = None
    return LockInfo(
        table=table.name, key=key, constraint=name, encoded=encoded,
        value=untyped(item[VALUE_ATTR]) if VALUE_ATTR in item else _value_in_key(encoded),
        # Only a hashed constraint's key hides its value (a lock missing its `value` attribute
        # still spells the value in its key).
        hashed=encoded.startswith(SECRET_HASH_TAG),
        model=item.get(MODEL_ATTR, {}).get("S"),
        # An owner map that is no key (a value not a string, number or binary) names no owner.
        owner=(dict(owner) if isinstance(owner, dict) and all(map(_typed_scalar, owner.values()))
               else None),
        created=item.get(CREATED_ATTR, {}).get("S"),
        expires=expires,
        secret_id=item.get(SECRET_ID_ATTR, {}).get("S"),
        intent=Intent.of(item),
    )


def _is_lock_item(table: _Table, item: Mapping[str, Any]) -> bool | None:
    """True for a lock, None for a dynaunique system item, False for anything else."""
    if not is_dynaunique_item(table.key_attributes, item):
        return False
    if split_lock_key(item[table.hash_attr]["S"]) is None:
        return None
    if table.range_attr is not None and item.get(table.range_attr) != {"S": LOCK_SORT_KEY}:
        return None
    return True
