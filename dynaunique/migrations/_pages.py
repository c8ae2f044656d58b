"""What a phase does with one scanned page: fill puts the locks its records require, sweep
deletes the locks their owners no longer require, remove deletes every lock of the constraint.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dynaunique._lock.items import key_id
from dynaunique._lock.locks import (
    CONSTRAINT_ATTR,
    CREATED_ATTR,
    MODEL_ATTR,
    OWNER_ATTR,
    TypedKey,
    lock_primary_key,
)
from dynaunique.errors import MigrationError
from dynaunique.migrations._dynamo import batch_get
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Conflict, Pending
from dynaunique.migrations._lockwrites import Answer, Entry, batch_size, read
from dynaunique.migrations._phase import Segment, made_with
from dynaunique.migrations._reconcile import MAX_RECONCILE_ROUNDS, Keeper


def fill_page(keeper: Keeper, seg: Segment, items: list[dict[str, Any]]) -> None:  # noqa: C901  # put, verify, reconcile: one page's pass in order
    """Put the lock every record of the page requires (one write unit each), then verify with
    one strongly consistent batch read of the records written: reconcile those that moved
    meanwhile (their lock is deleted under its owner guard), examine the locks found taken."""
    run = seg.run
    wanted: list[Entry] = []
    for raw in items:
        if run.load(raw) is None:
            seg.delta.skipped += 1
            continue
        seg.delta.records += 1
        required = run.required(raw)
        if required is not None:
            wanted.append((run.key(raw), required, raw))
    if not wanted:
        return
    # Write-ahead: one ledger write names every lock of the page before any is sent.
    seg.intend([Pending(ref.key) for _, ref, _ in wanted])
    # Records of the page that require the same lock are put one round after another, in
    # scan order, so the first of them gets it as with one put at a time: the duplicates
    # report is the same whatever the concurrency. A round goes out in tasks of up to
    # batch_size puts, up to --concurrency of them in flight.
    groups: dict[str, list[int]] = {}
    for index, (_, ref, _) in enumerate(wanted):
        groups.setdefault(ref.key, []).append(index)

    def put_batch(indexes: list[int]) -> list[tuple[int, Answer]]:
        answers = keeper.put(seg, [wanted[index] for index in indexes])
        for _ in indexes:
            keeper.tick()
        return list(zip(indexes, answers, strict=True))

    outcomes: list[Answer] = [(PutOutcome.NEW, None)] * len(wanted)
    for depth in range(max(len(g) for g in groups.values())):
        indexes = [g[depth] for g in groups.values() if len(g) > depth]
        for done in seg.each(put_batch, _batches(indexes, batch_size(seg), seg.concurrency)):
            for index, answer in done:
                outcomes[index] = answer
    # Verify: a strongly consistent read of every record whose lock was written, after its
    # write. One that still requires it keeps it: from then on the application's own writes
    # keep it right. One that moved meanwhile got an orphan: reconciled (deleted, exactly as put,
    # and the lock it now requires put).
    current = _read_back(seg, [owner for (owner, _, _), (outcome, _)
                               in zip(wanted, outcomes, strict=True)
                               if outcome != PutOutcome.TAKEN])
    for (owner, ref, _), (outcome, lock) in zip(wanted, outcomes, strict=True):
        if outcome == PutOutcome.TAKEN:
            conflict = keeper.taken(seg, owner, ref, lock, 0)
        else:
            now = run.required(current.get(key_id(owner)))
            if now is not None and now.key == ref.key:
                seg.delta.present += outcome == PutOutcome.PRESENT
                continue
            if outcome == PutOutcome.NEW and lock is not None:
                # Only the lock exactly as put is deleted.
                conflict = keeper.reconcile(seg, owner, {ref.key},
                                            stamps={ref.key: lock[CREATED_ATTR]["S"]})
            else:   # a lock naming the record was there: not this run's to delete
                conflict = keeper.reconcile(seg, owner, set())
        if conflict is not None:
            seg.progress.conflicts.append(conflict)


#: Pages of the consistent rescan that verifies a page, before the records it did not reach
#: are read by key.
RESCAN_PAGES = 2


def _read_back(seg: Segment, owners: list[TypedKey]) -> dict[Any, dict[str, Any]]:
    """The records ``owners`` (of the page just scanned) as they are now, strongly consistent,
    by :func:`~dynaunique._lock.items.key_id`; one absent is gone.

    The page is scanned again from where it started, consistently: a scan costs read units by
    the bytes it reads (one per 4 KB), not one per record as a read by key does. Records it
    does not reach within :data:`RESCAN_PAGES` pages (items written since push the page's end
    further) are read by key; a rescan that reached the segment's end has seen every record
    of it that exists.
    """
    run = seg.run
    wanted = {key_id(owner): owner for owner in owners}
    found: dict[Any, dict[str, Any]] = {}
    ended = False
    if wanted and seg.page_params is not None and seg.scan_page is not None:
        again = {**seg.page_params, "ConsistentRead": True}
        for _ in range(RESCAN_PAGES):
            page = seg.scan_page(again)
            for item in page.get("Items", []):
                ident = key_id(run.key(item))
                if ident in wanted:
                    found[ident] = item
            last = page.get("LastEvaluatedKey")
            ended = last is None
            if ended or len(found) == len(wanted):
                break
            again["ExclusiveStartKey"] = last
    rest = [owner for ident, owner in wanted.items() if ident not in found]
    if rest and not ended:
        found.update((key_id(run.key(item)), item)
                     for item in batch_get(run.connection, run.keys.table, rest))
    return found


def _batches(indexes: list[int], size: int, concurrency: int) -> list[list[int]]:
    """``indexes`` in consecutive batches of at most ``size``, at least ``concurrency`` of them
    (when there are that many) so that every thread has one."""
    if not indexes:
        return []
    count = max(-(-len(indexes) // size), min(concurrency, len(indexes)))
    size = -(-len(indexes) // count)
    return [indexes[i:i + size] for i in range(0, len(indexes), size)]


def sweep_page(keeper: Keeper, seg: Segment, items: list[dict[str, Any]]) -> None:
    """Delete the locks of this constraint that their owners do not require under the
    phase's declaration (old-shape locks of an altered constraint).

    A stale hashed lock the current secret did not make (:meth:`PhaseRun.other_secret`) is
    never deleted: the page stops the phase before any of its writes, unless the run accepts
    other secrets (then it is deleted as the current secret's, and the fill re-locks).
    """
    run = seg.run
    current = run.owners_now(items)
    stale: list[tuple[TypedKey, str]] = []
    other: Counter[str | None] = Counter()
    for item in items:
        owner = item.get(OWNER_ATTR, {}).get("M")
        if owner is None:
            continue
        seg.delta.records += 1
        key = item[run.keys.hash_attr]["S"]
        required = run.required(current.get(key_id(owner)))
        if required is not None and required.key == key:
            seg.delta.present += 1
        else:
            stale.append((owner, key))
            if run.other_secret(item, required=False):
                other[made_with(item)] += 1
    if other and not run.accept_other_secret:
        raise run.secret_error(other)
    if stale:
        seg.intend([Pending(key, dict(owner)) for owner, key in stale])

    def release(entry: tuple[TypedKey, str]) -> bool | Conflict:
        result = keeper.release_if_stale(seg, *entry)
        keeper.tick()
        return result

    for result in seg.each(release, stale):  # up to --concurrency at once
        if isinstance(result, Conflict):
            seg.progress.conflicts.append(result)


def remove_page(keeper: Keeper, seg: Segment, items: list[dict[str, Any]]) -> None:
    """Delete every lock of the constraint, each guarded by the owner it names."""
    run = seg.run

    def remove(item: dict[str, Any]) -> None:
        key = item[run.keys.hash_attr]["S"]
        current: dict[str, Any] | None = item
        for _ in range(MAX_RECONCILE_ROUNDS):
            if current is None:
                break
            owner = current.get(OWNER_ATTR, {}).get("M", {})
            if keeper.delete(seg, key, owner) != DeleteOutcome.FOREIGN:
                seg.count(records=1)
                break
            # The owner changed since the scan read it: read the lock again.
            current = read(run, lock_primary_key(run.keys.key_attributes, key))
            if current is not None and (
                    current.get(MODEL_ATTR, {}).get("S") != run.phase.model
                    or current.get(CONSTRAINT_ATTR, {}).get("S") != run.name):
                current = None
        else:
            raise MigrationError(f"lock {key!r} keeps changing owner; rerun to retry")
        keeper.tick()

    seg.each(remove, items)  # up to --concurrency at once
