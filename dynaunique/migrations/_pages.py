"""What a phase does with one scanned page: fill puts the locks its records require, sweep
deletes the locks their owners no longer require, remove deletes every lock of the constraint.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dynaunique._items import LockRef, TypedKey, key_id
from dynaunique._locks import CONSTRAINT_ATTR, MODEL_ATTR, OWNER_ATTR, lock_primary_key
from dynaunique.errors import MigrationError
from dynaunique.migrations._dynamo import batch_get
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Conflict, Pending
from dynaunique.migrations._lockwrites import read
from dynaunique.migrations._phase import Segment, made_with
from dynaunique.migrations._settle import MAX_SETTLE_ROUNDS, Keeper


def fill_page(keeper: Keeper, seg: Segment, items: list[dict[str, Any]]) -> None:
    """Put the lock every record of the page requires, then verify with one batch read."""
    run = seg.run
    wanted: list[tuple[TypedKey, LockRef, dict[str, Any]]] = []
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
    # Up to --concurrency puts in flight. Records of the page that require the same lock go
    # in one task, in scan order, so the first of them gets it as with one put at a time: the
    # duplicates report is the same whatever the concurrency.
    groups: dict[str, list[int]] = {}
    for index, (_, ref, _) in enumerate(wanted):
        groups.setdefault(ref.key, []).append(index)

    def put_group(indexes: list[int]) -> list[tuple[int, tuple[PutOutcome, Any]]]:
        out = []
        for index in indexes:
            owner, ref, raw = wanted[index]
            out.append((index, keeper.put(seg, owner, ref, raw)))
            keeper.tick()
        return out

    outcomes: list[tuple[PutOutcome, Any]] = [(PutOutcome.NEW, None)] * len(wanted)
    for done in seg.each(put_group, list(groups.values())):
        for index, answer in done:
            outcomes[index] = answer
    # Verify: a strongly consistent read of every record after its lock write.
    current = {
        key_id(run.key(item)): item
        for item in batch_get(run.client, run.keys.table, [w[0] for w in wanted])
    }
    for (owner, ref, _), (outcome, holder) in zip(wanted, outcomes, strict=True):
        now = run.required(current.get(key_id(owner)))
        still = now is not None and now.key == ref.key
        if outcome in (PutOutcome.NEW, PutOutcome.PRESENT):
            if still:
                seg.delta.present += outcome == PutOutcome.PRESENT
                continue
            conflict = keeper.settle(seg, owner, {ref.key})
        elif still:
            conflict = keeper.taken(seg, owner, ref, holder, 0)
        else:
            conflict = keeper.settle(seg, owner, set())
        if conflict is not None:
            seg.progress.conflicts.append(conflict)


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
        for _ in range(MAX_SETTLE_ROUNDS):
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
