"""Turn a report's findings into guarded writes — the repair plan. Pure: nothing is read or sent.

Repair never modifies a record: it deletes orphan locks, writes missing ones and hands a lock
over from a record that no longer needs it to the one that does — each as one
TransactWriteItems that also carries ConditionChecks on the records involved, so a record that
changed since it was read cancels the write instead of leaving a missing lock or an orphan
behind. On an MRSC table (no transactions) a lock the protocol wrote is settled by its
``Settle``, and a missing lock or a hand-over written by its ``Claim`` (``_intents``).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import attrs

from dynaunique._lock.items import key_id, owner_key
from dynaunique._lock.locks import LockRef, TypedKey
from dynaunique._write.mixed import identity
from dynaunique._write.mrsc import Claim, Settle, Verdict
from dynaunique._write.plan import Plan
from dynaunique._write.render import render
from dynaunique._write.writes import (
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

from . import _intents
from ._check import AuditReport, SecretWarning
from ._judge import Finding
from ._kinds import ActionKind, FindingKind, OwnerState
from ._stored import _absent, _Record
from ._tables import _info, _strong, _Table, _table_for, _tables

#: The kinds whose repair is a transaction on other tables, the protocol's Claim on MRSC.
_CLAIMED = (FindingKind.MISSING, FindingKind.FOREIGN_OWNER)


@attrs.frozen
class RepairAction:
    """One guarded fix: the finding, and the writes that fix it (one TransactWriteItems) — or,
    for a lock the MRSC protocol wrote, the protocol's rule (:attr:`settle`)."""

    #: ``delete_orphan``, ``put_missing``, ``transfer``, ``drop_unknown`` or
    #: ``confirm_intent``.
    kind: ActionKind
    finding: Finding
    plan: Plan = attrs.field(eq=False, repr=False)
    #: A lock the MRSC protocol wrote (it carries a token): settled by single-item requests,
    #: read its owner, judge, then clear the mark or delete the lock conditioned on the token
    #: (``dynaunique._write.mrsc.Settle``); :attr:`plan` is then empty.
    settle: Settle | None = attrs.field(default=None, eq=False, repr=False)
    #: On an MRSC table (no transactions), a missing lock or a hand-over written by the
    #: protocol's steps (``dynaunique._write.mrsc.Claim``: intent put, the holder read again,
    #: the mark cleared or the intent released); :attr:`plan` is then empty.
    claim: Claim | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def description(self) -> str:
        """One line: what will be written and on which condition."""
        f = self.finding
        owner = f.lock.owner_label if f.lock else "-"
        if self.settle is not None:
            token = self.settle.met.token
            if self.kind == ActionKind.CONFIRM_INTENT:
                return (f"clear the pending mark, if {owner} still holds the value and the "
                        f"lock still carries token {token}")
            return (f"delete, if {owner} still does not hold the value and the lock is still "
                    f"{owner}'s with token {token}")
        if self.claim is not None:
            holder = f.holders[0].label
            steps = (f"put it for {holder} as a pending intent, read {holder} again, then clear "
                     f"the mark if {holder} still holds the value, else delete the intent "
                     "(single-item writes conditioned on the intent's token: no transaction "
                     "on MRSC)")
            if self.claim.met is None:
                return f"if no lock exists, {steps}"
            return (f"hand over from {owner}: if {owner}, read again, still does not hold the "
                    f"value and the lock is still {owner}'s with token {self.claim.met.token}, "
                    f"{steps}")
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
        """The TransactWriteItems request this action sends (without its token); a settled
        lock's: ``{operation: parameters}`` of its conditional write (sent after its owner is
        read again and still judged so)."""
        if self.settle is not None:
            verdict = (Verdict.CONFIRM if self.kind == ActionKind.CONFIRM_INTENT
                       else Verdict.FREE)
            return _intents.planned(self.settle, verdict)
        if self.claim is not None:   # its first write; mrsc_at is the time it is sent
            request = self.claim.request(time.time())
            assert request is not None
            return {request[0]: request[1]}
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
    #: The unfixable findings left because they concern locks another secret made (or a
    #: constraint none of whose locks the current secret made): while there is one,
    #: :func:`apply_repair` refuses to run.
    other_secret: tuple[Finding, ...] = ()
    #: The report's warnings that the secret is probably wrong.
    secret_warnings: tuple[SecretWarning, ...] = ()
    #: Planned with ``accept_other_secret=True``: such locks are judged as the current secret's.
    accept_other_secret: bool = False
    #: Writes in flight (``pending`` intents of an MRSC table, within their grace period):
    #: left alone, neither fixed nor for a person.
    waiting: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``waiting`` only when there are some: an MRSC table's)."""
        data = {"actions": [a.to_dict() for a in self.actions],
                "unfixable": [dict(f.to_dict(), remedy=remedy(f, other_secret=f in
                                                              self.other_secret))
                              for f in self.unfixable],
                "secret_warnings": [w.to_dict() for w in self.secret_warnings],
                "accept_other_secret": self.accept_other_secret}
        if self.waiting:
            data["waiting"] = [dict(f.to_dict(), remedy=remedy(f)) for f in self.waiting]
        return data


