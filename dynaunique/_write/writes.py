"""The writes dynaunique sends, as plain data — guards, record writes, lock writes — and the one
builder of each lock write. No I/O: :mod:`dynaunique._write.render` renders them; the keys and
items they carry are the lock scheme's (:mod:`dynaunique._lock.locks`).

Lock puts are guarded "missing, or owned by an allowed owner" (:class:`HeldBy`: the record, or
for a value moving between two records of one unit of work, its old holder), lock deletes
"missing, or owned by this record": nobody can take over or delete a lock it does not own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import attrs

from dynaunique._lock.items import ModelInfo
from dynaunique._lock.locks import LockRef, Typed, TypedKey, lock_item, lock_primary_key, secret_id

# --- guards --------------------------------------------------------------------------------------


@attrs.frozen
class Absent:
    """The item must not exist (a create)."""


@attrs.frozen
class Unchanged:
    """The item must exist and hold exactly these values (``None``: the attribute is absent)."""

    expected: tuple[tuple[str, Typed | None], ...]


@attrs.frozen
class Lacking:
    """The item, if it exists, lacks one attribute of each group (each group: the stored fields
    of one constraint, so the item can hold no lock of it). An empty group: no such item."""

    groups: tuple[tuple[str, ...], ...]


@attrs.frozen
class HeldBy:
    """A lock must be missing, or owned by one of ``owners`` (typed record keys)."""

    owners: tuple[TypedKey, ...]


@attrs.frozen
class Shaped:
    """The item exists, with these values, these attributes present (whatever their values)
    and these absent: all that decides which model it is a record of and which locks it holds
    — or, guarding a lock put that takes an orphan lock over, that the lock is exactly the one
    met (its owner and ``created``)."""

    equal: tuple[tuple[str, Typed], ...]
    present: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()


Guard = Absent | Unchanged | HeldBy | Lacking | Shaped
#: What a record write guards on besides its own state, on a table other models share: that the
#: item it replaces holds no lock of theirs (``Lacking``), or is the item judged to hold none
#: (``Shaped``). See ``dynaunique._write.mixed``.
OthersGuard = Lacking | Shaped


@attrs.frozen
class Expression:
    """A rendered condition or update expression with its placeholders."""

    text: str
    names: dict[str, str] = attrs.field(factory=dict)
    values: dict[str, Typed] = attrs.field(factory=dict)

    @classmethod
    def of(cls, condition: Any) -> Expression:
        """Render a PynamoDB condition (anything with ``serialize(names, values)``)."""
        names: dict[str, str] = {}
        values: dict[str, Typed] = {}
        text = condition.serialize(names, values)
        return cls(text, {placeholder: name for name, placeholder in names.items()}, values)


# --- writes --------------------------------------------------------------------------------------


@attrs.frozen
class RecordPut:
    """Write the whole record (PynamoDB's ``save`` semantics)."""

    table: str
    model: str
    key: TypedKey
    item: dict[str, Typed]
    guard: Absent | Unchanged | None
    condition: Expression | None = None
    #: True when this is a create of an object that was never loaded.
    create: bool = False
    others: OthersGuard | None = None


@attrs.frozen
class RecordUpdate:
    """Apply update actions to the record."""

    table: str
    model: str
    key: TypedKey
    update: Expression
    guard: Unchanged | None
    condition: Expression | None = None
    #: The record as it will be after the update, when every action's result is known.
    predicted: dict[str, Typed] | None = None
    others: OthersGuard | None = None


@attrs.frozen
class RecordDelete:
    """Delete the record."""

    table: str
    model: str
    key: TypedKey
    guard: Unchanged | None
    condition: Expression | None = None
    others: OthersGuard | None = None


@attrs.frozen
class LockPut:
    """Put a lock item; ``guard`` says who may own it already (:class:`Shaped`: a takeover of
    exactly the orphan lock met, ``dynaunique._write.heal``)."""

    table: str
    model: str
    lock: LockRef
    owner: TypedKey
    item: dict[str, Typed]
    guard: HeldBy | Shaped
    key: TypedKey


@attrs.frozen
class LockDelete:
    """Delete a lock item that ``guard.owners`` hold (or that is already gone); a
    :class:`Shaped` guard: only the lock exactly as written (the backfill's verification)."""

    table: str
    model: str
    lock: LockRef
    key: TypedKey
    guard: HeldBy | Shaped


@attrs.frozen
class ConditionCheck:
    """A ConditionCheck: the unit commits only if the item meets ``condition`` and ``guard``.

    ``atomic()``'s ``condition_check`` passes a user's condition; the audit's repairs and the
    backfill pass a guard (the record still absent, or still as read) and ``others``.
    """

    table: str
    model: str
    key: TypedKey
    condition: Expression | None
    label: str
    guard: Absent | Unchanged | None = None
    #: On a table several models share: the record is still one of the model it was read as.
    others: OthersGuard | None = None
    #: The key of the orphan lock whose takeover this check guards (its old owner still does
    #: not hold the value: ``dynaunique._write.heal``); None for any other check.
    heals: str | None = None


Write = RecordPut | RecordUpdate | RecordDelete | LockPut | LockDelete | ConditionCheck
RECORD_WRITES = (RecordPut, RecordUpdate, RecordDelete)


@attrs.frozen
class Takeover:
    """An orphan lock a write met, taken over (``dynaunique._write.heal``): its lock put guarded on
    the lock being exactly the one met (``guard``), beside ``check``, a ConditionCheck that the
    old owner still does not hold the value."""

    lock_key: str
    guard: Shaped
    check: ConditionCheck


# --- lock writes: the one builder of each -------------------------------------------------------


def now() -> str:
    """The time stamped on a new lock or ledger entry: UTC, ISO 8601, to the microsecond."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def stamp() -> str:
    """The time to stamp a lock with when no unit of work gave one: :func:`now`."""
    return now()


@attrs.define
class Stamp:
    """The one time of a unit of work: every lock it writes carries the same ``created`` (they
    are written in one request, at one time), taken by :func:`now` at its first lock put."""

    value: str | None = None

    def take(self) -> str:
        """The unit's time (taken now, if no lock took it yet)."""
        if self.value is None:
            self.value = now()
        return self.value


def ttl_epoch(info: ModelInfo, item: Mapping[str, Typed]) -> int | None:
    """The expiry epoch a record's locks carry: its TTL attribute, or None."""
    if info.ttl_attr is None or info.ttl_attr not in item:
        return None
    return int(Decimal(item[info.ttl_attr]["N"]))


def lock_put(info: ModelInfo, lock: LockRef, owner: TypedKey, item: Mapping[str, Typed], *,
             allowed: Iterable[TypedKey] | None = None,
             created: str | Stamp | None = None) -> LockPut:
    """Put ``lock`` owned by ``owner``, the record ``item`` (its TTL is copied onto the lock).

    Guarded "missing, or held by one of ``allowed``" (default: ``owner`` itself — a retry, or a
    save that rewrote it meanwhile); a hand-over allows the previous holder instead. Never
    anyone else. A hashed lock carries the fingerprint of the model's secret, which made its key.
    """
    return lock_puts(info, (lock,), owner, item, allowed=allowed, created=created)[0]


def lock_puts(info: ModelInfo, locks: Iterable[LockRef], owner: TypedKey,
              item: Mapping[str, Typed], *, allowed: Iterable[TypedKey] | None = None,
              created: str | Stamp | None = None) -> list[LockPut]:
    """:func:`lock_put` of each of ``locks`` of one record: the one builder of lock puts.
    ``created``: their time, or the unit's :class:`Stamp` (default: :func:`now`)."""
    ttl = ttl_epoch(info, item)
    ttl_attribute = (info.ttl_attr, ttl) if info.ttl_attr is not None and ttl is not None else None
    guard = HeldBy(tuple(allowed) if allowed is not None else (owner,))
    when = (created.take() if isinstance(created, Stamp) else
            created if created is not None else now())
    return [LockPut(info.table, info.name, lock, owner, lock_item(
        key_attributes=info.key_attributes, lock_key_value=lock.key, owner=owner,
        model=info.name, constraint=lock.constraint, value=lock.value, hashed=lock.hashed,
        created=when, ttl=ttl_attribute, secret=secret_id(info.secret()) if lock.hashed else None,
    ), guard, lock_primary_key(info.key_attributes, lock.key)) for lock in locks]


def lock_delete(table: str, key_attributes: tuple[str, str | None], lock: LockRef,
                owner: TypedKey, *, model: str) -> LockDelete:
    """Delete ``lock`` of ``table``, guarded "missing, or held by ``owner``": a lock re-taken
    meanwhile by anyone else is left alone, and an already deleted one is no error."""
    return LockDelete(
        table=table,
        model=model,
        lock=lock,
        key=lock_primary_key(key_attributes, lock.key),
        guard=HeldBy((owner,)),
    )


# --- the record's guard -------------------------------------------------------------------------


def unchanged_guard(
    info: ModelInfo,
    loaded: Mapping[str, Typed],
    *,
    use_version: bool,
    condition_reads: Iterable[str] = (),
) -> Unchanged:
    """Guard "unchanged since loaded": every lock input, and the version when the model has one.

    Lock inputs are the constrained attributes, the TTL (copied onto locks) and the attributes
    the constraints' conditions read on the loaded state (``condition_reads``). The version
    alone is not enough: a record deleted and created again restarts at version 1, so a stale
    copy of the first life could pass a version-only guard with other values (and locks).
    """
    wanted = info.lock_relevant.union(condition_reads)   # the class's template: once
    wanted -= {info.hash_attr, info.range_attr, info.version_attr}
    inputs = tuple((name, loaded.get(name)) for name in sorted(wanted))
    if use_version and info.version_attr is not None:
        return Unchanged(((info.version_attr, loaded.get(info.version_attr)), *inputs))
    return Unchanged(inputs)
