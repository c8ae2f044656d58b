"""Throughput within a worker (issue 23) against the local server: lock writes of a page in
flight at once (``--concurrency``) with exact locks and the same duplicates report as one at a
time; the adaptive rate backing off on throttling and growing back; ``--max-wcu`` shared by
workers through the ledger; ``--max-rcu`` capping the scan. Capacity is measured from the
responses, as a fault proxy between the workers and the server sees them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reliability.proxy import WRITE_OPERATIONS, Fault, FaultProxy, Recorded
from support.migrations_workspace import LiveWriters, Workspace, open_workspace

from dynaunique.cli import cli
from dynaunique.migrations import DuplicatesFound, RunState
from dynaunique.migrations.ratelimit import AIMD

TABLE = "mig_throughput_accounts"
DUPLICATES = 6


@pytest.fixture
def proxy(dynaunique_db: str) -> Iterator[FaultProxy]:
    with FaultProxy(dynaunique_db) as running:
        yield running


@pytest.fixture
def ws(proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace whose every request goes through the proxy."""
    yield open_workspace(tmp_path, proxy.url, TABLE, monkeypatch)


def _applied_only(ws: Workspace) -> set[str]:
    return {f"UNIQ#~MIGRATION#{ws.module}#0001_initial"}


def _seed_with_duplicates(ws: Workspace, records: int) -> Any:
    """``DUPLICATES`` values held by two records each (``DUP#a<i>`` and ``DUP#b<i>``), then
    ``records`` accounts with distinct emails; the constraint deployed, its migration written."""
    for i in range(DUPLICATES):
        ws.put_raw(f"DUP#a{i}", email=f"dup{i}@x.io")
        ws.put_raw(f"DUP#b{i}", email=f"DUP{i}@x.io")
    return ws.seed_unique_email(records)


def _forget_locks(ws: Workspace) -> None:
    """Back to the table as it was before the migration: no lock, no ledger item."""
    for item in ws.scan():
        if item["PK"]["S"].startswith("UNIQ#"):
            ws.client.delete_item(TableName=ws.table, Key={"PK": item["PK"], "SK": item["SK"]})


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
    proxy.inject(Fault.DELAY_BEFORE, operations={"TransactWriteItems"}, delay=0.5,
                 when=lambda operation, body: "UNIQ#EMAIL#dup0@x.io" in _lock_keys(operation,
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
    assert ws.ledger() == _applied_only(ws)


def test_a_crash_with_writes_in_flight_is_repaired_by_the_rerun(ws: Workspace) -> None:
    from dynaunique.migrations._hooks import InjectedCrash, fail_after_records

    models = ws.seed_unique_email(90)
    with LiveWriters(models.Account, 90) as writers:
        writers.wait_for(3)
        executor = ws.project().executor(concurrency=8, page_size=30)
        fail_after_records(executor, 40)
        with pytest.raises(InjectedCrash):
            executor.migrate()
        assert ws.project().executor(concurrency=8, page_size=30).migrate().state == \
            RunState.DONE
    items = ws.scan()
    assert ws.locks(items) == ws.expected_locks(items=items)
    assert ws.ledger() == _applied_only(ws)


def test_the_cli_takes_concurrency_and_the_capacity_caps(ws: Workspace) -> None:
    ws.seed_unique_email(40)
    result = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                      "--concurrency", "4", "--max-wcu", "400",
                                      "--max-rcu", "400", "--segment", "0",
                                      "--total-segments", "2"])
    assert result.exit_code == 0, result.output
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == _applied_only(ws)  # the shared budget items are gone too


# --- the adaptive rate ---------------------------------------------------------------------------


def _lock_keys(operation: str, body: dict[str, Any]) -> list[str]:
    """The EMAIL locks a request puts (a backfill puts them in transactions, each next to a
    check of its record)."""
    if operation != "TransactWriteItems":
        return []
    keys = [entry["Put"]["Item"]["PK"]["S"] for entry in body.get("TransactItems", [])
            if "Put" in entry]
    return [key for key in keys if key.startswith("UNIQ#EMAIL#")]


def _lock_put(operation: str, body: dict[str, Any]) -> bool:
    return bool(_lock_keys(operation, body))


