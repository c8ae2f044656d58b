"""Apply and unapply migrations against the table: plan, backfill, sweep, remove, record.

:class:`MigrationExecutor` works like Django's: ``plan(target)`` lists the migrations to apply
(or unapply) and is pure reading; ``migrate(target)`` takes the lease, runs each operation's
phases and records each migration in the ledger when all of its phases are done.

Every phase scans the table in segments and checkpoints each page in the ledger, so a run that
stops for any reason resumes where it stopped. The lock writes are plain conditional writes,
never transactions; what keeps them right while the application keeps writing is the rule
"write, then read the record again": see :meth:`MigrationExecutor._settle` and
docs/migrations.md.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import attrs

from dynaunique.errors import DynauniqueError, InvalidValueError, MigrationError
from dynaunique.locks import (
    CONSTRAINT_ATTR,
    MODEL_ATTR,
    OWNER_ATTR,
    RESERVED_PREFIX,
    lock_item,
    lock_primary_key,
    untyped,
)
from dynaunique.migrations.loader import Migration, MigrationLoader
from dynaunique.migrations.operations import FILL, REMOVE, RUN, SWEEP, MigrationContext, Phase
from dynaunique.migrations.ratelimit import TokenBucket
from dynaunique.migrations.recorder import (
    ConditionFailed,
    Conflict,
    Counters,
    Lease,
    MigrationRecorder,
    Pending,
    Progress,
    TableKeys,
    batch_get,
    call,
    describe_table,
    job_id,
    now_iso,
)
from dynaunique.migrations.state import bind
from dynaunique.observe import emit
from dynaunique.observe import migrations_logger as _log
from dynaunique.transaction import render_write
from dynaunique.unit_of_work import (
    HeldBy,
    LockDelete,
    LockPut,
    LockRef,
    ModelInfo,
    TypedKey,
    locks_of,
)

#: How often one record is re-read and re-written before the executor gives up on it (a record
#: rewritten faster than a round trip, for seconds on end).
MAX_SETTLE_ROUNDS = 8


# --- reporting -----------------------------------------------------------------------------------


class Reporter(Protocol):
    """Receives progress; the CLI draws a progress bar or prints log lines from it."""

    def phase_started(self, label: str, *, estimate: int | None) -> None:
        """A phase starts (or resumes); ``estimate`` is the table's approximate item count."""

    def advance(self, label: str, delta: Counters) -> None:
        """A page of the phase was processed (called from scan threads)."""

    def phase_finished(self, label: str, totals: Counters) -> None:
        """A phase completed."""

    def note(self, text: str) -> None:
        """Something worth a line of output."""


class SilentReporter:
    """A reporter that reports nothing."""

    def phase_started(self, label: str, *, estimate: int | None) -> None:
        """Nothing."""

    def advance(self, label: str, delta: Counters) -> None:
        """Nothing."""

    def phase_finished(self, label: str, totals: Counters) -> None:
        """Nothing."""

    def note(self, text: str) -> None:
        """Nothing."""


# --- results and errors --------------------------------------------------------------------------


def plain_key(key: Mapping[str, Any] | None) -> dict[str, Any]:
    """A typed key as plain values: ``{"PK": "ACCT#1", "SK": "PROFILE"}``."""
    return {k: untyped(v) for k, v in (key or {}).items()}


@attrs.frozen
class Duplicate:
    """One value held by more than one record: ``holder`` has the lock, ``others`` do not."""

    model: str
    constraint: str
    value: Any
    hashed: bool
    lock: str
    holder: dict[str, Any] | None
    holder_model: str | None
    others: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly dict (values as stored)."""
        value = self.value
        if isinstance(value, tuple):
            value = list(value)
        return {
            "model": self.model,
            "constraint": self.constraint,
            "value": None if self.hashed else _jsonable(value),
            "hashed": self.hashed,
            "lock": self.lock,
            "holder": _jsonable(self.holder),
            "holder_model": self.holder_model,
            "others": [_jsonable(o) for o in self.others],
        }


def _jsonable(value: Any) -> Any:
    from decimal import Decimal

    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def group_conflicts(conflicts: Sequence[Conflict]) -> list[Duplicate]:
    """One :class:`Duplicate` per contested lock, holders and others merged."""
    groups: dict[tuple[str, str, str], list[Conflict]] = {}
    for conflict in conflicts:
        groups.setdefault((conflict.model, conflict.constraint, conflict.lock), []).append(conflict)
    out = []
    for (model, constraint, lock), members in sorted(groups.items()):
        first = members[0]
        holder = next((c.holder for c in members if c.holder is not None), None)
        holder_model = next((c.holder_model for c in members if c.holder is not None), None)
        others: list[dict[str, Any]] = []
        for c in members:
            key = plain_key(c.record)
            if key not in others and c.record != holder:
                others.append(key)
        out.append(Duplicate(model, constraint, first.value, first.hashed, lock,
                             plain_key(holder) if holder is not None else None, holder_model,
                             tuple(others)))
    return out


class DuplicatesFound(MigrationError):
    """Existing records share a value the new constraint says is unique; nothing was resolved.

    ``duplicates`` lists each contested value with the record holding its lock and the records
    that could not get it. No record was changed; fix the data (change or delete all but one
    holder of each value) and run ``migrate`` again: it re-checks these records and continues.
    """

    def __init__(self, migration: str, duplicates: Sequence[Duplicate], *,
                 incomplete: bool = False) -> None:
        self.migration = migration
        self.duplicates = list(duplicates)
        #: True when a segment stopped early because it found too many duplicates to store.
        self.incomplete = incomplete
        names = sorted({f"{d.model}.{d.constraint}" for d in self.duplicates})
        more = " (the scan stopped early: more may exist)" if incomplete else ""
        super().__init__(
            f"migration {migration} stopped: {len(self.duplicates)} value(s) of "
            f"{', '.join(names)} are held by more than one record{more}. No record was changed. "
            "Change or delete all but one holder of each value, then run `dynaunique migrate` "
            "again: it re-checks these records and continues."
        )


class InjectedCrash(MigrationError):
    """Raised by the test-only ``fail_after_records`` hook, to simulate a crash mid-backfill."""


@attrs.frozen
class Step:
    """One migration to apply (``backwards=False``) or unapply."""

    migration: Migration
    backwards: bool = False

    @property
    def name(self) -> str:
        """The migration's name."""
        return self.migration.name

    def jobs(self) -> list[tuple[str, Phase]]:
        """The phases to run, in order, each with its ledger job id."""
        operations = list(enumerate(self.migration.operations))
        if self.backwards:
            operations.reverse()
        out = []
        for index, op in operations:
            for number, phase in enumerate(op.phases(backwards=self.backwards)):
                out.append((job_id(self.name, index, self.backwards, number), phase))
        return out

    def all_job_ids(self) -> list[str]:
        """Every job id this migration can have in the ledger, in both directions."""
        out: list[str] = []
        for index, op in enumerate(self.migration.operations):
            for backwards in (False, True):
                try:
                    count = len(op.phases(backwards=backwards))
                except MigrationError:
                    continue
                out.extend(job_id(self.name, index, backwards, n) for n in range(count))
        return out


