"""Turn a report's findings into guarded writes — the repair plan. Pure: nothing is read or sent.

Repair never modifies a record: it deletes orphan locks, writes missing ones and hands a lock
over from a record that no longer needs it to the one that does — each as one
TransactWriteItems that also carries ConditionChecks on the records involved, so a record that
changed since it was read cancels the write instead of leaving a missing lock or an orphan
behind.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import attrs

from dynaunique._items import LockRef, TypedKey, key_id, owner_key
from dynaunique._plan import Plan
from dynaunique._render import render
from dynaunique._writes import (
    Absent,
    ConditionCheck,
    LockDelete,
    LockPut,
    Unchanged,
    lock_delete,
    lock_put,
    unchanged_guard,
)
from dynaunique.model import Model

from ._check import AuditReport
from ._judge import Finding
from ._kinds import ActionKind, FindingKind, OwnerState
from ._stored import _absent, _Record
from ._tables import _info, _Table, _table_for, _tables


@attrs.frozen
class RepairAction:
    """One guarded fix: the finding, and the writes that fix it (one TransactWriteItems)."""

    #: ``delete_orphan``, ``put_missing``, ``transfer`` or ``drop_unknown``.
    kind: ActionKind
    finding: Finding
    plan: Plan = attrs.field(eq=False, repr=False)

    @property
    def description(self) -> str:
        """One line: what will be written and on which condition."""
        f = self.finding
        owner = f.lock.owner_label if f.lock else "-"
        if self.kind == ActionKind.DELETE_ORPHAN:
            state = ("does not exist" if f.owner_state == OwnerState.GONE
                     else "does not hold the value")
            return f"delete, if still owned by {owner} and {owner} still {state}"
        if self.kind == ActionKind.PUT_MISSING:
            holder = f.holders[0].label
            return f"write for {holder}, if no lock exists and {holder} is unchanged"
        if self.kind == ActionKind.TRANSFER:
            holder = f.holders[0].label
            return (f"hand over from {owner} to {holder}, if still owned by {owner}, {owner} "
                    f"still without the value and {holder} unchanged")
        return f"delete, if still owned by {owner}"

    def request(self) -> dict[str, Any]:
        """The TransactWriteItems request this action sends (without its token)."""
        return render(self.plan)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind.value, "description": self.description,
                "finding": self.finding.to_dict()}


@attrs.frozen
class RepairPlan:
    """The result of :func:`plan_repair`: actions to send, and findings a person must decide."""

    actions: tuple[RepairAction, ...]
    #: Findings no repair fixes (duplicates, unknown constraints, unreadable records, ...).
    unfixable: tuple[Finding, ...]
    models: tuple[type[Model], ...] = attrs.field(eq=False, repr=False, default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"actions": [a.to_dict() for a in self.actions],
                "unfixable": [dict(f.to_dict(), remedy=remedy(f)) for f in self.unfixable]}


def remedy(finding: Finding) -> str:
    """What a person should do about a finding repair cannot fix."""
    if finding.kind == FindingKind.DUPLICATE:
        return ("decide which record keeps the value, change the others (through the "
                "library), then run repair to write the keeper's lock if it is missing")
    if finding.kind == FindingKind.UNKNOWN_CONSTRAINT:
        return ("load the model that declares it, remove it with a migration, or run repair "
                f"--drop-unknown {finding.constraint}")
    if finding.kind == FindingKind.UNREADABLE:
        return "fix the record by hand: its locks cannot be computed"
    if finding.owner_state == OwnerState.UNKNOWN:
        return "the owner is not a record of the loaded models: load the module that defines it"
    if finding.owner_state == OwnerState.NONE:
        return "the lock names no owner: inspect it and delete it by hand"
    return "run repair"


def _as_read(table: _Table, record: _Record) -> Absent | Unchanged:
    """A guard true while ``record`` is as read: absent, or its lock inputs unchanged.

    Lock inputs are the constrained attributes, the TTL and the attributes the constraints'
    conditions read, compared by value: records written around the library may not bump a
    version attribute, so the version alone would not prove the values unchanged.
    """
    if not record.exists:
        return Absent()
    model = table.model_named(record.ref.model)
    assert model is not None and record.item is not None
    return unchanged_guard(_info(model), record.item, use_version=False,
                           condition_reads=record.condition_reads)


def _check_record(table: _Table, record: _Record, label: str) -> ConditionCheck:
    return ConditionCheck(table=table.name, model=record.ref.model or "", key=record.ref.key,
                          condition=None, label=label, guard=_as_read(table, record))


def _record(finding: Finding, key: TypedKey | None) -> _Record | None:
    if key is None:
        return None
    return next((r for r in finding.evidence.records if key_id(r.ref.key) == key_id(key)), None)


def _delete_lock(table: _Table, finding: Finding, owner: TypedKey) -> LockDelete:
    lock = finding.lock
    assert lock is not None
    ref = LockRef(constraint=lock.constraint, fields=(), key=lock.key, value=lock.value,
                  hashed=lock.hashed)
    return lock_delete(table.name, table.key_attributes, ref, owner, model=lock.model or "")


def _put_lock(table: _Table, holder: _Record, lock_key: str, allowed: TypedKey) -> LockPut:
    model = table.model_named(holder.ref.model)
    assert model is not None and holder.requires is not None and holder.item is not None
    # Allowed to find it held by `allowed`: the holder itself (a retry, or a save that rewrote
    # it meanwhile) for a missing lock; the previous owner for a hand-over.
    return lock_put(_info(model), holder.requires[lock_key], holder.ref.key, holder.item,
                    allowed=[allowed])


def _action(table: _Table, finding: Finding, drop_unknown: Collection[str]) -> RepairAction | None:
    """The guarded writes that fix ``finding`` as read, or None when no repair may fix it."""
    lock = finding.lock
    owner_key_ = owner_key(table.key_attributes, lock.owner if lock is not None else None)
    if finding.kind == FindingKind.UNKNOWN_CONSTRAINT:
        if finding.constraint not in drop_unknown or owner_key_ is None:
            return None
        return RepairAction(ActionKind.DROP_UNKNOWN, finding,
                            Plan((_delete_lock(table, finding, owner_key_),)))
    if not finding.repairable:
        return None
    owner = None
    if owner_key_ is not None:
        owner = _record(finding, owner_key_) or _absent(table, owner_key_)
    if finding.kind == FindingKind.ORPHAN:
        assert owner_key_ is not None and owner is not None
        return RepairAction(ActionKind.DELETE_ORPHAN, finding, Plan((
            _delete_lock(table, finding, owner_key_),
            _check_record(table, owner, f"owner {owner.ref.label} still does not hold "
                                        f"{finding.constraint} {finding.shown_value!r}"),
        )))
    holder = _record(finding, finding.holders[0].key)
    assert holder is not None
    holder_check = _check_record(table, holder, f"{holder.ref.label} still holds "
                                                f"{finding.constraint} {finding.shown_value!r}")
    if finding.kind == FindingKind.MISSING:
        return RepairAction(ActionKind.PUT_MISSING, finding, Plan((
            _put_lock(table, holder, finding.lock_key, holder.ref.key), holder_check)))
    assert owner_key_ is not None and owner is not None
    return RepairAction(ActionKind.TRANSFER, finding, Plan((
        _put_lock(table, holder, finding.lock_key, owner_key_),
        _check_record(table, owner, f"previous owner {owner.ref.label} still does not hold "
                                    f"{finding.constraint} {finding.shown_value!r}"),
        holder_check,
    )))


def plan_repair(report: AuditReport, *, drop_unknown: Collection[str] = ()) -> RepairPlan:
    """The guarded writes that fix a report's findings. Pure: nothing is read or sent.

    Orphans are deleted, missing locks written, locks handed from a record that no longer holds
    the value to the one that does. Duplicates, unreadable records and orphans whose owner no
    loaded model reads are left for a person (``unfixable``). Locks of constraints no model
    declares are deleted only for the lock names listed in ``drop_unknown``.
    """
    tables = _tables(report.models)
    actions = []
    unfixable = []
    for finding in report.findings:
        action = _action(_table_for(tables, finding.table), finding, drop_unknown)
        if action is None:
            unfixable.append(finding)
        else:
            actions.append(action)
    return RepairPlan(tuple(actions), tuple(unfixable), report.models)