def test_the_rate_backs_off_on_throttling_and_grows_back(ws: Workspace,
                                                         proxy: FaultProxy) -> None:
    ws.seed_unique_email(60)  # 1 record a transaction under a cap of 40 units a second
    seen = 0

    def after_the_40th_lock_put(operation: str, body: dict[str, Any]) -> bool:
        nonlocal seen
        if not _lock_put(operation, body):
            return False
        seen += 1
        return seen > 40

    proxy.inject(Fault.THROTTLE, times=6, operations={"TransactWriteItems"},
                 when=after_the_40th_lock_put)
    executor = ws.project().executor(max_wcu=40, concurrency=4, page_size=10)
    assert executor.bucket is not None
    # The real controller, its interval shortened so that growing back takes a second.
    aimd = executor.bucket.aimd = AIMD(40, interval=0.1)
    rates: list[float | None] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            rates.append(aimd.rate)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        assert executor.migrate().state == RunState.DONE
    finally:
        stop.set()
        sampler.join()
    assert proxy.injected[Fault.THROTTLE] == 6
    assert aimd.throttles == 6 and aimd.decreases >= 1
    assert min(r for r in rates if r is not None) <= 20  # halved (at least)
    assert rates[-1] == 40  # and grown back to the cap
    low = rates.index(min(r for r in rates if r is not None))
    assert any(r == 40 for r in rates[low:])
    assert ws.locks() == ws.expected_locks()


# --- shared capacity caps ------------------------------------------------------------------------


def _units(record: Recorded) -> float:
    """The capacity a request consumed, as its answer reports it (a write that asked for no
    report: 1 unit, a ledger item under 1 KB; a transaction, which the local server reports
    none for: 2 units an item under 1 KB, as DynamoDB counts)."""
    consumed = (record.response or {}).get("ConsumedCapacity")
    if record.operation == "TransactWriteItems" and not consumed:
        return 2.0 * len(record.body.get("TransactItems", []))
    if isinstance(consumed, list):
        return sum(float(c.get("CapacityUnits", 0)) for c in consumed)
    if isinstance(consumed, dict):
        return float(consumed.get("CapacityUnits", 0))
    return 1.0


def _peak(events: list[tuple[float, float]], window: float) -> float:
    """The most units consumed within any ``window`` seconds."""
    events.sort()
    most = 0.0
    for i, (start, _) in enumerate(events):
        most = max(most, sum(u for t, u in events[i:] if t < start + window))
    return most


def test_max_wcu_is_shared_by_two_workers_through_the_ledger(ws: Workspace,
                                                             proxy: FaultProxy) -> None:
    cap = 8.0
    records = 25  # 4 write units each (a transactional lock put and its record's check)
    ws.seed_unique_email(records)
    proxy.clear()
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            executor = ws.project().executor(worker=(index, 4), max_wcu=cap, concurrency=4,
                                             page_size=10, wait_seconds=30, poll_seconds=0.2)
            while executor.migrate().state == RunState.MORE:
                pass
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 2)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    # Every write the migration paid for: the lock writes (their consumed capacity as DynamoDB
    # reports it) and the ledger's intents, checkpoints and budget takes.
    writes = [r for r in proxy.records(WRITE_OPERATIONS) if r.status == 200
              and not r.body.get("Key", r.body.get("Item", {})).get("PK", {}).get(
                  "S", "").startswith("UNIQ#~LEASE#")]
    events = [(r.at - started, _units(r)) for r in writes]
    total = sum(u for _, u in events)
    seconds = max(t for t, _ in events)
    assert total >= 100
    # Over any window: at most the cap per second plus one second's burst (the bucket starts
    # full), and a chunk each worker may hold.
    chunk = max(cap / 20, min(10.0, cap - 1))
    for window in (1.0, 2.0, 4.0):
        assert _peak(list(events), window) <= cap * window + cap + 2 * chunk + 1
    # Both workers together spent the budget: more than the half each got from a static split
    # of the cap by the segment count (4 segments, 2 workers: cap / 2).
    assert total / seconds > cap * 0.6
    assert total / seconds <= cap * 1.1 + cap / seconds
    lock_owners = {key for r in writes for key in _lock_keys(r.operation, r.body)}
    assert len(lock_owners) == records
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == _applied_only(ws)


def test_max_rcu_caps_the_scan_reads(ws: Workspace, proxy: FaultProxy) -> None:
    cap = 4.0
    ws.seed_unique_email(120)
    proxy.clear()
    started = time.monotonic()
    assert ws.project().executor(max_rcu=cap, page_size=10).migrate().state == RunState.DONE
    scans = [(r.at - started, _units(r)) for r in proxy.records({"Scan"}) if r.status == 200]
    assert all((r.response or {}).get("ConsumedCapacity") for r in proxy.records({"Scan"}))
    total = sum(u for _, u in scans)
    assert total >= 12  # 120 records, 10 a page
    for window in (1.0, 2.0):
        assert _peak(list(scans), window) <= cap * window + cap + 1
    # The first second's burst, then the cap.
    assert max(t for t, _ in scans) >= (total - cap - 1) / cap
    assert ws.locks() == ws.expected_locks()
