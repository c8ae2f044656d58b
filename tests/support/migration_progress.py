"""Progress callbacks the migrations tests hand an executor
(``Project.executor(progress_callback=...)``):

* :class:`Counting` sums the records a run processed (from its checkpointed pages) and keeps
  its notes;
* :func:`crash_after_records` makes a run die mid-page: it raises :class:`InjectedCrash` at the
  ``records``-th processed record — after its lock write, before the page's checkpoint — for
  the tests that prove a rerun resumes from the ledger and repairs what the dead run left
  unverified.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dynaunique.errors import MigrationError
from dynaunique.migrations import ProgressEvent
from dynaunique.migrations._kinds import ProgressState


class Counting:
    """A progress callback: ``records`` processed (summed over the checkpointed pages) and the
    ``notes``."""

    def __init__(self) -> None:
        self.records = 0
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            if event.state == ProgressState.RUNNING and event.counters is not None:
                self.records += event.counters.records
            elif event.state == ProgressState.NOTE:
                self.notes.append(event.text)


class InjectedCrash(MigrationError):
    """The crash a test injects (a MigrationError, as a failure inside a run would be)."""


def crash_after_records(records: int, *, when: Callable[[], bool] = lambda: True,
                        ) -> Callable[[ProgressEvent], None]:
    """A progress callback that counts the ``record`` events for which ``when()`` holds (from
    every scan and write thread) and raises :class:`InjectedCrash` at the ``records``-th."""
    lock = threading.Lock()
    seen = [0]

    def callback(event: ProgressEvent) -> None:
        if event.state != ProgressState.RECORD or not when():
            return
        with lock:
            seen[0] += 1
            crash = seen[0] == records
        if crash:
            raise InjectedCrash(f"injected crash after {records} records")

    return callback
