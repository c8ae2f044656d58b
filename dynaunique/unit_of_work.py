"""Plan writes: the loaded state of each object against its current state → a Plan. No I/O.

A :class:`Plan` is data — the exact record and lock writes a save or delete needs, each with its
guard — so it can be printed, asserted in a unit test, or handed to ``dynaunique.transaction`` to
execute. The rules (docs/how-it-works.md shows each request):

* create: record put (guarded on absence) + one lock put per lock the record holds;
* update: record put guarded "unchanged since loaded" + new-lock puts + old-lock deletes; with no
  lock change it is a single plain conditional write;
* delete: record delete (same guard) + one delete per lock held;
* lock puts are guarded "missing, or owned by an allowed owner" (this record, or — for a value
  moving between two records of one unit of work — its old holder), lock deletes "missing, or
  owned by this record": nobody can take over or delete a lock it does not own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import (
    ConcurrentModificationError,
    ConfigurationError,
    InvalidValueError,
    UniqueViolation,
)
from dynaunique.locks import (
    is_reserved_key,
    lock_item,
    lock_key,
    lock_primary_key,
    untyped,
)

Typed = dict[str, Any]
#: A record's primary key as DynamoDB values: ``{"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}``.
TypedKey = dict[str, Any]

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

    @property
    def name(self) -> str:
        """The lock name."""
        return self.constraint.name


@attrs.frozen
class ModelInfo:
    """What the planner needs to know about a model class, computed once at class definition."""

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

    def typed_key(self, hash_value: Any, range_value: Any = None) -> TypedKey:
        """The typed primary key of serialized key values (as PynamoDB serializes them)."""
        key = {self.hash_attr: {self.hash_type: hash_value}}
        if self.range_attr is not None and range_value is not None:
            key[self.range_attr] = {self.range_type or "S": range_value}
        return key

    @property
    def key_attributes(self) -> tuple[str, str | None]:
        """The table's hash and range key attribute names."""
        return self.hash_attr, self.range_attr

    @property
    def has_conditions(self) -> bool:
        """Whether any constraint is conditional (its lock depends on arbitrary fields)."""
        return any(b.constraint.condition is not None for b in self.constraints)

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


# --- locks and their diff ------------------------------------------------------------------------


@attrs.frozen
class LockRef:
    """One lock a record holds (or would hold): its name, key and the value it protects."""

    constraint: str
    fields: tuple[str, ...]
    key: str
    #: The normalized value (a tuple for composite constraints) — shown in errors and locks.
    value: Any
    hashed: bool = False


@attrs.frozen
class LockChange:
    """The history of one constraint's lock across a write: old and new (either may be None)."""

    constraint: str
    old: LockRef | None
    new: LockRef | None

    @property
    def kind(self) -> str:
        """``added``, ``removed``, ``moved`` or ``unchanged``."""
        if self.old is None:
            return "added" if self.new is not None else "unchanged"
        if self.new is None:
            return "removed"
        return "unchanged" if self.old.key == self.new.key else "moved"


class _RecordingValues(dict[str, Any]):
    """An instance's ``attribute_values`` that notes every attribute read through it."""

    def __init__(self, data: Mapping[str, Any], reads: set[str]) -> None:
        super().__init__(data)
        self.reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)


def _evaluate(condition: Callable[[Any], bool], instance: Any, reads: set[str] | None) -> bool:
    """Evaluate a constraint's condition, noting (into ``reads``) the attributes it reads.

    A deterministic condition that read only the attributes S of a state gives the same answer
    on every state that agrees on S — so guarding a write on S (plus the constrained fields) is
    enough to know the stored record holds exactly the locks this state holds.
    """
    values = getattr(instance, "attribute_values", None)
    if reads is None or not isinstance(values, dict):
        return bool(condition(instance))
    names: set[str] = set()
    instance.attribute_values = _RecordingValues(values, names)
    try:
        return bool(condition(instance))
    finally:
        instance.attribute_values = values
        attributes = type(instance).get_attributes()
        reads.update(attributes[n].attr_name for n in names if n in attributes)


