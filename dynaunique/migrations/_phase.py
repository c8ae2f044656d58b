"""One phase at run time: its model bound, which items are the model's records and the lock
each requires, whether the lock secret made the hashed locks it meets (the audit's rule), and the
segment of it being worked on, with its checkpoint in the ledger."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

import attrs

from dynaunique._lock.items import ModelInfo, claim, key_id, key_of, locks_of, plain_key
from dynaunique._lock.locks import (
    CONSTRAINT_ATTR,
    MODEL_ATTR,
    OWNER_ATTR,
    RESERVED_PREFIX,
    SECRET_HASH_TAG,
    SECRET_ID_ATTR,
    LockRef,
    TypedKey,
    secret_id,
)
from dynaunique._write.mixed import identity
from dynaunique._write.writes import Shaped, Unchanged, unchanged_guard
from dynaunique.errors import (
    ConfigurationError,
    DynauniqueError,
    InvalidValueError,
    MigrationError,
)
from dynaunique.migrations._dynamo import TableKeys, batch_get, call
from dynaunique.migrations._kinds import PhaseKind
from dynaunique.migrations._ledger import Counters, Pending, Progress
from dynaunique.migrations.operations import MigrationContext, Phase
from dynaunique.migrations.ratelimit import Limiter
from dynaunique.migrations.recorder import MigrationRecorder
from dynaunique.migrations.state import bind


class LockSecretError(MigrationError, ConfigurationError):
    """A phase met hashed locks of its constraint that the current lock secret did not make:
    the secret is probably wrong (a configuration mistake, so the CLI exits 2). Nothing was
    written or deleted on their account; ``accept_other_secret`` re-locks under the current
    secret."""

    exit_code = 2


@attrs.define
class PhaseRun:
    """What one phase needs at run time: the live model, its declaration bound, the table."""

    phase: Phase
    keys: TableKeys
    #: The PynamoDB connection to the table (its ``.client``: the botocore client).
    connection: Any
    model: Any = None
    info: ModelInfo | None = None
    #: The live models of the phase's table, the phase's own included: who else an item of the
    #: table may be a record of.
    table_models: tuple[Any, ...] = ()
    #: The phase's label in progress reports, and the table's approximate item count (None for
    #: a phase that does not scan) — for the ``migration_progress`` events.
    label: str = ""
    estimate: int | None = None
    #: The fingerprint of the secret the phase's hashed constraint is locked with (None: the
    #: constraint is not hashed, or the phase writes no lock it computes).
    fingerprint: str | None = None
    #: Locks another secret made are judged as the current secret's ("rotate").
    accept_other_secret: bool = False

    @property
    def name(self) -> str:
        """The lock name of the phase's constraint."""
        assert self.phase.constraint is not None
        return self.phase.constraint.name

    def load(self, raw: Mapping[str, Any] | None) -> Any:
        """The model instance ``raw`` is, or None when it is not one of the model's records.

        The audit's rule (:func:`dynaunique._lock.items.claim` over the table's live models):
        ``raw`` is this model's record iff the claim names this model — so a backfill locks exactly
        the records ``dynaunique check`` expects locks of — and PynamoDB can deserialize it.
        """
        if raw is None:
            return None
        owner, _ = claim(self.table_models, raw)
        if owner is None or owner is not self.model:
            return None
        try:
            return self.model.from_raw_data(copy.deepcopy(dict(raw)))
        except Exception:  # unreadable as the model: not one of its records
            return None

    def required(self, raw: Mapping[str, Any] | None) -> LockRef | None:
        """The lock of this phase's constraint that ``raw`` requires (None: no lock)."""
        instance = self.load(raw)
        if instance is None:
            return None
        assert self.info is not None and raw is not None
        try:
            return locks_of(self.info, instance).get(self.name)
        except InvalidValueError as exc:
            raise MigrationError(
                f"{self.info.name} {plain_key(self.key(raw))}: its value cannot be locked: {exc}"
            ) from exc

    def as_read(self, raw: Mapping[str, Any]) -> Unchanged:
        """A guard true while the record is still as ``raw`` (as scanned or read): its lock
        inputs unchanged — the constrained attributes, the TTL the lock copies and what the
        constraint's condition reads — compared by value (the guard the audit's repairs check
        records with; a version alone would not prove the values unchanged)."""
        assert self.info is not None
        reads: set[str] = set()
        if any(b.constraint.condition is not None for b in self.info.constraints):
            instance = self.load(raw)
            if instance is not None:
                locks_of(self.info, instance, reads)
        return unchanged_guard(self.info, raw, use_version=False, condition_reads=reads)

    def identity(self, raw: Mapping[str, Any], as_read: Unchanged) -> Shaped | None:
        """A guard true while ``raw`` is still a record of the phase's model by the audit's
        rule (None: the table has no other model): equal lock inputs (``as_read``, the check
        it goes with) do not prove it."""
        return identity(self.table_models, self.model, raw, [n for n, _ in as_read.expected])

    def owners_now(self, locks: Sequence[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        """The records the ``locks`` name as owners, read now (strongly consistent), by
        :func:`~dynaunique._lock.items.key_id` of their key."""
        owners = [lock[OWNER_ATTR]["M"] for lock in locks if OWNER_ATTR in lock]
        return {key_id(self.key(item)): item
                for item in (batch_get(self.connection, self.keys.table, owners) if owners else [])}

    def hashed_lock(self, lock: Mapping[str, Any]) -> bool:
        """Whether ``lock`` (of the phase's constraint) keeps an HMAC under a lock secret."""
        return bool(lock[self.keys.hash_attr]["S"].startswith(
            f"{RESERVED_PREFIX}{self.name}#{SECRET_HASH_TAG}"))

    def other_secret(self, lock: Mapping[str, Any], *, required: bool) -> bool:
        """Whether ``lock`` (of the phase's constraint) is a hashed lock of a hashed phase that
        is not known to be made with the current secret. The audit's rule: it carries another
        fingerprint, or none and no record requires it (``required``: its owner requires its
        key under the current secret). A hashed lock of a phase whose constraint is not hashed
        any more is stale under any secret: False.
        """
        if self.fingerprint is None or not self.hashed_lock(lock):
            return False
        made = made_with(lock)
        return made != self.fingerprint and not (made is None and required)

    def secret_error(self, seen: Counter[str | None]) -> LockSecretError:
        """The error that stops a phase meeting hashed locks another secret made (``seen``:
        how many of them carry each fingerprint, None for none)."""
        carried = ", ".join(f"{n} {fp if fp is not None else 'no fingerprint'}"
                            for fp, n in sorted(seen.items(), key=lambda c: (-c[1], c[0] or "")))
        return LockSecretError(
            f"{self.phase.describe()} on table {self.keys.table!r}: the lock secret is probably "
            f"wrong: {sum(seen.values())} hashed lock(s) of {self.name} were not made with the "
            f"current secret ({self.fingerprint}; they carry {carried}), so the migration "
            "stopped before writing or deleting any of its locks on their account; check "
            "Meta.lock_secret or DYNAUNIQUE_LOCK_SECRET; if their secret was retired on "
            "purpose, migrate with --accept-other-secret (accept_other_secret=True) to re-lock "
            "under the current secret")

    def lock_filter(self) -> dict[str, Any]:
        """The scan filter that keeps the locks of the phase's constraint and model."""
        return {
            "FilterExpression": "begins_with(#h, :prefix) AND #m = :model AND #c = :constraint",
            "ExpressionAttributeNames": {"#h": self.keys.hash_attr, "#m": MODEL_ATTR,
                                         "#c": CONSTRAINT_ATTR},
            "ExpressionAttributeValues": {
                ":prefix": {"S": f"{RESERVED_PREFIX}{self.name}#"},
                ":model": {"S": self.phase.model},
                ":constraint": {"S": self.name},
            },
        }

    def key(self, item: Mapping[str, Any]) -> TypedKey:
        """The typed primary key of an item of the table (a record read, or one to lock)."""
        key = key_of(self.keys.key_attributes, item)
        assert key is not None, "an item read by its key has its key attributes"
        return key


def phase_run(phase: Phase, keys: TableKeys, connection: Any, models: Mapping[str, Any], *,
              accept_other_secret: bool = False) -> PhaseRun:
    """``phase`` ready to run on the table ``keys`` describes: for a fill or a sweep, its live
    model (of ``models``) bound to the phase's declaration, and the table's other models.

    A fill of a hashed constraint first makes sure the secret is right (:func:`check_secret`),
    unless ``accept_other_secret``.

    :raises MigrationError: the model's key attributes are not the table's;
        :class:`LockSecretError`: the lock secret is probably wrong.
    """
    run = PhaseRun(phase, keys, connection, accept_other_secret=accept_other_secret)
    if phase.kind not in (PhaseKind.FILL, PhaseKind.SWEEP):
        return run
    assert phase.constraint is not None
    run.model = models[phase.model]
    run.info = bind(run.model, phase.constraint, table=keys.table)
    same = [m for m in models.values()
            if getattr(m, "_du_info", None) is not None and m._du_info.table == keys.table]
    # The model comes first if the module points it at another table than the migration's.
    run.table_models = tuple(same) if run.model in same else (run.model, *same)
    if run.info.key_attributes != keys.key_attributes:
        raise MigrationError(
            f"{phase.model}'s key attributes {run.info.key_attributes} differ from "
            f"table {keys.table!r}'s {keys.key_attributes}"
        )
    if phase.constraint.hashed:
        run.fingerprint = secret_id(run.info.secret())
        if phase.kind == PhaseKind.FILL and not accept_other_secret:
            check_secret(run)
    return run


def made_with(lock: Mapping[str, Any]) -> str | None:
    """The fingerprint of the secret a hashed lock carries (None: made before locks carried
    one)."""
    made = lock.get(SECRET_ID_ATTR, {}).get("S")
    return str(made) if made is not None else None


def check_secret(run: PhaseRun) -> None:
    """Before a fill writes a hashed lock: stop if the table's hashed locks of the constraint
    say the secret is wrong — the audit's rule: none of them was made with the current secret
    (carrying its fingerprint, or none and required by its owner's values).

    A fill scans the records, not the locks, so it cannot meet them on the way; a lock another
    secret made would be doubled by one under the current secret. The scan of the constraint's
    locks stops at the first one the current secret made, so with the right secret it costs a
    page or so; it reads the whole table only when there is no such lock (no lock at all, or
    the wrong secret).

    :raises LockSecretError: hashed locks of the constraint exist and none was made with the
        current secret.
    """
    seen: Counter[str | None] = Counter()
    params: dict[str, Any] = {"TableName": run.keys.table, **run.lock_filter()}
    while True:
        page = call(run.connection, "scan", **params)
        locks = page.get("Items", [])
        now = run.owners_now(locks) if locks else {}
        for lock in locks:
            owner = lock.get(OWNER_ATTR, {}).get("M")
            required = run.required(now.get(key_id(owner))) if owner is not None else None
            held = required is not None and required.key == lock[run.keys.hash_attr]["S"]
            if run.other_secret(lock, required=held):
                seen[made_with(lock)] += 1
            elif run.hashed_lock(lock):
                return  # one lock the current secret made: the secret is right
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    if seen:
        raise run.secret_error(seen)


def run_python(phase: Phase, context: MigrationContext, migration: str) -> None:
    """Call a ``run`` phase's function; its failure becomes a :class:`MigrationError`."""
    assert phase.function is not None
    try:
        phase.function(context)
    except DynauniqueError:
        raise
    except Exception as exc:
        raise MigrationError(f"{migration}: {phase.describe()} failed: "
                             f"{type(exc).__name__}: {exc}") from exc


@attrs.define
class Segment:
    """One segment being worked on: its phase, its progress item and the uncommitted counts."""

    run: PhaseRun
    progress: Progress
    worker: str
    recorder: MigrationRecorder
    #: What the writes pay through (``--max-wcu``, the adaptive rate), and the scan's reads
    #: (``--max-rcu``).
    bucket: Limiter | None = None
    delta: Counters = attrs.field(factory=Counters)
    #: The runner's lease holder id: checkpoints are fenced by it (None: not fenced).
    holder: str | None = None
    reads: Limiter | None = None
    #: The threads that keep up to ``--concurrency`` lock writes of a page in flight (None:
    #: one at a time).
    pool: ThreadPoolExecutor | None = None
    #: How many lock writes of a page ``pool`` keeps in flight.
    concurrency: int = 1
    #: The scan request of the page being worked on, and how to send one (paid for under
    #: ``--max-rcu``): the fill reads its page again, consistently, to verify its lock puts.
    page_params: dict[str, Any] | None = None
    scan_page: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    _guard: threading.RLock = attrs.field(factory=threading.RLock)

    def count(self, **units: float) -> None:
        """Add to the uncommitted counters (from any thread of the page)."""
        with self._guard:
            for name, value in units.items():
                setattr(self.delta, name, getattr(self.delta, name) + value)

    def each(self, work: Callable[[_In], _Out], items: Sequence[_In]) -> list[_Out]:
        """``work(item)`` for every item, up to ``--concurrency`` at once, results in order.

        Returns (or raises the first error, in item order) only once every call has ended:
        nothing of the page is in flight when the caller goes on to verify and checkpoint.
        """
        if self.pool is None or len(items) < 2:
            return [work(item) for item in items]
        futures = [self.pool.submit(work, item) for item in items]
        wait(futures)
        return [future.result() for future in futures]

    def save(self) -> None:
        """Overwrite the segment's progress item in the ledger (one write unit, rate-limited,
        fenced by the runner's holder id)."""
        if self.bucket is not None:
            self.bucket.acquire(1.0)
        with self._guard:
            self.recorder.save_progress(self.progress, worker=self.worker, holder=self.holder)

    def intend(self, entries: Sequence[Pending], *, put: bool = False) -> None:
        """Record lock writes about to be sent (write-ahead), unless already recorded.

        A put is covered by any entry for the same lock key (resuming reads the lock item to
        find its owner); a delete needs its owner recorded, since the lock may then be gone.
        """
        if self.run.phase.kind == PhaseKind.REMOVE:
            return  # owner-guarded deletes of a constraint nobody maintains: nothing to verify
        with self._guard:  # written before the write it announces, whichever thread sends it
            known = {p.ident for p in self.progress.pending}
            locks = {p.lock for p in self.progress.pending}
            new = [e for e in entries if e.ident not in known and not (put and e.lock in locks)]
            if new:
                self.progress.pending.extend(new)
                self.save()

    def spend(self, response: Mapping[str, Any], estimate: float = 1.0) -> None:
        """Count the write units DynamoDB reports ``response`` consumed (``estimate`` when it
        reports none) and charge the cap the difference from the ``estimate`` taken."""
        units = consumed_units(response, default=estimate)
        self.count(write_units=units)
        if self.bucket is not None:
            self.bucket.charge(units - estimate)

    def throttled(self, code: str) -> None:
        """The retry loop met a throttled lock write: the adaptive rate slows down."""
        if self.bucket is not None:
            self.bucket.throttled(code)


_In = TypeVar("_In")
_Out = TypeVar("_Out")


def consumed_units(response: Mapping[str, Any], default: float = 1.0) -> float:
    """The capacity units DynamoDB reports a response consumed (``ReturnConsumedCapacity``
    ``TOTAL``), ``default`` when it reports none."""
    consumed = response.get("ConsumedCapacity") or {}
    if isinstance(consumed, list):  # batch operations: one entry per table
        return sum(float(c.get("CapacityUnits", 0.0)) for c in consumed) or default
    return float(consumed.get("CapacityUnits", default))