@attrs.frozen
class _Secrets:
    """What repair may do about locks the current secret did not make."""

    #: ``(table, lock name)`` of the constraints a SecretWarning names.
    warned: frozenset[tuple[str, str]] = frozenset()
    accept: bool = False

    @classmethod
    def of(cls, warnings: Collection[SecretWarning], accept: bool) -> _Secrets:
        return cls(frozenset((w.table, w.constraint) for w in warnings), accept)

    def holds(self, finding: Finding) -> bool:
        """Whether ``finding`` rests on another secret's locks, so it waits for an explicit
        ``accept``: a lock another secret made, or a missing lock of a constraint none of whose
        locks the current secret made (it is the wrong secret's digest)."""
        return (finding.kind == FindingKind.FOREIGN_SECRET
                or (finding.kind == FindingKind.MISSING
                    and (finding.table, finding.constraint) in self.warned))


_OTHER_SECRET_REMEDY = (
    "check the lock secret (Meta.lock_secret or DYNAUNIQUE_LOCK_SECRET): these locks were not "
    "made with it; if their secret was retired on purpose, run repair --accept-other-secret")


def remedy(finding: Finding, *, other_secret: bool = False) -> str:
    """What a person should do about a finding repair cannot fix (``other_secret``: it was
    left because it rests on locks another secret made, :attr:`RepairPlan.other_secret`)."""
    if other_secret or finding.kind == FindingKind.FOREIGN_SECRET:
        return _OTHER_SECRET_REMEDY
    if finding.kind == FindingKind.DUPLICATE:
        return ("decide which record keeps the value, change the others (through the "
                "library), then run repair to write the keeper's lock if it is missing")
    if finding.kind == FindingKind.UNKNOWN_CONSTRAINT:
        return ("load the model that declares it, remove it with a migration, or run repair "
                f"--drop-unknown {finding.constraint}")
    if finding.kind == FindingKind.UNREADABLE:
        return "fix the record by hand: its locks cannot be computed"
    if finding.kind == FindingKind.PENDING:
        return (f"nothing: a write in flight; after its {_intents.TIMING.grace:g} s grace "
                "period an intent its owner does not hold is an orphan, and repair deletes it")
    if finding.kind == FindingKind.FOREIGN_OWNER and _intents.by_protocol(
            finding.evidence.lock_item):
        return ("the lock is the MRSC protocol's and another record holds the value without a "
                "lock: decide which record keeps it (a write around the library), then change "
                "the other through the library")
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
    # A record as read is also still a record of the model it was read as (the claim): on a
    # table several models share, equal lock inputs do not prove it.
    guard = _as_read(table, record)
    model = table.model_named(record.ref.model)
    others = (identity(table.models, model, record.item, [n for n, _ in guard.expected])
              if isinstance(guard, Unchanged) and record.item is not None else None)
    return ConditionCheck(table=table.name, model=record.ref.model or "", key=record.ref.key,
                          condition=None, label=label, guard=guard, others=others)


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


