"""One object and one call → the one ``Record`` the pure planner takes → a Plan.

The model-facing half of planning, as functions of the instance (no ``_du_*`` method of the
user's class is called): a save serializes the object (every value checked, its version bumped
over the snapshot's) and reads its locks off that item through the class's template
(``ModelInfo``, computed at class definition); a delete takes the snapshot's locks; an update
predicts the record after its actions when they touch anything a lock depends on. The plans
themselves are :mod:`dynaunique._write.plan`'s, pure; :mod:`dynaunique._write.flush` calls
:func:`plan`.

Locks derive from what is stored, never from the python value, and a value DynamoDB would
refuse (``True`` or ``"12abc"`` in a number, an ``int`` in a string, NaN, a string that is not
valid UTF-8 — a lone surrogate, anywhere in the item) is an :class:`InvalidValueError` naming
the field before anything is sent (:func:`serialize_checked`); the message shows the value
through :func:`~dynaunique.errors.format_value`, so a hashed constraint's value never appears.
A ``str`` given to a binary attribute is stored as its UTF-8 bytes (as the wire would carry
it), so its lock is those bytes'.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import attrs
from pynamodb.attributes import Attribute, ListAttribute, MapAttribute
from pynamodb.exceptions import AttributeNullError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Update
from pynamodb.models import Model as PynamoModel

from dynaunique._lock.items import stored_locks
from dynaunique._lock.locks import (
    LockRef,
    is_utf8,
    stored_lock_refs,
)
from dynaunique._write import plan as _plan
from dynaunique._write import writes as _writes
from dynaunique._write.mixed import judge_result, of_another_model, others_fields, others_guard
from dynaunique._write.plan import Plan, Record, action_target, predict
from dynaunique._write.state import InstanceState, Op, OpKind, Stored, loaded_for_key
from dynaunique._write.writes import RECORD_WRITES, Absent, Expression
from dynaunique.errors import InvalidValueError, format_value


def _render_condition(condition: Condition | None) -> Expression | None:
    return None if condition is None else Expression.of(condition)


def _and(first: Condition | None, second: Condition) -> Condition:
    return second if first is None else first & second


# --- values as DynamoDB will store them ------------------------------------------------------

_NOT_UTF8 = "it is not valid UTF-8 (it holds a lone surrogate)"


def stored_problem(raw: Mapping[str, Any]) -> str | None:
    """Why DynamoDB would refuse this serialized value (None: it would not); ``"binary text"``
    for a ``str`` in a binary value, which the wire carries as its UTF-8 bytes. The reason
    never quotes the value (the caller shows it, or hides a hashed one)."""
    if "S" in raw:
        text = raw["S"]
        if not isinstance(text, str):
            return f"a string must be a str, not {type(text).__name__}"
        return None if text.isascii() or is_utf8(text) else _NOT_UTF8
    if "N" in raw:
        number = raw["N"]
        try:
            finite = isinstance(number, str) and Decimal(number).is_finite()
        except ArithmeticError:
            finite = False
        return None if finite else "it is not a finite number"
    if "B" in raw:
        value = raw["B"]
        if isinstance(value, str):
            return "binary text" if is_utf8(value) else _NOT_UTF8
        return None if isinstance(value, (bytes, bytearray)) else (
            f"binary must be bytes, not {type(value).__name__}")
    if "BOOL" in raw:
        return None if isinstance(raw["BOOL"], bool) else (
            f"a boolean must be a bool, not {type(raw['BOOL']).__name__}")
    return None if _all_utf8(raw) else _NOT_UTF8


def _all_utf8(raw: Mapping[str, Any]) -> bool:
    """Whether every string of a serialized value — inside sets, lists and maps too, map keys
    included — is valid UTF-8: DynamoDB refuses the whole item otherwise. One pass, no
    recursion; an ASCII string costs one ``isascii``."""
    pending = [raw]
    while pending:
        for kind, content in pending.pop().items():
            if kind == "S":
                if isinstance(content, str) and not (content.isascii() or is_utf8(content)):
                    return False
            elif kind == "L":
                pending.extend(e for e in content if isinstance(e, Mapping))
            elif kind == "M":
                for name, element in content.items():
                    if isinstance(name, str) and not (name.isascii() or is_utf8(name)):
                        return False
                    if isinstance(element, Mapping):
                        pending.append(element)
            elif kind == "SS" and not all(
                    t.isascii() or is_utf8(t) for t in content if isinstance(t, str)):
                return False
    return True


def hidden_field(model: Any, field: str) -> bool:
    """Whether ``field`` of ``model`` is (part of) a hashed constraint: no message shows it."""
    info = getattr(model, "_du_info", None)
    return info is not None and field in info.hashed_fields


def refusal_for(model: Any, field: str, value: Any, attribute: Any,
             problem: str) -> InvalidValueError:
    """The error for a value of ``model.field`` that cannot be stored: one message, the value
    shown by :func:`~dynaunique.errors.format_value` (a hashed constraint's: never)."""
    return InvalidValueError(
        f"{model.__name__}.{field} = {format_value(value, hashed=hidden_field(model, field))} "
        f"cannot be stored as a {type(attribute).__name__}: {problem}"
    )


def serialize_problem(model: Any, field: str, inner: Exception) -> str:
    """What the attribute said when it refused a value; only the error's type for a hashed
    field (the attribute's message may quote the value)."""
    return type(inner).__name__ if hidden_field(model, field) else str(inner)


#: Per model class: its attributes as :func:`_serialized` walks them, or None (PynamoDB's walk).
_SCALARS: dict[type, Any] = {}
_UNKNOWN = object()
_Scalar = tuple[str, str, str, Any, bool]


def _scalars(model: Any) -> tuple[_Scalar, ...] | None:
    """``model``'s attributes as (python name, stored name, type, serialize, nullable), in
    PynamoDB's order, when its ``serialize`` is PynamoDB's own and every attribute a scalar read
    through PynamoDB's own descriptor — so :func:`_serialized` makes exactly its item; else
    None. Computed once per class."""
    if (model.serialize is not PynamoModel.serialize
            or model._container_serialize is not PynamoModel._container_serialize):
        return None
    fields = []
    for name, attr in model.get_attributes().items():
        if isinstance(attr, (ListAttribute, MapAttribute)) or type(attr).__get__ is not (
                Attribute.__get__) or model._dynamo_to_python_attrs.get(
                attr.attr_name, attr.attr_name) != name:
            return None
        fields.append((name, attr.attr_name, attr.attr_type, attr.serialize, bool(attr.null)))
    return tuple(fields)


def _serialized(values: Mapping[str, Any], fields: tuple[_Scalar, ...]) -> dict[str, Any]:
    # PynamoDB's _container_serialize(null_check=True) over scalar attributes, without the
    # descriptor and container checks they do not need.
    item: dict[str, Any] = {}
    for name, stored, kind, serialize, null in fields:
        value = values.get(name)
        raw = None if value is None else serialize(value)
        if raw is not None:
            item[stored] = {kind: raw}
        elif not null:
            raise AttributeNullError(name)
    return item


def serialize_checked(obj: Any) -> dict[str, Any]:
    """``obj`` (a model instance) as the item DynamoDB will store, every value checked.

    :raises InvalidValueError: a value its attribute cannot serialize, or serializes to
        something DynamoDB would refuse.
    """
    model = type(obj)
    fields = _SCALARS.get(model, _UNKNOWN)
    if fields is _UNKNOWN:
        fields = _SCALARS[model] = _scalars(model)
    try:
        item: dict[str, Any] = (obj.serialize(null_check=True) if fields is None
                                else _serialized(obj.attribute_values, fields))
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, AttributeNullError):
            raise
        for field, attribute in obj.get_attributes().items():
            value = getattr(obj, field, None)
            if value is None:
                continue
            try:
                attribute.serialize(value)
            except Exception as inner:
                error = refusal_for(model, field, value, attribute,
                                 serialize_problem(model, field, inner))
                # A hashed value's refusal is not chained to PynamoDB's, which may quote it.
                raise error from (None if hidden_field(model, field) else exc)
        raise
    # The item holds its attributes in get_attributes' order (PynamoDB serializes in it): the
    # first refused value is the same one; the field is looked up only for a refusal.
    for name, raw in item.items():
        problem = None if raw is None else as_stored_raw(raw)
        if problem is not None:
            field, attribute = next((f, a) for f, a in obj.get_attributes().items()
                                    if a.attr_name == name)
            raise refusal_for(model, field, getattr(obj, field, None), attribute, problem)
    return item