def locks_of(info: ModelInfo, instance: Any, reads: set[str] | None = None) -> dict[str, LockRef]:
    """The locks ``instance``'s current values require, by lock name (no lock for a None).

    With ``reads``, the stored names of the attributes that conditions read are added to it.
    """
    held: dict[str, LockRef] = {}
    for bound in info.constraints:
        constraint = bound.constraint
        values = constraint.normalized([getattr(instance, field) for field in constraint.fields])
        if None in values:
            continue
        if constraint.condition is not None and not _evaluate(constraint.condition, instance,
                                                                reads):
            continue
        lockable = (values if bound.plain else
                    tuple(conv(v) for conv, v in zip(bound.to_lockable, values, strict=True)))
        secret = info.secret() if constraint.hashed else None
        key = lock_key(constraint.name, lockable, secret=secret)
        held[constraint.name] = LockRef(
            constraint=constraint.name,
            fields=constraint.fields,
            key=key,
            value=constraint.display_value(lockable),
            hashed=constraint.hashed,
        )
    return held


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


Guard = Absent | Unchanged | HeldBy


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


@attrs.frozen
class RecordDelete:
    """Delete the record."""

    table: str
    model: str
    key: TypedKey
    guard: Unchanged | None
    condition: Expression | None = None


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
    """A ConditionCheck item of an ``atomic()`` block."""

    table: str
    model: str
    key: TypedKey
    condition: Expression
    label: str


Write = RecordPut | RecordUpdate | RecordDelete | LockPut | LockDelete | ConditionCheck
RECORD_WRITES = (RecordPut, RecordUpdate, RecordDelete)


@attrs.frozen
class Plan:
    """The writes of one unit of work and the lock diff that produced them."""

    writes: tuple[Write, ...]
    changes: tuple[LockChange, ...] = ()
    #: A model without constraints: its single write is sent as PynamoDB sends it (no
    #: ``ReturnValuesOnConditionCheckFailure``, which only dynaunique's settling reads).
    pynamodb: bool = False

    @property
    def is_transaction(self) -> bool:
        """False when the plan is one record write and nothing else: a plain conditional write."""
        return not (len(self.writes) == 1 and isinstance(self.writes[0], RECORD_WRITES))

    @property
    def has_work(self) -> bool:
        """Whether anything is to be sent."""
        return bool(self.writes)

    def without_deletes(self, lock_keys: Iterable[str]) -> Plan:
        """This plan minus the deletes of the given locks (locks another record turned out to
        hold: they were never this record's to delete)."""
        skip = set(lock_keys)
        writes = tuple(w for w in self.writes
                       if not (isinstance(w, LockDelete) and w.lock.key in skip))
        return Plan(writes, self.changes, self.pynamodb)


# --- planning ------------------------------------------------------------------------------------


def record_key(info: ModelInfo, item: Mapping[str, Typed]) -> TypedKey:
    """The typed primary key of a serialized record, checked against the reserved prefix."""
    if info.hash_attr not in item:
        raise InvalidValueError(f"{info.name} has no value for its hash key {info.hash_field!r}")
    key = {info.hash_attr: item[info.hash_attr]}
    if is_reserved_key(untyped(item[info.hash_attr])):
        raise InvalidValueError(
            f"{info.name}'s hash key {untyped(item[info.hash_attr])!r} starts with 'UNIQ#', which "
            "is reserved for dynaunique's lock items"
        )
    if info.range_attr is not None:
        if info.range_attr not in item:
            raise InvalidValueError(
                f"{info.name} has no value for its range key {info.range_field!r}"
            )
        key[info.range_attr] = item[info.range_attr]
    return key


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


def _ttl_epoch(info: ModelInfo, item: Mapping[str, Typed]) -> int | None:
    if info.ttl_attr is None or info.ttl_attr not in item:
        return None
    return int(item[info.ttl_attr]["N"])


def _lock_put(info: ModelInfo, lock: LockRef, owner: TypedKey, item: Mapping[str, Typed],
              now: str) -> LockPut:
    ttl = _ttl_epoch(info, item)
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
            created=now,
            ttl=(info.ttl_attr, ttl) if info.ttl_attr is not None and ttl is not None else None,
        ),
        guard=HeldBy((owner,)),
        key=lock_primary_key(info.key_attributes, lock.key),
    )


