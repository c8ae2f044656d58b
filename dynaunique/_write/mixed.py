"""Tables several models share: a write replaces or deletes only an item holding no lock it
does not carry.

A record write of model W that may meet an existing item (any write but a create) is guarded,
beside its own guard, on the item holding no lock of a constraint W does not declare — of any
other model bound to the table (``binding.table_models``). The cheap guard is
:class:`~dynaunique._write.writes.Lacking`: for each such constraint, one of its stored fields is
absent (a record missing a field of a constraint holds no lock of it). When it fails, DynamoDB
returns the item and it is judged precisely, by the audit's rule: the model it is a record of
(``_items.claim``) and the locks that model requires of it as stored (``_items.locks_of``). An
item holding a lock W's write does not carry is refused (``OtherModelRecordError``, naming both
models); any other item is written over, guarded on being still the item judged (``exactly``:
the attributes the table's models know present or absent as they were, the values a lock or
the choice of model depends on equal). On a table with one model the set is empty and nothing
changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pynamodb.attributes import DiscriminatorAttribute
from pynamodb.constants import PUT
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path
from pynamodb.models import BatchWrite

from dynaunique._lock.items import claim, plain_key, stored_locks
from dynaunique._model.binding import GENERATION, table_models
from dynaunique._write.state import Op, OpKind, holds, same_item
from dynaunique._write.writes import Guard, Lacking, OthersGuard, Shaped, Unchanged
from dynaunique.errors import OtherModelRecordError


def _models(table: str) -> list[Any]:
    return [m for m in table_models(table) if m._du_info is not None]


# class → (registry generation, its cheap guard): on every write's path, derived only from
# declarations, so computed once per class until another model is defined.
_lacking: dict[Any, tuple[int, Lacking | None]] = {}


# table → (registry generation, how many models it has): as ``_lacking``, for every loaded save.
_counts: dict[str, tuple[int, int]] = {}


def _model_count(table: str) -> int:
    """How many models are bound to ``table`` (cached per registry generation)."""
    cached = _counts.get(table)
    if cached is None or cached[0] != GENERATION[0]:
        cached = _counts[table] = (GENERATION[0], len(table_models(table)))
    return cached[1]


def lacking(cls: Any) -> Lacking | None:
    """The cheap guard of ``cls``'s writes: the item lacks a field of every constraint of the
    table that ``cls`` does not declare itself (None: there is none)."""
    generation = GENERATION[0]
    cached = _lacking.get(cls)
    if cached is not None and cached[0] == generation:
        return cached[1]
    guard = _lacking_now(cls)
    _lacking[cls] = (generation, guard)
    return guard


def _lacking_now(cls: Any) -> Lacking | None:
    info = cls._du_info
    own = {(b.name, b.attr_names) for b in info.constraints}
    groups: set[tuple[str, ...]] = set()
    for model in _models(info.table):
        attributes = model.get_attributes()
        for bound in model._du_info.constraints:
            if (bound.name, bound.attr_names) in own:
                continue
            # A field with a default is never absent to the model that loads it (PynamoDB fills
            # the default in): its absence proves nothing. No field left: the item must not be.
            groups.add(tuple(sorted(
                name for field, name in zip(bound.constraint.fields, bound.attr_names, strict=True)
                if attributes[field].default is None)))
    # A group holding a smaller one is implied by it (lacking a field of the smaller one lacks
    # a field of the larger): left out.
    minimal = [g for g in groups if not any(set(o) < set(g) for o in groups)]
    return Lacking(tuple(sorted(minimal))) if minimal else None


def others_fields(cls: Any) -> set[str]:
    """The stored fields of the constraints of the table that ``cls`` does not declare."""
    cheap = lacking(cls)
    return {name for group in cheap.groups for name in group} if cheap is not None else set()


def touched(op: Op) -> set[str]:
    """The top-level attributes an update's actions set or remove."""
    names = set()
    for action in op.actions or ():
        path = action.values[0]
        if isinstance(path, Path):
            names.add(str(path.path[0]).split("[", 1)[0])
    return names


