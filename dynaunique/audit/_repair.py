"""Send a repair plan: one guarded TransactWriteItems per action, re-planned when a guard fails.

A failed guard means the lock or a record changed since it was read: the key is read again
consistently and the action planned afresh from that state. A record is never written. A lock
the MRSC protocol wrote is settled by the protocol's rule instead (``_intents.settle``: its
owner read, then one single-item write conditioned on the lock's token), in the same loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import attrs

from dynaunique._write.flush import MAX_ATTEMPTS as _REPAIR_ATTEMPTS
from dynaunique._write.flush import execute
from dynaunique._write.mrsc import Verdict
from dynaunique.errors import AuditError, DynauniqueError, WriteConflict

from . import _intents
from ._judge import Finding, _involved, _recheck
from ._kinds import ActionKind, FindingKind, RepairStatus
from ._plan import RepairAction, RepairPlan, _action, _Secrets, remedy
from ._tables import Cost, _at_home, _Meter, _strong, _Table, _table_for, _tables


@attrs.frozen
class RepairOutcome:
    """What happened to one action: ``fixed``, ``already_fixed``, ``not_fixed``, ``skipped``,
    ``failed``."""

    action: RepairAction
    status: RepairStatus
    message: str
    #: TransactWriteItems (an MRSC lock's: conditional single-item writes) sent for this
    #: action (0 when the state had already been fixed).
    writes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"action": self.action.to_dict(), "status": self.status.value,
                "message": self.message, "writes": self.writes}


@attrs.frozen
class RepairResult:
    """The result of :func:`apply_repair`."""

    outcomes: tuple[RepairOutcome, ...]
    unfixable: tuple[Finding, ...]
    cost: Cost

    @property
    def ok(self) -> bool:
        """True when every action ended fixed (or already fixed) and nothing was unfixable."""
        return not self.unfixable and all(
            o.status in (RepairStatus.FIXED, RepairStatus.ALREADY_FIXED) for o in self.outcomes)

    def counts(self) -> dict[str, int]:
        """Outcomes per status, keyed by the statuses' words."""
        counts = {status.value: 0 for status in RepairStatus}
        for outcome in self.outcomes:
            counts[outcome.status] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ok": self.ok, "counts": self.counts(),
                "outcomes": [o.to_dict() for o in self.outcomes],
                "unfixable": [dict(f.to_dict(), remedy=remedy(f)) for f in self.unfixable],
                "cost": self.cost.to_dict()}


def _apply_one(table: _Table, action: RepairAction, drop_unknown: Collection[str],
               secrets: _Secrets, meter: _Meter) -> RepairOutcome:
    current: RepairAction | None = action
    sent = 0
    strong = _strong(table)
    for attempt in range(_REPAIR_ATTEMPTS):
        if attempt > 0:
            # The guard failed: something changed. Read the key again and decide afresh.
            finding = _recheck(table, action.finding.lock_key, _involved(action.finding), meter)
            if finding is None:
                return RepairOutcome(action, RepairStatus.ALREADY_FIXED,
                                     "already consistent when re-read (fixed meanwhile)", sent)
            if finding.kind == FindingKind.PENDING:   # a writer took the lock over: its own
                return RepairOutcome(action, RepairStatus.ALREADY_FIXED,
                                     f"now a write in flight, left alone: {finding.message}",
                                     sent)
            current = _action(table, finding, drop_unknown, secrets, strong)
            if current is None:
                return RepairOutcome(action, RepairStatus.NOT_FIXED,
                                     f"now {finding.kind}: {finding.message}", sent)
        assert current is not None
        try:
            writes, status, message = _send(table, current, meter, strong, sent)
        except DynauniqueError as exc:
            return RepairOutcome(action, RepairStatus.FAILED, str(exc), sent)
        sent += writes
        if status is not None:
            return RepairOutcome(action, status, message, sent)
    return RepairOutcome(action, RepairStatus.SKIPPED,
                         f"the records kept changing ({_REPAIR_ATTEMPTS} tries); run check again",
                         sent)


