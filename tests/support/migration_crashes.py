"""A migration that dies mid-page, for the tests that prove a rerun resumes from the ledger and
repairs what the dead run left unverified: :func:`crash_after_records` is a progress callback
(``Project.executor(progress_callback=...)``) that raises :class:`InjectedCrash` at the
``records``-th processed record — after its lock write, before the page's checkpoint."""

from __future__ import annotations

import threading
from collections.abc import Callable

from dynaunique.errors import MigrationError
from dynaunique.migrations import ProgressEvent
from dynaunique.migrations._kinds import ProgressState


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