def exactly(cls: Any, item: Mapping[str, Any], models: Sequence[Any] | None = None) -> Shaped:
    """The guard "the item is still ``item``" as far as the audit's rule can tell: which of the
    attributes any model of the table knows are present, and the values of those a lock or the
    choice of model depends on — constrained fields and discriminators; every value when a model
    has a conditional constraint or a ``Meta.is_record`` hook, which may read any. ``models``:
    the table's models (default: those bound to it)."""
    info = cls._du_info
    models = _models(info.table) if models is None else models
    names = set(item)
    valued: set[str] = set()
    every_value = False
    for model in models:
        attributes = model.get_attributes().values()
        names.update(a.attr_name for a in attributes)
        valued.update(a.attr_name for a in attributes if isinstance(a, DiscriminatorAttribute))
        valued.update(n for b in model._du_info.constraints for n in b.attr_names)
        every_value |= (model._du_info.has_conditions
                        or getattr(model.Meta, "is_record", None) is not None)
    names -= {info.hash_attr, info.range_attr}
    here = sorted(n for n in names if n in item)
    return Shaped(
        equal=tuple((n, item[n]) for n in here if every_value or n in valued),
        present=tuple(n for n in here if not (every_value or n in valued)),
        absent=tuple(sorted(n for n in names if n not in item)))


def identity(models: Sequence[Any], cls: Any, item: Mapping[str, Any],
             pinned: Iterable[str] = ()) -> Shaped | None:
    """The guard "the item is still a record of the model it was read as" (the audit's rule,
    ``_items.claim``, over ``models``, the table's models), in its cheapest sound form; None on
    a table with one model, where every item is a record of it.

    A ``Meta.is_record`` hook may read any value: :func:`exactly`. Else the discriminators'
    values (or their absence) are pinned; a stored discriminator that names a class of the
    table decides alone. Otherwise the claim ranks models by which of their attributes are
    present: the presence of every attribute some model knows is pinned, but for one every
    model knows as nullable (it counts alike for all of them). ``pinned``: attributes the
    write's own guard already holds to their value or absence (its ``Unchanged``), left out.
    """
    if len(models) < 2:
        return None
    if any(getattr(m.Meta, "is_record", None) is not None for m in models):
        return exactly(cls, item, models)
    known = [{a.attr_name: a for a in m.get_attributes().values()} for m in models]
    keys = {n for attributes in known for n, a in attributes.items()
            if a.is_hash_key or a.is_range_key}
    discriminators = sorted({n for attributes in known for n, a in attributes.items()
                             if isinstance(a, DiscriminatorAttribute)})
    equal = tuple((n, item[n]) for n in discriminators if n in item)
    absent = [n for n in discriminators if n not in item]
    if equal and _decided_by_discriminator(models, item):
        return Shaped(equal=equal, absent=tuple(absent))
    names = set().union(*known) - keys - set(discriminators) - set(pinned)
    ranked = sorted(n for n in names
                    if not all(n in attributes and attributes[n].null for attributes in known))
    return Shaped(equal=equal, present=tuple(n for n in ranked if n in item),
                  absent=tuple(sorted([*absent, *(n for n in ranked if n not in item)])))


def _decided_by_discriminator(models: Sequence[Any], item: Mapping[str, Any]) -> bool:
    """Whether the claim's discriminator step names the model of ``item`` (no hook ruling)."""
    for model in models:
        try:
            stored = model._get_discriminator_class(dict(item))
        except Exception:  # an unknown discriminator value: not this model
            stored = None
        if stored is not None and any(issubclass(stored, m) for m in models):
            return True
    return False


def meets(guard: Any, item: Mapping[str, Any] | None) -> bool:
    """Whether ``item`` (None: absent) meets a write's own ``guard`` as DynamoDB would judge it
    (an ``Unchanged``; any other guard, or none, is not judged here: True)."""
    if not isinstance(guard, Unchanged):
        return True
    if item is None:
        return False
    return all(n not in item if v is None else
               n in item and same_item({"v": item[n]}, {"v": v}) for n, v in guard.expected)


