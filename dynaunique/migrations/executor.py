"""Apply and unapply migrations against the table: plan against the ledger, run each step's
phases, record each migration when all of its phases are done.

:class:`MigrationExecutor` works like Django's: ``plan(target)`` lists the migrations to apply
(or unapply) and is pure reading; ``migrate(target)`` takes the lease, runs each operation's
phases and records each migration in the ledger when all of its phases are done.

Every phase scans the table in segments and checkpoints each page in the ledger, so a run that
stops for any reason — its time bound (``max_seconds``) included — resumes where it stopped. A
worker (``worker=(I, N)``) takes any open segment of the current phase under a lease of its own
and goes on to the next phase when this one is complete (:mod:`._worker`), so workers started in
any order, at any time, finish the migration between them.

The lock writes are plain conditional writes, never transactions; what keeps them right while
the application keeps writing is the rule "write, then read the record again": see
:class:`~dynaunique.migrations._reconcile.Keeper` and docs/migrations.md. The rooms:
:mod:`._plan` (which steps), :mod:`._segments` (scanning a phase), :mod:`._worker` (a worker's
pass over a phase), :mod:`._pages` (a page's work), :mod:`._reconcile` (one record's lock),
:mod:`._lockwrites` (one write), :mod:`._report` (what the caller is told).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dynaunique._lock.items import plain_key as plain_key
from dynaunique._lock.locks import TypedKey
from dynaunique.errors import MigrationError
from dynaunique.migrations._budget import limiters
from dynaunique.migrations._dynamo import describe_table
from dynaunique.migrations._kinds import (
    DeleteOutcome,
    PhaseKind,
    ProgressState,
    RunState,
)
from dynaunique.migrations._lease import Lease
from dynaunique.migrations._ledger import Counters, Progress
from dynaunique.migrations._lockwrites import Answer, Entry, delete_lock, put_locks
from dynaunique.migrations._phase import PhaseRun, Segment, phase_run, run_python
from dynaunique.migrations._plan import MigrationStatus, Step, check_steps, plan_steps, statuses
from dynaunique.migrations._reconcile import MAX_RECONCILE_ROUNDS as MAX_RECONCILE_ROUNDS
from dynaunique.migrations._reconcile import Keeper
from dynaunique.migrations._report import Duplicate as Duplicate
from dynaunique.migrations._report import (
    DuplicatesFound,
    MigrateResult,
    group_conflicts,
    progress_event,
    reporter_callback,
)
from dynaunique.migrations._segments import SegmentRunner, finished, sum_counters
from dynaunique.migrations._worker import Deadline, at_rest, work_phase
from dynaunique.migrations.loader import MigrationLoader
from dynaunique.migrations.operations import MigrationContext, Phase
from dynaunique.migrations.options import (
    MigrationOptions,
    ProgressCallback,
    ProgressEvent,
    legacy_options,
)
from dynaunique.migrations.recorder import MigrationRecorder, TableKeys


def _renamed(legacy: dict[str, Any], old: str, new: str) -> Any:
    """``legacy[old]`` (removed from it), with a :class:`DeprecationWarning` that names what to
    pass instead; None when not given."""
    value = legacy.pop(old, None)
    if value is not None:
        warnings.warn(f"MigrationExecutor(..., {old}=...) is deprecated: pass {new}",
                      DeprecationWarning, stacklevel=3)
    return value


class MigrationExecutor:
    """End-to-end migration execution: plan against the ledger, then run phases and record.

    * ``loader`` — the migration files; ``recorder`` — the ledger (with its connection and
      table);
    * ``models`` — the live model classes (by class name), for computing locks;
    * ``options`` — how the run goes: a :class:`~dynaunique.migrations.MigrationOptions`
      (default: its defaults; ``Project.options()`` reads ``[tool.dynaunique]``);
    * ``connection_for`` — the PynamoDB connection for a table (default: the ledger's
      connection);
    * ``progress_callback`` — called with each
      :class:`~dynaunique.migrations.ProgressEvent` (from the running threads), as Django's
      executor calls its ``progress_callback``; an exception it raises stops the run there.

    The knobs that were keyword arguments here (``segments=``, ``page_size=``, ...),
    ``reporter=`` and ``client_for=`` (now ``connection_for=``) still work, with a
    :class:`DeprecationWarning` (docs/decisions.md).
    """

    def __init__(
        self,
        loader: MigrationLoader,
        recorder: MigrationRecorder,
        models: Mapping[str, Any],
        options: MigrationOptions | None = None,
        *,
        connection_for: Callable[[str], Any] | None = None,
        progress_callback: ProgressCallback | None = None,
        **legacy: Any,
    ) -> None:
        reporter = _renamed(legacy, "reporter", "progress_callback=, a function of one "
                            "ProgressEvent")
        if reporter is not None:
            progress_callback = progress_callback or reporter_callback(reporter)
        connection_for = connection_for or _renamed(
            legacy, "client_for", "connection_for= (it returns a PynamoDB Connection)")
        self.options = legacy_options(options, legacy, "MigrationExecutor")
        self.loader = loader
        self.recorder = recorder
        self.models = dict(models)
        self.connection_for = connection_for or (lambda table: recorder.connection)
        self.progress_callback = progress_callback
        self.bucket, self.reads = limiters(recorder, self.options.worker, self.options.max_wcu,
                                           self.options.max_rcu)
        self._tables: dict[str, TableKeys] = {recorder.table: recorder.keys}

    @property
    def worker(self) -> tuple[int, int] | None:
        """``options.worker``: ``(I, N)`` when this executor runs as one of several workers."""
        return self.options.worker

    def _progress(self, event: ProgressEvent) -> None:
        if self.progress_callback is not None:
            self.progress_callback(event)

    def _note(self, text: str) -> None:
        self._progress(ProgressEvent(ProgressState.NOTE, text=text))

    # --- planning (reads only) -------------------------------------------------------------------

    def applied(self) -> dict[str, dict[str, Any]]:
        """The migrations on disk that the ledger records as applied."""
        return self.recorder.applied(self.loader.order)

    def plan(self, target: str | None = None) -> list[Step]:
        """The steps that bring the ledger to ``target`` (a migration name or prefix, ``zero``,
        or None for the latest), like Django's ``migration_plan``.

        :raises MigrationError: the ledger's history is inconsistent with the files.
        """
        return plan_steps(self.loader, set(self.applied()), target)

    def status(self) -> list[MigrationStatus]:
        """Each migration on disk: applied or not, and what an interrupted run left behind."""
        return statuses(self.loader, self.recorder, self.applied())

    def check_runnable(self, steps: Sequence[Step]) -> None:
        """Fail before any write when a step cannot run: irreversible, or a model it needs for
        computing locks is gone, or a normalizer/condition path no longer imports."""
        check_steps(steps, self.models)

    # --- running ---------------------------------------------------------------------------------

    def migrate(self, target: str | None = None, *, fake: bool = False,
                max_seconds: float | None = None) -> MigrateResult:
        """Apply (or unapply) migrations up to ``target``; see :meth:`plan`.

        With ``max_seconds`` the run stops at the first page boundary after that many seconds,
        checkpointed, and returns ``state`` :attr:`RunState.MORE <dynaunique.migrations
        .RunState>`: run it again to continue. A worker with nothing left for it returns
        ``idle``.

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
        deadline = Deadline(max_seconds)
        lease = self.recorder.acquire(seconds=self.options.lease_seconds, worker=self.worker)
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
                    state = self._apply(step, lease, result, deadline)
                    if state is not RunState.DONE:
                        result.state = state
                        return result
                (result.unapplied if step.backwards else result.applied).append(step.name)
        finally:
            lease.release()
        return result

    def _finished_elsewhere(self, step: Step) -> bool:
        return self.recorder.is_applied(step.name) != step.backwards

    def _apply(self, step: Step, lease: Lease, result: MigrateResult,
               deadline: Deadline) -> RunState:
        if self.worker is not None and self._finished_elsewhere(step):
            return RunState.DONE
        self._note(f"{'Unapplying' if step.backwards else 'Applying'} {step.name}")
        for job, phase in step.jobs():
            totals = self._run_job(step, job, phase, lease, deadline, result)
            if totals is None:  # another worker completed the whole migration meanwhile
                # It cleared the ledger; clear again whatever this worker wrote since.
                self.recorder.clear_jobs(step.all_job_ids())
                return RunState.DONE
            if not isinstance(totals, Counters):
                return totals
            result.totals[f"{step.name}: {phase.describe()}"] = totals
        if step.backwards:
            self.recorder.record_unapplied(step.name)
        else:
            self.recorder.record_applied(step.name)
        # Progress is cleared only after the record: a crash in between leaves stale items that
        # the next completion of this migration (either direction) clears.
        self.recorder.clear_jobs(step.all_job_ids())
        return RunState.DONE

    def _run_job(self, step: Step, job: str, phase: Phase, lease: Lease, deadline: Deadline,
                 result: MigrateResult) -> Counters | RunState | None:
        """The phase's totals once it is complete; MORE or IDLE when this run stops before
        that; None when another worker recorded the migration meanwhile."""
        total = _split(self, step, job, phase)
        progress = self.recorder.progress(job, total)
        label = f"{step.name}: {phase.describe()}"
        if all(finished(p) for p in progress):
            return sum_counters(progress)
        run = self._prepare(phase)
        estimate = run.keys.item_count if phase.scans else None
        run.label, run.estimate = label, estimate
        so_far = sum_counters(progress)
        self._progress(ProgressEvent(ProgressState.STARTED, label, so_far, estimate))
        progress_event(ProgressState.STARTED, label, so_far, estimate)
        runner = self._segment_runner(deadline)
        if self.worker is None:
            if phase.kind == PhaseKind.RUN:
                self._run_function(step, phase, progress[0], lease.holder)
            else:
                runner.run(run, [p for p in progress if not finished(p)], lease, label)
        else:
            def run_segment(segment: Progress, ident: str) -> None:
                if phase.kind == PhaseKind.RUN:
                    self._run_function(step, phase, segment, lease.holder)
                else:
                    runner.run(run, [segment], lease, label, ident=ident)

            outcome = work_phase(
                self.recorder, lease, job, total, start=self.worker[0] % total,
                deadline=deadline, run_segment=run_segment,
                stop=lambda: self._finished_elsewhere(step),
                wait_seconds=self.options.wait_seconds, poll_seconds=self.options.poll_seconds,
                only=self.options.only)
            if self._finished_elsewhere(step):
                return None
            if outcome.state is not None:
                result.waiting = outcome.waiting
                return _stopped(self, result, outcome.state, label, job, total)
        final = self.recorder.progress(job, total)
        if self.options.only and not all(at_rest(p) for p in final):
            result.waiting = [p.segment for p in final if not at_rest(p)]
            return RunState.IDLE  # its own segment is at rest; the others are theirs
        if self.worker is None and deadline.expired() and not all(at_rest(p) for p in final):
            return _stopped(self, result, RunState.MORE, label, job, total)
        conflicts = [c for p in final for c in p.conflicts]
        if conflicts:
            raise DuplicatesFound(step.name, group_conflicts(conflicts),
                                  incomplete=any(not p.done for p in final))
        if not all(finished(p) for p in final):
            raise MigrationError(f"{label}: some segments did not finish; rerun to resume")
        totals = sum_counters(final)
        self._progress(ProgressEvent(ProgressState.FINISHED, label, totals, estimate))
        progress_event(ProgressState.FINISHED, label, totals, estimate)
        return totals

    def _run_function(self, step: Step, phase: Phase, progress: Progress,
                      holder: str) -> None:
        # RunPython functions get the botocore client behind the ledger's connection.
        context = MigrationContext(app=self.recorder.app, models=self.models,
                                   client=self.recorder.connection.client,
                                   backwards=step.backwards)
        run_python(phase, context, step.name)
        progress.done = True
        self.recorder.save_progress(progress, worker=self._worker_name(), holder=holder)

    def _worker_name(self) -> str:
        return f"{self.worker[0]}/{self.worker[1]}" if self.worker is not None else "all"

    def _prepare(self, phase: Phase) -> PhaseRun:
        table = phase.table or self.recorder.table
        connection = self.connection_for(table)
        keys = self._tables.get(table)
        if keys is None:
            keys = describe_table(connection, table)
            self._tables[table] = keys
        return phase_run(phase, keys, connection, self.models,
                         accept_other_secret=self.options.accept_other_secret)

    def _segment_runner(self, deadline: Deadline) -> SegmentRunner:
        options = self.options
        keeper = Keeper(self._put_locks, self._delete_lock, self._record_done)
        return SegmentRunner(keeper, self.recorder, self._progress, worker=self._worker_name(),
                             threads=1 if self.worker is not None else options.segments,
                             page_size=options.page_size, conflict_cap=options.conflict_cap,
                             bucket=self.bucket, deadline=deadline,
                             concurrency=options.concurrency, reads=self.reads)

    def _record_done(self) -> None:
        """A record of a page was processed (its checkpoint not yet written)."""
        if self.progress_callback is not None:
            self.progress_callback(_RECORD)

    # --- the lock writes (methods, so that a subclass may act at them) ---------------------------

    def _put_locks(self, seg: Segment, entries: Sequence[Entry]) -> list[Answer]:
        """Put each ``(owner, lock, record as read)``'s lock guarded "missing, or owned by
        ``owner``" (see :func:`._lockwrites.put_locks`; the caller verifies the record)."""
        return put_locks(seg, entries)

    def _delete_lock(self, seg: Segment, key: str, owner: TypedKey, *,
                     created: str | None = None) -> DeleteOutcome:
        """Delete lock ``key`` guarded "missing, or owned by ``owner``" — with ``created``,
        exactly as this run put it (see :func:`._lockwrites.delete_lock`)."""
        return delete_lock(seg, key, owner, created=created)