def _lock_delete(info: ModelInfo, lock: LockRef, owner: TypedKey) -> LockDelete:
    return LockDelete(
        table=info.table,
        model=info.name,
        lock=lock,
        key=lock_primary_key(info.key_attributes, lock.key),
        guard=HeldBy((owner,)),
    )


def diff_locks(old: Mapping[str, LockRef], new: Mapping[str, LockRef]) -> tuple[LockChange, ...]:
    """One LockChange per lock name present on either side, in a stable order."""
    names = sorted(set(old) | set(new))
    return tuple(LockChange(n, old.get(n), new.get(n)) for n in names)


def plan_save(
    info: ModelInfo,
    *,
    item: dict[str, Typed],
    new_locks: Mapping[str, LockRef],
    loaded_item: Mapping[str, Typed] | None,
    old_locks: Mapping[str, LockRef],
    now: str,
    condition: Expression | None = None,
    use_version: bool = True,
    condition_reads: Iterable[str] = (),
) -> Plan:
    """Plan a save of a record whose serialized new state is ``item``.

    ``loaded_item`` is the record as it was loaded (None: never loaded — planned as a create)
    and ``old_locks`` the locks that state holds. ``item`` already carries the bumped version.
    """
    key = record_key(info, item)
    if loaded_item is None:
        record: RecordPut = RecordPut(info.table, info.name, key, item, Absent(), condition,
                                      create=True)
        puts = [_lock_put(info, lock, key, item, now) for _, lock in sorted(new_locks.items())]
        return Plan((record, *puts), diff_locks({}, new_locks))

    guard = unchanged_guard(info, loaded_item, use_version=use_version,
                            condition_reads=condition_reads)
    record = RecordPut(info.table, info.name, key, item, guard, condition)
    changes = diff_locks(old_locks, new_locks)
    lock_writes = _lock_writes(info, changes, key, loaded_item, item, now)
    return Plan((record, *lock_writes), changes)


def _lock_writes(info: ModelInfo, changes: Sequence[LockChange], key: TypedKey,
                 before: Mapping[str, Typed], after: Mapping[str, Typed],
                 now: str) -> list[Write]:
    """The lock puts and deletes that take a record from ``before`` to ``after``."""
    ttl_changed = _ttl_epoch(info, after) != _ttl_epoch(info, before)
    writes: list[Write] = []
    for change in changes:
        if change.kind == "unchanged":
            if change.new is not None and ttl_changed:
                # Re-put with the new expiry so the lock expires with the record.
                writes.append(_lock_put(info, change.new, key, after, now))
            continue
        if change.new is not None:
            writes.append(_lock_put(info, change.new, key, after, now))
        if change.old is not None:
            writes.append(_lock_delete(info, change.old, key))
    return writes


def plan_delete(
    info: ModelInfo,
    *,
    loaded_item: Mapping[str, Typed],
    old_locks: Mapping[str, LockRef],
    condition: Expression | None = None,
    use_version: bool = True,
    condition_reads: Iterable[str] = (),
) -> Plan:
    """Plan the delete of a loaded record and every lock it holds."""
    key = record_key(info, loaded_item)
    guard = unchanged_guard(info, loaded_item, use_version=use_version,
                            condition_reads=condition_reads)
    record = RecordDelete(info.table, info.name, key, guard, condition)
    deletes = [_lock_delete(info, lock, key) for _, lock in sorted(old_locks.items())]
    return Plan((record, *deletes), diff_locks(old_locks, {}))


