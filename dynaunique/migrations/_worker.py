"""A worker's pass over one phase: take any open segment of it (a lease per segment), run it
within the time bound, and go on until nothing is left — never waiting on a worker that is not
running.

A segment is *open* for a worker while it has work: it is not at rest (not done, or done with
writes still to verify), or it holds duplicates this worker has not re-checked in this run. A
worker tries the open segments starting with its own (``--segment I``), takes the first whose
lease is free (absent, expired or its own), reads its checkpoint again, runs it, gives the lease
back, and reads the phase again. When every open segment is leased by a live worker it waits up
to ``wait_seconds`` for one to come free, then says so (:attr:`RunState.IDLE`). A dead worker's
lease expires; the next worker to look takes the segment and resumes it from its checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from dynaunique.migrations._kinds import RunState
from dynaunique.migrations._lease import Lease, SegmentLost
from dynaunique.migrations._ledger import Progress

if TYPE_CHECKING:
    from dynaunique.migrations.recorder import MigrationRecorder


class Deadline:
    """``max_seconds`` from now (None: never), on a monotonic clock."""

    def __init__(self, max_seconds: float | None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.at = clock() + max_seconds if max_seconds is not None else None

    def expired(self) -> bool:
        """Whether the time is up."""
        return self.at is not None and self._clock() >= self.at

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None without a bound."""
        return max(0.0, self.at - self._clock()) if self.at is not None else None


def at_rest(progress: Progress) -> bool:
    """Whether a segment is at rest: no worker has anything left to do on it until its
    duplicates are fixed — scanned to the end with every write verified, or stopped at the
    conflict cap (:func:`finished` is stricter: no duplicates either)."""
    return (progress.done and not progress.pending) or progress.blocked


def finished(progress: Progress) -> bool:
    """Whether a segment needs no more work."""
    # Done scanning is not enough: unverified writes (a crash) or standing conflicts remain work.
    return progress.done and not progress.pending and not progress.conflicts


@attrs.define
class Pass:
    """How a worker's pass over a phase ended: ``state`` None when no segment is open for the
    worker any more; else MORE (time is up, or, with ``only``, its segment is leased) or IDLE,
    with the segments ``waiting`` on other workers."""

    state: RunState | None
    waiting: list[int] = attrs.field(factory=list)


def work_phase(recorder: MigrationRecorder, lease: Lease, job: str, total: int, *,
               start: int, deadline: Deadline, run_segment: Callable[[Progress, str], None],
               stop: Callable[[], bool], wait_seconds: float = 0.0, poll_seconds: float = 1.0,
               only: bool = False) -> Pass:
    """Work on ``job``'s open segments until none is open, time is up, or every open one is
    leased by a live worker for ``wait_seconds`` (see the module docstring).

    ``run_segment(progress, ident)`` runs one segment (its lease held as ``ident``); ``stop()``
    says the phase's migration was completed by another worker meanwhile. With ``only`` the
    worker runs segment ``start`` alone (a Map state's item): that segment leased by someone
    else is MORE (try again later), the other segments are not its business.
    """
    attempted: set[int] = set()
    waiting_since: float | None = None
    while True:
        lease.check()
        progress = recorder.progress(job, total)
        # Progress is read before the record is: it is cleared only after the record.
        if stop():
            return Pass(None)
        open_ = [p.segment for p in progress
                 if not at_rest(p) or (not finished(p) and p.segment not in attempted)]
        if only:
            open_ = [s for s in open_ if s == start]
        if not open_:
            return Pass(None)
        if deadline.expired() and attempted:
            # Not before one segment was run: a run always makes progress, however short its
            # bound (each segment run does a page at least).
            return Pass(RunState.MORE, open_)
        if _take_one(recorder, lease, job, total, _rotated(open_, start), attempted,
                     run_segment):
            waiting_since = None
            continue
        now = time.monotonic()
        waiting_since = now if waiting_since is None else waiting_since
        left = wait_seconds - (now - waiting_since)
        remaining = deadline.remaining()
        if left <= 0 or (remaining is not None and remaining <= 0):
            return Pass(RunState.MORE if only else RunState.IDLE, open_)
        time.sleep(min(poll_seconds, left, remaining if remaining is not None else left))


def _take_one(recorder: MigrationRecorder, lease: Lease, job: str, total: int,
              order: Sequence[int], attempted: set[int],
              run_segment: Callable[[Progress, str], None]) -> bool:
    """Take the first of ``order`` whose lease is free and run it; False if none was free."""
    for segment in order:
        ident = lease.take(job, total, segment)
        if ident is None:
            continue
        try:
            # Read again under the lease: the last holder may have moved it on.
            (fresh,) = recorder.progress(job, total, [segment])
            attempted.add(segment)
            if not finished(fresh):
                run_segment(fresh, ident)
        except SegmentLost:
            pass  # another worker took it over after our lease lapsed: it is theirs now
        finally:
            lease.drop(ident)
        return True
    return False


def _rotated(segments: Sequence[int], start: int) -> list[int]:
    """``segments`` in the order a worker that starts with ``start`` tries them."""
    return sorted(segments, key=lambda s: (s < start, s))
