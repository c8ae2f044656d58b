"""One object's state in dynaunique: what it was loaded as, the locks that holds, its version.

Each model instance keeps one :class:`InstanceState`: the item as last loaded from or written to
DynamoDB (the snapshot the next write guards on and diffs against), caches of the locks a
snapshot holds, and the record write of a call whose outcome is unknown. A snapshot is replaced,
never mutated, and only after a write succeeded (:func:`finish_steps`, the after-success update
of ``dynaunique._write.flush``). The version rules a unit of work applies to a stored record
(:func:`may_adopt`), item equality (:func:`same_item`) and whether a stored item meets a guard
on other models' locks (:func:`holds`) live here too, so the flush and the model read one
object's state through one module; so does what one flush knows of each op's record
(:class:`Stored`, one value per op, in the :class:`Basis` an attempt is planned from).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import attrs

from dynaunique._lock.kinds import Kind
from dynaunique._write.writes import Lacking, OthersGuard, RecordPut, RecordUpdate, Takeover, Write

if TYPE_CHECKING:
    from dynaunique._lock.locks import LockRef
    from dynaunique._transport.connection import Steps
    from dynaunique._write.plan import Plan


class OpKind(Kind):
    """What a unit of work does to one object."""

    SAVE = "save"
    DELETE = "delete"
    UPDATE = "update"


@attrs.define(eq=False)
class Op:
    """One object's operation in a unit of work."""

    #: The model instance (a ``dynaunique.Model``).
    obj: Any
    kind: OpKind
    condition: Any = None
    add_version_condition: bool = True
    #: The update actions (``OpKind.UPDATE``).
    actions: list[Any] | None = None


@attrs.frozen
class Stored:
    """One op's record as a flush knows it: the one state the op is planned from."""

    #: The record as stored (None: absent, or a never-loaded save's create).
    item: dict[str, Any] | None = None
    #: Found by this flush (read, or returned with a failed guard), not loaded by the caller:
    #: it may be replanned from what DynamoDB returns; a caller's copy may not.
    fresh: bool = False
    #: The item this op met and judged to hold no lock of another model (``_model.mixed``).
    judged: dict[str, Any] | None = None
    #: Nothing is left to do (a loaded copy's delete of a record already gone).
    done: bool = False


@attrs.frozen
class Basis:
    """What one attempt of a flush is planned from: each op's :class:`Stored` (by
    ``id(obj)``), the locks other records turned out to hold (left out of the deletes), the
    orphan locks met (taken over, by lock key: ``dynaunique._write.heal``)."""

    stored: Mapping[int, Stored]
    foreign: frozenset[str] = frozenset()
    takeovers: Mapping[str, Takeover] = attrs.field(factory=dict)


@attrs.define
class InstanceState:
    """What dynaunique remembers of one model instance (all of it, in one place).

    ``loaded`` is the item as last loaded from or written to DynamoDB (None: never loaded, or
    deleted); it is what the next write guards on and diffs against. The lock caches only save
    recomputation; ``unknown`` is the record write of a call that ended in
    ``OutcomeUnknownError``, so that repeating the call recognises its own landed write.
    """

    loaded: dict[str, Any] | None = None
    #: (loaded item, its locks, the attributes their conditions read) — valid while ``loaded``
    #: is that very item.
    old_locks: tuple[Mapping[str, Any], dict[str, LockRef], frozenset[str]] | None = None
    #: (plan, the new locks, the attributes read) of the last planned save, to seed
    #: ``old_locks`` once that plan succeeded.
    new_locks: tuple[Plan, dict[str, LockRef], frozenset[str]] | None = None
    unknown: Write | None = None

    def set_loaded(self, item: dict[str, Any] | None) -> None:
        """``item`` is what DynamoDB now holds for this object (None: nothing)."""
        self.loaded = item
        self.unknown = None

    def locks_of_snapshot(self, loaded: Mapping[str, Any],
                          compute: Callable[[Mapping[str, Any], set[str]], dict[str, LockRef]],
                          reads: set[str] | None = None) -> dict[str, LockRef]:
        """The locks ``loaded`` holds (``compute`` them once per snapshot: snapshots are
        replaced, never mutated, so repeated saves of one loaded object do not rebuild it)."""
        cached = self.old_locks
        if cached is None or cached[0] is not loaded:
            found: set[str] = set()
            cached = self.old_locks = (loaded, compute(loaded, found), frozenset(found))
        if reads is not None:
            reads.update(cached[2])
        return dict(cached[1])

    def saved(self, item: Mapping[str, Any], record: Write | None = None) -> None:
        """``item`` was written by ``record``: it is the new snapshot."""
        # The item was serialized for this write alone and nothing mutates it: no copy.
        loaded = dict(item)
        self.set_loaded(loaded)
        seeded, self.new_locks = self.new_locks, None
        if seeded is not None and any(w is record for w in seeded[0].writes):
            # The locks just written are the new snapshot's: the next save need not rebuild.
            self.old_locks = (loaded, seeded[1], seeded[2])