def plan_update(
    info: ModelInfo,
    *,
    loaded_item: Mapping[str, Typed],
    update: Expression,
    predicted_item: dict[str, Typed] | None,
    old_locks: Mapping[str, LockRef],
    new_locks: Mapping[str, LockRef],
    lock_relevant: bool,
    now: str,
    condition: Expression | None = None,
    use_version: bool = True,
    condition_reads: Iterable[str] = (),
    predicted_complete: bool = True,
) -> Plan:
    """Plan ``Model.update(actions)``: an UpdateItem, plus lock writes when a lock moves.

    ``lock_relevant`` says whether the actions touch anything a lock depends on; when they do,
    ``predicted_item`` (the record after the update) decides the new locks. The update is
    guarded "unchanged since loaded" when it is lock-relevant, and also when the model has a
    conditional constraint: the condition must read the same attributes on the stored record
    as on the loaded one for the untouched locks to stay right. ``predicted_complete`` is False
    when some action's result on a lock-irrelevant attribute cannot be known: the prediction
    still decides the locks but is not the record's exact next state.
    """
    key = record_key(info, loaded_item)
    guard = (unchanged_guard(info, loaded_item, use_version=use_version,
                             condition_reads=condition_reads)
             if lock_relevant or info.has_conditions else None)
    record = RecordUpdate(info.table, info.name, key, update, guard, condition,
                          predicted_item if predicted_complete else None)
    if not lock_relevant:
        return Plan((record,), ())
    assert predicted_item is not None
    changes = diff_locks(old_locks, new_locks)
    lock_writes = _lock_writes(info, changes, key, loaded_item, predicted_item, now)
    return Plan((record, *lock_writes), changes)


def _item_id(table: str, key: Mapping[str, Typed]) -> tuple[str, str]:
    return table, repr(sorted((k, sorted(v.items())) for k, v in key.items()))


def merge(plans: Sequence[Plan], extra: Iterable[Write] = ()) -> Plan:
    """Combine the plans of one unit of work into one, as DynamoDB needs it.

    DynamoDB rejects two operations on one item in a transaction, so the writes to one lock item
    are fused: a value freed by one record and taken by another (a swap, a rename chain) becomes
    one put guarded by "owned by the old holder or the new one". Two records taking the same
    value is a :class:`UniqueViolation` before anything is sent.
    """
    records: list[Write] = []
    seen_records: dict[tuple[str, str], Write] = {}
    locks: dict[tuple[str, str], list[LockPut | LockDelete]] = {}
    changes: list[LockChange] = []
    for plan in plans:
        changes.extend(plan.changes)
        for write in plan.writes:
            if isinstance(write, (LockPut, LockDelete)):
                locks.setdefault(_item_id(write.table, write.key), []).append(write)
                continue
            ident = _item_id(write.table, write.key)
            if ident in seen_records:
                raise InvalidValueError(
                    f"two objects in one unit of work write the same {write.model} record "
                    f"{[untyped(v) for v in write.key.values()]}: save one object per record"
                )
            seen_records[ident] = write
            records.append(write)
    for write in extra:
        ident = _item_id(write.table, write.key)
        if ident in seen_records:
            raise InvalidValueError(
                f"a condition check targets {[untyped(v) for v in write.key.values()]}, which "
                "this unit of work also writes: DynamoDB allows one operation per item"
            )
        seen_records[ident] = write
        records.append(write)
    lock_writes: list[Write] = []
    for group in locks.values():
        lock_writes.append(_fuse(group))
    # One write of a model without constraints, alone: still sent as PynamoDB sends it.
    alone = len(plans) == 1 and len(records) == 1 and not lock_writes
    return Plan((*records, *lock_writes), tuple(changes), pynamodb=alone and plans[0].pynamodb)


def _fuse(group: list[LockPut | LockDelete]) -> LockPut | LockDelete:
    if len(group) == 1:
        return group[0]
    puts = [w for w in group if isinstance(w, LockPut)]
    deletes = [w for w in group if isinstance(w, LockDelete)]
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
    previous = tuple(o for d in deletes for o in d.guard.owners)
    if puts:
        put = puts[0]
        owners = (put.owner, *[o for o in previous if o != put.owner])
        return attrs.evolve(put, guard=HeldBy(owners))
    if len({repr(d.guard.owners) for d in deletes}) > 1:
        raise ConcurrentModificationError(
            f"two records of this unit of work both believe they hold lock {deletes[0].lock.key!r};"
            " at least one copy is stale: reload and retry"
        )
    return deletes[0]
