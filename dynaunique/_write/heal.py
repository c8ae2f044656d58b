"""Orphan locks healed on contact: a lock put refused because another record's lock is there is
judged by the audit's rule, and an orphan is taken over in the write's own transaction.

A refused lock put comes back with the lock in the way (``ALL_OLD``). Its owner is read once,
strongly consistent — one read, only on a conflict. The owner holds the value when it is a
record of a model of the table by the audit's rule (``_items.claim``) and that model requires
this very lock of it as stored (``_items.stored_locks``); then the refusal stands, a
``UniqueViolation`` naming it (it held the value during the call). Otherwise — the owner is
gone, or moved to another value, or not a record of a model requiring the lock — the lock is
an orphan, and the flush sends the unit again (``Plan.taking_over``) with:

* the lock put guarded on the lock being exactly the one met: its owner and its ``created``
  (every put stamps a new one), so a lock re-put or taken meanwhile is not overwritten;
* a ConditionCheck that the old owner still does not hold the value: still absent, or still
  the item read as far as the audit's rule can tell (``_model.mixed.exactly``).

A takeover that loses a race fails one of the two and is judged again like any conflict, within
the flush's attempts. Not healed, so refused as before: an owner no loaded model claims (its
model may be one this process did not import), one the same unit writes or checks (DynamoDB
takes one operation per item), and a lock naming no readable owner. ``dynaunique check``
still reports orphans no write has met.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dynaunique._lock.items import claim, key_id, owner_key, plain_key, stored_locks
from dynaunique._lock.locks import CREATED_ATTR, OWNER_ATTR
from dynaunique._model.binding import table_models
from dynaunique._model.instance import read_steps
from dynaunique._transport.connection import RetryPolicy, Steps
from dynaunique._write.mixed import exactly
from dynaunique._write.plan import Plan
from dynaunique._write.transaction import failures_error
from dynaunique._write.writes import (
    Absent,
    ConditionCheck,
    LockDelete,
    LockPut,
    Shaped,
    Takeover,
    Write,
)
from dynaunique.errors import DynauniqueError
from dynaunique.observe import emit, stats
from dynaunique.observe import write_logger as _log

Failures = list[tuple[Write, Mapping[str, Any] | None]]


class LocksMet(DynauniqueError):
    """Internal: a flush's request was refused only by locks other records hold (or by the
    check of a takeover); the flush judges them (:func:`heal_steps`) before any error."""

    def __init__(self, failures: Failures) -> None:
        super().__init__("refused by locks other records hold")
        self.failures = failures


def met_locks(failures: Failures) -> bool:
    """Whether a refusal is only locks met: nothing failed but lock puts and takeovers'
    checks."""
    return bool(failures) and all(
        isinstance(w, LockPut) or (isinstance(w, ConditionCheck) and w.heals is not None)
        for w, _ in failures)


class _Unreadable(Exception):
    """The owner key a lock names is not one DynamoDB can read."""


def heal_steps(exc: LocksMet, plan: Plan, taken: Mapping[str, Takeover],
               connection: Any, policy: RetryPolicy) -> Steps[dict[str, Takeover]]:
    """Judge the locks ``plan``'s request met: the takeovers of the next attempt (by lock key),
    ``taken`` (this one's) with each orphan met added; a lock its owner holds raises its
    ``UniqueViolation``. A takeover whose put or check failed is dropped and its lock judged
    anew."""
    takeovers = dict(taken)
    # Items the unit already writes or checks (a takeover's own check aside: one per old
    # owner, shared by its locks): no ConditionCheck may join them.
    touched = {key_id(w.key) for w in plan.writes if not isinstance(w, (LockPut, LockDelete))
               and not (isinstance(w, ConditionCheck) and w.heals is not None)}
    held: Failures = []
    for write, lock in exc.failures:
        if isinstance(write, ConditionCheck):
            takeovers.pop(write.heals or "", None)   # the old owner moved: judge it again
            continue
        assert isinstance(write, LockPut)
        takeovers.pop(write.lock.key, None)
        if lock is None:
            continue   # gone since: the next attempt puts it
        names = list(write.key)   # the lock's key: the table's key attributes, in order
        owner = owner_key((names[0], names[1] if len(names) > 1 else None),
                          (lock.get(OWNER_ATTR) or {}).get("M"))
        if owner is None or key_id(owner) in touched:
            held.append((write, lock))
            continue
        try:
            item = yield from read_steps(connection, policy, write.table, owner,
                                         invalid_key=_Unreadable())
        except _Unreadable:
            held.append((write, lock))
            continue
        check = _orphan_check(write, owner, item)
        if check is None:
            held.append((write, lock))
            continue
        created = lock.get(CREATED_ATTR)
        guard = Shaped(equal=((OWNER_ATTR, lock[OWNER_ATTR]),
                              *([(CREATED_ATTR, created)] if created is not None else [])),
                       absent=(CREATED_ATTR,) if created is None else ())
        takeovers[write.lock.key] = Takeover(write.lock.key, guard, check)
    if held:   # DynamoDB's refusal stays the cause (its cancellation reasons)
        raise failures_error(held) from exc.__cause__
    return takeovers


def _orphan_check(write: LockPut, owner: Mapping[str, Any],
                  item: Mapping[str, Any] | None) -> ConditionCheck | None:
    """The ConditionCheck "the owner still does not hold ``write``'s lock" when it does not
    hold it now (``item``: the owner as read, None: gone); None when it holds it, or no loaded
    model can say (by the audit's rule)."""
    label = f"the old owner of {write.lock.key} still does not hold it"
    if item is None:
        return ConditionCheck(table=write.table, model=write.model, key=dict(owner),
                              condition=None, label=label, guard=Absent(),
                              heals=write.lock.key)
    models = [m for m in table_models(write.table) if m._du_info is not None]
    model, _ = claim(models, item)
    if model is None:
        return None   # not a record of a model loaded here (or several disagree): kept
    try:
        required = stored_locks(model, item)
    except Exception:   # unreadable as its model: the audit reports it, the write keeps off
        return None
    if any(ref.key == write.lock.key for ref in required.values()):
        return None
    return ConditionCheck(table=write.table, model=write.model, key=dict(owner),
                          condition=None, label=label, others=exactly(model, item, models),
                          heals=write.lock.key)


def healed(plan: Plan) -> None:
    """After ``plan`` succeeded: each orphan lock it took over, logged (INFO) and counted on
    the write's span."""
    for write in plan.writes:
        if isinstance(write, ConditionCheck) and write.heals is not None:
            st = stats()
            if st is not None:
                st.healed += 1
            owner = plain_key(write.key)
            emit(_log, logging.INFO, "orphan_lock_healed",
                 f"{write.model}: took over the orphan lock {write.heals} (its owner {owner} "
                 "does not hold the value)", model=write.model, lock_key=write.heals,
                 old_owner=owner)

