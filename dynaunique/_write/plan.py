"""Plan writes: the loaded state of each object against its current state → a Plan. No I/O.

A :class:`Plan` is data — the exact record and lock writes a save or delete needs, each with its
guard — so it can be printed, asserted in a unit test, or handed to
``dynaunique._write.transaction`` to execute. The rules (docs/how-it-works.md shows each request):

* create (never loaded): record put (guarded on absence) + one lock put per lock the record
  holds;
* update: record put guarded "unchanged since loaded" + new-lock puts + old-lock deletes; with no
  lock change it is a single plain conditional write;
* delete: record delete (same guard) + one delete per lock held;
* a model without constraints: its one write, as PynamoDB sends it (the caller's condition);
* lock puts are guarded "missing, or owned by an allowed owner" (this record, or — for a value
  moving between two records of one unit of work — its old holder), lock deletes "missing, or
  owned by this record": nobody can take over or delete a lock it does not own.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction

from dynaunique._lock.items import ModelInfo, key_id
from dynaunique._lock.locks import (
    ChangeKind,
    LockChange,
    LockRef,
    Typed,
    TypedKey,
    diff_locks,
    record_key,
    untyped,
)
from dynaunique._write import writes as _writes
from dynaunique.errors import (
    ConcurrentModificationError,
    InvalidValueError,
    UniqueViolation,
    UnsupportedOperationError,
)


@attrs.frozen
class Plan:
    """The writes of one unit of work and the lock diff that produced them."""

    writes: tuple[_writes.Write, ...]
    changes: tuple[LockChange, ...] = ()
    #: A model without constraints: its single write is sent as PynamoDB sends it (no
    #: ``ReturnValuesOnConditionCheckFailure``, which only dynaunique's settling reads).
    pynamodb: bool = False
    #: False when the plan is one record write and nothing else: a plain conditional write
    #: (computed with the plan: the renderer and the sender both ask; a planner that knows it
    #: passes it).
    is_transaction: bool = attrs.field(kw_only=True, eq=False, repr=False)

    @is_transaction.default
    def _is_transaction(self) -> bool:
        return not (len(self.writes) == 1 and isinstance(self.writes[0], _writes.RECORD_WRITES))

    @property
    def has_work(self) -> bool:
        """Whether anything is to be sent."""
        return bool(self.writes)

    def without_deletes(self, lock_keys: Iterable[str]) -> Plan:
        """This plan minus the deletes of the given locks (locks another record turned out to
        hold: they were never this record's to delete)."""
        skip = set(lock_keys)
        writes = tuple(w for w in self.writes
                       if not (isinstance(w, _writes.LockDelete) and w.lock.key in skip))
        return Plan(writes, self.changes, self.pynamodb)

    def taking_over(self, takeovers: Mapping[str, _writes.Takeover]) -> Plan:
        """This plan with the puts of orphan locks it met (``takeovers``, by lock key) guarded
        on each lock being exactly as met, and one ConditionCheck per old owner that it still
        does not hold the value (``dynaunique._write.heal``), after every other write."""
        writes: list[_writes.Write] = []
        checks: dict[tuple[str, object], _writes.ConditionCheck] = {}
        for write in self.writes:
            taken = takeovers.get(write.lock.key) if isinstance(write, _writes.LockPut) else None
            if taken is not None and isinstance(write, _writes.LockPut):
                writes.append(attrs.evolve(write, guard=taken.guard))
                checks.setdefault((taken.check.table, key_id(taken.check.key)), taken.check)
            else:
                writes.append(write)
        return Plan((*writes, *checks.values()), self.changes, self.pynamodb)


# --- planning ------------------------------------------------------------------------------------


@attrs.frozen
class Record:
    """One record as the planner sees it: the state it is stored in, the state a write makes of
    it, and how the write is guarded — the one value a model hands the planner."""

    info: ModelInfo
    #: The record as it was loaded (None: never loaded — a save plans a create).
    loaded: Mapping[str, Typed] | None
    #: The locks ``loaded`` holds.
    old_locks: Mapping[str, LockRef] = attrs.field(factory=dict)
    #: The record after the write: a save's item (its version already bumped), an update's
    #: prediction (None when it cannot be known).
    item: dict[str, Typed] | None = None
    #: The locks ``item`` holds.
    new_locks: Mapping[str, LockRef] = attrs.field(factory=dict)
    #: The caller's own condition.
    condition: _writes.Expression | None = None
    use_version: bool = True
    #: The attributes the constraints' conditions read on ``loaded``.
    condition_reads: Iterable[str] = ()
    #: ``loaded`` is a record of another model (sharing these locks) that this write turns into
    #: one of ``info``'s: the locks it keeps are put again, naming this model.
    reown: bool = False
    #: The ``created`` time of the lock puts, or the unit's one
    #: :class:`~dynaunique._write.writes.Stamp`.
    now: str | _writes.Stamp = ""
    #: The record's primary key (None: read off ``item``, or ``loaded`` for a delete).
    key: TypedKey | None = None


def _guard(record: Record, loaded: Mapping[str, Typed]) -> _writes.Unchanged:
    return _writes.unchanged_guard(record.info, loaded, use_version=record.use_version,
                                   condition_reads=record.condition_reads)


def plan_save(record: Record) -> Plan:
    """Plan a save of ``record`` into its ``item``.

    Never loaded: a create — the record put guarded on absence, then one lock put per lock
    ``item`` holds. Loaded: the record put guarded "unchanged since loaded", then the lock
    puts and deletes from ``loaded``'s locks to ``item``'s. A model without constraints: its
    one put, guarded by the caller's ``condition`` alone (PynamoDB's save)."""
    info, item, loaded = record.info, record.item, record.loaded
    assert item is not None
    key = record.key if record.key is not None else record_key(info, item)
    if not info.constraints:
        return Plan((_writes.RecordPut(info.table, info.name, key, item, None,
                                       record.condition),), pynamodb=True)
    changes = diff_locks(record.old_locks, record.new_locks)
    if loaded is None:
        puts = _writes.lock_puts(info, [c.new for c in changes if c.new is not None], key, item,
                                 created=record.now)
        put = _writes.RecordPut(info.table, info.name, key, item, _writes.Absent(),
                                record.condition, create=True)
        return Plan((put, *puts), changes, is_transaction=bool(puts))
    put = _writes.RecordPut(info.table, info.name, key, item, _guard(record, loaded),
                            record.condition)
    lock_writes = _lock_writes(info, changes, key, loaded, item, record.now, reown=record.reown)
    return Plan((put, *lock_writes), changes)


def _lock_writes(info: ModelInfo, changes: Sequence[LockChange], key: TypedKey,
                 before: Mapping[str, Typed], after: Mapping[str, Typed],
                 now: str | _writes.Stamp, *, reown: bool = False) -> list[_writes.Write]:
    """The lock puts and deletes that take a record from ``before`` to ``after``."""
    ttl_changed = reown or _writes.ttl_epoch(info, after) != _writes.ttl_epoch(info, before)
    writes: list[_writes.Write] = []
    for change in changes:
        if change.kind is ChangeKind.UNCHANGED:
            if change.new is not None and ttl_changed:
                # Re-put with the new expiry so the lock expires with the record.
                writes.append(_writes.lock_put(info, change.new, key, after, created=now))
            continue
        if change.new is not None:
            writes.append(_writes.lock_put(info, change.new, key, after, created=now))
        if change.old is not None:
            writes.append(_writes.lock_delete(info.table, info.key_attributes, change.old, key,
                                      model=info.name))
    return writes


def plan_delete(record: Record) -> Plan:
    """Plan the delete of a loaded record and every lock it holds (of a model without
    constraints: by its key, as PynamoDB deletes, ``loaded`` being that key)."""
    info, loaded = record.info, record.loaded
    assert loaded is not None
    key = record_key(info, loaded)
    if not info.constraints:   # PynamoDB's delete, by key: no lock to release
        return Plan((_writes.RecordDelete(info.table, info.name, key, None, record.condition),),
                    pynamodb=True)
    delete = _writes.RecordDelete(info.table, info.name, key, _guard(record, loaded),
                                  record.condition)
    deletes = [_writes.lock_delete(info.table, info.key_attributes, lock, key, model=info.name)
               for _, lock in sorted(record.old_locks.items())]
    return Plan((delete, *deletes), diff_locks(record.old_locks, {}))


def plan_update(record: Record, update: _writes.Expression, *, lock_relevant: bool,
                complete: bool = True) -> Plan:
    """Plan ``Model.update(actions)``: an UpdateItem, plus lock writes when a lock moves.

    ``lock_relevant`` says whether the actions touch anything a lock depends on; when they do,
    the record's ``item`` (the record after the update) decides the new locks. The update is
    guarded "unchanged since loaded" when it is lock-relevant, and also when the model has a
    conditional constraint: the condition must read the same attributes on the stored record
    as on the loaded one for the untouched locks to stay right. ``complete`` is False when some
    action's result on a lock-irrelevant attribute cannot be known: the prediction still
    decides the locks but is not the record's exact next state.
    """
    info, loaded, predicted = record.info, record.loaded, record.item
    assert loaded is not None
    key = record_key(info, loaded)
    guard = _guard(record, loaded) if lock_relevant or info.has_conditions else None
    write = _writes.RecordUpdate(info.table, info.name, key, update, guard, record.condition,
                                 predicted if complete else None)
    if not lock_relevant:
        return Plan((write,), ())
    assert predicted is not None
    changes = diff_locks(record.old_locks, record.new_locks)
    lock_writes = _lock_writes(info, changes, key, loaded, predicted, record.now,
                               reown=record.reown)
    return Plan((write, *lock_writes), changes)


def merge(plans: Sequence[Plan], extra: Iterable[_writes.Write] = ()) -> Plan:
    """Combine the plans of one unit of work into one, as DynamoDB needs it.

    DynamoDB rejects two operations on one item in a transaction, so the writes to one lock item
    are fused: a value freed by one record and taken by another (a swap, a rename chain) becomes
    one put guarded by "owned by the old holder or the new one". Two records taking the same
    value is a :class:`UniqueViolation` before anything is sent.
    """
    records: list[_writes.Write] = []
    seen_records: dict[tuple[str, object], _writes.Write] = {}
    locks: dict[tuple[str, object], list[_writes.LockPut | _writes.LockDelete]] = {}
    changes: list[LockChange] = []
    for plan in plans:
        changes.extend(plan.changes)
        for write in plan.writes:
            if isinstance(write, (_writes.LockPut, _writes.LockDelete)):
                locks.setdefault((write.table, key_id(write.key)), []).append(write)
                continue
            ident = (write.table, key_id(write.key))
            if ident in seen_records:
                raise InvalidValueError(
                    f"two objects in one unit of work write the same {write.model} record "
                    f"{[untyped(v) for v in write.key.values()]}: save one object per record"
                )
            seen_records[ident] = write
            records.append(write)
    for write in extra:
        ident = (write.table, key_id(write.key))
        if ident in seen_records:
            raise InvalidValueError(
                f"a condition check targets {[untyped(v) for v in write.key.values()]}, which "
                "this unit of work also writes: DynamoDB allows one operation per item"
            )
        seen_records[ident] = write
        records.append(write)
    lock_writes: list[_writes.Write] = []
    for group in locks.values():
        lock_writes.append(_fuse(group))
    # One write of a model without constraints, alone: still sent as PynamoDB sends it.
    alone = len(plans) == 1 and len(records) == 1 and not lock_writes
    return Plan((*records, *lock_writes), tuple(changes), pynamodb=alone and plans[0].pynamodb)


def _fuse(group: list[_writes.LockPut | _writes.LockDelete]
          ) -> _writes.LockPut | _writes.LockDelete:
    if len(group) == 1:
        return group[0]
    puts = [w for w in group if isinstance(w, _writes.LockPut)]
    deletes = [w for w in group if isinstance(w, _writes.LockDelete)]
    if len(puts) > 1:
        first, second = puts[0], puts[1]
        raise UniqueViolation(
            model=second.model,
            fields=second.lock.fields,
            constraint=second.lock.constraint,
            value=second.lock.value,
            owner={k: untyped(v) for k, v in first.owner.items()},
            hashed=second.lock.hashed,
        )
    previous = tuple(o for d in deletes for o in _owners(d))
    if puts:
        put = puts[0]
        owners = (put.owner, *[o for o in previous if o != put.owner])
        return attrs.evolve(put, guard=_writes.HeldBy(owners))
    if len({repr(_owners(d)) for d in deletes}) > 1:
        raise ConcurrentModificationError(
            f"two records of this unit of work both believe they hold lock {deletes[0].lock.key!r};"
            " at least one copy is stale: reload and retry"
        )
    return deletes[0]


def _owners(write: _writes.LockDelete) -> tuple[TypedKey, ...]:
    # A planned delete is guarded by its owner (only the backfill deletes an exact lock).
    assert isinstance(write.guard, _writes.HeldBy)
    return write.guard.owners


# --- update(actions): the record they make ---------------------------------------------------


def action_target(action: Action) -> str:
    """The top-level attribute an update action changes."""
    path = action.values[0]
    if not isinstance(path, Path):
        raise UnsupportedOperationError(f"cannot tell which attribute {action!r} changes")
    return str(path.path[0]).split("[", 1)[0]


def predict(info: ModelInfo, loaded: Mapping[str, Any], actions: Sequence[Action],
             relevant: set[str]) -> tuple[dict[str, Any], bool]:
    """The record after ``actions``; complete=False when some result cannot be known."""
    predicted = copy.deepcopy(dict(loaded))
    complete = True
    for action in actions:
        target = action_target(action)
        path = action.values[0]
        assert isinstance(path, Path)
        top_level = len(path.path) == 1 and "[" not in path.path[0]
        if isinstance(action, SetAction) and top_level and isinstance(action.values[1], Value):
            predicted[target] = copy.deepcopy(action.values[1].value)
            continue
        if isinstance(action, RemoveAction) and top_level:
            predicted.pop(target, None)
            continue
        if target == info.version_attr:
            base = int(loaded[target]["N"]) if target in loaded else 0
            predicted[target] = {"N": str(base + 1)}
            continue
        if target in relevant:
            # The action's repr holds its operands: not shown for a hashed constraint's.
            hidden = any(target in b.attr_names for b in info.constraints if b.constraint.hashed)
            shown = "an update action" if hidden else f"update action {action!r}"
            raise UnsupportedOperationError(
                f"{shown} changes {target!r}, which a unique lock depends "
                "on, in a way that cannot be known before sending; assign the new value and "
                "call save() instead"
            )
        complete = False
    return predicted, complete
