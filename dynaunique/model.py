"""Model: a PynamoDB model whose unique constraints are kept by lock items on every write.

The metaclass collects ``unique=True`` fields and ``Meta.constraints`` when the class is defined
(and rejects mistakes there, with ``ConfigurationError``). Each instance remembers the item it was
loaded from; ``save()``, ``delete()`` and ``update()`` diff that snapshot against the current values
(``dynaunique.unit_of_work``, pure) and hand the plan to ``dynaunique.transaction``. The snapshot is
refreshed only after a write succeeded.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, ClassVar, TypeVar

from pynamodb import attributes as pa
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction, Update
from pynamodb.models import MetaModel
from pynamodb.models import Model as PynamoModel
from pynamodb.pagination import ResultIterator

from dynaunique import transaction
from dynaunique.attributes import UniqueOptions
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import (
    ConcurrentModificationError,
    ConfigurationError,
    ForeignLockError,
    InvalidValueError,
    UnsupportedOperationError,
)
from dynaunique.locks import (
    LOCK_ATTRIBUTES,
    LOCK_SORT_KEY,
    OWNER_ATTR,
    RESERVED_PREFIX,
    is_reserved_key,
    lock_key,
    lock_primary_key,
    untyped,
)
from dynaunique.unit_of_work import (
    BoundConstraint,
    Expression,
    LockRef,
    ModelInfo,
    Plan,
    RecordDelete,
    RecordPut,
    Unchanged,
    locks_of,
    plan_delete,
    plan_save,
    plan_update,
)

_M = TypeVar("_M", bound="Model")

_SCALAR_TYPES = (pa.UnicodeAttribute, pa.NumberAttribute, pa.BinaryAttribute,
                 pa.BooleanAttribute, pa.UTCDateTimeAttribute)
_NOT_LOCKABLE = (pa.VersionAttribute, pa.TTLAttribute, pa.DiscriminatorAttribute)
_UNIQUE_OPTIONS = {"unique", "normalize", "lock_name", "hashed"}

# table name → lock name → (model class, declared explicitly). Guards against two models on one
# table silently sharing a lock namespace.
_lock_names: dict[str, dict[str, tuple[type, bool]]] = {}
_lock_names_guard = threading.Lock()


def _identity(value: Any) -> Any:
    return value


def _bind(cls: type[Model]) -> None:
    meta = getattr(cls, "Meta", None)
    table = getattr(meta, "table_name", None) if meta is not None else None
    attributes = cls.get_attributes()
    declared: list[UniqueConstraint] = []
    for field, attribute in attributes.items():
        if isinstance(attribute, UniqueOptions) and attribute.unique:
            declared.append(UniqueConstraint(
                (field,),
                name=attribute.lock_name or "",
                normalize=attribute.normalize,
                hashed=attribute.hashed,
            ))
    for constraint in getattr(meta, "constraints", ()) or ():
        if not isinstance(constraint, UniqueConstraint):
            raise ConfigurationError(
                f"{cls.__name__}.Meta.constraints holds {constraint!r}; only UniqueConstraint "
                "values belong there"
            )
        declared.append(constraint)
    if table is None:
        if declared:
            raise ConfigurationError(f"{cls.__name__} declares unique constraints but no "
                                     "Meta.table_name")
        cls._du_info = None
        return

    names: set[str] = set()
    bound: list[BoundConstraint] = []
    for constraint in declared:
        if constraint.name in names:
            raise ConfigurationError(
                f"{cls.__name__} declares the unique constraint name {constraint.name!r} twice; "
                "give each constraint its own name (lock_name= or name=)"
            )
        names.add(constraint.name)
        attr_names = []
        converters = []
        for field in constraint.fields:
            found = attributes.get(field)
            if found is None:
                raise ConfigurationError(
                    f"constraint {constraint.name} of {cls.__name__} names unknown field "
                    f"{field!r}; the fields are {sorted(attributes)}"
                )
            attribute = found
            if not isinstance(attribute, _SCALAR_TYPES) or isinstance(attribute, _NOT_LOCKABLE):
                raise ConfigurationError(
                    f"{cls.__name__}.{field} is a {type(attribute).__name__}; unique constraints "
                    "take string, number, binary, boolean or datetime attributes"
                )
            attr_names.append(attribute.attr_name)
            converters.append(attribute.serialize if isinstance(attribute, pa.UTCDateTimeAttribute)
                              else _identity)
        bound.append(BoundConstraint(constraint, tuple(attr_names), tuple(converters),
                                     plain=all(c is _identity for c in converters)))

    hash_field = cls._hash_keyname
    if hash_field is None:
        raise ConfigurationError(f"{cls.__name__} has no hash key")
    hash_attribute = attributes[hash_field]
    range_field = cls._range_keyname
    range_attribute: pa.Attribute[Any] | None = attributes[range_field] if range_field else None
    if bound:
        if hash_attribute.attr_type != "S":
            raise ConfigurationError(
                f"{cls.__name__}'s hash key {hash_field!r} is not a string attribute; lock items "
                "share the table's key, so a model with unique constraints needs a string hash key"
            )
        if range_attribute is not None and range_attribute.attr_type != "S":
            raise ConfigurationError(
                f"{cls.__name__}'s range key {range_field!r} is not a string attribute; lock items "
                "use the range key 'LOCK', so it must be a string"
            )
        for index in getattr(cls, "_indexes", {}).values():
            for attribute in index.Meta.attributes.values() if hasattr(index.Meta, "attributes") \
                    else []:
                if attribute.attr_name in LOCK_ATTRIBUTES:
                    raise ConfigurationError(
                        f"index {index.Meta.index_name} of {cls.__name__} is keyed on "
                        f"{attribute.attr_name!r}, an attribute every lock item carries; lock "
                        "items must stay out of indexes: rename that attribute (attr_name=)"
                    )
    version_field = cls._version_attribute_name
    ttl_field = next((f for f, a in attributes.items() if isinstance(a, pa.TTLAttribute)), None)
    if bound:
        # A lock item carries the table's key attributes and the TTL beside its own attributes:
        # the same name twice would make one overwrite the other.
        for role, named in (("hash key", hash_field), ("range key", range_field),
                            ("TTL attribute", ttl_field)):
            if named is not None and attributes[named].attr_name in LOCK_ATTRIBUTES:
                raise ConfigurationError(
                    f"{cls.__name__}'s {role} is stored as {attributes[named].attr_name!r}, a "
                    f"name every lock item uses for itself ({', '.join(LOCK_ATTRIBUTES)}); give "
                    "it another attr_name="
                )
    secret = getattr(meta, "lock_secret", None)
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    cls._du_info = ModelInfo(
        name=cls.__name__,
        table=table,
        hash_attr=hash_attribute.attr_name,
        range_attr=range_attribute.attr_name if range_attribute is not None else None,
        hash_field=hash_field,
        range_field=range_field,
        version_attr=attributes[version_field].attr_name if version_field else None,
        version_field=version_field,
        ttl_attr=attributes[ttl_field].attr_name if ttl_field else None,
        ttl_field=ttl_field,
        constraints=tuple(bound),
        meta_secret=secret,
    )
    _register_lock_names(cls, table, declared)


def _same_model(a: type, b: type) -> bool:
    # A subclass shares its parent's locks (polymorphic models on one table); a class of the same
    # name is a redefinition (a reloaded module, a test) and writes the same lock items.
    return a.__name__ == b.__name__ or issubclass(a, b) or issubclass(b, a)


def _register_lock_names(cls: type, table: str, declared: Sequence[UniqueConstraint]) -> None:
    with _lock_names_guard:
        taken = _lock_names.setdefault(table, {})
        for constraint in declared:
            previous = taken.get(constraint.name)
            if (previous is not None and not _same_model(previous[0], cls)
                    and not (previous[1] and constraint.explicit_name)):
                raise ConfigurationError(
                    f"{cls.__name__} and {previous[0].__name__} both use lock name "
                    f"{constraint.name!r} on table {table!r}; two models may share a lock "
                    "namespace only when both name it explicitly (lock_name= / name=)"
                )
        # Only a class that passed every check claims its names.
        for constraint in declared:
            taken[constraint.name] = (cls, constraint.explicit_name)


class ModelMeta(MetaModel):
    """PynamoDB's model metaclass, plus: collect and validate the unique constraints."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                discriminator: Any = None) -> ModelMeta:
        # PynamoDB's MapAttribute takes unknown keywords as map values (and drops them when the
        # class is built), so ``unique=True`` there would silently protect nothing.
        for field, value in namespace.items():
            if isinstance(value, pa.MapAttribute) and _UNIQUE_OPTIONS & set(
                    value.__dict__.get("attribute_values", {})):
                raise ConfigurationError(
                    f"{name}.{field} is a {type(value).__name__}, which cannot be unique: "
                    "declare a UniqueConstraint over scalar fields instead"
                )
        cls: ModelMeta = super().__new__(mcs, name, bases, namespace, discriminator)  # type: ignore[no-untyped-call]
        return cls

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                 discriminator: Any = None) -> None:
        super().__init__(name, bases, namespace, discriminator)
        _bind(cls)  # type: ignore[arg-type]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _render_condition(condition: Condition | None) -> Expression | None:
    return None if condition is None else Expression.of(condition)


