"""Plan a Model's writes without I/O: its stored state and its current values → a Plan.

A save diffs the object's snapshot against its serialized values; a delete removes the
snapshot's locks; an update predicts the record after its actions, when the actions touch
anything a lock depends on. The plans themselves are :mod:`dynaunique._plan`'s; this
module turns an object and a call into their inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction, Update

import dynaunique._writes as _writes
from dynaunique._items import LockRef, ModelInfo, locks_of, record_key
from dynaunique._model.mixed import MixedMixin, of_another_model, others_fields
from dynaunique._model.stored import serialize_checked
from dynaunique._plan import Plan, Record, plan_delete, plan_save, plan_update
from dynaunique._state import Op, OpKind
from dynaunique._writes import Expression, RecordDelete, RecordPut
from dynaunique.errors import UnsupportedOperationError


def _render_condition(condition: Condition | None) -> Expression | None:
    return None if condition is None else Expression.of(condition)


def _and(first: Condition | None, second: Condition) -> Condition:
    return second if first is None else first & second


def _lock_relevant(info: ModelInfo) -> set[str]:
    """The stored attributes a lock depends on: the constrained ones and the TTL."""
    relevant = {a for b in info.constraints for a in b.attr_names}
    if info.ttl_attr is not None:
        relevant.add(info.ttl_attr)
    return relevant


def _action_target(action: Action) -> str:
    """The top-level attribute an update action changes."""
    path = action.values[0]
    if not isinstance(path, Path):
        raise UnsupportedOperationError(f"cannot tell which attribute {action!r} changes")
    return str(path.path[0]).split("[", 1)[0]


def _predict(info: ModelInfo, loaded: Mapping[str, Any], actions: Sequence[Action],
             relevant: set[str]) -> tuple[dict[str, Any], bool]:
    """The record after ``actions``; complete=False when some result cannot be known."""
    predicted = copy.deepcopy(dict(loaded))
    complete = True
    for action in actions:
        target = _action_target(action)
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


class PlanningMixin(MixedMixin):
    """A model's writes as plans (pure), and the unit of work's planning hooks."""

    def _du_item(self, loaded: Mapping[str, Any] | None) -> dict[str, Any]:
        """This object as the item a save writes, its version bumped over ``loaded``'s."""
        info = self._du_info
        assert info is not None
        item = serialize_checked(self)
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
        plan = plan_save(Record(info, loaded, old_locks, item, new_locks, condition=cond,
                                use_version=add_version_condition, condition_reads=reads,
                                reown=of_another_model(type(self), loaded),
                                now=_writes.stamp()))
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
        return plan_delete(Record(info, loaded, old_locks,
                                  condition=_render_condition(condition),
                                  use_version=add_version_condition, condition_reads=reads))

    def _du_plan_update(self, op: Op, loaded: Mapping[str, Any] | None) -> Plan:
        info = self._du_info
        assert info is not None
        actions = op.actions or []
        relevant = _lock_relevant(info)
        touched = [_action_target(a) for a in actions]
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
            predicted, complete = _predict(info, loaded, actions, relevant)
        if lock_relevant:
            assert predicted is not None
            # What a condition reads on the NEW state must match the stored record too: the new
            # state is the stored one plus these actions, not the loaded one.
            new_locks = locks_of(info, self._du_lock_inputs(predicted), reads)
        reown = False
        if loaded is not None and predicted is not None:
            left = new_locks if lock_relevant else old_locks
            moves = lock_relevant and {r.key for r in new_locks.values()} != {
                r.key for r in old_locks.values()}
            self._du_judge_result(loaded, predicted, {r.key for r in left.values()}, moves)
            # Another model's record that this update makes one of this model's.
            reown = of_another_model(type(self), loaded) and not of_another_model(type(self),
                                                                                  predicted)
        stored = loaded if loaded is not None else self.serialize(null_check=False)
        return plan_update(Record(info, stored, old_locks, predicted, new_locks,
                                  condition=condition_only, use_version=op.add_version_condition,
                                  condition_reads=reads, reown=reown, now=_writes.stamp()),
                           update_expr, lock_relevant=lock_relevant, complete=complete)

    # --- the unit of work's planning hooks (dynaunique._flush) ------------------------------------

    def _du_needs_stored(self, op: Op) -> bool:
        """Whether planning ``op`` needs the stored record when this object was never loaded."""
        info = self._du_info
        assert info is not None
        if op.kind is OpKind.SAVE:
            return False  # planned as a create; an existing record is adopted on refusal
        if op.kind is OpKind.DELETE:
            return bool(info.constraints)  # its locks are those of the stored values
        relevant = _lock_relevant(info) | others_fields(type(self))
        touched = {_action_target(a) for a in op.actions or ()}
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
