"""The writes dynaunique sends, as plain data — guards, record and lock writes — and the one
builder of each lock write. No I/O: :mod:`dynaunique._transaction` renders and sends them.

Lock puts are guarded "missing, or owned by an allowed owner" (:class:`HeldBy`: the record, or
for a value moving between two records of one unit of work, its old holder), lock deletes
"missing, or owned by this record": nobody can take over or delete a lock it does not own.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import attrs

from dynaunique._items import LockRef, ModelInfo, Typed, TypedKey
from dynaunique._locks import lock_item, lock_primary_key, secret_id

# --- guards --------------------------------------------------------------------------------------


@attrs.frozen
class Absent:
    """The item must not exist (a create)."""


@attrs.frozen
class Unchanged:
    """The item must exist and hold exactly these values (``None``: the attribute is absent)."""

    expected: tuple[tuple[str, Typed | None], ...]


@attrs.frozen
class HeldBy:
    """A lock must be missing, or owned by one of ``owners`` (typed record keys)."""

    owners: tuple[TypedKey, ...]


@attrs.frozen
class Lacking:
    """The item, if it exists, lacks one attribute of each group (each group: the stored fields
    of one constraint, so the item can hold no lock of it). An empty group: no such item."""

    groups: tuple[tuple[str, ...], ...]


@attrs.frozen
class Shaped:
    """The item exists, with these values, these attributes present (whatever their values)
    and these absent: all that decides which model it is a record of and which locks it holds."""

    equal: tuple[tuple[str, Typed], ...]
    present: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()


Guard = Absent | Unchanged | HeldBy | Lacking | Shaped
#: What a record write guards on besides its own state, on a table other models share: that the
#: item it replaces holds no lock of theirs (``Lacking``), or is the item judged to hold none
#: (``Shaped``). See ``dynaunique._model.mixed``.
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
    """Put a lock item; ``guard`` says who may own it already."""

    table: str
    model: str
    lock: LockRef
    owner: TypedKey
    item: dict[str, Typed]
    guard: HeldBy
    key: TypedKey


@attrs.frozen
class LockDelete:
    """Delete a lock item that ``guard.owners`` hold (or that is already gone)."""

    table: str
    model: str
    lock: LockRef
    key: TypedKey
    guard: HeldBy


@attrs.frozen
class ConditionCheck:
    """A ConditionCheck: the unit commits only if the item meets ``condition`` and ``guard``.

    ``atomic()``'s ``condition_check`` passes a user's condition; the audit's repairs pass a
    guard (the record still absent, or still as read).
    """

    table: str
    model: str
    key: TypedKey
    condition: Expression | None
    label: str
    guard: Absent | Unchanged | None = None


Write = RecordPut | RecordUpdate | RecordDelete | LockPut | LockDelete | ConditionCheck
RECORD_WRITES = (RecordPut, RecordUpdate, RecordDelete)


# --- the one builder of each lock write ----------------------------------------------------------


def now() -> str:
    """The time stamped on a new lock or ledger entry: UTC, ISO 8601, to the microsecond."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


#: The one timestamp of the unit of work being planned (see :func:`one_timestamp`).
_unit_time: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "dynaunique_unit_time", default=None)


@contextmanager
def one_timestamp() -> Iterator[None]:
    """Inside the block, :func:`stamp` is one :func:`now` for all: every lock a unit of work
    writes carries the same ``created`` (they are written in one request, at one time)."""
    token = _unit_time.set([])
    try:
        yield
    finally:
        _unit_time.reset(token)


def stamp() -> str:
    """The time to stamp a new lock with: the unit's one timestamp inside
    :func:`one_timestamp` (taken at its first use), else :func:`now`."""
    held = _unit_time.get()
    if held is None:
        return now()
    if not held:
        held.append(now())
    return held[0]


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
    wanted = {a for b in info.constraints for a in b.attr_names} | set(condition_reads)
    if info.ttl_attr is not None:
        wanted.add(info.ttl_attr)
    wanted -= {info.hash_attr, info.range_attr, info.version_attr}
    inputs = tuple((name, loaded.get(name)) for name in sorted(wanted))
    if use_version and info.version_attr is not None:
        return Unchanged(((info.version_attr, loaded.get(info.version_attr)), *inputs))
    return Unchanged(inputs)


def ttl_epoch(info: ModelInfo, item: Mapping[str, Typed]) -> int | None:
    """The expiry epoch a record's locks carry: its TTL attribute, or None."""
    if info.ttl_attr is None or info.ttl_attr not in item:
        return None
    return int(Decimal(item[info.ttl_attr]["N"]))


def lock_put(info: ModelInfo, lock: LockRef, owner: TypedKey, item: Mapping[str, Typed], *,
             allowed: Iterable[TypedKey] | None = None, created: str | None = None) -> LockPut:
    """Put ``lock`` owned by ``owner``, the record ``item`` (its TTL is copied onto the lock).

    Guarded "missing, or held by one of ``allowed``" (default: ``owner`` itself — a retry, or a
    save that rewrote it meanwhile); a hand-over allows the previous holder instead. Never
    anyone else. A hashed lock carries the fingerprint of the model's secret, which made its key.
    """
    ttl = ttl_epoch(info, item)
    return LockPut(
        table=info.table,
        model=info.name,
        lock=lock,
        owner=owner,
        item=lock_item(
            key_attributes=info.key_attributes,
            lock_key_value=lock.key,
            owner=owner,
            model=info.name,
            constraint=lock.constraint,
            value=lock.value,
            hashed=lock.hashed,
            created=created if created is not None else stamp(),
            ttl=(info.ttl_attr, ttl) if info.ttl_attr is not None and ttl is not None else None,
            secret=secret_id(info.secret()) if lock.hashed else None,
        ),
        guard=HeldBy(tuple(allowed) if allowed is not None else (owner,)),
        key=lock_primary_key(info.key_attributes, lock.key),
    )


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