def as_stored_raw(raw: dict[str, Any]) -> str | None:
    """Make the serialized value ``raw`` what DynamoDB stores, in place — a ``str`` in a
    binary value becomes its UTF-8 bytes, as the wire carries it — or say why DynamoDB would
    refuse it (:func:`stored_problem`)."""
    problem = stored_problem(raw)
    if problem == "binary text":
        raw["B"] = raw["B"].encode("utf-8")
        return None
    return problem


def as_stored(model: Any, field: str, value: Any) -> Any:
    """``value`` of ``model.field`` as the attribute stores and loads it back, checked by the
    record's rules (a lookup's locks derive from that)."""
    if value is None:
        return None
    attribute = model.get_attributes()[field]
    try:
        serialized = attribute.serialize(value)
    except Exception as exc:
        error = refusal_for(model, field, value, attribute, serialize_problem(model, field, exc))
        raise error from (None if hidden_field(model, field) else exc)
    raw = {attribute.attr_type: serialized}
    problem = as_stored_raw(raw)
    if problem is not None:
        raise refusal_for(model, field, value, attribute, problem)
    return attribute.deserialize(raw[attribute.attr_type])



# --- what a state holds ---------------------------------------------------------------------------


def item_of(obj: Any, loaded: Mapping[str, Any] | None) -> dict[str, Any]:
    """``obj`` as the item a save writes, its version bumped over ``loaded``'s."""
    info = obj._du_info
    item = serialize_checked(obj)
    if info.version_attr is not None:
        base = loaded.get(info.version_attr) if loaded is not None else None
        if base is not None:
            version = int(base["N"]) + 1
        else:
            current = getattr(obj, info.version_field or "", None)
            version = (int(current) + 1) if (loaded is None and current is not None) else 1
        item[info.version_attr] = {"N": str(version)}
    return item


