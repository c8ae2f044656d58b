"""Throughput within a worker (issue 23) against the local server: lock writes of a page in
flight at once (``--concurrency``) with exact locks and the same duplicates report as one at a
time, a crash with writes in flight, the CLI's options. The adaptive rate and the capacity caps
are in test_migrations_ratelimit.py (a file of their own, so that xdist's ``loadfile`` gives
them to another worker: tests/README.md, "Time")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from reliability.proxy import Fault, FaultProxy
from support.migrations_workspace import LiveWriters, Workspace, email_lock_puts, proxied_fixtures

from dynaunique.cli import cli
from dynaunique.migrations import DuplicatesFound, RunState

TABLE = "mig_throughput_accounts"
DUPLICATES = 6


proxy, ws = proxied_fixtures(TABLE)


def _seed_with_duplicates(ws: Workspace, records: int) -> Any:
    """``DUPLICATES`` values held by two records each (``DUP#a<i>`` and ``DUP#b<i>``), then
    ``records`` accounts with distinct emails; the constraint deployed, its migration written."""
    ws.put_raw_many({pk: {"email": email} for i in range(DUPLICATES) for pk, email in
                     ((f"DUP#a{i}", f"dup{i}@x.io"), (f"DUP#b{i}", f"DUP{i}@x.io"))})
    return ws.seed_unique_email(records)


def _forget_locks(ws: Workspace) -> None:
    """Back to the table as it was before the migration: no lock, no ledger item."""
    ws.delete_raw_many([item for item in ws.scan() if item["PK"]["S"].startswith("UNIQ#")])


def _report(exc: DuplicatesFound) -> list[tuple[Any, ...]]:
    return sorted((d.value, d.lock, d.holder["PK"] if d.holder else None,
                   tuple(sorted(o["PK"] for o in d.others))) for d in exc.duplicates)


class InFlight:
    """Counts the lock puts in flight at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def wrap(self, put: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            with self._lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                return put(*args)
            finally:
                with self._lock:
                    self.now -= 1
        return counted


def _duplicates(ws: Workspace, concurrency: int, flight: InFlight | None = None
                ) -> DuplicatesFound:
    executor = ws.project().executor(concurrency=concurrency, page_size=200)  # one page
    if flight is not None:
        executor._put_locks = flight.wrap(executor._put_locks)  # type: ignore[method-assign]
    with pytest.raises(DuplicatesFound) as info:
        executor.migrate()
    return info.value


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrency_reports_the_duplicates_one_at_a_time_does_and_ends_with_exact_locks(
        ws: Workspace, proxy: FaultProxy) -> None:
    models = _seed_with_duplicates(ws, 40)
    one_at_a_time = _report(_duplicates(ws, 1))
    assert len(one_at_a_time) == DUPLICATES
    _forget_locks(ws)
    # The first put of a contested lock is slow: the other record of the same page that
    # requires it must still wait for it (one task, in scan order), not overtake it.
    proxy.inject(Fault.DELAY_BEFORE, operations={"PutItem"}, delay=0.5,
                 when=lambda operation, body: "UNIQ#EMAIL#dup0@x.io" in email_lock_puts(operation,
                                                                                    body))
    flight = InFlight()
    assert _report(_duplicates(ws, 16, flight)) == one_at_a_time
    assert proxy.injected[Fault.DELAY_BEFORE] == 1
    assert 1 < flight.most <= 16  # really in flight at once, never more than asked
    # And with the application writing meanwhile: the same report, then exact locks.
    _forget_locks(ws)
    with LiveWriters(models.Account, 40) as writers:
        writers.wait_for(3)
        flight = InFlight()
        assert _report(_duplicates(ws, 8, flight)) == one_at_a_time
        assert 1 < flight.most <= 8
        for i in range(DUPLICATES):
            models.Account.get(f"DUP#b{i}", "PROFILE").delete()
        result = ws.project().executor(concurrency=8, page_size=25).migrate()
        assert result.state == RunState.DONE
    items = ws.scan()
    assert ws.locks(items) == ws.expected_locks(items=items)
    assert ws.ledger() == ws.applied_only()


def test_a_crash_with_writes_in_flight_is_repaired_by_the_rerun(ws: Workspace) -> None:
    from support.migration_progress import InjectedCrash, crash_after_records

    models = ws.seed_unique_email(90)
    with LiveWriters(models.Account, 90) as writers:
        writers.wait_for(3)
        executor = ws.project().executor(concurrency=8, page_size=30,
                                         progress_callback=crash_after_records(40))
        with pytest.raises(InjectedCrash):
            executor.migrate()
        assert ws.project().executor(concurrency=8, page_size=30).migrate().state == \
            RunState.DONE
    items = ws.scan()
    assert ws.locks(items) == ws.expected_locks(items=items)
    assert ws.ledger() == ws.applied_only()


def test_the_cli_takes_concurrency_and_the_capacity_caps(ws: Workspace) -> None:
    ws.seed_unique_email(40)
    result = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                      "--concurrency", "4", "--max-wcu", "400",
                                      "--max-rcu", "400", "--segment", "0",
                                      "--total-segments", "2"])
    assert result.exit_code == 0, result.output
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()  # the shared budget items are gone too
