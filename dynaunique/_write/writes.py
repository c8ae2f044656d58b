"""The writes dynaunique sends, as plain data — guards, record and lock writes. No I/O:
:mod:`dynaunique._write.render` renders them. The lock writes and the one builder of each are
:mod:`dynaunique._lock.locks`' (a create's planning runs through that module in one go),
re-exported.

Lock puts are guarded "missing, or owned by an allowed owner" (:class:`HeldBy`: the record, or
for a value moving between two records of one unit of work, its old holder), lock deletes
"missing, or owned by this record": nobody can take over or delete a lock it does not own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from dynaunique._lock.items import ModelInfo, Typed, TypedKey
from dynaunique._lock.locks import (  # re-exported: the lock writes and their builders live there
    HeldBy,
    LockDelete,
    LockPut,
    Shaped,
    Stamp,
    lock_delete,
    lock_put,
    lock_puts,
    now,
    stamp,
    ttl_epoch,
)

#: The names re-exported (every name defined here is the package's too).
__all__ = ["HeldBy", "LockDelete", "LockPut", "Shaped", "Stamp", "lock_delete", "lock_put",
           "lock_puts", "now", "stamp", "ttl_epoch"]

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
