"""Throughput within a worker (issue 23) against the local server, the rate side: the adaptive
rate backing off on throttling and growing back; ``--max-wcu`` shared by workers through the
ledger; ``--max-rcu`` capping the scan. Capacity is measured from the responses, as a fault proxy
between the workers and the server sees them. (Concurrency: test_migrations_throughput.py.)"""

from __future__ import annotations

import threading
import time
from typing import Any

from reliability.proxy import WRITE_OPERATIONS, Fault, FaultProxy, Recorded
from support.migrations_workspace import Workspace, email_lock_puts, proxied_fixtures

from dynaunique.migrations import RunState
from dynaunique.migrations.ratelimit import AIMD

TABLE = "mig_ratelimit_accounts"


proxy, ws = proxied_fixtures(TABLE)


# --- the adaptive rate ---------------------------------------------------------------------------


def _lock_put(operation: str, body: dict[str, Any]) -> bool:
    return bool(email_lock_puts(operation, body))


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

    proxy.inject(Fault.THROTTLE, times=6, operations={"PutItem"},
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
    records = 60  # a write unit each (a plain lock put), besides the ledger's writes
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
    assert total >= records
    # Over any window: at most the cap per second plus one second's burst (the bucket starts
    # full), and a chunk each worker may hold.
    chunk = max(cap / 20, min(10.0, cap - 1))
    for window in (1.0, 2.0, 4.0):
        assert _peak(list(events), window) <= cap * window + cap + 2 * chunk + 1
    # Both workers together spent the budget: more than the half each got from a static split
    # of the cap by the segment count (4 segments, 2 workers: cap / 2).
    assert total / seconds > cap * 0.6
    assert total / seconds <= cap * 1.1 + cap / seconds
    lock_owners = {key for r in writes for key in email_lock_puts(r.operation, r.body)}
    assert len(lock_owners) == records
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()


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