#: The event of every processed record (one value: it carries nothing else).
_RECORD = ProgressEvent(ProgressState.RECORD)


def _stopped(executor: MigrationExecutor, result: MigrateResult, state: RunState, label: str,
             job: str, total: int) -> RunState:
    """This run stops in the phase ``label``: the note, and the phase's totals so far (what its
    segments' checkpoints hold, as the totals of a finished phase) in ``result``."""
    result.totals[label] = sum_counters(executor.recorder.progress(job, total))
    executor._note(_stopped_note(state, label, result.waiting))
    return state


def _split(executor: MigrationExecutor, step: Step, job: str, phase: Phase) -> int:
    """The job's split in segments, fixed by the first runner that starts it."""
    if not phase.scans:
        wanted = 1
    elif executor.worker is not None:
        wanted = executor.worker[1]
    else:
        wanted = executor.options.segments
    total = executor.recorder.start_job(job, wanted, phase.describe())
    if executor.worker is not None and phase.scans and total != executor.worker[1]:
        raise MigrationError(
            f"{phase.describe()} of {step.name} was started split in {total} segments; run "
            f"the workers with --total-segments {total}"
        )
    if executor.worker is None and phase.scans and total != executor.options.segments:
        executor._note(f"{phase.describe()}: resuming with the {total} segments it "
                               "was started with")
    return total


def _stopped_note(state: RunState, label: str, waiting: list[int]) -> str:
    if state == RunState.MORE:
        return f"{label}: stopped at a checkpoint (time bound); run again to continue"
    return (f"{label}: nothing left for this worker: segment(s) {waiting} are being run by "
            "other workers, which finish the migration")


def __getattr__(name: str) -> Any:
    """``MAX_SETTLE_ROUNDS``, the old name of :data:`MAX_RECONCILE_ROUNDS`: deprecated, removed
    in the release after next."""
    if name == "MAX_SETTLE_ROUNDS":
        warnings.warn("dynaunique.migrations.executor.MAX_SETTLE_ROUNDS is deprecated: use "
                      "MAX_RECONCILE_ROUNDS", DeprecationWarning, stacklevel=2)
        return MAX_RECONCILE_ROUNDS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
