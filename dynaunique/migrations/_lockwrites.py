"""The single lock writes of a segment — a put or a delete guarded by ownership, and a strongly
consistent read — each announced in the ledger first, rate-limited and counted.

The writes are built by :mod:`dynaunique._writes` (the same lock items and guards the model's
own saves send) and rendered by :mod:`dynaunique._render`; they go out as plain conditional
writes, never transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynaunique._items import LockRef, TypedKey
from dynaunique._render import render_write
from dynaunique._writes import lock_delete, lock_put
from dynaunique.migrations._dynamo import ConditionFailed, call
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Pending
from dynaunique.migrations._phase import PhaseRun, Segment


def put_lock(seg: Segment, owner: TypedKey, ref: LockRef,
             raw: Mapping[str, Any]) -> tuple[PutOutcome, dict[str, Any] | None]:
    """Put the lock guarded "missing, or owned by ``owner``" (``raw``: the record as read).

    Returns ``(NEW, None)``, ``(PRESENT, None)`` (it was already this record's) or
    ``(TAKEN, lock_item)`` (another record holds it).
    """
    info = seg.run.info
    assert info is not None
    seg.intend([Pending(ref.key, dict(owner))], put=True)
    _, params = render_write(lock_put(info, ref, owner, raw))
    if seg.bucket is not None:
        seg.bucket.acquire(1.0)
    try:
        response = call(seg.run.client, "put_item", **params, ReturnValues="ALL_OLD",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                        ReturnConsumedCapacity="TOTAL", on_throttle=seg.throttled)
    except ConditionFailed as exc:
        seg.count(write_units=1.0)
        return PutOutcome.TAKEN, exc.item
    seg.spend(response)
    if response.get("Attributes"):
        return PutOutcome.PRESENT, None
    seg.count(written=1)
    return PutOutcome.NEW, None


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
