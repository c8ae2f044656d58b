"""The audit's reads of many items: scans, batches of locks, one lock key's consistent snapshot.

A scan is read page by page; locks by BatchGetItem; a lock with its owner and the records
that require it by one serializable TransactGetItems — on an MRSC table, which refuses
transactions, by strongly consistent GetItems: the lock, then the records, then the lock again
(the protocol's order: a lock is judged on its owner read after it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from dynaunique._lock.items import key_id, owner_key
from dynaunique._lock.locks import TypedKey
from dynaunique._transport.connection import in_batches
from dynaunique.errors import AuditError

from ._stored import LockInfo, _interpret, _lock_info, _Record
from ._tables import _READ_POLICY, _call, _Meter, _strong, _Table

# TransactGetItems takes at most 100 items; one slot is the lock itself.
_MAX_RECORDS_PER_READ = 99


def _scan_pages(table: _Table, meter: _Meter, *, segment: int | None = None,
                total_segments: int | None = None, on_page: Callable[[int], None] | None = None,
                **params: Any) -> Iterator[dict[str, Any]]:
    """Every item of one scan (or one segment of a parallel scan), following LastEvaluatedKey."""
    request: dict[str, Any] = {"TableName": table.name, **params}
    if segment is not None:
        request.update(Segment=segment, TotalSegments=total_segments)
    while True:
        response = _call(meter, table.connection, "Scan", **request)
        if on_page is not None:
            on_page(int(response.get("ScannedCount", len(response.get("Items", ())))))
        yield from response.get("Items", ())
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


def _batch_get_locks(table: _Table, keys: Sequence[str], meter: _Meter) -> dict[str, LockInfo]:
    """The stored locks among lock keys ``keys``, by key: consistent BatchGetItems of 100."""
    found: dict[str, LockInfo] = {}

    def send_chunk(chunk: list[TypedKey]) -> list[TypedKey]:
        response = _call(meter, table.connection, "BatchGetItem", RequestItems={
            table.name: {"Keys": chunk, "ConsistentRead": True}})
        for item in response.get("Responses", {}).get(table.name, []):
            lock = _lock_info(table, item)
            found[lock.key] = lock
        return list(response.get("UnprocessedKeys", {}).get(table.name, {}).get("Keys", []))

    in_batches([table.lock_pk(k) for k in keys], 100, send_chunk, policy=_READ_POLICY,
               what="BatchGetItem keys", error=AuditError)
    return found


def _read_key(table: _Table, key: str, record_keys: Iterable[TypedKey],
              meter: _Meter) -> tuple[dict[str, Any] | None, list[_Record]]:
    """Read lock ``key``, its owner and ``record_keys`` in one serializable TransactGetItems.

    When the lock names an owner that was not asked for (it changed since the scan), read again
    with that owner included, so the lock and its owner always come from one snapshot.
    """
    wanted: dict[Any, TypedKey] = {}
    for record_key in record_keys:
        wanted.setdefault(key_id(record_key), record_key)
    keys = list(wanted.values())[:_MAX_RECORDS_PER_READ]
    if _strong(table):
        return _read_key_by_items(table, key, keys, meter)
    for _ in range(4):
        response = _call(meter, table.connection, "TransactGetItems", TransactItems=[
            {"Get": {"TableName": table.name, "Key": k}} for k in [table.lock_pk(key), *keys]
        ])
        answers = response.get("Responses", [])
        items = [a.get("Item") if isinstance(a, dict) else None for a in answers]
        items += [None] * (len(keys) + 1 - len(items))
        lock_item = items[0]
        owner = (owner_key(table.key_attributes, _lock_info(table, lock_item).owner)
                 if lock_item else None)
        if (owner is not None and key_id(owner) not in {key_id(k) for k in keys}
                and len(keys) < _MAX_RECORDS_PER_READ):
            keys.append(owner)
            continue
        records = [_interpret(table, k, item, keep_item=True)
                   for k, item in zip(keys, items[1:], strict=True)]
        return lock_item, records
    raise AuditError(f"lock {key!r} kept changing owner while it was being read; try again")


def _get(table: _Table, key: TypedKey, meter: _Meter) -> dict[str, Any] | None:
    item: dict[str, Any] | None = _call(meter, table.connection, "GetItem", TableName=table.name,
                                        Key=key, ConsistentRead=True).get("Item")
    return item


def _read_key_by_items(table: _Table, key: str, keys: list[TypedKey],
                       meter: _Meter) -> tuple[dict[str, Any] | None, list[_Record]]:
    """:func:`_read_key` without a transaction (an MRSC table): GetItem the lock, then its
    owner and ``keys``, then the lock again; the same lock twice brackets the records read
    (else read again). Not a snapshot: a lock is judged on records read after it, as the
    protocol's writers judge a lock they meet (``dynaunique._write.mrsc.judge``)."""
    lock_pk = table.lock_pk(key)
    lock_item = _get(table, lock_pk, meter)
    for _ in range(4):
        owner = (owner_key(table.key_attributes, _lock_info(table, lock_item).owner)
                 if lock_item else None)
        if owner is not None and key_id(owner) not in {key_id(k) for k in keys}:
            keys = [*keys, owner]
        items = [_get(table, k, meter) for k in keys]
        again = _get(table, lock_pk, meter)
        if again == lock_item:
            return lock_item, [_interpret(table, k, item, keep_item=True)
                               for k, item in zip(keys, items, strict=True)]
        lock_item = again
    raise AuditError(f"lock {key!r} kept changing while it was being read; try again")
