"""The items of a dynaunique table — records and locks — and the one way to name each.

Everything that writes or reads items (the model's write path, the audit, the migrations) asks
this module: what a model looks like (:class:`ModelInfo`), a record's primary key
(:func:`~dynaunique._lock.locks.record_key`, :func:`key_of`), a lock's owner
(:func:`owner_key`), the locks a record
requires (:func:`locks_of`, :func:`lock_of`) and which model an item is a record of
(:func:`claim`). No I/O.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import attrs
from pynamodb.attributes import Attribute

from dynaunique._lock.locks import (
    MAX_HASH_KEY_BYTES,
    RESERVED_PREFIX,
    LockRef,
    TypedKey,
    lock_prefix,
    lock_refs,
    stored_lock_refs,
    stored_value,
    untyped,
)
from dynaunique.constraints import UniqueConstraint, _evaluate_condition
from dynaunique.errors import ConfigurationError
from dynaunique.normalizers import Normalizer

SECRET_ENV = "DYNAUNIQUE_LOCK_SECRET"


# --- what a model looks like to the planner ------------------------------------------------------


@attrs.frozen
class BoundConstraint:
    """A constraint bound to one model: the python field names mapped to stored attributes."""

    constraint: UniqueConstraint
    #: DynamoDB attribute names of ``constraint.fields``, in the same order.
    attr_names: tuple[str, ...]
    #: Converts a field's python value to the value that is encoded (datetimes → their string).
    to_lockable: tuple[Callable[[Any], Any], ...] = attrs.field(eq=False, repr=False)
    #: True when every field's value is encoded as it is (no conversion to apply).
    plain: bool = attrs.field(default=False, eq=False, repr=False)
    #: The class's attributes of ``constraint.fields`` (what reads a field from a stored item).
    attributes: tuple[Any, ...] = attrs.field(default=(), eq=False, repr=False)
    #: The normalizer of each field (None: the value as it is), looked up once.
    normalizers: tuple[Normalizer | None, ...] = attrs.field(init=False, eq=False, repr=False)
    #: Whether each field is stored as a string read as it is (its ``S``, no deserializing).
    text: tuple[bool, ...] = attrs.field(init=False, eq=False, repr=False)
    #: What every lock key of this constraint starts with.
    prefix: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        functions = tuple(self.constraint.normalizer_for(f) for f in self.constraint.fields)
        text = tuple(getattr(a, "attr_type", None) == "S"
                     and type(a).get_value is Attribute.get_value
                     and type(a).deserialize is Attribute.deserialize for a in self.attributes)
        for name, value in (("normalizers", functions), ("text", text),
                            ("prefix", lock_prefix(self.constraint.name))):
            object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        """The lock name."""
        return self.constraint.name


@attrs.frozen
class ModelInfo:
    """What the planner needs to know about a model class, computed once at class definition:
    the class's template — key layout, lock rules, the attributes a lock depends on — so a
    write reads these instead of recomputing them."""

    name: str
    table: str
    hash_attr: str
    range_attr: str | None
    hash_field: str
    range_field: str | None
    version_attr: str | None
    version_field: str | None
    ttl_attr: str | None
    ttl_field: str | None
    constraints: tuple[BoundConstraint, ...]
    #: ``Meta.lock_secret`` (str or bytes) or None to fall back to the environment.
    meta_secret: bytes | None = attrs.field(default=None, repr=False)
    #: DynamoDB types of the hash and range keys (``S``, ``N`` or ``B``).
    hash_type: str = "S"
    range_type: str | None = None
    #: The table's hash and range key attribute names.
    key_attributes: tuple[str, str | None] = attrs.field(init=False, eq=False, repr=False)
    #: Whether any constraint is conditional (its lock depends on arbitrary fields).
    has_conditions: bool = attrs.field(init=False, eq=False, repr=False)
    #: The fields of hashed constraints: no message, log or span may show their values.
    hashed_fields: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    #: The stored attributes a lock depends on: the constrained ones and the TTL.
    lock_relevant: frozenset[str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        relevant = {a for b in self.constraints for a in b.attr_names}
        relevant.update([self.ttl_attr] if self.ttl_attr is not None else [])
        hashed = frozenset(f for b in self.constraints if b.constraint.hashed
                           for f in b.constraint.fields)
        conditional = any(b.constraint.condition is not None for b in self.constraints)
        for name, value in (("key_attributes", (self.hash_attr, self.range_attr)),
                            ("has_conditions", conditional), ("hashed_fields", hashed),
                            ("lock_relevant", frozenset(relevant))):
            object.__setattr__(self, name, value)

    def typed_key(self, hash_value: Any, range_value: Any = None) -> TypedKey:
        """The typed primary key of serialized key values (as PynamoDB serializes them)."""
        key = {self.hash_attr: {self.hash_type: hash_value}}
        if self.range_attr is not None and range_value is not None:
            key[self.range_attr] = {self.range_type or "S": range_value}
        return key

    def secret(self) -> bytes:
        """The HMAC secret of hashed constraints: ``Meta.lock_secret``, else the environment."""
        if self.meta_secret is not None:
            return self.meta_secret
        env = os.environ.get(SECRET_ENV)
        if env:
            return env.encode("utf-8")
        raise ConfigurationError(
            f"{self.name} has a hashed unique constraint but no secret: set Meta.lock_secret on "
            f"the model or the environment variable {SECRET_ENV}"
        )


# --- locks ----------------------------------------------------------------------------------------


def lock_of(info: ModelInfo, bound: BoundConstraint, values: Sequence[Any]) -> LockRef | None:
    """The lock ``bound``'s constraint requires for these field values (None: a None is never
    locked). The values are the fields' python values as stored; the constraint's condition is
    not evaluated here (:func:`locks_of` does)."""
    return lock_refs(info, [(bound, values)])[0]


def locks_of(info: ModelInfo, instance: Any, reads: set[str] | None = None) -> dict[str, LockRef]:
    """The locks ``instance``'s current values require, by lock name (no lock for a None).

    With ``reads``, the stored names of the attributes that conditions read are added to it.
    """
    rows = [(bound, [getattr(instance, field) for field in bound.constraint.fields])
            for bound in info.constraints]
    held: dict[str, LockRef] = {}
    for (bound, _), lock in zip(rows, lock_refs(info, rows), strict=True):
        if lock is None:
            continue
        condition = bound.constraint.condition
        if condition is not None and not _evaluate_condition(condition, instance, reads):
            continue
        held[bound.constraint.name] = lock
    return held


def lock_inputs(model: Any, item: Mapping[str, Any]) -> Any:
    """What :func:`locks_of` needs of a stored (or about to be stored) item of ``model``: locks
    derive from what is stored, never from the python value. Without a condition (which may
    read any attribute) only the constrained fields are deserialized, not the whole record."""
    info = model._du_info
    if info.has_conditions:
        return model._du_build(item)
    values: dict[str, Any] = {}
    for bound in info.constraints:
        for field, attribute in zip(bound.constraint.fields, bound.attributes, strict=True):
            if field not in values:
                values[field] = stored_value(attribute, item.get(attribute.attr_name))
    return SimpleNamespace(**values)


def stored_locks(model: Any, item: Mapping[str, Any],
                 reads: set[str] | None = None) -> dict[str, LockRef]:
    """The locks ``item`` (as stored) requires of ``model``: :func:`locks_of` of its
    :func:`lock_inputs` (without a condition, :func:`~dynaunique._lock.locks.stored_lock_refs`)."""
    info = model._du_info
    if not info.has_conditions:
        return stored_lock_refs(info, item)
    return locks_of(info, lock_inputs(model, item), reads)


# --- record keys and owners ----------------------------------------------------------------------


def key_of(key_attributes: tuple[str, str | None], item: Mapping[str, Any]) -> TypedKey | None:
    """The typed primary key of any item of a table (None when a key attribute is missing)."""
    hash_attr, range_attr = key_attributes
    if hash_attr not in item:
        return None
    key = {hash_attr: item[hash_attr]}
    if range_attr is not None:
        if range_attr not in item:
            return None
        key[range_attr] = item[range_attr]
    return key


def owner_key(key_attributes: tuple[str, str | None], owner: Any,
              types: tuple[str, str | None] | None = None) -> TypedKey | None:
    """A lock's ``owner`` map as a primary key of its table (None when absent or malformed).

    Malformed: not a map of exactly the key attributes, or a key value DynamoDB could not read
    — not one non-empty string, number or binary (of ``types``, the hash and range key types
    such as ``ModelInfo.hash_type``, when given), or longer than a key may be.
    """
    if not isinstance(owner, Mapping):
        return None
    names = [name for name in key_attributes if name is not None]
    if set(owner) != set(names):
        return None
    kinds = types if types is not None else (None, None)
    key: TypedKey = {}
    for name, kind, limit in zip(key_attributes, kinds, _KEY_LIMITS, strict=True):
        if name is None:
            continue
        value = owner[name]
        if not isinstance(value, Mapping) or len(value) != 1:
            return None
        (found, raw), = value.items()
        if found not in ((kind,) if kind is not None else ("S", "N", "B")):
            return None
        size = (len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else
                len(raw) if isinstance(raw, (bytes, bytearray)) else -1)
        if not 0 < size <= limit:
            return None
        key[name] = value
    return key


#: DynamoDB's limits on a hash and a range key value, in bytes.
_KEY_LIMITS = (MAX_HASH_KEY_BYTES, 1024)


def key_id(key: Mapping[str, Any]) -> object:
    """A hashable, order-free identity of a typed key (two equal keys have equal ids): its
    names and typed values as tuples; a value that cannot be hashed (a ``bytearray``) makes it
    their ``repr`` instead."""
    ident = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in key.items()))
    try:
        hash(ident)
    except TypeError:
        return repr(sorted((k, sorted(v.items())) for k, v in key.items()))
    return ident


def plain_key(key: Mapping[str, Any] | None) -> dict[str, Any]:
    """A typed key as plain values: ``{"PK": "ACCT#1", "SK": "PROFILE"}``."""
    return {k: untyped(v) for k, v in (key or {}).items()}


# --- which model an item is a record of ----------------------------------------------------------


def is_dynaunique_item(key_attributes: tuple[str, str | None], item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is one of dynaunique's own (a lock or a system item), by its hash key."""
    hash_value = item.get(key_attributes[0], {}).get("S")
    return isinstance(hash_value, str) and hash_value.startswith(RESERVED_PREFIX)


