"""Scanning a phase in segments: one thread per segment, a page at a time, each page's work
checkpointed in the ledger, the stored duplicates re-checked at the end of a segment, and a
time bound checked at every page boundary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dynaunique._lock.items import key_id
from dynaunique._lock.locks import RESERVED_PREFIX
from dynaunique.migrations._dynamo import call
from dynaunique.migrations._kinds import PhaseKind, ProgressState
from dynaunique.migrations._lease import Lease
from dynaunique.migrations._ledger import Conflict, Counters, Progress
from dynaunique.migrations._pages import fill_page, remove_page, sweep_page
from dynaunique.migrations._phase import PhaseRun, Segment, consumed_units
from dynaunique.migrations._reconcile import Keeper
from dynaunique.migrations._report import progress_event
from dynaunique.migrations._worker import Deadline
from dynaunique.migrations._worker import finished as finished
from dynaunique.migrations.options import ProgressCallback, ProgressEvent
from dynaunique.migrations.ratelimit import Limiter
from dynaunique.migrations.recorder import MigrationRecorder

_PAGES: dict[PhaseKind, Callable[[Keeper, Segment, list[dict[str, Any]]], None]] = {
    PhaseKind.FILL: fill_page, PhaseKind.SWEEP: sweep_page, PhaseKind.REMOVE: remove_page,
}


class SegmentRunner:
    """Runs the segments of a phase for one runner (all segments, or a worker's one)."""

    def __init__(self, keeper: Keeper, recorder: MigrationRecorder,
                 on_progress: ProgressCallback, *, worker: str, threads: int, page_size: int,
                 conflict_cap: int,
                 bucket: Limiter | None, deadline: Deadline | None = None,
                 concurrency: int = 1, reads: Limiter | None = None) -> None:
        self.keeper = keeper
        self.recorder = recorder
        #: The run's progress callback: a ``running`` event per checkpointed page.
        self.on_progress = on_progress
        #: The runner's name in progress items: ``all``, or ``I/N`` for a worker.
        self.worker = worker
        self.threads = threads
        self.page_size = page_size
        self.conflict_cap = conflict_cap
        self.bucket = bucket
        #: Lock writes of a page in flight at once, per segment (``--concurrency``).
        self.concurrency = concurrency
        #: What the scan's pages pay through (``--max-rcu``), None: not capped.
        self.reads = reads
        #: Past it, every segment stops at its next page boundary (each does one page at least).
        self.deadline = deadline or Deadline(None)
        self._stop = threading.Event()

    def run(self, run: PhaseRun, todo: list[Progress], lease: Lease, label: str, *,
            ident: str | None = None) -> None:
        """Work on the ``todo`` segments of ``run``'s phase, one thread each (up to
        ``threads``); the first error stops the others at their next page, checkpointed.
        ``ident`` names the segment lease a worker holds for them (checked at every page)."""
        if not todo:
            return
        threads = min(self.threads, len(todo))
        if threads == 1:
            for progress in todo:
                self._run_segment(run, progress, lease, label, ident)
            return
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dynaunique-scan") as pool:
            futures = [pool.submit(self._run_segment, run, p, lease, label, ident)
                       for p in todo]
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

    def _run_segment(self, run: PhaseRun, progress: Progress, lease: Lease, label: str,
                     ident: str | None) -> None:
        if self.concurrency < 2:
            self._run_in(Segment(run, progress, self.worker, self.recorder, self.bucket,
                                 holder=lease.holder, reads=self.reads), lease, label, ident)
            return
        with ThreadPoolExecutor(max_workers=self.concurrency,
                                thread_name_prefix="dynaunique-write") as pool:
            self._run_in(Segment(run, progress, self.worker, self.recorder, self.bucket,
                                 holder=lease.holder, reads=self.reads, pool=pool,
                                 concurrency=self.concurrency),
                         lease, label, ident)

    def _run_in(self, seg: Segment, lease: Lease, label: str, ident: str | None) -> None:
        run, progress = seg.run, seg.progress
        progress.blocked = False
        if progress.pending:
            # The last run died between writing locks and verifying them: verify them now.
            for pending in list(progress.pending):
                conflict = self.keeper.resume_pending(seg, pending)
                if conflict is not None:
                    progress.conflicts.append(conflict)
            progress.pending = []
            self._checkpoint(seg, label)
        if progress.conflicts:
            # A rerun after the user fixed data: re-check the contested records first.
            self._recheck_all(seg, label)
        pages = 0
        while not progress.done:
            if self._stop.is_set() or (pages and self.deadline.expired()):
                return  # the last page was checkpointed: a rerun resumes from there
            pages += 1
            if len(progress.conflicts) >= self.conflict_cap:
                # Stored conflicts must be fixed before the scan goes on.
                progress.blocked = True
                self._checkpoint(seg, label)
                return
            lease.check(ident)
            params: dict[str, Any] = {
                "TableName": run.keys.table, "Limit": self.page_size,
                "Segment": progress.segment, "TotalSegments": progress.total,
                **_scan_filter(run),
            }
            if progress.last_key is not None:
                params["ExclusiveStartKey"] = progress.last_key
            page = self._scan(seg, params)
            seg.page_params, seg.scan_page = params, lambda again: self._scan(seg, again)
            items = page.get("Items", [])
            seg.delta.scanned += len(items)
            _PAGES[run.phase.kind](self.keeper, seg, items)
            progress.conflicts = unique(progress.conflicts)
            progress.pending = []
            progress.last_key = page.get("LastEvaluatedKey")
            progress.done = progress.last_key is None
            self._checkpoint(seg, label)
            if progress.done and progress.conflicts:
                # Report only what still holds at the end: the application may have resolved
                # a duplicate found early in the scan (or created one that is now gone).
                self._recheck_all(seg, label)

    def _scan(self, seg: Segment, params: dict[str, Any]) -> dict[str, Any]:
        """One page of the scan, paid for under ``--max-rcu``: the units the last page
        consumed are taken before it, the difference charged after (ReturnConsumedCapacity)."""
        if self.reads is None:
            return call(seg.run.connection, "scan", **params)
        estimate = self._page_units
        self.reads.acquire(estimate)
        page = call(seg.run.connection, "scan", **params, ReturnConsumedCapacity="TOTAL",
                    on_throttle=self.reads.throttled)
        units = consumed_units(page, default=estimate)
        self.reads.charge(units - estimate)
        self._page_units = max(units, 0.5)
        return page

    #: The read units the last scanned page consumed (the estimate for the next one).
    _page_units = 1.0

    def _recheck_all(self, seg: Segment, label: str) -> None:
        """Re-examine every stored conflict of the segment and keep those that still stand."""
        progress = seg.progress
        # The stored list stays as it is until every conflict was re-checked: checkpoints taken
        # meanwhile (intents) must not lose the ones not yet looked at.
        standing: list[Conflict] = []
        for conflict in list(progress.conflicts):
            standing.extend(self.keeper.recheck(seg, conflict))
        progress.conflicts = unique(standing)
        # Each reconcile returned only after a read confirmed its writes: nothing is in flight.
        progress.pending = []
        # The counter becomes the number of duplicates standing now; the callback gets the change.
        seg.delta.duplicates = len(progress.conflicts) - progress.counters.duplicates
        self._checkpoint(seg, label)

    def _checkpoint(self, seg: Segment, label: str) -> None:
        """Checkpoint: fold the segment's new counters into its progress item and save it."""
        delta, seg.delta = seg.delta, Counters()
        seg.progress.counters.add(delta)
        seg.save()
        self.on_progress(ProgressEvent(ProgressState.RUNNING, label, delta,
                                       segment=seg.progress.segment,
                                       segments=seg.progress.total))
        progress_event(ProgressState.RUNNING, label, seg.progress.counters, seg.run.estimate,
                        segment=seg.progress.segment, segments=seg.progress.total)


def _scan_filter(run: PhaseRun) -> dict[str, Any]:
    """Fill scans the records (dynaunique's items filtered out), the others the phase's locks."""
    if run.phase.kind == PhaseKind.FILL:
        return {
            "FilterExpression": "NOT begins_with(#h, :reserved)",
            "ExpressionAttributeNames": {"#h": run.keys.hash_attr},
            "ExpressionAttributeValues": {":reserved": {"S": RESERVED_PREFIX}},
        }
    return run.lock_filter()


def unique(conflicts: list[Conflict]) -> list[Conflict]:
    """``conflicts`` without repeats (one per lock and record)."""
    seen: set[tuple[str, Any]] = set()
    out = []
    for conflict in conflicts:
        ident = (conflict.lock, key_id(conflict.record))
        if ident not in seen:
            seen.add(ident)
            out.append(conflict)
    return out


def sum_counters(progress: Sequence[Progress]) -> Counters:
    """The counters of every segment, summed."""
    out = Counters()
    for p in progress:
        out.add(p.counters)
    return out