def same_model(cls: Any, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether ``after`` is a record of the model ``before`` was (the audit's rule): a copy
    loaded from ``before`` that meets ``after`` in its place is stale when not."""
    models = _models(cls._du_info.table)
    was, unclear = claim(models, before, prefer=cls)
    now, problem = claim(models, after, prefer=cls)
    return problem is None and unclear is None and was is now


def of_another_model(cls: Any, item: Mapping[str, Any] | None) -> bool:
    """Whether ``item`` is a record of a model of the table other than ``cls`` (by the audit's
    rule): a save by ``cls`` makes it one of ``cls``'s, and the locks it keeps must say so."""
    if item is None or _model_count(cls._du_info.table) < 2:
        return False
    models = _models(cls._du_info.table)
    owner, _ = claim(models, item, prefer=cls)
    return owner is not None and owner._du_info.name != cls._du_info.name


def as_condition(guard: Lacking, hash_attr: str) -> Condition:
    """``guard`` as a PynamoDB condition, for writes PynamoDB sends (its ``TransactWrite``)."""
    condition: Condition | None = None
    for group in guard.groups:
        term: Condition | None = None
        for name in group or (hash_attr,):
            absent = Path(name).does_not_exist()
            term = absent if term is None else term | absent
        assert term is not None
        condition = term if condition is None else condition & term
    assert condition is not None
    return condition


class GuardedBatchWrite(BatchWrite[Any]):
    """``batch_write()`` of a model without constraints on a table that holds lock items.

    A BatchWriteItem carries no condition, so it could write over a lock or over another
    model's record without its locks. Each item is written by the model's own guarded
    ``save()``/``delete()`` instead (one request per item: the same write units, no batching);
    a key in the reserved namespace is refused as it is added, before anything is sent.
    """

    def save(self, put_item: Any) -> None:
        """Add a put (refused at once when its key is reserved)."""
        put_item._du_check_key(put_item._get_hash_range_key_serialized_values()[0])
        super().save(put_item)

    def delete(self, del_item: Any) -> None:
        """Add a delete (refused at once when its key is reserved)."""
        del_item._du_check_key(del_item._get_hash_range_key_serialized_values()[0])
        super().delete(del_item)

    def commit(self) -> None:
        """Write every pending item, each guarded, as PynamoDB's batch would (no version
        checks: a batch write carries none)."""
        pending: Iterable[dict[str, Any]]
        pending, self.pending_operations = self.pending_operations, []
        for operation in pending:
            item = operation["item"]
            if operation["action"] == PUT:
                item.save(add_version_condition=False)
            else:
                item.delete(add_version_condition=False)


# --- the unit of work's judging (dynaunique._write.flush, dynaunique._write.record) ---------------


def others_guard(op: Op, judged: Mapping[str, Any] | None,
                 guard: Guard | None = None) -> OthersGuard | None:
    """The guard keeping ``op``'s write off other models' locks: the cheap one, or — once an
    item failing it was judged to hold none — "exactly that item". An update setting a field
    of another model's constraint was judged on its result: it is always guarded on exactly
    the item it was predicted from (and never creates one). On a table several models share,
    a write over a judged item is also guarded on that item still being a record of the model
    it was judged to be (:func:`identity`): equal lock inputs do not prove it (``guard``: the
    write's own, whose ``Unchanged`` attributes need no second term)."""
    cls = type(op.obj)
    cheap = lacking(cls)
    if cheap is not None and op.kind is OpKind.UPDATE and touched(op) & others_fields(cls):
        return exactly(cls, judged) if judged is not None else Shaped(())
    if judged is None or _model_count(cls._du_info.table) < 2:
        return cheap
    if cheap is not None and not holds(cheap, judged):
        return exactly(cls, judged)
    # What the write's own guard pins as ``judged`` has it (present or absent) needs no term.
    same = ([n for n, v in guard.expected if (v is None) == (n not in judged)]
            if isinstance(guard, Unchanged) else ())
    pinned = identity(_models(cls._du_info.table), cls, judged, same)
    if pinned is None:
        return cheap
    if cheap is None:
        return pinned
    # Lacking, made exact: of each group, a field the judged item lacks stays absent.
    lacks = {next(n for n in group if n not in judged) for group in cheap.groups}
    return Shaped(pinned.equal, pinned.present, tuple(sorted(lacks.union(pinned.absent))))


def judge_result(cls: Any, before: Mapping[str, Any], after: Mapping[str, Any],
                 locks: Iterable[str], moves: bool) -> None:
    """Refuse an update whose result would be a record of another model than the one whose
    locks it leaves (``locks``: the lock keys this write leaves the record holding), or that
    writes locks (``moves``) for a record that stays another model's: a lock names the model
    of its record."""
    info = cls._du_info
    models = _models(info.table)
    if len(models) < 2:
        return
    owner, problem = claim(models, after, prefer=cls)
    required = (set() if owner is None else
                {r.key for r in stored_locks(owner, after).values()})
    foreign = owner is not None and owner._du_info.name != info.name
    if problem is None and required == set(locks) and not (moves and foreign):
        return
    key = plain_key({k: before[k] for k in info.key_attributes if k is not None})
    other = owner._du_info.name if owner is not None else "no model"
    raise OtherModelRecordError(
        f"{info.name} cannot update {key}: the result would be a record of {other} "
        f"({problem or 'whose locks are not the ones this update leaves'}); save it as "
        "the model it is, or delete it and create it as the other",
        model=info.name, other_model=other if owner is not None else "", key=key)


def transact_condition(obj: Any, condition: Condition | None) -> Condition | None:
    """The condition of ``obj``'s write in PynamoDB's ``TransactWrite``: a reserved key is
    refused; on a table other models share, the cheap guard is added (there is no judging and
    resending inside someone else's transaction: it fails instead)."""
    info = obj._du_info
    if info is None:
        return condition
    obj._du_check_key(obj._get_hash_range_key_serialized_values()[0])
    cheap = lacking(type(obj))
    if cheap is None:
        return condition
    guard = as_condition(cheap, info.hash_attr)
    return guard if condition is None else condition & guard


def judge(op: Op, item: Mapping[str, Any] | None) -> None:
    """Refuse to write over ``item`` when it holds a lock ``op``'s write does not carry.

    :raises OtherModelRecordError: naming both models and the locks at stake.
    """
    if item is None:
        return
    cls = type(op.obj)
    cheap = lacking(cls)
    if cheap is None or holds(cheap, item):
        return
    info = cls._du_info
    verb = "delete" if op.kind is OpKind.DELETE else "replace"
    key = plain_key({k: item[k] for k in info.key_attributes if k is not None and k in item})
    owner, problem = claim(_models(info.table), item, prefer=cls)
    if problem is not None:
        raise OtherModelRecordError(
            f"{info.name} cannot {verb} {key}: which model it is a record of is unclear "
            f"({problem}); write it as the model it belongs to",
            model=info.name, other_model="", key=key)
    if owner is None or not owner._du_info.constraints:
        return
    held = stored_locks(owner, item)
    mine = ({ref.key for ref in stored_locks(cls, item).values()}
            if info.constraints else set())
    foreign = sorted(name for name, ref in held.items() if ref.key not in mine)
    if foreign:
        # What its model requires of it, by its values: held, or not yet written (a record
        # from before the constraint, awaiting its migration) — the message claims no more.
        other, many = owner._du_info.name, len(foreign) > 1
        raise OtherModelRecordError(
            f"{info.name} cannot {verb} {key}: it is a record of {other}, whose constraint"
            f"{'s' if many else ''} {', '.join(foreign)} require{'' if many else 's'} "
            f"{'locks' if many else 'a lock'} of it that this write does not carry; delete it "
            f"as {other} first, or do both in atomic()",
            model=info.name, other_model=other, key=key, locks=foreign)