def _send(table: _Table, action: RepairAction, meter: _Meter, strong: bool, sent: int
          ) -> tuple[int, RepairStatus | None, str]:
    """Send one attempt of ``action`` (``sent``: its writes so far): (writes sent, the status
    it ended with — None: a guard failed, read again and re-plan —, its message).

    :raises DynauniqueError: a request of an MRSC lock's failed otherwise.
    """
    if action.settle is not None:
        settled = _intents.settle(table, action.settle, meter)
        if settled is None:   # refused: the lock is no longer the one read
            return 1, None, ""
        if settled.verdict not in (Verdict.CONFIRM, Verdict.FREE):
            return 0, None, ""   # its owner, read again, is judged otherwise: nothing sent
        return 1, RepairStatus.FIXED, (
            "cleared its pending mark (UpdateItem conditioned on its token)"
            if settled.verdict is Verdict.CONFIRM else
            "deleted it (DeleteItem conditioned on its token and owner)")
    if action.claim is not None:
        claimed = _intents.claim(table, action.claim, meter)
        if claimed is None:   # the lock to hand over, its owner read again, is not free
            return 0, None, ""
        # refused, released or taken over: something changed, read again
        status = RepairStatus.FIXED if claimed.outcome == "held" else None
        return _CLAIM_WRITES[claimed.outcome], status, _HELD
    if strong:
        return 0, RepairStatus.FAILED, _NO_TRANSACTION.format(kind=action.kind)
    meter.add("TransactWriteItems")
    try:
        execute(action.plan, table.connection)
    except WriteConflict:
        return 1, None, ""
    except DynauniqueError as exc:
        return 1, RepairStatus.FAILED, str(exc)
    return 1, RepairStatus.FIXED, f"{sent + 1} TransactWriteItems"


#: Conditional writes a Claim sent, by how it ended: the intent put, then the mark cleared or
#: the intent deleted (none after a refused put).
_CLAIM_WRITES = {"held": 2, "released": 2, "lost": 2, "refused": 1}
_HELD = ("wrote it as a pending intent (PutItem), read its holder again, cleared the mark "
         "(UpdateItem conditioned on its token)")
_NO_TRANSACTION = (
    "not repaired: {kind} is a transaction, and this table is a global table with multi-Region "
    "strong consistency (MRSC), which refuses transactions; nothing was sent. Check the lock and "
    "its owner (dynaunique locks) and delete it by hand if it is nobody's")


def _refusal(plan: RepairPlan) -> str:
    """One line: why a plan that rests on another secret's locks is not applied."""
    names = sorted({f"{f.constraint} on {f.table!r}" for f in plan.other_secret})
    why = (plan.secret_warnings[0].message if plan.secret_warnings else
           f"{len(plan.other_secret)} hashed lock(s) of {', '.join(names)} were not made with "
           "the current secret")
    return (f"refusing to repair: {why}. Check the lock secret (Meta.lock_secret or "
            "DYNAUNIQUE_LOCK_SECRET); if those locks' secret was retired on purpose, repair "
            "with --accept-other-secret (accept_other_secret=True)")


def apply_repair(plan: RepairPlan, *, drop_unknown: Collection[str] = (),
                 progress: Callable[[RepairOutcome], None] | None = None) -> RepairResult:
    """Send a repair plan, one guarded TransactWriteItems per action; never touches a record.

    A guard that fails (the lock or a record changed since it was read) is not an error: the key
    is read again consistently and the action re-planned from that state, up to four times;
    ``already_fixed`` when the state became consistent meanwhile, ``not_fixed`` when it became
    something repair must not fix (e.g. a duplicate: a missing lock's value taken by another
    record). ``drop_unknown`` must repeat the names given to :func:`plan_repair` for retries.
    On a global table every write and re-read goes to the home region, as the library's writes
    do (docs/global-tables.md).

    An MRSC table (strong consistency) has no home region: it is repaired where the models
    point, and its protocol's locks by their single-item conditional writes (``_intents``): a
    missing lock or a hand-over by the protocol's ``Claim``; a repair that is a transaction
    elsewhere (an orphan without a token, ``drop_unknown``) ends ``failed``, nothing sent.

    :raises GlobalTableError: an eventually consistent global table without a home region:
        nothing is sent.
    :raises AuditError: the plan left findings that rest on locks another secret made
        (:attr:`RepairPlan.other_secret`): nothing is sent. A wrong secret would otherwise
        delete every real hashed lock as an orphan; plan with ``accept_other_secret=True`` to
        repair them as the current secret's.
    """
    if plan.other_secret:
        raise AuditError(_refusal(plan))
    # A global table is repaired in its home region, where the library writes its locks: a lock
    # written in another replica would be a write that bypasses the home region.
    wanted = {action.finding.table for action in plan.actions}
    tables = [_at_home(t) if t.name in wanted else t for t in _tables(plan.models)]
    secrets = _Secrets.of(plan.secret_warnings, plan.accept_other_secret)
    meter = _Meter()
    drops = set(drop_unknown) | {a.finding.constraint for a in plan.actions
                                 if a.kind == ActionKind.DROP_UNKNOWN}
    outcomes = []
    for action in plan.actions:
        outcome = _apply_one(_table_for(tables, action.finding.table), action, drops, secrets,
                             meter)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return RepairResult(tuple(outcomes), plan.unfixable, meter.cost())