def old_locks(obj: Any, loaded: Mapping[str, Any] | None,
              reads: set[str] | None = None) -> dict[str, LockRef]:
    """The locks the stored state ``loaded`` holds (computed once per snapshot)."""
    if loaded is None:
        return {}
    model = type(obj)
    state: InstanceState = obj._du_state   # it exists (``loaded_for_key``): no call to reach it
    return state.locks_of_snapshot(
        loaded, lambda item, found: stored_locks(model, item, found), reads)


def version_condition(obj: Any, loaded: Mapping[str, Any] | None) -> Condition:
    """PynamoDB's optimistic lock for a model without constraints: the version loaded (or
    held in memory) must still be stored — or, for a first save, no version at all."""
    info = obj._du_info
    assert info.version_field is not None
    attribute = obj.get_attributes()[info.version_field]
    stored = loaded.get(info.version_attr or "") if loaded is not None else None
    current = int(stored["N"]) if stored is not None else getattr(obj, info.version_field)
    condition: Condition = (attribute.does_not_exist() if current is None
                            else attribute == current)
    return condition


# --- the plans -----------------------------------------------------------------------------------


def plan_save(obj: Any, condition: Condition | None = None,
              add_version_condition: bool = True) -> Plan:
    """Plan a save of ``obj`` from its snapshot (see :func:`plan_save_from`)."""
    return plan_save_from(obj, loaded_for_key(obj), condition, add_version_condition)


def plan_save_from(obj: Any, loaded: Mapping[str, Any] | None,
                   condition: Condition | None = None, add_version_condition: bool = True,
                   now: _writes.Stamp | str | None = None) -> Plan:
    """Plan a save of ``obj`` over the stored state ``loaded`` (None: a create); ``now`` is
    the ``created`` of its lock puts (the unit's one timestamp)."""
    info = obj._du_info
    item = item_of(obj, loaded)
    if not info.constraints:
        # No locks at stake: PynamoDB's semantics (a plain put, version-guarded if any).
        if add_version_condition and info.version_attr is not None:
            condition = _and(condition, version_condition(obj, loaded))
        return _plan.plan_save(Record(info, loaded, item=item,
                                      condition=_render_condition(condition)))
    reads: set[str] = set()
    new_reads: set[str] = set()
    new_locks = (stored_locks(type(obj), item, new_reads) if info.has_conditions
                 else stored_lock_refs(info, item))
    plan = _plan.plan_save(Record(
        info, loaded, old_locks(obj, loaded, reads), item, new_locks,
        condition=_render_condition(condition), use_version=add_version_condition,
        condition_reads=reads, reown=loaded is not None and of_another_model(type(obj), loaded),
        now=now if now is not None else _writes.Stamp()))
    # The state exists already (``loaded_for_key`` made it): seeded for the after-success update.
    obj._du_state.new_locks = (plan, new_locks, frozenset(new_reads))
    return plan


def plan_delete(obj: Any, loaded: Mapping[str, Any], condition: Condition | None = None,
                add_version_condition: bool = True) -> Plan:
    """Plan the delete of ``obj``'s stored state ``loaded`` and every lock it holds."""
    info = obj._du_info
    reads: set[str] = set()
    if not info.constraints:
        if add_version_condition and info.version_attr is not None:
            condition = _and(condition, version_condition(obj, loaded))
        old: dict[str, LockRef] = {}
    else:
        old = old_locks(obj, loaded, reads)
    return _plan.plan_delete(Record(info, loaded, old, condition=_render_condition(condition),
                                    use_version=add_version_condition, condition_reads=reads))


