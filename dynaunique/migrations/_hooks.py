"""Test-only hooks of the executor: a crash injected after a number of records, mid-backfill.

Not part of the API: the test suite uses it to prove that a rerun resumes from the ledger and
repairs what a crashed run left unverified.
"""

from __future__ import annotations

import threading
from typing import Any

from dynaunique.errors import MigrationError


class InjectedCrash(MigrationError):
    """Raised by :func:`fail_after_records`'s countdown, to simulate a crash mid-backfill."""


class Countdown:
    """Counts processed records (from every scan thread) and crashes at the ``records``-th."""

    def __init__(self, records: int) -> None:
        self.records = records
        self._processed = 0
        self._lock = threading.Lock()

    def tick(self) -> None:
        """One more record processed; raises :class:`InjectedCrash` at the chosen one."""
        with self._lock:
            self._processed += 1
            crash = self._processed == self.records
        if crash:
            raise InjectedCrash(f"injected crash after {self.records} records "
                                "(fail_after_records, a test hook)")


def fail_after_records(executor: Any, records: int) -> None:
    """Make ``executor`` (a :class:`~dynaunique.migrations.MigrationExecutor`) raise
    :class:`InjectedCrash` after ``records`` records were processed, before the page's
    checkpoint is written."""
    executor._countdown = Countdown(records)
