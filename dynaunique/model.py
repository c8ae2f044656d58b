"""Model: a PynamoDB model whose unique constraints are kept by lock items on every write.

The metaclass collects ``unique=True`` fields and ``Meta.constraints`` when the class is defined
(and rejects mistakes there, with ``ConfigurationError``). Each instance remembers the item it was
loaded from; ``save()``, ``delete()`` and ``update()`` diff that snapshot against the current values
(``dynaunique.unit_of_work``, pure) and hand the plan to ``dynaunique.transaction``. The snapshot is
refreshed only after a write succeeded.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, ClassVar, TypeVar

from pynamodb.exceptions import AttributeNullError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction, Update
from pynamodb.models import Model as PynamoModel
from pynamodb.pagination import ResultIterator

from dynaunique._binding import ModelMeta, table_holds_locks
from dynaunique.connection import Steps, connection_for, policy_for, run, send_steps
from dynaunique.errors import (
    ConfigurationError,
    InvalidValueError,
    UnsupportedOperationError,
)
from dynaunique.flush import (
    Flushed,
    InstanceState,
    Op,
    OpKind,
    Unit,
    as_operation,
    current_unit,
    flush,
    flush_steps,
)
from dynaunique.locks import (
    LOCK_SORT_KEY,
    MODEL_ATTR,
    OWNER_ATTR,
    RESERVED_PREFIX,
    is_reserved_key,
    lock_key,
    lock_primary_key,
    untyped,
)
from dynaunique.observe import traced
from dynaunique.transaction import render_checked, same_item
from dynaunique.unit_of_work import (
    BoundConstraint,
    Expression,
    LockRef,
    ModelInfo,
    Plan,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Write,
    locks_of,
    plan_delete,
    plan_save,
    plan_update,
    record_key,
)

_M = TypeVar("_M", bound="Model")

def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _render_condition(condition: Condition | None) -> Expression | None:
    return None if condition is None else Expression.of(condition)


def _and(first: Condition | None, second: Condition) -> Condition:
    return second if first is None else first & second


def _stored_problem(raw: Mapping[str, Any]) -> str | None:
    """Why DynamoDB would refuse this serialized scalar (None: it would not); ``"binary text"``
    for a ``str`` in a binary value, which the wire carries as its UTF-8 bytes."""
    if "S" in raw:
        return None if isinstance(raw["S"], str) else f"a string must be a str, not {raw['S']!r}"
    if "N" in raw:
        number = raw["N"]
        try:
            finite = isinstance(number, str) and Decimal(number).is_finite()
        except ArithmeticError:
            finite = False
        return None if finite else f"{number!r} is not a finite number"
    if "B" in raw:
        value = raw["B"]
        if isinstance(value, str):
            return "binary text"
        return None if isinstance(value, (bytes, bytearray)) else f"{value!r} is not binary"
    if "BOOL" in raw:
        return None if isinstance(raw["BOOL"], bool) else f"{raw['BOOL']!r} is not a boolean"
    return None


class Model(PynamoModel, metaclass=ModelMeta):
    """A PynamoDB model whose ``unique=True`` fields and ``Meta.constraints`` are enforced.

    Everything PynamoDB offers keeps working (get, query, scan, indexes, conditions); lock items
    never come back from ``scan``/``query``/``count``. Declare a string hash key.
    """

    _du_info: ClassVar[ModelInfo | None] = None

    # --- instance state --------------------------------------------------------------------------

    @property
    def _du_state(self) -> InstanceState:
        """Everything dynaunique remembers of this instance (``dynaunique.flush``)."""
        state = self.__dict__.get("_du_state_")
        if state is None:
            state = self.__dict__["_du_state_"] = InstanceState()
        return state

    @property
    def _du_loaded(self) -> dict[str, Any] | None:
        """The item as last loaded from or written to DynamoDB (None: never loaded)."""
        return self._du_state.loaded

    @_du_loaded.setter
    def _du_loaded(self, item: dict[str, Any] | None) -> None:
        state = self._du_state
        state.loaded = item
        state.unknown = None

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

    @classmethod
    def _du_key_of(cls, hash_key: Any, range_key: Any = None) -> dict[str, Any]:
        """The typed primary key of the record with these (python) key values."""
        info = cls._du_info
        assert info is not None
        return info.typed_key(*cls._serialize_keys(hash_key, range_key))

    def _du_key(self) -> dict[str, Any]:
        """This object's typed primary key, as PynamoDB serializes it."""
        info = self._du_info
        assert info is not None
        return info.typed_key(*self._get_hash_range_key_serialized_values())

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
        if all(same_item(loaded.get(k), v) for k, v in key.items()):
            return loaded
        return None

    @classmethod
    def _du_lock_inputs(cls, item: Mapping[str, Any]) -> Any:
        """What ``locks_of`` needs of a stored (or about to be stored) item: locks derive from
        what is stored, never from the python value. Without a condition (which may read any
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
        state = self._du_state
        cached = state.old_locks
        if cached is not None and cached[0] is loaded:
            if reads is not None:
                reads.update(cached[2])
            return dict(cached[1])
        found: set[str] = set()
        locks = locks_of(info, self._du_lock_inputs(loaded), found)
        state.old_locks = (loaded, locks, frozenset(found))
        if reads is not None:
            reads.update(found)
        return dict(locks)

    # --- planning (no I/O) -----------------------------------------------------------------------

    def _du_serialize(self) -> dict[str, Any]:
        """This object as the item DynamoDB will store, every value checked before sending.

        A value its attribute cannot serialize, or serializes to something DynamoDB would refuse
        (``True`` or ``"12abc"`` in a number, an ``int`` in a string, NaN), is an
        :class:`InvalidValueError` naming the field. A ``str`` given to a binary attribute is
        stored as its UTF-8 bytes (as the wire would carry it), so its lock is those bytes'.
        """
        try:
            item: dict[str, Any] = self.serialize(null_check=True)
        except (TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, AttributeNullError):
                raise
            for field, attribute in self.get_attributes().items():
                value = getattr(self, field, None)
                if value is None:
                    continue
                try:
                    attribute.serialize(value)
                except Exception as inner:
                    raise InvalidValueError(
                        f"{type(self).__name__}.{field} = {value!r} cannot be stored as a "
                        f"{type(attribute).__name__}: {inner}"
                    ) from exc
            raise
        for field, attribute in self.get_attributes().items():
            raw = item.get(attribute.attr_name)
            if raw is not None:
                problem = _stored_problem(raw)
                if problem == "binary text":
                    raw["B"] = raw["B"].encode("utf-8")
                elif problem is not None:
                    raise InvalidValueError(
                        f"{type(self).__name__}.{field} = {getattr(self, field, None)!r} cannot "
                        f"be stored as a {type(attribute).__name__}: {problem}"
                    )
        return item

    def _du_item(self, loaded: Mapping[str, Any] | None) -> dict[str, Any]:
        info = self._du_info
        assert info is not None
        item = self._du_serialize()
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
        """Plan a save of this object from its snapshot (see :meth:`_du_plan_save_from`)."""
        return self._du_plan_save_from(self._du_loaded_for_key(), condition,
                                       add_version_condition)

    def _du_plan_save_from(self, loaded: Mapping[str, Any] | None,
                           condition: Condition | None = None,
                           add_version_condition: bool = True) -> Plan:
        """Plan a save of this object over the stored state ``loaded`` (None: a create)."""
        info = self._du_info
        assert info is not None
        item = self._du_item(loaded)
        cond = _render_condition(condition)
        if not info.constraints:
            # No locks at stake: PynamoDB's semantics (a plain put, version-guarded if any).
            key = record_key(info, item)
            if add_version_condition and info.version_attr is not None:
                cond = _render_condition(_and(condition, self._du_version_condition(loaded)))
            return Plan((RecordPut(info.table, info.name, key, item, None, cond),), pynamodb=True)
        new_reads: set[str] = set()
        new_locks = locks_of(info, self._du_lock_inputs(item), new_reads)
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
        self._du_state.new_locks = (plan, new_locks, frozenset(new_reads))
        return plan

    def _du_version_condition(self, loaded: Mapping[str, Any] | None) -> Condition:
        """PynamoDB's optimistic lock for a model without constraints: the version loaded (or
        held in memory) must still be stored — or, for a first save, no version at all."""
        info = self._du_info
        assert info is not None and info.version_field is not None
        attribute = self.get_attributes()[info.version_field]
        stored = loaded.get(info.version_attr or "") if loaded is not None else None
        current = int(stored["N"]) if stored is not None else getattr(self, info.version_field)
        if current is None:
            return attribute.does_not_exist()
        condition: Condition = attribute == current
        return condition

    def _du_plan_delete(self, loaded: Mapping[str, Any], condition: Condition | None = None,
                        add_version_condition: bool = True) -> Plan:
        info = self._du_info
        assert info is not None
        if not info.constraints:
            if add_version_condition and info.version_attr is not None:
                condition = _and(condition, self._du_version_condition(loaded))
            return Plan((RecordDelete(info.table, info.name, record_key(info, loaded), None,
                                      _render_condition(condition)),), pynamodb=True)
        reads: set[str] = set()
        old_locks = self._du_old_locks(loaded, reads)
        return plan_delete(info, loaded_item=loaded, old_locks=old_locks,
                           condition=_render_condition(condition),
                           use_version=add_version_condition, condition_reads=reads)

    # --- the unit of work's hooks (dynaunique.flush) ---------------------------------------------

    def _du_needs_stored(self, op: Op) -> bool:
        """Whether planning ``op`` needs the stored record when this object was never loaded."""
        info = self._du_info
        assert info is not None
        if op.kind is OpKind.SAVE:
            return False  # planned as a create; an existing record is adopted on refusal
        if op.kind is OpKind.DELETE:
            return bool(info.constraints)  # its locks are those of the stored values
        relevant = self._du_lock_relevant(info)
        touched = {self._du_action_target(a) for a in op.actions or ()}
        return info.has_conditions or bool(touched & relevant)

    def _du_plan(self, op: Op, loaded: Mapping[str, Any] | None) -> Plan:
        """Plan ``op`` from the stored state ``loaded`` (pure)."""
        if op.kind is OpKind.SAVE:
            return self._du_plan_save_from(loaded, op.condition, op.add_version_condition)
        if op.kind is OpKind.DELETE:
            if loaded is None:
                # No stored state known (a model without constraints deletes by key).
                loaded = self._du_key()
            return self._du_plan_delete(loaded, op.condition, op.add_version_condition)
        return self._du_plan_update(op, loaded)

    def _du_finish_steps(self, op: Op, record: Write | None,
                         response: Mapping[str, Any]) -> Steps[None]:
        """After the unit succeeded: this object's new snapshot (one read when it is unknown)."""
        if op.kind is OpKind.DELETE:
            self._du_loaded = None
            return
        if op.kind is OpKind.SAVE:
            assert isinstance(record, RecordPut)
            self._du_after_save(record.item, record)
            return
        # An update: a plain UpdateItem returns the new item; a transaction (or a write found
        # already in place) returns none, so the known prediction is used, else one read.
        attributes = response.get("Attributes")
        if attributes is not None:
            self.deserialize(attributes)
        elif isinstance(record, RecordUpdate) and record.predicted is not None:
            self.deserialize(copy.deepcopy(record.predicted))
        else:
            item = yield from self._du_read_steps()
            if item is None:
                raise self.DoesNotExist("This item does not exist in the table.")
            self.deserialize(item)

    def _du_after_save(self, item: Mapping[str, Any], record: Write | None = None) -> None:
        """``item`` was written: it is the new snapshot (and the version the object holds)."""
        info = self._du_info
        assert info is not None
        state = self._du_state
        if info.version_field is not None and info.version_attr in item:
            setattr(self, info.version_field, int(item[info.version_attr or ""]["N"]))
        # The item was serialized for this write alone and nothing mutates it: no copy.
        loaded = dict(item)
        self._du_loaded = loaded
        seeded, state.new_locks = state.new_locks, None
        if seeded is not None and any(w is record for w in seeded[0].writes):
            # The locks just written are the new snapshot's: the next save need not rebuild.
            state.old_locks = (loaded, seeded[1], seeded[2])

    def _du_read_steps(self) -> Steps[dict[str, Any] | None]:
        """A strongly consistent read of this object's record (raw item, or None)."""
        info = self._du_info
        assert info is not None
        response = yield from send_steps(
            connection_for(self.Meta), "GetItem",
            {"TableName": info.table, "Key": self._du_key(), "ConsistentRead": True},
            policy=policy_for(self.Meta))
        item = response.get("Item")
        return dict(item) if item is not None else None

    def _du_flush(self, op: Op, dry_run: bool) -> Flushed:
        unit = Unit()
        unit.add(op)
        # Also PynamoDB's PutError/DeleteError/UpdateError, for `except PutError:` code.
        with traced(type(self).__name__, op.kind.value), as_operation(op.kind.value):
            return flush(unit, dry_run=dry_run)

    def _du_may_adopt(self, op: Op, current: Mapping[str, Any] | None) -> bool:
        """Whether a never-loaded save that met an existing record may become an update of it.

        Not when the model is versioned and the object's version does not match the stored
        one: PynamoDB refuses that save (its first save is guarded ``attribute_not_exists``,
        later ones on the version held), and so does dynaunique.
        """
        info = self._du_info
        assert info is not None
        if current is None or not op.add_version_condition or info.version_field is None:
            return True
        mine = getattr(self, info.version_field)
        stored = current.get(info.version_attr or "")
        return mine is not None and stored is not None and int(stored["N"]) == int(mine)

    async def _du_aflush(self, op: Op) -> Flushed:
        """:meth:`_du_flush` under asyncio: the same flush, driven by ``dynaunique.aio``."""
        from dynaunique.aio import arun  # only an async caller needs the async client

        unit = Unit()
        unit.add(op)
        with traced(type(self).__name__, op.kind.value), as_operation(op.kind.value):
            return await arun(flush_steps(unit))

    # --- writes ----------------------------------------------------------------------------------

    def save(self, condition: Condition | None = None, *, add_version_condition: bool = True,
             dry_run: bool = False) -> dict[str, Any]:
        """Save this object and keep its locks right, in one request.

        A never-loaded object is tried as a create; if the record exists, the stored item becomes
        the loaded state and the save is redone as an update guarded on it. A copy loaded earlier
        whose record changed since is refused (``ConcurrentModificationError``), never written
        over. Inside ``atomic()`` the save is collected and sent when the block ends.
        ``dry_run=True`` sends nothing and returns the request that would be sent. A model that
        declares no constraint saves exactly as PynamoDB does.

        :raises UniqueViolation: a value is held by another record.
        :raises ConcurrentModificationError: the record changed since this copy was loaded.
        """
        unit = current_unit()
        if unit is not None and not dry_run:
            unit.add_save(self, condition, add_version_condition)
            return {}
        if not dry_run and not self._du_constrained():
            response = super().save(condition, add_version_condition=add_version_condition)
            self._du_loaded = self.serialize(null_check=False)
            return response
        flushed = self._du_flush(Op(self, OpKind.SAVE, condition, add_version_condition),
                                 dry_run)
        return render_checked(flushed.plan) if dry_run else flushed.response

    async def asave(self, condition: Condition | None = None, *,
                    add_version_condition: bool = True) -> dict[str, Any]:
        """:meth:`save` for asyncio: ``await obj.asave()`` — the same plan, request and errors.

        Inside ``async with atomic()`` (or ``with atomic()``) the save is collected, as
        :meth:`save` is. A model without constraints is saved through the same flush (the
        request PynamoDB's ``save`` sends).
        """
        unit = current_unit()
        if unit is not None:
            unit.add_save(self, condition, add_version_condition)
            return {}
        op = Op(self, OpKind.SAVE, condition, add_version_condition)
        return (await self._du_aflush(op)).response

    def delete(self, condition: Condition | None = None, *, add_version_condition: bool = True,
               dry_run: bool = False) -> Any:
        """Delete this record and every lock it holds, in one request.

        An object that was never loaded (or was loaded partially) is read consistently first.
        Deleting a record that does not exist does nothing, as in PynamoDB (unless a version
        or a ``condition`` was to be checked on it).
        """
        unit = current_unit()
        if unit is not None and not dry_run:
            unit.add_delete(self, condition, add_version_condition)
            return {}
        if not dry_run and not self._du_constrained():
            response = super().delete(condition, add_version_condition=add_version_condition)
            self._du_loaded = None
            return response
        flushed = self._du_flush(Op(self, OpKind.DELETE, condition, add_version_condition),
                                 dry_run)
        if dry_run:
            return render_checked(flushed.plan) if flushed.plan.has_work else {}
        return flushed.response

    async def adelete(self, condition: Condition | None = None, *,
                      add_version_condition: bool = True) -> Any:
        """:meth:`delete` for asyncio: ``await obj.adelete()`` — the same requests and errors."""
        unit = current_unit()
        if unit is not None:
            unit.add_delete(self, condition, add_version_condition)
            return {}
        op = Op(self, OpKind.DELETE, condition, add_version_condition)
        return (await self._du_aflush(op)).response

    def _du_constrained(self) -> bool:
        info = self._du_info
        return info is not None and bool(info.constraints)

    @staticmethod
    def _du_lock_relevant(info: ModelInfo) -> set[str]:
        relevant = {a for b in info.constraints for a in b.attr_names}
        if info.ttl_attr is not None:
            relevant.add(info.ttl_attr)
        return relevant

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
        self._du_check_update(actions)
        if not dry_run and not self._du_constrained():
            return super().update(actions, condition, add_version_condition=add_version_condition)
        flushed = self._du_flush(self._du_update_op(actions, condition, add_version_condition),
                                 dry_run)
        return render_checked(flushed.plan) if dry_run else flushed.response

    async def aupdate(self, actions: list[Action], condition: Condition | None = None, *,
                      add_version_condition: bool = True) -> Any:
        """:meth:`update` for asyncio: ``await obj.aupdate([Model.n.add(1)])``."""
        self._du_check_update(actions)
        op = self._du_update_op(actions, condition, add_version_condition)
        return (await self._du_aflush(op)).response

    @staticmethod
    def _du_check_update(actions: list[Action]) -> None:
        if current_unit() is not None:
            raise UnsupportedOperationError(
                "update(actions) inside atomic() is not supported: assign the new values and "
                "call save(), which atomic() collects"
            )
        if not isinstance(actions, list) or not actions:
            raise TypeError("the value of `actions` is expected to be a non-empty list")

    def _du_update_op(self, actions: list[Action], condition: Condition | None,
                      add_version_condition: bool) -> Op:
        actions = list(actions)
        version_condition = self._handle_version_attribute(actions=actions)
        if add_version_condition and version_condition is not None:
            condition = version_condition if condition is None else condition & version_condition
        return Op(self, OpKind.UPDATE, condition, add_version_condition, actions)

    def _du_plan_update(self, op: Op, loaded: Mapping[str, Any] | None) -> Plan:
        info = self._du_info
        assert info is not None
        actions = op.actions or []
        relevant = self._du_lock_relevant(info)
        touched = [self._du_action_target(a) for a in actions]
        # The update and the condition share one set of placeholders.
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        update_text = Update(*actions).serialize(names, values)
        condition_text = (op.condition.serialize(names, values) if op.condition is not None
                          else None)
        update_expr = Expression(update_text or "", {p: n for n, p in names.items()}, values)
        condition_only = Expression(condition_text) if condition_text else None
        if loaded is None and self._du_needs_stored(op):
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
            new_locks = locks_of(info, self._du_lock_inputs(predicted), reads)
        return plan_update(
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
            use_version=op.add_version_condition,
            condition_reads=reads,
        )

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
        return run(cls._du_get_by_unique_steps(field_or_name, value, values))

    @classmethod
    async def aget_by_unique(cls: type[_M], field_or_name: str | None = None, value: Any = None,
                             **values: Any) -> _M:
        """:meth:`get_by_unique` for asyncio: the same two reads, the same errors."""
        from dynaunique.aio import arun

        return await arun(cls._du_get_by_unique_steps(field_or_name, value, values))

    @classmethod
    def _du_get_by_unique_steps(cls: type[_M], field_or_name: str | None, value: Any,
                                values: Mapping[str, Any]) -> Steps[_M]:
        info = cls._du_info
        if info is None or not info.constraints:
            raise ConfigurationError(f"{cls.__name__} declares no unique constraint")
        bound, raw = cls._du_resolve(info, field_or_name, value, values)
        constraint = bound.constraint
        stored = tuple(cls._du_as_stored(f, v) for f, v in zip(constraint.fields, raw,
                                                                 strict=True))
        normalized = constraint.normalized(stored)
        if any(v is None for v in normalized):
            raise cls.DoesNotExist(f"None is never locked ({', '.join(constraint.fields)})")
        lockable = tuple(c(v) for c, v in zip(bound.to_lockable, normalized, strict=True))
        key = lock_key(constraint.name, lockable,
                       secret=info.secret() if constraint.hashed else None)
        connection, policy = connection_for(cls.Meta), policy_for(cls.Meta)
        lock = (yield from send_steps(
            connection, "GetItem",
            {"TableName": info.table, "Key": lock_primary_key(info.key_attributes, key),
             "ConsistentRead": True}, policy=policy)).get("Item")
        shown = constraint.display_value(tuple(raw))
        if lock is None or OWNER_ATTR not in lock or not cls._du_family_holds(lock):
            # A lock name two models share explicitly: the other model's record is not a cls.
            raise cls.DoesNotExist(f"no {cls.__name__} holds {', '.join(constraint.fields)} "
                                   f"{shown!r}")
        owner = lock[OWNER_ATTR]["M"]
        item = (yield from send_steps(
            connection, "GetItem", {"TableName": info.table, "Key": owner, "ConsistentRead": True},
            policy=policy)).get("Item")
        if item is None:
            raise cls.DoesNotExist(
                f"the lock on {shown!r} names {untyped({'M': owner})}, which does not exist (an "
                "orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)"
            )
        # The record read second is returned only if it holds the value now (it may have moved
        # between the two reads).
        held = locks_of(info, cls._du_lock_inputs(item)).get(constraint.name)
        if held is None or held.key != key:
            raise cls.DoesNotExist(
                f"the lock on {shown!r} names {untyped({'M': owner})}, which no longer holds that "
                "value (an orphan lock)"
            )
        return cls.from_raw_data(item)

    @classmethod
    def _du_as_stored(cls, field: str, value: Any) -> Any:
        """``value`` as the attribute stores and loads it back (locks derive from that)."""
        if value is None:
            return None
        attribute = cls.get_attributes()[field]
        try:
            serialized = attribute.serialize(value)
        except Exception as exc:
            raise InvalidValueError(f"{cls.__name__}.{field}: {value!r} cannot be stored as a "
                                    f"{type(attribute).__name__}: {exc}") from exc
        problem = _stored_problem({attribute.attr_type: serialized})
        if problem == "binary text":
            serialized = serialized.encode("utf-8")
        elif problem is not None:
            raise InvalidValueError(f"{cls.__name__}.{field}: {value!r} cannot be stored as a "
                                    f"{type(attribute).__name__}: {problem}")
        return attribute.deserialize(serialized)

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
    def _du_table_holds_locks(cls) -> bool:
        """Whether this table holds lock items: a model defined in this process declares a
        constraint on it, or marks it with ``Meta.holds_locks = True``.

        Decided from the registry of lock names per table, so a model without constraints that
        shares its table with one that has them still keeps lock items out of its reads. A table
        whose models declare none holds no lock items, and its reads are PynamoDB's, unchanged.
        """
        return table_holds_locks(getattr(getattr(cls, "Meta", None), "table_name", None) or "")

    @classmethod
    def _du_not_lock(cls) -> Condition | None:
        """The filter that keeps lock items out of a scan; None when the table holds none."""
        if not cls._du_table_holds_locks():
            return None
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
        if not cls._du_table_holds_locks():
            return  # no lock items to reach: the query is PynamoDB's
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
        """PynamoDB's scan; on a table that holds lock items, they are filtered out."""
        not_lock = cls._du_not_lock()
        combined = (filter_condition if not_lock is None
                    else not_lock if filter_condition is None else filter_condition & not_lock)
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
        """PynamoDB's count. On a table that holds lock items, a count without a hash key is a
        scan that excludes them (DescribeTable's approximate ItemCount, which PynamoDB returns,
        would include them); on any other table it is PynamoDB's, DescribeTable included."""
        not_lock = cls._du_not_lock() if hash_key is None else None
        if not_lock is not None:
            if kwargs.get("filter_condition") is not None or args:
                raise ValueError("A hash_key must be given to use filters")
            hash_attr = cls.get_attributes()[cls._hash_keyname or ""].attr_name
            # A full scan can be costly: honour the read options a caller gave count().
            return sum(1 for _ in super().scan(
                not_lock, attributes_to_get=[hash_attr],
                consistent_read=kwargs.get("consistent_read"),
                rate_limit=kwargs.get("rate_limit")))
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
    async def aget(cls: type[_M], hash_key: Any, range_key: Any = None,
                   consistent_read: bool = False) -> _M:
        """:meth:`get` for asyncio: the loaded object, its snapshot set (ready to change and
        ``asave()``). ``await Account.aget("ACCT#1", consistent_read=True)``.

        :raises Model.DoesNotExist: no such record.
        """
        from dynaunique.aio import arun

        return await arun(cls._du_get_steps(hash_key, range_key, consistent_read))

    @classmethod
    def _du_get_steps(cls: type[_M], hash_key: Any, range_key: Any,
                      consistent_read: bool) -> Steps[_M]:
        cls._du_check_key(hash_key)
        info = cls._du_info
        if info is None:
            raise ConfigurationError(f"{cls.__name__} has no Meta.table_name")
        params: dict[str, Any] = {"TableName": info.table,
                                  "Key": cls._du_key_of(hash_key, range_key)}
        if consistent_read:
            params["ConsistentRead"] = True
        response = yield from send_steps(connection_for(cls.Meta), "GetItem", params,
                                         policy=policy_for(cls.Meta))
        item = response.get("Item")
        if not item:
            raise cls.DoesNotExist()
        return cls.from_raw_data(item)

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
