"""The single lock writes of a segment — lock puts guarded by the record they are for, a
delete guarded by ownership, and a strongly consistent read — each announced in the ledger
first, rate-limited and counted.

The writes are built by :mod:`dynaunique._writes` (the same lock items and guards the model's
own saves send) and rendered by :mod:`dynaunique._render`. A lock put goes out in a
TransactWriteItems with a ConditionCheck that its record is still as read (:func:`put_locks`),
so it never makes a lock for a record that moved off the value meanwhile; a delete is a plain
conditional write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dynaunique._items import LockRef, TypedKey
from dynaunique._plan import Plan
from dynaunique._render import render_checked, render_write
from dynaunique._writes import ConditionCheck, Write, lock_delete, lock_put
from dynaunique.errors import MigrationError
from dynaunique.migrations._dynamo import ConditionFailed, call
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Pending
from dynaunique.migrations._phase import PhaseRun, Segment

#: Records whose locks one TransactWriteItems puts: two actions each (the lock put and the
#: check of its record), DynamoDB taking at most 100 actions in a transaction.
BATCH = 50

#: Write units a record's guarded lock put costs: 2 for the transactional put of a lock item
#: under 1 KB, 2 for the ConditionCheck of a record under 1 KB.
UNITS_PER_PUT = 4.0


def batch_size(seg: Segment) -> int:
    """Records per transaction: :data:`BATCH`, fewer under a ``--max-wcu`` cap so that one
    transaction takes at most a tenth of a second's worth (at least one record)."""
    cap = seg.bucket.cap if seg.bucket is not None else None
    if cap is None:
        return BATCH
    return max(1, min(BATCH, int(cap / (10 * UNITS_PER_PUT))))


#: What to put: the record's key, the lock it requires, the record as read.
Entry = tuple[TypedKey, LockRef, Mapping[str, Any]]
#: What a put found (:class:`PutOutcome`) and, when ``TAKEN``, the lock item in the way.
Answer = tuple[PutOutcome, dict[str, Any] | None]


def put_locks(seg: Segment, entries: Sequence[Entry]) -> list[Answer]:
    """Put each entry's lock, in transactions of up to :func:`batch_size` records, each lock put
    (guarded "missing, or owned by this record") next to a ConditionCheck that its record is
    still as read (:meth:`PhaseRun.as_read`); answers in ``entries`` order.

    ``(NEW, None)``: written, and the record held the value when it was. ``(TAKEN, lock)``:
    the record held it, but another record holds the lock. ``(MOVED, None)``: the record is no
    longer as read (changed, or deleted), so nothing of it was written. A refused condition
    cancels the whole transaction: the positions of its ``CancellationReasons`` say which
    records were refused, and the others are sent again without them. The entries must
    require distinct locks (a transaction touches an item once).
    """
    seg.intend([Pending(ref.key, dict(owner)) for owner, ref, _ in entries], put=True)
    answers: dict[int, Answer] = {}
    size = batch_size(seg)
    for start in range(0, len(entries), size):
        todo = list(range(start, min(start + size, len(entries))))
        while todo:
            refused = _put_batch(seg, [entries[i] for i in todo])
            if refused is None:
                answers.update((i, (PutOutcome.NEW, None)) for i in todo)
                break
            answers.update((todo[slot], answer) for slot, answer in refused.items())
            todo = [i for slot, i in enumerate(todo) if slot not in refused]
    return [answers[i] for i in range(len(entries))]


def _put_batch(seg: Segment, entries: Sequence[Entry]) -> dict[int, Answer] | None:
    """One transaction of ``entries``' lock puts and record checks: None when it was applied,
    else the refused entries' answers by position (at least one)."""
    run = seg.run
    info = run.info
    assert info is not None
    writes: list[Write] = []
    for owner, ref, raw in entries:
        writes.append(lock_put(info, ref, owner, raw))
        as_read = run.as_read(raw)
        writes.append(ConditionCheck(table=info.table, model=info.name, key=owner,
                                     condition=None, label="the record as read",
                                     guard=as_read, others=run.identity(raw, as_read)))
    request = render_checked(Plan(tuple(writes)))
    estimate = UNITS_PER_PUT * len(entries)
    if seg.bucket is not None:
        seg.bucket.acquire(estimate)
    try:
        response = call(run.client, "transact_write_items", **request,
                        on_throttle=seg.throttled)
    except ConditionFailed as exc:
        # DynamoDB reports no consumed capacity for a cancelled transaction: count the estimate.
        seg.count(write_units=estimate)
        refused = _refused(exc.reasons, len(entries))
        if not refused:
            codes = [reason.get("Code") for reason in exc.reasons]  # no item: no value shown
            raise MigrationError(
                "DynamoDB cancelled a lock transaction without naming a refused lock or "
                f"record: {codes}") from None
        return refused
    seg.spend(response, estimate)
    seg.count(written=len(entries))
    return None


def _refused(reasons: Sequence[Mapping[str, Any]], count: int) -> dict[int, Answer]:
    """The entries a cancelled transaction of ``count`` (lock put, record check) pairs
    refused, by position: a failed check is ``MOVED`` (whatever the lock), a failed lock put
    with its record as read is ``TAKEN`` (the lock item in the way, as ALL_OLD returned it)."""
    out: dict[int, Answer] = {}
    for slot in range(min(count, len(reasons) // 2)):
        lock, check = reasons[2 * slot], reasons[2 * slot + 1]
        if check.get("Code") == "ConditionalCheckFailed":
            out[slot] = (PutOutcome.MOVED, None)
        elif lock.get("Code") == "ConditionalCheckFailed":
            item = lock.get("Item")
            out[slot] = (PutOutcome.TAKEN, dict(item) if item is not None else None)
    return out


def delete_lock(seg: Segment, key: str, owner: TypedKey) -> DeleteOutcome:
    """Delete lock ``key`` guarded "missing, or owned by ``owner``".

    Returns ``DELETED``, ``ABSENT`` or ``FOREIGN`` (another record holds it).
    """
    run = seg.run
    seg.intend([Pending(key, dict(owner))])
    ref = LockRef(run.name, (), key, None)
    delete = lock_delete(run.keys.table, run.keys.key_attributes, ref, owner,
                         model=run.phase.model)
    _, params = render_write(delete)
    if seg.bucket is not None:
        seg.bucket.acquire(1.0)
    try:
        response = call(run.client, "delete_item", **params, ReturnValues="ALL_OLD",
                        ReturnConsumedCapacity="TOTAL", on_throttle=seg.throttled)
    except ConditionFailed:
        seg.count(write_units=1.0)
        return DeleteOutcome.FOREIGN
    seg.spend(response)
    if response.get("Attributes"):
        seg.count(deleted=1)
        return DeleteOutcome.DELETED
    return DeleteOutcome.ABSENT


def read(run: PhaseRun, key: TypedKey) -> dict[str, Any] | None:
    """The item at ``key`` (strongly consistent), or None."""
    item = call(run.client, "get_item", TableName=run.keys.table, Key=dict(key),
                ConsistentRead=True).get("Item")
    return dict(item) if item is not None else None
