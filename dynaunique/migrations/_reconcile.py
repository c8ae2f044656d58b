"""Keeping one record's lock right while the application keeps writing: write, then read the
record again, until a read agrees with the last write (:meth:`Keeper.reconcile` says why that is
enough; docs/migrations.md tells the whole story).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dynaunique._lock.items import plain_key
from dynaunique._lock.locks import (
    CREATED_ATTR,
    MODEL_ATTR,
    OWNER_ATTR,
    LockRef,
    TypedKey,
    lock_primary_key,
)
from dynaunique._write.flush import MAX_ATTEMPTS
from dynaunique.errors import MigrationError
from dynaunique.migrations._kinds import DeleteOutcome, PutOutcome
from dynaunique.migrations._ledger import Conflict, Pending
from dynaunique.migrations._lockwrites import Answer, Entry, read
from dynaunique.migrations._phase import Segment

#: How often one record is re-read and re-written before giving up on it (a record rewritten
#: faster than a round trip, for seconds on end).
MAX_RECONCILE_ROUNDS = 8

#: ``put(seg, [(owner, lock, record as read), ...])`` and ``delete(seg, lock key, owner)``: the
#: executor's lock writes (:mod:`._lockwrites`, through the executor so a test can act at that
#: moment). A put is guarded "missing" only: a read after it verifies its record. ``delete``
#: takes ``created=`` to delete only the lock exactly as this run put it.
Put = Callable[[Segment, Sequence[Entry]], list[Answer]]
Delete = Callable[..., DeleteOutcome]


class Keeper:
    """Reconciles records' locks of one phase with the lock writes it is given."""

    def __init__(self, put: Put, delete: Delete, tick: Callable[[], None]) -> None:
        self.put = put
        self.delete = delete
        #: Called after each record a page processed (a `record` progress event).
        self.tick = tick

    def reconcile(self, seg: Segment, owner: TypedKey, written: set[str],
                  depth: int = 0, stamps: Mapping[str, str] | None = None) -> Conflict | None:
        """Make ``owner``'s lock right: present iff the record requires it, gone otherwise.

        ``written`` are lock keys this run has put for the record; ``stamps`` the ``created``
        of those whose put this run knows (the lock exactly as put, and only it, is deleted:
        a lock the record, or another model's record under its key, put again is not this
        run's to delete). Each round reads the record
        (strongly consistent), deletes what it no longer requires and puts what it requires
        (a record that moved meanwhile got a lock it does not require: the next round reads it
        again and deletes it); a round that needs no write ends it. Why that is enough: the
        application's own saves keep a record's locks equal to its values — moving to a value
        puts the lock, moving away deletes it (both guarded by ownership) — so the only thing
        that can leave a lock wrong is a write of ours made from a stale read. A read *after*
        our last write that agrees with it means no such write remains.
        """
        run = seg.run
        made = dict(stamps or {})
        for _ in range(MAX_RECONCILE_ROUNDS):
            current = read(run, owner)
            required = run.required(current)
            wrote = False
            for key in sorted(written):
                if required is None or key != required.key:
                    if key in made:
                        self.delete(seg, key, owner, created=made.pop(key))
                    else:
                        self.delete(seg, key, owner)
                    written.discard(key)
                    wrote = True
            if required is not None and required.key not in written:
                assert current is not None
                ((outcome, lock),) = self.put(seg, [(owner, required, current)])
                if outcome == PutOutcome.TAKEN:
                    return self.taken(seg, owner, required, lock, depth)
                if outcome == PutOutcome.NEW and lock is not None:
                    # Verified by the next round's read (a lock naming the record already
                    # there, PRESENT, is not this run's: nothing was written).
                    written.add(required.key)
                    made[required.key] = lock[CREATED_ATTR]["S"]
                    wrote = True
            if not wrote:
                return None
        raise MigrationError(f"{run.phase.model} {plain_key(owner)} kept changing while its "
                             f"{run.name} lock was written; rerun to retry it")

    def taken(self, seg: Segment, owner: TypedKey, ref: LockRef,
               lock: Mapping[str, Any] | None, depth: int) -> Conflict | None:
        """``owner`` requires ``ref`` but another record's lock is there: a duplicate, unless
        that lock is stale (its owner no longer requires it), which is then removed."""
        run = seg.run
        if depth >= MAX_ATTEMPTS - 1:
            raise MigrationError(f"lock {ref.key!r} keeps changing hands; rerun to retry it")
        holder = lock.get(OWNER_ATTR, {}).get("M") if lock is not None else None
        holder_model = lock.get(MODEL_ATTR, {}).get("S") if lock is not None else None
        if holder is None:  # the lock vanished in between: try again
            return self.reconcile(seg, owner, set(), depth + 1)
        if holder_model == run.phase.model:
            released = self.release_if_stale(seg, holder, ref.key)
            if isinstance(released, Conflict):
                return released
            if released:
                return self.reconcile(seg, owner, set(), depth + 1)
        # The holder requires the value: a duplicate, if this record still requires it too.
        current = read(run, owner)
        required = run.required(current)
        if required is None or required.key != ref.key:
            return self.reconcile(seg, owner, set(), depth + 1)
        seg.count(duplicates=1)
        return Conflict(model=run.phase.model, constraint=run.name, lock=ref.key,
                        record=dict(owner), holder=dict(holder), holder_model=holder_model,
                        value=ref.value, hashed=ref.hashed)

    def release_if_stale(self, seg: Segment, holder: TypedKey, key: str) -> bool | Conflict:
        """Delete ``holder``'s lock ``key`` if ``holder`` does not require it (verified by a
        read after the delete). True: released; False: the holder requires it; a Conflict when
        the holder requires it again but another record took it meanwhile."""
        run = seg.run
        deleted = False
        for _ in range(MAX_RECONCILE_ROUNDS):
            current = read(run, holder)
            required = run.required(current)
            if required is not None and required.key == key:
                if not deleted:
                    return False
                assert current is not None
                ((outcome, other),) = self.put(seg, [(holder, required, current)])
                if outcome == PutOutcome.TAKEN:
                    seg.count(duplicates=1)
                    return Conflict(model=run.phase.model, constraint=run.name, lock=key,
                                    record=dict(holder),
                                    holder=(other or {}).get(OWNER_ATTR, {}).get("M"),
                                    holder_model=(other or {}).get(MODEL_ATTR, {}).get("S"),
                                    value=required.value, hashed=required.hashed)
                deleted = False
                continue
            if deleted:
                return True
            if self.delete(seg, key, holder) == DeleteOutcome.FOREIGN:
                return True  # someone else's now: not the holder's to keep
            deleted = True
        raise MigrationError(f"{plain_key(holder)} kept changing while its stale lock was "
                             "removed; rerun to retry")

    def resume_pending(self, seg: Segment, pending: Pending) -> Conflict | None:
        """Reconcile a lock write the previous run sent but may not have verified."""
        run = seg.run
        owner = pending.owner
        if owner is None:
            lock = read(run, lock_primary_key(run.keys.key_attributes, pending.lock))
            if lock is None or lock.get(MODEL_ATTR, {}).get("S") != run.phase.model:
                return None  # never written, or already deleted: nothing can be wrong
            owner = lock.get(OWNER_ATTR, {}).get("M")
            if owner is None:
                return None
        # The write in flight may have been a put or a delete: reconcile the lock with the
        # owner as it is now — put it if required (reconcile puts keys it has not written), delete
        # it otherwise (reconcile deletes written keys the record does not require) — and verify.
        required = run.required(read(run, owner))
        if required is not None and required.key == pending.lock:
            return self.reconcile(seg, owner, set())
        return self.reconcile(seg, owner, {pending.lock})

    def recheck(self, seg: Segment, conflict: Conflict) -> list[Conflict]:
        """Re-examine a stored duplicate after the user fixed data: reconcile the record that
        lacked the lock and (same model) the holder, whatever their values are now."""
        out = []
        result = self.reconcile(seg, conflict.record, set())
        if result is not None:
            out.append(result)
        if conflict.holder is not None and conflict.holder_model == seg.run.phase.model:
            # The holder may have been changed with a write that bypassed the locks.
            result = self.reconcile(seg, conflict.holder, set())
            if result is not None:
                out.append(result)
        return out