@attrs.frozen
class MigrationStatus:
    """What ``showmigrations`` prints for one migration."""

    name: str
    applied: bool
    fake: bool = False
    #: A description of work done toward the opposite state, when a run was interrupted.
    partial: str | None = None


@attrs.define
class MigrateResult:
    """What ``migrate`` did: the migrations applied and unapplied, and the phase totals."""

    applied: list[str] = attrs.field(factory=list)
    unapplied: list[str] = attrs.field(factory=list)
    fake: bool = False
    totals: dict[str, Counters] = attrs.field(factory=dict)


# --- the executor --------------------------------------------------------------------------------


@attrs.define
class _PhaseRun:
    """What one phase needs at run time: the live model, its declaration bound, the table."""

    phase: Phase
    keys: TableKeys
    client: Any
    model: Any = None
    info: ModelInfo | None = None
    #: The phase's label in progress reports, and the table's approximate item count (None for
    #: a phase that does not scan) — for the ``migration_progress`` events.
    label: str = ""
    estimate: int | None = None

    @property
    def name(self) -> str:
        assert self.phase.constraint is not None
        return self.phase.constraint.name

    def load(self, raw: Mapping[str, Any] | None) -> Any:
        """The model instance ``raw`` is, or None when it is not one of the model's records.

        The rule: not a dynaunique item (hash key not starting with ``UNIQ#``), every key
        attribute present, ``Meta.is_record(raw)`` true when the model defines it, PynamoDB can
        deserialize it, and (for a polymorphic model) its discriminator names this class.
        """
        if raw is None:
            return None
        assert self.info is not None
        hash_value = raw.get(self.keys.hash_attr, {}).get("S")
        if not isinstance(hash_value, str) or hash_value.startswith(RESERVED_PREFIX):
            return None
        if self.keys.range_attr is not None and self.keys.range_attr not in raw:
            return None
        is_record = getattr(self.model.Meta, "is_record", None)
        if is_record is not None and not is_record(raw):
            return None
        try:
            instance = self.model.from_raw_data(copy.deepcopy(dict(raw)))
        except Exception:
            return None
        return instance if isinstance(instance, self.model) else None

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
                f"{self.info.name} {plain_key(self.owner_key(raw))}: its value cannot be "
                f"locked: {exc}"
            ) from exc

    def owner_key(self, raw: Mapping[str, Any]) -> TypedKey:
        """The record's typed primary key."""
        key: TypedKey = {self.keys.hash_attr: raw[self.keys.hash_attr]}
        if self.keys.range_attr is not None:
            key[self.keys.range_attr] = raw[self.keys.range_attr]
        return key


