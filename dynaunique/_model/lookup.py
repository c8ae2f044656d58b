"""Find the record that holds a unique value: read its lock, then the owner the lock names.

Both reads are strongly consistent, and the record read second is returned only if it holds the
value now. When it does not, the lock is read again: a lock that changed meanwhile (the value
handed to another record between the two reads, by a swap in ``atomic()``) is followed, so the
lookup never says "nobody" while the value was held at every moment; a lock still as first read
names a record without the value: an orphan. The lock's key is the one a save builds
(:func:`dynaunique._lock.items.lock_of`), from the value as its attribute stores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from dynaunique._lock.items import (
    BoundConstraint,
    ModelInfo,
    lock_of,
    locks_of,
    owner_key,
    plain_key,
)
from dynaunique._lock.locks import MODEL_ATTR, OWNER_ATTR, lock_primary_key
from dynaunique._model.instance import InstanceMixin, read_steps
from dynaunique._transport.clients import connection_for, connection_in
from dynaunique._transport.connection import Steps, policy_for
from dynaunique._transport.regions import route
from dynaunique._write.flush import MAX_ATTEMPTS as _LOOKUP_ATTEMPTS
from dynaunique._write.record import as_stored
from dynaunique._write.state import same_item
from dynaunique.errors import ConfigurationError, format_value

_L = TypeVar("_L", bound="LookupMixin")



class LookupMixin(InstanceMixin):
    """The steps of ``get_by_unique``: which constraint is meant, its lock, its owner."""

    @classmethod
    def _du_get_by_unique_steps(cls: type[_L], field_or_name: str | None, value: Any,
                                values: Mapping[str, Any]) -> Steps[_L]:
        info = cls._du_info
        if info is None or not info.constraints:
            raise ConfigurationError(f"{cls.__name__} declares no unique constraint")
        bound, raw = cls._du_resolve(info, field_or_name, value, values)
        constraint = bound.constraint
        stored = tuple(as_stored(cls, f, v) for f, v in zip(constraint.fields, raw, strict=True))
        wanted = lock_of(info, bound, stored)
        if wanted is None:
            raise cls.DoesNotExist(f"None is never locked ({', '.join(constraint.fields)})")
        meta = route(cls.Meta, lambda _meta: connection_for(cls), write=False)  # global: home
        connection, policy = connection_in(cls, meta), policy_for(meta)
        lock_at = lock_primary_key(info.key_attributes, wanted.key)
        lock = (yield from read_steps(connection, policy, info.table, lock_at))
        # The value as the caller gave it, or <hashed>: the one renderer decides.
        what = (f"{', '.join(constraint.fields)} "
                f"{format_value(constraint.display_value(tuple(raw)), hashed=constraint.hashed)}")
        malformed = cls.DoesNotExist(
            f"the lock on {what} names no record of {cls.__name__} (its owner is not a key of "
            "the table; an orphan lock: `dynaunique check` finds and `dynaunique repair` removes "
            "these)")
        for _ in range(_LOOKUP_ATTEMPTS):
            if lock is None or not cls._du_family_holds(lock):
                # A lock name two models share explicitly: the other model's record is not a cls.
                raise cls.DoesNotExist(f"no {cls.__name__} holds {what}")
            owner_attr = lock.get(OWNER_ATTR)
            owner = owner_key(info.key_attributes,
                              owner_attr.get("M") if isinstance(owner_attr, Mapping) else None,
                              (info.hash_type, info.range_type))
            if owner is None:
                raise malformed
            item = yield from read_steps(connection, policy, info.table, owner,
                                         invalid_key=malformed)
            if item is not None and not cls._du_is_mine(item):
                # A parent's own record (its lock's model, a parent, is family): not a cls.
                raise cls.DoesNotExist(f"no {cls.__name__} holds {what}")
            # The record read second is returned only if it holds the value now.
            held = (locks_of(info, cls._du_lock_inputs(item)).get(constraint.name)
                    if item is not None else None)
            if item is not None and held is not None and held.key == wanted.key:
                return cls.from_raw_data(item)
            # The owner is gone or holds another value: the value may have moved between the
            # two reads (a swap hands it to another record), or the lock is an orphan. Only a
            # lock still exactly as read says which; a lock that moved is followed.
            again = yield from read_steps(connection, policy, info.table, lock_at)
            if not same_item(again, lock):
                lock = again
                continue
            if item is None:
                raise cls.DoesNotExist(
                    f"the lock on {what} names {plain_key(owner)}, which does not exist (an "
                    "orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)"
                )
            raise cls.DoesNotExist(
                f"the lock on {what} names {plain_key(owner)}, which no longer holds that "
                "value (an orphan lock)"
            )
        raise cls.DoesNotExist(f"the lock on {what} kept changing hands while it was read; "
                               "try again")

    @classmethod
    def _du_family_holds(cls, lock: Mapping[str, Any]) -> bool:
        """Whether a lock was written by this model, a parent or a subclass of it."""
        writer = lock.get(MODEL_ATTR, {}).get("S")
        if writer is None:
            return True  # a lock written around the library: the record check decides
        family = {c.__name__ for c in cls.__mro__}
        pending = list(cls.__subclasses__())
        while pending:
            sub = pending.pop()
            family.add(sub.__name__)
            pending.extend(sub.__subclasses__())
        return writer in family

    @classmethod
    def _du_is_mine(cls, item: Mapping[str, Any]) -> bool:
        """Whether a record item is a ``cls`` by its stored discriminator (a polymorphic model's
        record of a parent or a sibling class is not); without one, any item is."""
        try:
            stored = cls._get_discriminator_class(dict(item))
        except ValueError:  # a discriminator value no class of the family declares
            return False
        return stored is None or issubclass(stored, cls)

    @classmethod
    def _du_resolve(cls, info: ModelInfo, field_or_name: str | None, value: Any,
                    values: Mapping[str, Any]) -> tuple[BoundConstraint, tuple[Any, ...]]:
        """The constraint a lookup means, and its fields' values in the constraint's order."""
        if values:
            if field_or_name is not None:
                raise TypeError("give either a field/constraint name and a value, or keywords")
            for bound in info.constraints:
                if set(bound.constraint.fields) == set(values):
                    return bound, tuple(values[f] for f in bound.constraint.fields)
            raise ConfigurationError(
                f"{cls.__name__} has no unique constraint on exactly {sorted(values)}"
            )
        if field_or_name is None:
            raise TypeError("get_by_unique() needs a field or constraint name and a value")
        for bound in info.constraints:
            constraint = bound.constraint
            if constraint.name == field_or_name or constraint.fields == (field_or_name,):
                fields = bound.constraint.fields
                if len(fields) == 1:
                    return bound, (value,)
                if not isinstance(value, (tuple, list)) or len(value) != len(fields):
                    raise TypeError(f"constraint {bound.constraint.name} needs a tuple of "
                                    f"{len(fields)} values {fields}")
                return bound, tuple(value)
        raise ConfigurationError(
            f"{cls.__name__} has no unique field or constraint named {field_or_name!r}; it has "
            f"{[b.constraint.name for b in info.constraints]}"
        )