def _action(table: _Table, finding: Finding, drop_unknown: Collection[str],
            secrets: _Secrets = _Secrets(), strong: bool = False) -> RepairAction | None:
    """The guarded writes that fix ``finding`` as read, or None when no repair may fix it
    (``strong``: the table is MRSC, no transactions: a missing lock or a hand-over is the
    protocol's :class:`~dynaunique._write.mrsc.Claim`)."""
    lock = finding.lock
    owner_key_ = owner_key(table.key_attributes, lock.owner if lock is not None else None)
    if secrets.holds(finding) and not secrets.accept:
        return None
    if finding.kind == FindingKind.UNKNOWN_CONSTRAINT:
        if finding.constraint not in drop_unknown or owner_key_ is None:
            return None
        return RepairAction(ActionKind.DROP_UNKNOWN, finding,
                            Plan((_delete_lock(table, finding, owner_key_),)))
    # Accepted, a lock another secret made is judged as an orphan of the current one.
    orphan = finding.kind in (FindingKind.ORPHAN, FindingKind.FOREIGN_SECRET)
    if not (finding.repairable or (orphan and finding.owner_state in (OwnerState.GONE,
                                                                       OwnerState.CHANGED))):
        return None
    lock_item = finding.evidence.lock_item
    if finding.kind == FindingKind.FOREIGN_OWNER and _intents.by_protocol(lock_item) and (
            not strong):
        return None   # the protocol's lock: handed over only by the protocol's steps
    if finding.kind == FindingKind.CONFIRMABLE or (orphan and _intents.by_protocol(lock_item)):
        # A lock the MRSC protocol wrote: settled by the protocol's rule, never a transaction.
        assert lock_item is not None
        kind = (ActionKind.CONFIRM_INTENT if finding.kind == FindingKind.CONFIRMABLE
                else ActionKind.DELETE_ORPHAN)
        return RepairAction(kind, finding, Plan(()), _intents.settle_rule(table, lock_item))
    owner = None
    if owner_key_ is not None:
        owner = _record(finding, owner_key_) or _absent(table, owner_key_)
    if orphan:
        assert owner_key_ is not None and owner is not None
        return RepairAction(ActionKind.DELETE_ORPHAN, finding, Plan((
            _delete_lock(table, finding, owner_key_),
            _check_record(table, owner, f"owner {owner.ref.label} still does not hold "
                                        f"{finding.constraint} {finding.shown_value!r}"),
        )))
    holder = _record(finding, finding.holders[0].key)
    assert holder is not None
    if strong:
        return _claimed(table, finding, holder)
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


def _claimed(table: _Table, finding: Finding, holder: _Record) -> RepairAction | None:
    """A missing lock or a hand-over on an MRSC table: the protocol's Claim. A hand-over of a
    pending intent its owner may still write (within its grace period) is left for a person."""
    if finding.kind == FindingKind.MISSING:
        return RepairAction(ActionKind.PUT_MISSING, finding, Plan(()),
                            claim=_intents.claim_rule(table, holder, finding.lock_key, None))
    lock_item = finding.evidence.lock_item
    assert lock_item is not None and finding.lock is not None
    owner = _record(finding, finding.lock.owner)
    judged = _intents.verdict(table, lock_item, owner.item if owner is not None else None,
                              time.time())
    if judged is not Verdict.FREE:
        return None
    return RepairAction(ActionKind.TRANSFER, finding, Plan(()),
                        claim=_intents.claim_rule(table, holder, finding.lock_key, lock_item))


def plan_repair(report: AuditReport, *, drop_unknown: Collection[str] = (),
                accept_other_secret: bool = False) -> RepairPlan:
    """The guarded writes that fix a report's findings. Pure: nothing is read or sent.

    Orphans are deleted, missing locks written, locks handed from a record that no longer holds
    the value to the one that does. A lock the MRSC protocol wrote is settled by the protocol's
    rule (:attr:`RepairAction.settle`): a ``confirmable`` intent's mark cleared, an orphan
    deleted, each by one single-item write conditioned on its token; ``pending`` intents (writes
    in flight) are left alone, in :attr:`RepairPlan.waiting`. On an MRSC table a missing lock
    or a hand-over is the protocol's :attr:`RepairAction.claim` (intent put, the holder read
    again, the mark cleared or the intent deleted; the table's mode is asked once per process,
    already known after :func:`check`). Duplicates, unreadable records
    and orphans whose owner no loaded model reads are left for a person (``unfixable``). Locks
    of constraints no model declares are deleted only for the lock names listed in
    ``drop_unknown``.

    Hashed locks another secret made (``foreign_secret``), and the missing locks of a constraint
    none of whose locks the current secret made (a :class:`SecretWarning`), are left too, in
    :attr:`RepairPlan.other_secret` — and :func:`apply_repair` refuses such a plan — unless
    ``accept_other_secret``: then those locks are judged as the current secret's (a retired
    secret's locks are deleted as orphans, and the current secret's written).
    """
    tables = _tables(report.models)
    secrets = _Secrets.of(report.secret_warnings, accept_other_secret)
    strong = {t.name: _strong(t) for t in tables
              if any(f.table == t.name and f.kind in _CLAIMED for f in report.findings)}
    actions = []
    unfixable = []
    waiting = tuple(f for f in report.findings if f.kind == FindingKind.PENDING)
    for finding in report.findings:
        if finding.kind == FindingKind.PENDING:
            continue
        action = _action(_table_for(tables, finding.table), finding, drop_unknown, secrets,
                         strong.get(finding.table, False))
        if action is None:
            unfixable.append(finding)
        else:
            actions.append(action)
    held = tuple(f for f in unfixable if secrets.holds(f)) if not accept_other_secret else ()
    return RepairPlan(tuple(actions), tuple(unfixable), report.models, other_secret=held,
                      secret_warnings=report.secret_warnings,
                      accept_other_secret=accept_other_secret, waiting=waiting)