def _fits(model: Any, item: Mapping[str, Any]) -> bool:
    """Whether ``item`` has every attribute ``model`` requires (non-nullable ones)."""
    for attribute in model.get_attributes().values():
        if not attribute.null and attribute.attr_name not in item:
            return False
    return True


def _hook(model: Any, item: Mapping[str, Any]) -> bool | None:
    """``Meta.is_record(raw_item)`` when the model defines it."""
    hook = getattr(model.Meta, "is_record", None)
    return None if hook is None else bool(hook(dict(item)))


def claim(models: Sequence[Any], item: Mapping[str, Any], *,  # noqa: C901  # the audit's rule, one ordered list of tests (docstring)
          prefer: Any = None) -> tuple[Any | None, str | None]:
    """The model of ``models`` (the models of one table) that ``item`` is a record of.

    Returns ``(model, None)``, ``(None, None)`` when no model claims it (not a record: a
    dynaunique item, a key attribute missing, or every ``Meta.is_record`` hook said no), or
    ``(None, problem)`` when several models fit it equally and would require different locks.
    The rule, in order: a ``Meta.is_record(raw)`` hook that says yes wins; hooks that say no
    rule their model out; among the rest, the stored discriminator of a polymorphic model
    names the most derived class; else the model whose non-null attributes are all present and
    that knows most of the item's attributes; a tie between models that require the same locks
    is no problem (the first is taken, or ``prefer`` when it is one of them: a writer whose
    model reads the item exactly as another does keeps it as its own).
    """
    if not models:
        return None, None
    key_attributes = (models[0]._du_info.hash_attr, models[0]._du_info.range_attr)
    if is_dynaunique_item(key_attributes, item) or key_of(key_attributes, item) is None:
        return None, None
    verdicts = {model: _hook(model, item) for model in models}
    claimed = [m for m, v in verdicts.items() if v is True]
    if len(claimed) == 1:
        return claimed[0], None
    candidates = claimed or [m for m, v in verdicts.items() if v is None]
    if not candidates:
        return None, None
    if len(candidates) == 1:
        return candidates[0], None
    for model in candidates:
        try:
            stored = model._get_discriminator_class(dict(item))
        except Exception:  # an unknown discriminator value: not this model
            stored = None
        if stored is not None:
            owners = [m for m in candidates if issubclass(stored, m)]
            if owners:
                return max(owners, key=lambda m: len(m.__mro__)), None

    def rank(model: Any) -> tuple[bool, int]:
        names = {a.attr_name for a in model.get_attributes().values()}
        return _fits(model, item), sum(1 for name in item if name in names)

    best = max(rank(m) for m in candidates)
    tied = [m for m in candidates if rank(m) == best]
    if len(tied) == 1:
        return tied[0], None
    keys = set()
    for model in tied:
        try:
            keys.add(frozenset(r.key for r in locks_of(model._du_info,
                                                       model.from_raw_data(dict(item))).values()))
        except ConfigurationError:
            raise
        except Exception:  # unreadable as this model: not the same locks
            keys.add(frozenset({model.__name__}))
    if len(keys) == 1:
        return (prefer if prefer in tied else tied[0]), None
    return None, ("several models fit it equally and require different locks: "
                  + ", ".join(m.__name__ for m in tied))