class Model(PynamoModel, metaclass=ModelMeta):
    """A PynamoDB model whose ``unique=True`` fields and ``Meta.constraints`` are enforced.

    Everything PynamoDB offers keeps working (get, query, scan, indexes, conditions); lock items
    never come back from ``scan``/``query``/``count``. Declare a string hash key.
    """

    _du_info: ClassVar[ModelInfo | None] = None
    #: The item as last loaded from or written to DynamoDB (None: never loaded).
    _du_loaded: dict[str, Any] | None = None

    # --- loading and snapshots -------------------------------------------------------------------

    @classmethod
    def _instantiate(cls: type[_M], attribute_values: dict[str, dict[str, Any]]) -> _M:
        instance = super()._instantiate(attribute_values)
        if isinstance(instance, Model):
            instance._du_loaded = copy.deepcopy(attribute_values)
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        """Load ``attribute_values`` (as PynamoDB does) and remember them as the loaded state."""
        super().deserialize(attribute_values)
        self._du_loaded = copy.deepcopy(attribute_values)

    @classmethod
    def _du_build(cls: type[_M], item: Mapping[str, Any]) -> _M:
        """A throwaway instance holding ``item``, for computing that state's locks.

        Deserializing does not mutate ``item``, and the instance is never saved, so neither a
        copy nor a snapshot is needed (this is on every save's path).
        """
        instance: _M = super()._instantiate(dict(item))
        return instance

    def _du_key(self) -> dict[str, Any]:
        info = self._du_info
        assert info is not None
        hash_value, range_value = self._get_hash_range_key_serialized_values()
        key = {info.hash_attr: {"S": hash_value}}
        if info.range_attr is not None and range_value is not None:
            key[info.range_attr] = {"S": range_value}
        return key

    def _du_loaded_for_key(self) -> dict[str, Any] | None:
        """The loaded item, if it is this object's current key (a changed key is a new record)."""
        loaded = self._du_loaded
        info = self._du_info
        if loaded is None or info is None:
            return None
        try:
            key = self._du_key()
        except Exception:
            return None
        if all(loaded.get(k) == v for k, v in key.items()):
            return loaded
        return None

    @classmethod
    def _du_lock_inputs(cls, item: Mapping[str, Any]) -> Any:
        """What ``locks_of`` needs of a stored item: without a condition (which may read any
        attribute) only the constrained fields are deserialized, not the whole record."""
        info = cls._du_info
        assert info is not None
        if info.has_conditions:
            return cls._du_build(item)
        attributes = cls.get_attributes()
        values: dict[str, Any] = {}
        for bound in info.constraints:
            for field in bound.constraint.fields:
                attribute = attributes[field]
                raw = item.get(attribute.attr_name)
                if raw is None or "NULL" in raw:
                    # As PynamoDB's loading does: a missing attribute takes its default.
                    default = attribute.default
                    values[field] = default() if callable(default) else default
                else:
                    values[field] = attribute.deserialize(attribute.get_value(raw))
        return SimpleNamespace(**values)

    def _du_old_locks(self, loaded: Mapping[str, Any] | None,
                      reads: set[str] | None = None) -> dict[str, LockRef]:
        info = self._du_info
        assert info is not None
        if loaded is None:
            return {}
        # The loaded state's locks are computed once per snapshot (snapshots are replaced, never
        # mutated), so repeated saves of one loaded object do not rebuild it.
        cached = self.__dict__.get("_du_old_cache")
        if cached is not None and cached[0] is loaded:
            if reads is not None:
                reads.update(cached[2])
            return dict(cached[1])
        found: set[str] = set()
        locks = locks_of(info, self._du_lock_inputs(loaded), found)
        self.__dict__["_du_old_cache"] = (loaded, locks, frozenset(found))
        if reads is not None:
            reads.update(found)
        return dict(locks)

    # --- planning --------------------------------------------------------------------------------

    def _du_item(self, loaded: Mapping[str, Any] | None) -> dict[str, Any]:
        info = self._du_info
        assert info is not None
        item = self.serialize(null_check=True)
        if info.version_attr is not None:
            base = loaded.get(info.version_attr) if loaded is not None else None
            if base is not None:
                version = int(base["N"]) + 1
            else:
                current = getattr(self, info.version_field or "", None)
                version = (int(current) + 1) if (loaded is None and current is not None) else 1
            item[info.version_attr] = {"N": str(version)}
        return item

    def _du_plan_save(self, condition: Condition | None = None,
                      add_version_condition: bool = True) -> Plan:
        info = self._du_info
        assert info is not None
        loaded = self._du_loaded_for_key()
        item = self._du_item(loaded)
        cond = _render_condition(condition)
        if not info.constraints:
            # No locks at stake: PynamoDB's semantics (a plain put, version-guarded if any).
            key = {k: item[k] for k in (info.hash_attr, info.range_attr) if k is not None}
            guard = self._du_version_guard(loaded) if add_version_condition else None
            return Plan((RecordPut(info.table, info.name, key, item, guard, cond),))
        new_reads: set[str] = set()
        new_locks = locks_of(info, self, new_reads)
        reads: set[str] = set()
        old_locks = self._du_old_locks(loaded, reads)
        plan = plan_save(
            info,
            item=item,
            new_locks=new_locks,
            loaded_item=loaded,
            old_locks=old_locks,
            now=_now(),
            condition=cond,
            use_version=add_version_condition,
            condition_reads=reads,
        )
        self.__dict__["_du_new_locks"] = (plan, new_locks, frozenset(new_reads))
        return plan

    def _du_plan_delete(self, loaded: Mapping[str, Any], condition: Condition | None = None,
                        add_version_condition: bool = True) -> Plan:
        info = self._du_info
        assert info is not None
        cond = _render_condition(condition)
        reads: set[str] = set()
        old_locks = self._du_old_locks(loaded, reads)
        return plan_delete(info, loaded_item=loaded, old_locks=old_locks, condition=cond,
                           use_version=add_version_condition, condition_reads=reads)

    def _du_after_save(self, item: Mapping[str, Any], plan: Plan | None = None) -> None:
        info = self._du_info
        assert info is not None
        if info.version_field is not None and info.version_attr is not None \
                and info.version_attr in item:
            setattr(self, info.version_field, int(item[info.version_attr]["N"]))
        # The item was serialized for this write alone and nothing mutates it: no copy needed.
        loaded = dict(item)
        self._du_loaded = loaded
        seeded = self.__dict__.pop("_du_new_locks", None)
        if seeded is not None and seeded[0] is plan:
            # The locks just written are the new snapshot's locks: the next save need not
            # rebuild them.
            self.__dict__["_du_old_cache"] = (loaded, seeded[1], seeded[2])

    def _du_read(self) -> dict[str, Any] | None:
        """A strongly consistent read of this object's record (raw item, or None)."""
        response = transaction.client_for(self.Meta).get_item(
            TableName=self.Meta.table_name, Key=self._du_key(), ConsistentRead=True
        )
        item = response.get("Item")
        return dict(item) if item is not None else None

    # --- writes ----------------------------------------------------------------------------------

    def save(self, condition: Condition | None = None, *, add_version_condition: bool = True,
             dry_run: bool = False) -> dict[str, Any]:
        """Save this object and keep its locks right, in one request.

        A never-loaded object is tried as a create; if the record exists, the stored item becomes
        the loaded state and the save is redone as an update of it. Inside ``atomic()`` the save
        is collected and sent when the block ends. ``dry_run=True`` sends nothing and returns
        the request that would be sent.

        :raises UniqueViolation: a value is held by another record.
        :raises ConcurrentModificationError: the record changed since this copy was loaded.
        """
        from dynaunique.atomic import current_unit

        unit = current_unit()
        if unit is not None and not dry_run:
            unit.add_save(self, condition, add_version_condition)
            return {}
        plan = self._du_plan_save(condition, add_version_condition)
        if dry_run:
            return transaction.render_checked(plan)
        client = transaction.client_for(self.Meta)
        foreign: set[str] = set()
        for _ in range(4):
            try:
                response = transaction.execute(plan, client)
            except ForeignLockError as exc:
                # Locks another record holds were never ours to delete: leave them.
                foreign.update(exc.lock_keys)
                plan = plan.without_deletes(foreign)
                continue
            except ConcurrentModificationError as exc:
                write = exc.write
                if not (isinstance(write, RecordPut) and write.create and write is plan.writes[0]
                        and self._du_info is not None and self._du_info.constraints):
                    raise
                # The record exists: adopt the stored item as loaded and redo as an update.
                current = exc.current if exc.current is not None else self._du_read()
                self._du_loaded = copy.deepcopy(current) if current is not None else None
                plan = self._du_plan_save(condition, add_version_condition)
                plan = plan.without_deletes(foreign)
                continue
            record = plan.writes[0]
            assert isinstance(record, RecordPut)
            self._du_after_save(record.item, plan)
            return response
        raise ConcurrentModificationError(
            f"{type(self).__name__} kept changing while this save was retried; try again",
            model=type(self).__name__,
        )

    def delete(self, condition: Condition | None = None, *, add_version_condition: bool = True,
               dry_run: bool = False) -> Any:
        """Delete this record and every lock it holds, in one request.

        An object that was never loaded (or was loaded partially) is read consistently first.
        Deleting a record that does not exist does nothing, as in PynamoDB.
        """
        from dynaunique.atomic import current_unit

        unit = current_unit()
        if unit is not None and not dry_run:
            unit.add_delete(self, condition, add_version_condition)
            return {}
        info = self._du_info
        assert info is not None
        client = transaction.client_for(self.Meta)
        if not info.constraints:
            # No locks at stake: PynamoDB's delete (no read first), sent the same way.
            plan = self._du_plan_delete_unlocked(condition, add_version_condition)
            if dry_run:
                return transaction.render(plan)
            response = transaction.execute(plan, client)
            self._du_loaded = None
            return response
        loaded = self._du_loaded_for_key()
        fresh_read = loaded is None
        foreign: set[str] = set()
        for _ in range(4):
            if loaded is None:
                loaded = self._du_read()
                if loaded is None:
                    self._du_loaded = None
                    return {}
            plan = self._du_plan_delete(loaded, condition, add_version_condition)
            plan = plan.without_deletes(foreign)
            if dry_run:
                return transaction.render_checked(plan)
            try:
                response = transaction.execute(plan, client)
            except ForeignLockError as exc:
                foreign.update(exc.lock_keys)
                continue
            except ConcurrentModificationError:
                if not fresh_read:
                    raise
                loaded = None  # we only read it to delete it: read again and retry
                continue
            self._du_loaded = None
            return response
        raise ConcurrentModificationError(
            f"{type(self).__name__} kept changing while this delete was retried; try again",
            model=type(self).__name__,
        )

    def _du_plan_delete_unlocked(self, condition: Condition | None,
                                 add_version_condition: bool) -> Plan:
        """A model without constraints deletes as PynamoDB does: version-guarded if any."""
        info = self._du_info
        assert info is not None
        guard = (self._du_version_guard(self._du_loaded_for_key())
                 if add_version_condition else None)
        return Plan((RecordDelete(info.table, info.name, self._du_key(), guard,
                                  _render_condition(condition)),))

    def _du_version_guard(self, loaded: Mapping[str, Any] | None) -> Unchanged | None:
        """PynamoDB's optimistic lock for a model without constraints: the version loaded (or
        held in memory), when the model has one and it is known."""
        info = self._du_info
        assert info is not None
        if info.version_attr is None:
            return None
        expected = loaded.get(info.version_attr) if loaded is not None else None
        if expected is None:
            current = getattr(self, info.version_field or "")
            expected = {"N": str(int(current))} if current is not None else None
        return Unchanged(((info.version_attr, expected),)) if expected is not None else None

    def update(self, actions: list[Action], condition: Condition | None = None, *,
               add_version_condition: bool = True, dry_run: bool = False) -> Any:
        """PynamoDB's ``update(actions)``, keeping the locks right.

        Actions that touch no constrained field, nor the TTL, nor an attribute a condition reads,
        are one plain UpdateItem (guarded "unchanged since loaded" when the model has a
        conditional constraint). Actions that set or remove a
        constrained field become one transaction with the lock changes. An action whose result
        cannot be known before sending (``add``, arithmetic, ``if_not_exists`` …) on a field a
        lock depends on raises :class:`UnsupportedOperationError`: assign and ``save()`` instead.
        """
        from dynaunique.atomic import current_unit

        info = self._du_info
        assert info is not None
        if current_unit() is not None:
            raise UnsupportedOperationError(
                "update(actions) inside atomic() is not supported: assign the new values and "
                "call save(), which atomic() collects"
            )
        if not isinstance(actions, list) or not actions:
            raise TypeError("the value of `actions` is expected to be a non-empty list")
        if not info.constraints and not dry_run:
            return super().update(actions, condition, add_version_condition=add_version_condition)
        relevant = {a for b in info.constraints for a in b.attr_names}
        if info.ttl_attr is not None:
            relevant.add(info.ttl_attr)
        touched = [self._du_action_target(a) for a in actions]

        actions = list(actions)
        version_condition = self._handle_version_attribute(actions=actions)
        if add_version_condition and version_condition is not None:
            condition = version_condition if condition is None else condition & version_condition
        # The update and the condition share one set of placeholders.
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        update_text = Update(*actions).serialize(names, values)
        condition_text = condition.serialize(names, values) if condition is not None else None
        update_expr = Expression(update_text or "", {p: n for n, p in names.items()}, values)
        condition_only = Expression(condition_text) if condition_text else None

        loaded = self._du_loaded_for_key()
        if loaded is None and (info.has_conditions or any(t in relevant for t in touched)):
            # The locks' inputs are needed: read the record (one consistent GetItem).
            loaded = self._du_read()
            if loaded is None:
                raise self.DoesNotExist(f"{type(self).__name__} {self._du_key()} does not exist")
        reads: set[str] = set()
        old_locks = self._du_old_locks(loaded, reads) if loaded is not None else {}
        # A condition's inputs are lock inputs too (the attributes it read on the loaded state).
        relevant |= reads
        lock_relevant = any(t in relevant for t in touched)
        predicted: dict[str, Any] | None = None
        new_locks: dict[str, LockRef] = {}
        complete = False
        if loaded is not None:
            # Also for a plain update: a known result lets a resend after a lost response
            # recognise its own write instead of reporting a conflict.
            predicted, complete = self._du_predict(loaded, actions, relevant)
        if lock_relevant:
            assert predicted is not None
            # What a condition reads on the NEW state must match the stored record too: the new
            # state is the stored one plus these actions, not the loaded one.
            new_locks = locks_of(info, self._du_build(predicted), reads)
        plan = plan_update(
            info,
            loaded_item=loaded if loaded is not None else self.serialize(null_check=False),
            update=update_expr,
            predicted_item=predicted,
            predicted_complete=complete,
            old_locks=old_locks,
            new_locks=new_locks,
            lock_relevant=lock_relevant,
            now=_now(),
            condition=condition_only,
            use_version=add_version_condition,
            condition_reads=reads,
        )
        if dry_run:
            return transaction.render_checked(plan)
        client = transaction.client_for(self.Meta)
        try:
            response = transaction.execute(plan, client)
        except ForeignLockError as exc:
            response = transaction.execute(plan.without_deletes(exc.lock_keys), client)
        # A plain UpdateItem returns the new item; a transaction (or a write found already in
        # place) returns none, so the known prediction is used, else one consistent read.
        attributes = response.get("Attributes")
        if attributes is not None:
            self.deserialize(attributes)
        elif predicted is not None and complete:
            self.deserialize(predicted)
        else:
            self.refresh(consistent_read=True)
        return response

    def _du_action_target(self, action: Action) -> str:
        path = action.values[0]
        if not isinstance(path, Path):
            raise UnsupportedOperationError(f"cannot tell which attribute {action!r} changes")
        return str(path.path[0]).split("[", 1)[0]

    def _du_predict(self, loaded: Mapping[str, Any], actions: Sequence[Action],
                    relevant: set[str]) -> tuple[dict[str, Any], bool]:
        """The record after ``actions``; complete=False when some result cannot be known."""
        info = self._du_info
        assert info is not None
        predicted = copy.deepcopy(dict(loaded))
        complete = True
        for action in actions:
            target = self._du_action_target(action)
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
                raise UnsupportedOperationError(
                    f"update action {action!r} changes {target!r}, which a unique lock depends "
                    "on, in a way that cannot be known before sending; assign the new value and "
                    "call save() instead"
                )
            complete = False
        return predicted, complete

    # --- reads -----------------------------------------------------------------------------------

    @classmethod
    def get_by_unique(cls: type[_M], field_or_name: str | None = None, value: Any = None,
                      **values: Any) -> _M:
        """The record holding a unique value: ``Account.get_by_unique("email", "ADA@x.io")``.

        ``field_or_name`` is a field of a one-field constraint or a constraint name (give a tuple
        for a composite: ``get_by_unique("TENANT_SLUG", ("acme", "home"))``); or pass the fields
        as keywords: ``get_by_unique(tenant="acme", slug="home")``. The value is normalized as on
        save. Both reads are strongly consistent.

        :raises Model.DoesNotExist: no record holds the value.
        """
        info = cls._du_info
        if info is None or not info.constraints:
            raise ConfigurationError(f"{cls.__name__} declares no unique constraint")
        bound, raw = cls._du_resolve(info, field_or_name, value, values)
        constraint = bound.constraint
        normalized = constraint.normalized(raw)
        if any(v is None for v in normalized):
            raise cls.DoesNotExist(f"None is never locked ({', '.join(constraint.fields)})")
        lockable = tuple(c(v) for c, v in zip(bound.to_lockable, normalized, strict=True))
        key = lock_key(constraint.name, lockable,
                       secret=info.secret() if constraint.hashed else None)
        client = transaction.client_for(cls.Meta)
        lock = client.get_item(TableName=info.table,
                               Key=lock_primary_key(info.key_attributes, key),
                               ConsistentRead=True).get("Item")
        shown = constraint.display_value(tuple(raw))
        if lock is None or OWNER_ATTR not in lock:
            raise cls.DoesNotExist(f"no {cls.__name__} holds {', '.join(constraint.fields)} "
                                   f"{shown!r}")
        owner = lock[OWNER_ATTR]["M"]
        item = client.get_item(TableName=info.table, Key=owner, ConsistentRead=True).get("Item")
        if item is None:
            raise cls.DoesNotExist(
                f"the lock on {shown!r} names {untyped({'M': owner})}, which does not exist (an "
                "orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)"
            )
        record = cls.from_raw_data(item)
        held = locks_of(info, record).get(constraint.name)
        if held is None or held.key != key:
            raise cls.DoesNotExist(
                f"the lock on {shown!r} names {untyped({'M': owner})}, which no longer holds that "
                "value (an orphan lock)"
            )
        return record

    @classmethod
    def _du_resolve(cls, info: ModelInfo, field_or_name: str | None, value: Any,
                    values: Mapping[str, Any]) -> tuple[BoundConstraint, tuple[Any, ...]]:
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

    @classmethod
    def _du_not_lock(cls) -> Condition:
        info = cls._du_info
        hash_attr = info.hash_attr if info is not None else cls._hash_keyname or ""
        condition: Condition = ~Path(hash_attr).startswith(RESERVED_PREFIX)
        return condition

    @classmethod
    def _du_check_key(cls, hash_key: Any) -> None:
        if is_reserved_key(hash_key):
            raise InvalidValueError(
                f"{hash_key!r} starts with 'UNIQ#', which is reserved for dynaunique's lock items"
            )

    @classmethod
    def _du_check_query_key(cls, hash_key: Any, index_name: str | None) -> None:
        """Refuse a query that could only return lock items.

        A lock's hash key starts with ``UNIQ#`` and its range key is ``LOCK``; an index keyed
        on the table's range key (an inverted index) would list the locks under ``LOCK``.
        """
        if not index_name:
            cls._du_check_key(hash_key)
            return
        info = cls._du_info
        index = cls._indexes.get(index_name)
        if info is None or index is None:
            return
        index_hash = next((a.attr_name for a in index.Meta.attributes.values()
                           if a.is_hash_key), None) if hasattr(index.Meta, "attributes") else None
        if index_hash == info.hash_attr:
            cls._du_check_key(hash_key)
        elif index_hash is not None and index_hash == info.range_attr and hash_key == LOCK_SORT_KEY:
            raise InvalidValueError(
                f"querying {index_name} for {LOCK_SORT_KEY!r} would list dynaunique's lock items "
                "(an index keyed on the table's range key sees them); that value is reserved"
            )

    @classmethod
    def scan(cls: type[_M], filter_condition: Condition | None = None,
             *args: Any, **kwargs: Any) -> ResultIterator[_M]:
        """PynamoDB's scan; lock items and dynaunique's system items are filtered out."""
        not_lock = cls._du_not_lock()
        combined = not_lock if filter_condition is None else filter_condition & not_lock
        result = super().scan(combined, *args, **kwargs)
        return _mark_partial(result, kwargs.get("attributes_to_get"))

    @classmethod
    def query(cls: type[_M], hash_key: Any, *args: Any,
              **kwargs: Any) -> ResultIterator[_M]:
        """PynamoDB's query; a hash key in dynaunique's reserved namespace is refused."""
        cls._du_check_query_key(hash_key, kwargs.get("index_name"))
        result = super().query(hash_key, *args, **kwargs)
        return _mark_partial(result, kwargs.get("attributes_to_get"))

    @classmethod
    def count(cls, hash_key: Any = None, *args: Any, **kwargs: Any) -> int:
        """PynamoDB's count. Without a hash key it counts by a scan, so lock items are excluded
        (PynamoDB would return DescribeTable's approximate ItemCount, locks included)."""
        if hash_key is None:
            if kwargs.get("filter_condition") is not None or args:
                raise ValueError("A hash_key must be given to use filters")
            hash_attr = cls.get_attributes()[cls._hash_keyname or ""].attr_name
            return sum(1 for _ in super().scan(cls._du_not_lock(), attributes_to_get=[hash_attr]))
        cls._du_check_query_key(hash_key, kwargs.get("index_name"))
        return super().count(hash_key, *args, **kwargs)

    @classmethod
    def get(cls: type[_M], hash_key: Any, range_key: Any = None,
            consistent_read: bool = False, attributes_to_get: Sequence[str] | None = None) -> _M:
        """PynamoDB's get; a key in dynaunique's reserved namespace is refused."""
        cls._du_check_key(hash_key)
        instance = super().get(hash_key, range_key, consistent_read=consistent_read,
                               attributes_to_get=attributes_to_get)
        if attributes_to_get is not None:
            instance._du_loaded = None
        return instance

    @classmethod
    def batch_get(cls: type[_M], items: Iterable[Any],
                  consistent_read: bool | None = None,
                  attributes_to_get: Sequence[str] | None = None) -> Iterator[_M]:
        """PynamoDB's batch_get; partial projections are not taken as loaded state."""
        for instance in super().batch_get(items, consistent_read=consistent_read,
                                          attributes_to_get=attributes_to_get):
            if attributes_to_get is not None:
                instance._du_loaded = None
            yield instance

    @classmethod
    def batch_write(cls, auto_commit: bool = True) -> Any:
        """Refused for models with unique constraints: a batch cannot keep locks atomic."""
        info = cls._du_info
        if info is not None and info.constraints:
            raise UnsupportedOperationError(
                f"{cls.__name__}.batch_write() would write records without their locks; use "
                "`with dynaunique.atomic(): ...` and save()/delete() (up to 100 items per "
                "transaction)"
            )
        return super().batch_write(auto_commit)

    def get_save_kwargs_from_instance(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Refused for constrained models: PynamoDB's TransactWrite would bypass the locks."""
        self._du_refuse_pynamo_transaction()
        return super().get_save_kwargs_from_instance(*args, **kwargs)

    def get_delete_kwargs_from_instance(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Refused for constrained models: PynamoDB's TransactWrite would bypass the locks."""
        self._du_refuse_pynamo_transaction()
        return super().get_delete_kwargs_from_instance(*args, **kwargs)

    def get_update_kwargs_from_instance(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Refused for constrained models: PynamoDB's TransactWrite would bypass the locks."""
        self._du_refuse_pynamo_transaction()
        return super().get_update_kwargs_from_instance(*args, **kwargs)

    def _du_refuse_pynamo_transaction(self) -> None:
        info = self._du_info
        if info is not None and info.constraints:
            raise UnsupportedOperationError(
                f"PynamoDB's TransactWrite would write {type(self).__name__} without its locks; "
                "use `with dynaunique.atomic(): obj.save()` instead"
            )


def _mark_partial(result: ResultIterator[_M], attributes_to_get: Any) -> ResultIterator[_M]:
    if attributes_to_get is None:
        return result
    original = result._map_fn

    def load_partial(data: Any) -> Any:
        instance = original(data) if original is not None else data
        if isinstance(instance, Model):
            # A projection is not the record: never diff locks against it.
            instance._du_loaded = None
        return instance

    result._map_fn = load_partial
    return result