def plan_update(op: Op, loaded: Mapping[str, Any] | None,
                now: _writes.Stamp | str | None = None) -> Plan:
    """Plan ``op``'s ``update(actions)`` over the stored state ``loaded``."""
    obj: Any = op.obj
    info = obj._du_info
    model = type(obj)
    actions = op.actions or []
    relevant = set(info.lock_relevant)
    touched = [action_target(a) for a in actions]
    # The update and the condition share one set of placeholders.
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    update_text = Update(*actions).serialize(names, values)
    condition_text = (op.condition.serialize(names, values) if op.condition is not None
                      else None)
    update_expr = Expression(update_text or "", {p: n for n, p in names.items()}, values)
    condition_only = Expression(condition_text) if condition_text else None
    if loaded is None and needs_stored(op):
        raise obj.DoesNotExist(f"{model.__name__} {obj._du_key()} does not exist")
    reads: set[str] = set()
    old = old_locks(obj, loaded, reads) if loaded is not None else {}
    # A condition's inputs are lock inputs too (the attributes it read on the loaded state).
    relevant |= reads
    lock_relevant = any(t in relevant for t in touched)
    predicted: dict[str, Any] | None = None
    new_locks: dict[str, LockRef] = {}
    complete = False
    if loaded is not None:
        # Also for a plain update: a known result lets a resend after a lost response
        # recognise its own write instead of reporting a conflict.
        predicted, complete = predict(info, loaded, actions, relevant)
    if lock_relevant:
        assert predicted is not None
        # What a condition reads on the NEW state must match the stored record too: the new
        # state is the stored one plus these actions, not the loaded one.
        new_locks = stored_locks(model, predicted, reads)
    reown = False
    if loaded is not None and predicted is not None:
        left = new_locks if lock_relevant else old
        moves = lock_relevant and {r.key for r in new_locks.values()} != {
            r.key for r in old.values()}
        judge_result(model, loaded, predicted, {r.key for r in left.values()}, moves)
        # Another model's record that this update makes one of this model's.
        reown = of_another_model(model, loaded) and not of_another_model(model, predicted)
    stored = loaded if loaded is not None else obj.serialize(null_check=False)
    return _plan.plan_update(
        Record(info, stored, old, predicted, new_locks, condition=condition_only,
               use_version=op.add_version_condition, condition_reads=reads, reown=reown,
               now=now if now is not None else _writes.Stamp()),
        update_expr, lock_relevant=lock_relevant, complete=complete)


def needs_stored(op: Op) -> bool:
    """Whether planning ``op`` needs the stored record when its object was never loaded."""
    info = op.obj._du_info
    if op.kind is OpKind.SAVE:
        return False  # planned as a create; an existing record is adopted on refusal
    if op.kind is OpKind.DELETE:
        return bool(info.constraints)  # its locks are those of the stored values
    relevant = info.lock_relevant | others_fields(type(op.obj))
    touched = {action_target(a) for a in op.actions or ()}
    return info.has_conditions or bool(touched & relevant)


def plan(op: Op, stored: Stored, now: _writes.Stamp | str | None = None) -> Plan | None:
    """Plan ``op`` from the one state its flush knows of its record (no I/O; None: nothing to
    do — done, or a delete of a record the flush found absent). A write that may meet an existing
    item is also guarded off other models' locks (``_model.mixed``)."""
    loaded = stored.item
    if stored.done or (op.kind is OpKind.DELETE and loaded is None and stored.fresh):
        return None
    if op.kind is OpKind.SAVE:
        plan = plan_save_from(op.obj, loaded, op.condition, op.add_version_condition, now)
    elif op.kind is OpKind.DELETE:
        # No stored state known: a model without constraints deletes by key.
        plan = plan_delete(op.obj, loaded if loaded is not None else op.obj._du_key(),
                           op.condition, op.add_version_condition)
    else:
        plan = plan_update(op, loaded, now)
    write = plan.writes[0] if plan.writes else None
    if not isinstance(write, RECORD_WRITES) or isinstance(write.guard, Absent):
        return plan   # a create needs no guard off other models' locks: the item must not exist
    others = others_guard(op, stored.judged, write.guard)
    if others is None:
        return plan   # a table only its model uses
    # The item is judged from what DynamoDB returns with a failed guard: ALL_OLD is asked for.
    return attrs.evolve(plan, writes=(attrs.evolve(write, others=others), *plan.writes[1:]),
                        pynamodb=False)
