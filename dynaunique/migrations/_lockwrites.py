"""The single lock writes of a segment — a lock put and a delete, each a plain conditional
write guarded by ownership, and a strongly consistent read — each announced in the ledger
first, rate-limited and counted.

The writes are built by :mod:`dynaunique._write.writes` (the same lock items and guards the model's
own saves send) and rendered by :mod:`dynaunique._write.render`. A lock put costs one write unit: it
is not guarded by its record, so a record that moved off the value between the scan and the
put gets a lock it does not require — an orphan, which the page's verification read finds and
deletes (``_pages.fill_page``), and which any save meeting it first takes over (``_heal``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id
from dynaunique._lock.locks import CREATED_ATTR, OWNER_ATTR, LockRef, TypedKey
from dynaunique._write.render import render_write
from dynaunique._write.writes import Shaped, lock_delete, lock_put
from dynaunique.migrations._dynamo import ConditionFailed, call
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Pending
from dynaunique.migrations._phase import PhaseRun, Segment

#: Records whose lock puts one task of a page sends one after another (up to
#: ``--concurrency`` tasks in flight).
BATCH = 50

#: Write units a lock put costs: a plain PutItem of a lock item under 1 KB.
UNITS_PER_PUT = 1.0


def batch_size(seg: Segment) -> int:
    """Records per task: :data:`BATCH`, fewer under a ``--max-wcu`` cap so that one task takes
    at most a tenth of a second's worth (at least one record)."""
    cap = seg.bucket.cap if seg.bucket is not None else None
    if cap is None:
        return BATCH
    return max(1, min(BATCH, int(cap / (10 * UNITS_PER_PUT))))


#: What to put: the record's key, the lock it requires, the record as read.
Entry = tuple[TypedKey, LockRef, Mapping[str, Any]]
#: What a put found (:class:`PutOutcome`) and the lock item: when ``NEW``, the one written;
#: when ``TAKEN``, the one in the way.
Answer = tuple[PutOutcome, dict[str, Any] | None]


def put_locks(seg: Segment, entries: Sequence[Entry]) -> list[Answer]:
    """Put each entry's lock, one PutItem each guarded "missing"; answers in ``entries`` order.

    ``(NEW, lock)``: written (the item written, whose ``created`` names this very put);
    ``(PRESENT, None)``: a lock naming this record is there (left as it is: a record of
    another model sharing the lock name may own it under the same key); ``(TAKEN, lock)``:
    another record holds it (the lock item in the way, as ALL_OLD returned it). The record is
    not checked: the caller verifies it afterwards (a read of the record).
    """
    seg.intend([Pending(ref.key, dict(owner)) for owner, ref, _ in entries], put=True)
    return [_put(seg, owner, ref, raw) for owner, ref, raw in entries]


def _put(seg: Segment, owner: TypedKey, ref: LockRef, raw: Mapping[str, Any]) -> Answer:
    info = seg.run.info
    assert info is not None
    put = lock_put(info, ref, owner, raw, allowed=())   # allowed nobody: "missing" only
    _, params = render_write(put)
    if seg.bucket is not None:
        seg.bucket.acquire(UNITS_PER_PUT)
    try:
        response = call(seg.run.connection, "put_item", **params,
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                        ReturnConsumedCapacity="TOTAL", on_throttle=seg.throttled)
    except ConditionFailed as exc:
        seg.count(write_units=UNITS_PER_PUT)
        if exc.item is not None and key_id((exc.item.get(OWNER_ATTR) or {}).get("M") or {}) \
                == key_id(owner):
            return PutOutcome.PRESENT, None
        return PutOutcome.TAKEN, exc.item
    seg.spend(response, UNITS_PER_PUT)
    seg.count(written=1)
    return PutOutcome.NEW, put.item


def delete_lock(seg: Segment, key: str, owner: TypedKey, *,
                created: str | None = None) -> DeleteOutcome:
    """Delete lock ``key`` guarded "missing, or owned by ``owner``" — with ``created``, only
    the lock exactly as this run put it (that owner, that ``created``): a lock its record put
    again meanwhile is its own.

    Returns ``DELETED``, ``ABSENT`` or ``FOREIGN`` (another record holds it, or — with
    ``created`` — it is not the lock this run put).
    """
    run = seg.run
    seg.intend([Pending(key, dict(owner))])
    ref = LockRef(run.name, (), key, None)
    delete = lock_delete(run.keys.table, run.keys.key_attributes, ref, owner,
                         model=run.phase.model)
    if created is not None:
        delete = attrs.evolve(delete, guard=Shaped(equal=(
            (OWNER_ATTR, {"M": dict(owner)}), (CREATED_ATTR, {"S": created}))))
    _, params = render_write(delete)
    if seg.bucket is not None:
        seg.bucket.acquire(1.0)
    try:
        response = call(run.connection, "delete_item", **params, ReturnValues="ALL_OLD",
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
    item = call(run.connection, "get_item", TableName=run.keys.table, Key=dict(key),
                ConsistentRead=True).get("Item")
    return dict(item) if item is not None else None