def state_of(obj: Any) -> InstanceState:
    """The :class:`InstanceState` of a model instance (created on first use).

    Kept in the instance's ``__dict__`` under ``_du_state``, where the model's cached property
    of that name finds it without a call."""
    state: InstanceState | None = obj.__dict__.get("_du_state")
    if state is None:
        state = obj.__dict__["_du_state"] = InstanceState()
    return state


def loaded_for_key(obj: Any) -> dict[str, Any] | None:
    """``obj``'s snapshot, if it is of its current key (a changed key is a new record)."""
    loaded = state_of(obj).loaded
    info = obj._du_info
    if loaded is None or info is None:
        return None
    try:
        key = info.typed_key(*obj._get_hash_range_key_serialized_values())
    except Exception:
        return None
    if all(same_item(loaded.get(k), v) for k, v in key.items()):
        return loaded
    return None


def _number_normal(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"N"}:
            return {"N": str(Decimal(value["N"]).normalize())}
        return {k: _number_normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_number_normal(v) for v in value]
    return value


def same_item(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two raw items are equal, numbers compared by value."""
    if a is None or b is None:
        return a is b
    return bool(_number_normal(dict(a)) == _number_normal(dict(b)))


def holds(guard: OthersGuard, item: Mapping[str, Any] | None) -> bool:
    """Whether ``item`` (None: absent) meets ``guard``, as DynamoDB would judge it."""
    if isinstance(guard, Lacking):
        return item is None or all(any(name not in item for name in group) and bool(group)
                                   for group in guard.groups)
    if item is None:
        return False
    return (all(n in item and same_item({"v": item[n]}, {"v": v}) for n, v in guard.equal)
            and all(n in item for n in guard.present)
            and not any(n in item for n in guard.absent))


# --- the version rules and the after-success update ----------------------------------------------


def after_save(obj: Any, item: Mapping[str, Any], record: Write | None = None) -> None:
    """``item`` was written for ``obj``: its new snapshot, and the version the object holds."""
    info = obj._du_info
    if info.version_field is not None and info.version_attr in item:
        setattr(obj, info.version_field, int(item[info.version_attr or ""]["N"]))
    state_of(obj).saved(item, record)


def may_adopt(op: Op, current: Mapping[str, Any] | None) -> bool:
    """Whether a never-loaded save that met an existing record may become an update of it.

    Not when the model is versioned and the object's version does not match the stored
    one: PynamoDB refuses that save (its first save is guarded ``attribute_not_exists``,
    later ones on the version held), and so does dynaunique.
    """
    info = getattr(op.obj, "_du_info", None)
    if (current is None or not op.add_version_condition or info is None
            or info.version_field is None):
        return True
    mine = getattr(op.obj, info.version_field)
    stored = current.get(info.version_attr or "")
    return mine is not None and stored is not None and int(stored["N"]) == int(mine)


def finish_steps(op: Op, record: Write | None, response: Mapping[str, Any]) -> Steps[None]:
    """After the unit succeeded: ``op``'s object gets its new snapshot (one read when the
    result of an update is not known)."""
    obj: Any = op.obj
    state_of(obj).unknown = None
    if op.kind is OpKind.DELETE:
        state_of(obj).set_loaded(None)
        return
    if op.kind is OpKind.SAVE:
        assert isinstance(record, RecordPut)
        after_save(obj, record.item, record)
        return
    # An update: a plain UpdateItem returns the new item; a transaction (or a write found
    # already in place) returns none, so the known prediction is used, else one read.
    attributes = response.get("Attributes")
    if attributes is not None:
        obj.deserialize(attributes)
    elif isinstance(record, RecordUpdate) and record.predicted is not None:
        obj.deserialize(copy.deepcopy(record.predicted))
    else:
        item = yield from obj._du_read_steps()
        if item is None:
            raise obj.DoesNotExist("This item does not exist in the table.")
        obj.deserialize(item)