class MigrationExecutor:
    """End-to-end migration execution: plan against the ledger, then run phases and record.

    * ``loader`` — the migration files; ``recorder`` — the ledger (with its client and table);
    * ``models`` — the live model classes (by class name), for computing locks;
    * ``client_for`` — the DynamoDB client for a table (default: the ledger's client);
    * ``segments`` — scan segments (and threads) for a new phase;
    * ``worker`` — ``(I, N)``: run only segment *I* of *N* of every phase, next to other
      workers, coordinating through the ledger;
    * ``max_wcu`` — cap on write units per second (in worker mode, the total over N workers);
    * ``fail_after_records`` — **test-only** crash injection: raise :class:`InjectedCrash` after
      that many records were processed, before the page's checkpoint is written.
    """

    def __init__(
        self,
        loader: MigrationLoader,
        recorder: MigrationRecorder,
        models: Mapping[str, Any],
        *,
        client_for: Callable[[str], Any] | None = None,
        segments: int = 1,
        worker: tuple[int, int] | None = None,
        max_wcu: float | None = None,
        reporter: Reporter | None = None,
        lease_seconds: float = 60.0,
        page_size: int = 100,
        poll_seconds: float = 1.0,
        wait_timeout: float | None = None,
        conflict_cap: int = 500,
        fail_after_records: int | None = None,
    ) -> None:
        if segments < 1 or segments > 1000:
            raise MigrationError("segments must be between 1 and 1000")
        if worker is not None and not (0 <= worker[0] < worker[1] <= 1000):
            raise MigrationError(f"--segment {worker[0]} --total-segments {worker[1]}: the "
                                 "segment must be in 0..total-1 (total at most 1000)")
        self.loader = loader
        self.recorder = recorder
        self.models = dict(models)
        self.client_for = client_for or (lambda table: recorder.client)
        self.segments = segments
        self.worker = worker
        self.reporter: Reporter = reporter or SilentReporter()
        self.lease_seconds = lease_seconds
        self.page_size = page_size
        self.poll_seconds = poll_seconds
        self.wait_timeout = wait_timeout
        self.conflict_cap = conflict_cap
        self.fail_after_records = fail_after_records
        rate = max_wcu / worker[1] if (max_wcu is not None and worker is not None) else max_wcu
        self.bucket = TokenBucket(rate) if rate is not None else None
        self._tables: dict[str, TableKeys] = {recorder.table: recorder.keys}
        self._processed = 0
        self._processed_lock = threading.Lock()
        self._stop = threading.Event()

    # --- planning (reads only) -------------------------------------------------------------------

    def applied(self) -> dict[str, dict[str, Any]]:
        """The migrations on disk that the ledger records as applied."""
        return self.recorder.applied(self.loader.order)

    def plan(self, target: str | None = None) -> list[Step]:
        """The steps that bring the ledger to ``target`` (a migration name or prefix, ``zero``,
        or None for the latest), like Django's ``migration_plan``.

        :raises MigrationError: the ledger's history is inconsistent with the files.
        """
        applied = set(self.applied())
        order = self.loader.order
        migrations = self.loader.migrations
        for name in order:
            if name in applied:
                missing = [d for d in migrations[name].dependencies if d not in applied]
                if missing:
                    raise MigrationError(
                        f"inconsistent history: {name} is applied but its dependency "
                        f"{', '.join(missing)} is not; `migrate --fake` it or fix the ledger"
                    )
        if target is None:
            leaf = self.loader.leaf()
            goal = self._ancestors(leaf) if leaf is not None else set()
        else:
            resolved = self.loader.resolve(target)
            goal = self._ancestors(resolved) if resolved is not None else set()
        forwards = [Step(migrations[n]) for n in order if n in goal and n not in applied]
        backwards = [Step(migrations[n], backwards=True) for n in reversed(order)
                     if n in applied and n not in goal]
        return backwards + forwards

    def _ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self.loader.migrations[current].dependencies)
        return seen

    def status(self) -> list[MigrationStatus]:
        """Each migration on disk: applied or not, and what an interrupted run left behind."""
        applied = self.applied()
        steps = [Step(self.loader.migrations[n], backwards=n in applied)
                 for n in self.loader.order]
        all_jobs = [j for s in steps for j in s.all_job_ids()]
        started = self.recorder.jobs_started(all_jobs)
        out = []
        for step in steps:
            partial = None
            try:
                jobs = step.jobs()
            except MigrationError:
                jobs = []
            notes = []
            for job, phase in jobs:
                total = started.get(job)
                if total is None:
                    continue
                progress = self.recorder.progress(job, total)
                done = sum(1 for p in progress if p.done)
                conflicts = sum(len(p.conflicts) for p in progress)
                note = f"{phase.describe()} {done}/{total} segments done"
                if conflicts:
                    note += f", {conflicts} duplicate(s) to fix"
                notes.append(note)
            if notes:
                verb = "partly unapplied" if step.backwards else "partly applied"
                partial = f"{verb}: " + "; ".join(notes)
            record = applied.get(step.name, {})
            out.append(MigrationStatus(step.name, step.name in applied,
                                       bool(record.get("fake", False)), partial))
        return out

    def check_runnable(self, steps: Sequence[Step]) -> None:
        """Fail before any write when a step cannot run: irreversible, or a model it needs for
        computing locks is gone, or a normalizer/condition path no longer imports."""
        for step in steps:
            if step.backwards and not step.migration.reversible:
                raise MigrationError(f"migration {step.name} cannot be unapplied (a RunPython "
                                     "without a backwards function)")
            for _, phase in step.jobs():
                if phase.kind in (FILL, SWEEP):
                    model = self.models.get(phase.model)
                    assert phase.constraint is not None
                    if model is None:
                        raise MigrationError(
                            f"{step.name} needs model {phase.model} to compute the locks of "
                            f"{phase.constraint.name}, but the module no longer defines it"
                        )
                    bind(model, phase.constraint, table=phase.table)

    # --- running ---------------------------------------------------------------------------------

    def migrate(self, target: str | None = None, *, fake: bool = False) -> MigrateResult:
        """Apply (or unapply) migrations up to ``target``; see :meth:`plan`.

        :raises DuplicatesFound: a backfill found records sharing a value (exit code 1).
        :raises MigrationError: another runner holds the lease, or a step cannot run.
        """
        if fake and self.worker is not None:
            raise MigrationError("--fake records migrations without running them; it takes no "
                                 "--segment/--total-segments")
        steps = self.plan(target)
        result = MigrateResult(fake=fake)
        if not steps:
            return result
        if not fake:
            self.check_runnable(steps)
        lease = self.recorder.acquire(seconds=self.lease_seconds, worker=self.worker)
        try:
            for step in steps:
                lease.check()
                if fake:
                    if step.backwards:
                        self.recorder.record_unapplied(step.name)
                    else:
                        self.recorder.record_applied(step.name, fake=True)
                    self.recorder.clear_jobs(step.all_job_ids())
                else:
                    self._apply(step, lease, result)
                (result.unapplied if step.backwards else result.applied).append(step.name)
        finally:
            lease.release()
        return result

    def _finished_elsewhere(self, step: Step) -> bool:
        return self.recorder.is_applied(step.name) != step.backwards

    def _apply(self, step: Step, lease: Lease, result: MigrateResult) -> None:
        if self.worker is not None and self._finished_elsewhere(step):
            return
        self.reporter.note(f"{'Unapplying' if step.backwards else 'Applying'} {step.name}")
        for job, phase in step.jobs():
            totals = self._run_job(step, job, phase, lease)
            if totals is None:  # another worker completed the whole migration meanwhile
                return
            result.totals[f"{step.name}: {phase.describe()}"] = totals
        if step.backwards:
            self.recorder.record_unapplied(step.name)
        else:
            self.recorder.record_applied(step.name)
        # Progress is cleared only after the record: a crash in between leaves stale items that
        # the next completion of this migration (either direction) clears.
        self.recorder.clear_jobs(step.all_job_ids())

    def _run_job(self, step: Step, job: str, phase: Phase, lease: Lease) -> Counters | None:
        if not phase.scans:
            wanted = 1
        elif self.worker is not None:
            wanted = self.worker[1]
        else:
            wanted = self.segments
        total = self.recorder.start_job(job, wanted, phase.describe())
        if self.worker is not None and phase.scans and total != self.worker[1]:
            raise MigrationError(
                f"{phase.describe()} of {step.name} was started split in {total} segments; run "
                f"the workers with --total-segments {total}"
            )
        if self.worker is None and phase.scans and total != self.segments:
            self.reporter.note(f"{phase.describe()}: resuming with the {total} segments it was "
                               "started with")
        progress = self.recorder.progress(job, total)
        label = f"{step.name}: {phase.describe()}"
        if all(_finished(p) for p in progress):
            return _sum(progress)
        run = self._prepare(phase)
        estimate = run.keys.item_count if phase.scans else None
        run.label, run.estimate = label, estimate
        self.reporter.phase_started(label, estimate=estimate)
        _progress_event("started", label, _sum(progress), estimate)
        if phase.kind == RUN:
            if self.worker is None or self.worker[0] == 0:
                self._run_function(step, phase, progress[0])
            elif not self._wait(step, job, total, lease):
                return None
        else:
            todo = [p for p in progress if not _finished(p)]
            if self.worker is not None:
                todo = [p for p in todo if p.segment == self.worker[0]]
            self._run_segments(run, todo, lease, label)
            if self.worker is not None and not self._wait(step, job, total, lease):
                return None
        final = self.recorder.progress(job, total)
        conflicts = [c for p in final for c in p.conflicts]
        if conflicts:
            raise DuplicatesFound(step.name, group_conflicts(conflicts),
                                  incomplete=any(not p.done for p in final))
        if not all(_finished(p) for p in final):
            raise MigrationError(f"{label}: some segments did not finish; rerun to resume")
        totals = _sum(final)
        self.reporter.phase_finished(label, totals)
        _progress_event("finished", label, totals, estimate)
        return totals

    def _wait(self, step: Step, job: str, total: int, lease: Lease) -> bool:
        """Wait until every segment of ``job`` is done (or blocked by duplicates); False when
        another worker completed the whole migration meanwhile."""
        started = time.monotonic()
        announced = False
        while True:
            lease.check()
            progress = self.recorder.progress(job, total)
            # Read progress before the record: progress is cleared only after the record.
            if self._finished_elsewhere(step):
                return False
            waiting = [p.segment for p in progress
                       if not (p.done and not p.pending) and not _blocked(p)]
            if not waiting:
                return True
            if not announced:
                self.reporter.note(f"waiting for segment(s) {waiting} of {job}")
                announced = True
            if self.wait_timeout is not None and time.monotonic() - started > self.wait_timeout:
                raise MigrationError(f"gave up waiting for segments {waiting} of {job}")
            time.sleep(self.poll_seconds)

    def _run_function(self, step: Step, phase: Phase, progress: Progress) -> None:
        assert phase.function is not None
        # RunPython functions get the botocore client behind the ledger's connection.
        client = self.recorder.client.client
        context = MigrationContext(app=self.recorder.app, models=self.models, client=client,
                                   backwards=step.backwards)
        try:
            phase.function(context)
        except DynauniqueError:
            raise
        except Exception as exc:
            raise MigrationError(f"{step.name}: {phase.describe()} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        progress.done = True
        self.recorder.save_progress(progress, worker=self._worker_name())

    def _worker_name(self) -> str:
        return f"{self.worker[0]}/{self.worker[1]}" if self.worker is not None else "all"

    def _prepare(self, phase: Phase) -> _PhaseRun:
        table = phase.table or self.recorder.table
        client = self.client_for(table)
        keys = self._tables.get(table)
        if keys is None:
            keys = describe_table(client, table)
            self._tables[table] = keys
        run = _PhaseRun(phase, keys, client)
        if phase.kind in (FILL, SWEEP):
            assert phase.constraint is not None
            run.model = self.models[phase.model]
            run.info = bind(run.model, phase.constraint, table=table)
            if run.info.key_attributes != keys.key_attributes:
                raise MigrationError(
                    f"{phase.model}'s key attributes {run.info.key_attributes} differ from "
                    f"table {table!r}'s {keys.key_attributes}"
                )
        return run

    def _run_segments(self, run: _PhaseRun, todo: list[Progress], lease: Lease,
                      label: str) -> None:
        if not todo:
            return
        threads = 1 if self.worker is not None else min(self.segments, len(todo))
        if threads == 1:
            for progress in todo:
                self._run_segment(run, progress, lease, label)
            return
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dynaunique-scan") as pool:
            futures = [pool.submit(self._run_segment, run, p, lease, label) for p in todo]
            for future in futures:
                try:
                    future.result()
                except BaseException as exc:
                    # Stop the other segments at their next page; they checkpoint first.
                    self._stop.set()
                    errors.append(exc)
        self._stop.clear()
        if errors:
            raise errors[0]

    def _run_segment(self, run: _PhaseRun, progress: Progress, lease: Lease, label: str) -> None:
        seg = _Segment(run, progress, self._worker_name())
        progress.blocked = False
        if progress.pending:
            # The last run died between writing locks and verifying them: verify them now.
            for pending in list(progress.pending):
                conflict = self._resume_pending(seg, pending)
                if conflict is not None:
                    progress.conflicts.append(conflict)
            progress.pending = []
            self._flush(seg, label)
        if progress.conflicts:
            # A rerun after the user fixed data: re-check the contested records first.
            self._recheck_all(seg, label)
        while not progress.done:
            if self._stop.is_set():
                return
            if len(progress.conflicts) >= self.conflict_cap:
                # Stored conflicts must be fixed before the scan goes on.
                progress.blocked = True
                self._flush(seg, label)
                return
            lease.check()
            params: dict[str, Any] = {
                "TableName": run.keys.table, "Limit": self.page_size,
                "Segment": progress.segment, "TotalSegments": progress.total,
                **self._scan_filter(run),
            }
            if progress.last_key is not None:
                params["ExclusiveStartKey"] = progress.last_key
            page = call(run.client, "scan", **params)
            items = page.get("Items", [])
            seg.delta.scanned += len(items)
            if run.phase.kind == FILL:
                self._fill_page(seg, items)
            elif run.phase.kind == SWEEP:
                self._sweep_page(seg, items)
            else:
                self._remove_page(seg, items)
            progress.conflicts = _unique(progress.conflicts)
            progress.pending = []
            progress.last_key = page.get("LastEvaluatedKey")
            progress.done = progress.last_key is None
            self._flush(seg, label)
            if progress.done and progress.conflicts:
                # Report only what still holds at the end: the application may have resolved
                # a duplicate found early in the scan (or created one that is now gone).
                self._recheck_all(seg, label)

    def _recheck_all(self, seg: _Segment, label: str) -> None:
        """Re-examine every stored conflict of the segment and keep those that still stand."""
        progress = seg.progress
        # The stored list stays as it is until every conflict was re-checked: checkpoints taken
        # meanwhile (intents) must not lose the ones not yet looked at.
        standing: list[Conflict] = []
        for conflict in list(progress.conflicts):
            standing.extend(self._recheck(seg, conflict))
        progress.conflicts = _unique(standing)
        # Each settle returned only after a read confirmed its writes: nothing is in flight.
        progress.pending = []
        # The counter becomes the number of duplicates standing now; the reporter gets the change.
        seg.delta.duplicates = len(progress.conflicts) - progress.counters.duplicates
        self._flush(seg, label)

    def _flush(self, seg: _Segment, label: str) -> None:
        """Checkpoint: fold the segment's new counters into its progress item and save it."""
        delta, seg.delta = seg.delta, Counters()
        seg.progress.counters.add(delta)
        self._save(seg)
        self.reporter.advance(label, delta)
        _progress_event("running", label, seg.progress.counters, seg.run.estimate,
                        segment=seg.progress.segment, segments=seg.progress.total)

    def _save(self, seg: _Segment) -> None:
        if self.bucket is not None:
            self.bucket.acquire(1.0)
        self.recorder.save_progress(seg.progress, worker=seg.worker)

    def _intend(self, seg: _Segment, entries: Sequence[Pending], *, put: bool = False) -> None:
        """Record lock writes about to be sent (write-ahead), unless already recorded.

        A put is covered by any entry for the same lock key (resuming reads the lock item to
        find its owner); a delete needs its owner recorded, since the lock may then be gone.
        """
        if seg.run.phase.kind == REMOVE:
            return  # owner-guarded deletes of a constraint nobody maintains: nothing to verify
        known = {p.ident for p in seg.progress.pending}
        locks = {p.lock for p in seg.progress.pending}
        new = [e for e in entries if e.ident not in known and not (put and e.lock in locks)]
        if new:
            seg.progress.pending.extend(new)
            self._save(seg)

    def _scan_filter(self, run: _PhaseRun) -> dict[str, Any]:
        if run.phase.kind == FILL:
            return {
                "FilterExpression": "NOT begins_with(#h, :reserved)",
                "ExpressionAttributeNames": {"#h": run.keys.hash_attr},
                "ExpressionAttributeValues": {":reserved": {"S": RESERVED_PREFIX}},
            }
        return {
            "FilterExpression": "begins_with(#h, :prefix) AND #m = :model AND #c = :constraint",
            "ExpressionAttributeNames": {"#h": run.keys.hash_attr, "#m": MODEL_ATTR,
                                         "#c": CONSTRAINT_ATTR},
            "ExpressionAttributeValues": {
                ":prefix": {"S": f"{RESERVED_PREFIX}{run.name}#"},
                ":model": {"S": run.phase.model},
                ":constraint": {"S": run.name},
            },
        }

    def _tick(self) -> None:
        if self.fail_after_records is None:
            return
        with self._processed_lock:
            self._processed += 1
            crash = self._processed == self.fail_after_records
        if crash:
            raise InjectedCrash(f"injected crash after {self.fail_after_records} records "
                                "(fail_after_records, a test hook)")

    # --- single writes ---------------------------------------------------------------------------

    def _spend(self, response: Mapping[str, Any], seg: _Segment) -> None:
        consumed = response.get("ConsumedCapacity") or {}
        units = float(consumed.get("CapacityUnits", 1.0)) if isinstance(consumed, dict) else 1.0
        seg.delta.write_units += units
        if self.bucket is not None:
            self.bucket.charge(units - 1.0)

    def _put_lock(self, seg: _Segment, owner: TypedKey, ref: LockRef,
                  raw: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """Put the lock guarded "missing, or owned by ``owner``".

        Returns ``("new", None)``, ``("present", None)`` (it was already this record's) or
        ``("taken", lock_item)`` (another record holds it).
        """
        run = seg.run
        info = run.info
        assert info is not None
        self._intend(seg, [Pending(ref.key, dict(owner))], put=True)
        ttl = None
        if info.ttl_attr is not None and info.ttl_attr in raw:
            ttl = (info.ttl_attr, int(raw[info.ttl_attr]["N"]))
        item = lock_item(
            key_attributes=run.keys.key_attributes, lock_key_value=ref.key, owner=owner,
            model=info.name, constraint=ref.constraint, value=ref.value, hashed=ref.hashed,
            created=now_iso(), ttl=ttl,
        )
        put = LockPut(run.keys.table, info.name, ref, owner, item, HeldBy((owner,)),
                      lock_primary_key(run.keys.key_attributes, ref.key))
        _, params = render_write(put)
        if self.bucket is not None:
            self.bucket.acquire(1.0)
        try:
            response = call(run.client, "put_item", **params, ReturnValues="ALL_OLD",
                            ReturnValuesOnConditionCheckFailure="ALL_OLD",
                            ReturnConsumedCapacity="TOTAL")
        except ConditionFailed as exc:
            seg.delta.write_units += 1.0
            return "taken", exc.item
        self._spend(response, seg)
        if response.get("Attributes"):
            return "present", None
        seg.delta.written += 1
        return "new", None

    def _delete_lock(self, seg: _Segment, key: str, owner: TypedKey) -> str:
        """Delete lock ``key`` guarded "missing, or owned by ``owner``".

        Returns ``"deleted"``, ``"absent"`` or ``"foreign"`` (another record holds it).
        """
        run = seg.run
        self._intend(seg, [Pending(key, dict(owner))])
        ref = LockRef(run.name, (), key, None)
        delete = LockDelete(run.keys.table, run.phase.model, ref,
                            lock_primary_key(run.keys.key_attributes, key), HeldBy((owner,)))
        _, params = render_write(delete)
        if self.bucket is not None:
            self.bucket.acquire(1.0)
        try:
            response = call(run.client, "delete_item", **params, ReturnValues="ALL_OLD",
                            ReturnConsumedCapacity="TOTAL")
        except ConditionFailed:
            seg.delta.write_units += 1.0
            return "foreign"
        self._spend(response, seg)
        if response.get("Attributes"):
            seg.delta.deleted += 1
            return "deleted"
        return "absent"

    def _read(self, run: _PhaseRun, key: TypedKey) -> dict[str, Any] | None:
        item = call(run.client, "get_item", TableName=run.keys.table, Key=dict(key),
                    ConsistentRead=True).get("Item")
        return dict(item) if item is not None else None

    # --- keeping one record's lock right ---------------------------------------------------------

    def _settle(self, seg: _Segment, owner: TypedKey, written: set[str],
                depth: int = 0) -> Conflict | None:
        """Make ``owner``'s lock right: present iff the record requires it, gone otherwise.

        ``written`` are lock keys this run has put for the record. Each round reads the record
        (strongly consistent), deletes what it no longer requires and puts what it requires;
        a round that needs no write ends it. Why that is enough: the application's own saves
        keep a record's locks equal to its values — moving to a value puts the lock, moving
        away deletes it (both guarded by ownership) — so the only thing that can leave a lock
        wrong is a write of ours made from a stale read. A read *after* our last write that
        agrees with it means no such write remains.
        """
        run = seg.run
        for _ in range(MAX_SETTLE_ROUNDS):
            current = self._read(run, owner)
            required = run.required(current)
            wrote = False
            for key in sorted(written):
                if required is None or key != required.key:
                    self._delete_lock(seg, key, owner)
                    written.discard(key)
                    wrote = True
            if required is not None and required.key not in written:
                assert current is not None
                outcome, holder = self._put_lock(seg, owner, required, current)
                if outcome == "taken":
                    return self._taken(seg, owner, required, holder, depth)
                written.add(required.key)
                wrote = True
            if not wrote:
                return None
        raise MigrationError(f"{run.phase.model} {plain_key(owner)} kept changing while its "
                             f"{run.name} lock was written; rerun to retry it")

    def _taken(self, seg: _Segment, owner: TypedKey, ref: LockRef,
               lock: Mapping[str, Any] | None, depth: int) -> Conflict | None:
        """``owner`` requires ``ref`` but another record's lock is there: a duplicate, unless
        that lock is stale (its owner no longer requires it), which is then removed."""
        run = seg.run
        if depth >= 3:
            raise MigrationError(f"lock {ref.key!r} keeps changing hands; rerun to retry it")
        holder = lock.get(OWNER_ATTR, {}).get("M") if lock is not None else None
        holder_model = lock.get(MODEL_ATTR, {}).get("S") if lock is not None else None
        if holder is None:  # the lock vanished in between: try again
            return self._settle(seg, owner, set(), depth + 1)
        if holder_model == run.phase.model:
            released = self._release_if_stale(seg, holder, ref.key)
            if isinstance(released, Conflict):
                return released
            if released:
                return self._settle(seg, owner, set(), depth + 1)
        # The holder requires the value: a duplicate, if this record still requires it too.
        current = self._read(run, owner)
        required = run.required(current)
        if required is None or required.key != ref.key:
            return self._settle(seg, owner, set(), depth + 1)
        seg.delta.duplicates += 1
        return Conflict(model=run.phase.model, constraint=run.name, lock=ref.key,
                        record=dict(owner), holder=dict(holder), holder_model=holder_model,
                        value=ref.value, hashed=ref.hashed)

    def _release_if_stale(self, seg: _Segment, holder: TypedKey, key: str) -> bool | Conflict:
        """Delete ``holder``'s lock ``key`` if ``holder`` does not require it (verified by a
        read after the delete). True: released; False: the holder requires it; a Conflict when
        the holder requires it again but another record took it meanwhile."""
        run = seg.run
        deleted = False
        for _ in range(MAX_SETTLE_ROUNDS):
            current = self._read(run, holder)
            required = run.required(current)
            if required is not None and required.key == key:
                if not deleted:
                    return False
                assert current is not None
                outcome, other = self._put_lock(seg, holder, required, current)
                if outcome == "taken":
                    seg.delta.duplicates += 1
                    return Conflict(model=run.phase.model, constraint=run.name, lock=key,
                                    record=dict(holder),
                                    holder=(other or {}).get(OWNER_ATTR, {}).get("M"),
                                    holder_model=(other or {}).get(MODEL_ATTR, {}).get("S"),
                                    value=required.value, hashed=required.hashed)
                deleted = False
                continue
            if deleted:
                return True
            if self._delete_lock(seg, key, holder) == "foreign":
                return True  # someone else's now: not the holder's to keep
            deleted = True
        raise MigrationError(f"{plain_key(holder)} kept changing while its stale lock was "
                             "removed; rerun to retry")

    def _resume_pending(self, seg: _Segment, pending: Pending) -> Conflict | None:
        """Reconcile a lock write the previous run sent but may not have verified."""
        run = seg.run
        owner = pending.owner
        if owner is None:
            lock = self._read(run, lock_primary_key(run.keys.key_attributes, pending.lock))
            if lock is None or lock.get(MODEL_ATTR, {}).get("S") != run.phase.model:
                return None  # never written, or already deleted: nothing can be wrong
            owner = lock.get(OWNER_ATTR, {}).get("M")
            if owner is None:
                return None
        # The write in flight may have been a put or a delete: reconcile the lock with the
        # owner as it is now — put it if required (settle puts keys it has not written), delete
        # it otherwise (settle deletes written keys the record does not require) — and verify.
        required = run.required(self._read(run, owner))
        if required is not None and required.key == pending.lock:
            return self._settle(seg, owner, set())
        return self._settle(seg, owner, {pending.lock})

    # --- pages -----------------------------------------------------------------------------------

    def _fill_page(self, seg: _Segment, items: list[dict[str, Any]]) -> None:
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
                wanted.append((run.owner_key(raw), required, raw))
        if not wanted:
            return
        # Write-ahead: one ledger write names every lock of the page before any is sent.
        self._intend(seg, [Pending(ref.key) for _, ref, _ in wanted])
        outcomes = []
        for owner, ref, raw in wanted:
            outcomes.append(self._put_lock(seg, owner, ref, raw))
            self._tick()
        # Verify: a strongly consistent read of every record after its lock write.
        current = {
            _key_id(run.owner_key(item)): item
            for item in batch_get(run.client, run.keys.table, [w[0] for w in wanted])
        }
        for (owner, ref, _), (outcome, holder) in zip(wanted, outcomes, strict=True):
            now = run.required(current.get(_key_id(owner)))
            still = now is not None and now.key == ref.key
            if outcome in ("new", "present"):
                if still:
                    seg.delta.present += outcome == "present"
                    continue
                conflict = self._settle(seg, owner, {ref.key})
            elif still:
                conflict = self._taken(seg, owner, ref, holder, 0)
            else:
                conflict = self._settle(seg, owner, set())
            if conflict is not None:
                seg.progress.conflicts.append(conflict)

    def _recheck(self, seg: _Segment, conflict: Conflict) -> list[Conflict]:
        """Re-examine a stored duplicate after the user fixed data: settle the record that
        lacked the lock and (same model) the holder, whatever their values are now."""
        out = []
        result = self._settle(seg, conflict.record, set())
        if result is not None:
            out.append(result)
        if conflict.holder is not None and conflict.holder_model == seg.run.phase.model:
            # The holder may have been changed with a write that bypassed the locks.
            result = self._settle(seg, conflict.holder, set())
            if result is not None:
                out.append(result)
        return out

    def _sweep_page(self, seg: _Segment, items: list[dict[str, Any]]) -> None:
        """Delete the locks of this constraint that their owners do not require under the
        phase's declaration (old-shape locks of an altered constraint)."""
        run = seg.run
        owners = [item[OWNER_ATTR]["M"] for item in items if OWNER_ATTR in item]
        current = {
            _key_id(run.owner_key(item)): item
            for item in (batch_get(run.client, run.keys.table, owners) if owners else [])
        }
        stale: list[tuple[TypedKey, str]] = []
        for item in items:
            owner = item.get(OWNER_ATTR, {}).get("M")
            if owner is None:
                continue
            seg.delta.records += 1
            key = item[run.keys.hash_attr]["S"]
            required = run.required(current.get(_key_id(owner)))
            if required is not None and required.key == key:
                seg.delta.present += 1
            else:
                stale.append((owner, key))
        if stale:
            self._intend(seg, [Pending(key, dict(owner)) for owner, key in stale])
        for owner, key in stale:
            result = self._release_if_stale(seg, owner, key)
            self._tick()
            if isinstance(result, Conflict):
                seg.progress.conflicts.append(result)

    def _remove_page(self, seg: _Segment, items: list[dict[str, Any]]) -> None:
        """Delete every lock of the constraint, each guarded by the owner it names."""
        run = seg.run
        for item in items:
            key = item[run.keys.hash_attr]["S"]
            current: dict[str, Any] | None = item
            for _ in range(MAX_SETTLE_ROUNDS):
                if current is None:
                    break
                owner = current.get(OWNER_ATTR, {}).get("M", {})
                if self._delete_lock(seg, key, owner) != "foreign":
                    seg.delta.records += 1
                    break
                # The owner changed since the scan read it: read the lock again.
                current = self._read(run, lock_primary_key(run.keys.key_attributes, key))
                if current is not None and (
                        current.get(MODEL_ATTR, {}).get("S") != run.phase.model
                        or current.get(CONSTRAINT_ATTR, {}).get("S") != run.name):
                    current = None
            else:
                raise MigrationError(f"lock {key!r} keeps changing owner; rerun to retry")
            self._tick()


def _progress_event(state: str, label: str, counters: Counters, total: int | None,
                    **segment: int) -> None:
    """The ``migration_progress`` event (INFO): a phase started, checkpointed a segment (its
    counts so far, ``segment`` of ``segments``), or finished (the phase's totals). ``total`` is
    the table's approximate item count, when the phase scans."""
    if not _log.isEnabledFor(logging.INFO):
        return
    where = f" (segment {segment['segment']} of {segment['segments']})" if segment else ""
    of = f" of about {total}" if total is not None else ""
    emit(_log, logging.INFO, "migration_progress",
         f"{label}: {state}{where}, {counters.scanned} items scanned{of}, {counters.records} "
         f"records, {counters.written} locks written", state=state, phase=label,
         scanned=counters.scanned, records=counters.records, written=counters.written,
         deleted=counters.deleted, duplicates=counters.duplicates, total=total, **segment)


@attrs.define
class _Segment:
    """One segment being worked on: its phase, its progress item and the uncommitted counts."""

    run: _PhaseRun
    progress: Progress
    worker: str
    delta: Counters = attrs.field(factory=Counters)


def _key_id(key: Mapping[str, Any]) -> str:
    return repr(sorted((k, sorted(v.items())) for k, v in key.items()))


def _unique(conflicts: list[Conflict]) -> list[Conflict]:
    seen: set[str] = set()
    out = []
    for conflict in conflicts:
        ident = conflict.lock + "|" + _key_id(conflict.record)
        if ident not in seen:
            seen.add(ident)
            out.append(conflict)
    return out


def _finished(progress: Progress) -> bool:
    # Done scanning is not enough: unverified writes (a crash) or standing conflicts remain work.
    return progress.done and not progress.pending and not progress.conflicts


def _blocked(progress: Progress) -> bool:
    # A segment that stopped on stored conflicts counts as finished for the waiters: the
    # duplicates must be fixed before anything else can happen.
    return progress.blocked


def _sum(progress: Sequence[Progress]) -> Counters:
    total = Counters()
    for p in progress:
        total.add(p.counters)
    return total
