"""``check --export`` over a large export: rate, and memory sampled while it runs.

    python -m benchmarks.export_audit [--items 1000000] [--spill runs,sqlite,memory]
                                      [--run-rows 100000] [--json out.json]

Writes an export of ``--items`` items in AWS's documented layout (``dynaunique.testing._exports``):
records of ``BenchAccount`` (two unique values) with their two locks each, in 8 data files. A
record in every 20,000 is written without its locks (a suspect the live table clears: the live
table does not hold it), and 5 records saved on the local server through the library then had
a lock deleted by hand (suspects confirmed). Each ``--spill`` strategy then audits it in its own
process (so peak memory is its own): ``runs`` is the shipped one (sorted runs on disk,
``audit._spill``), ``sqlite`` an on-disk sqlite table read back ``ORDER BY``, ``memory`` every
row in one list sorted in memory (what holding the scan's snapshot costs). Resident memory is
sampled every 0.1 s; the report gives it at 10 %, 50 % and 100 % of the items read, and at the
end (after the merge and the consistent reads), with the peak (``ru_maxrss``); the rate both per
second of wall-clock time and per CPU-second (the machine it runs on may be shared).
"""

from __future__ import annotations

import argparse
import json
import marshal
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.models import TABLE, BenchAccount, fake_credentials, fresh_table, point_at
from dynaunique import audit
from dynaunique._lock.locks import lock_item, lock_key
from dynaunique.audit import _export_check
from dynaunique.testing import local_dynamodb
from dynaunique.testing._exports import write_export

_PAGE = os.sysconf("SC_PAGE_SIZE")
#: A record in every DRIFT_EVERY is exported without its locks.
DRIFT_EVERY = 20_000
#: Records on the live table whose lock was deleted by hand.
LIVE_DRIFT = 5


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE / 2**20


def _record(n: int) -> list[dict[str, Any]]:
    key = {"PK": {"S": f"ACCT#{n:08d}"}, "SK": {"S": "PROFILE"}}
    email, username = f"user{n}@example.com", f"user{n}"
    items = [{**key, "email": {"S": email}, "username": {"S": username},
              "name": {"S": f"User number {n}"}}]
    if n % DRIFT_EVERY == DRIFT_EVERY - 1:
        return items
    for name, value in (("EMAIL", email), ("USERNAME", username)):
        items.append(lock_item(key_attributes=("PK", "SK"),
                               lock_key_value=lock_key(name, (value,)), owner=key,
                               model="BenchAccount", constraint=name, value=value, hashed=False,
                               created="2026-01-01T00:00:00+00:00"))
    return items


def _items(total: int, live: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from live
    count, n = len(live), 0
    while count < total:
        for item in _record(n)[: total - count]:
            yield item
            count += 1
        n += 1


# --- the alternatives measured against the shipped spill ----------------------------------------


class _MemorySpill:
    """Every row in one list, sorted in memory: what holding a scan's snapshot costs."""

    def __init__(self, **_: Any) -> None:
        self.rows: list[Any] = []

    def __enter__(self) -> _MemorySpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.rows = []

    def add(self, row: Any) -> None:
        self.rows.append(row)

    def sorted(self) -> Iterator[Any]:
        self.rows.sort(key=lambda r: (r[0], r[1]))
        yield from self.rows


class _SqliteSpill:
    """Rows in an on-disk sqlite table (payloads marshalled), read back ORDER BY key, kind."""

    def __init__(self, **_: Any) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="bench-sqlite-")
        self._db = sqlite3.connect(Path(self._dir.name) / "rows.db")
        self._db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; "
                               "PRAGMA temp_store=FILE; PRAGMA cache_size=-16000; "
                               "CREATE TABLE rows (k TEXT, kind INT, seq INT, payload BLOB)")
        self._batch: list[tuple[str, int, int, bytes]] = []
        self._seq = 0

    def __enter__(self) -> _SqliteSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()
        self._dir.cleanup()

    def _flush(self) -> None:
        self._db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)", self._batch)
        self._batch = []

    def add(self, row: Any) -> None:
        self._seq += 1
        self._batch.append((row[0], row[1], self._seq, marshal.dumps(row[2])))
        if len(self._batch) >= 10_000:
            self._flush()

    def sorted(self) -> Iterator[Any]:
        self._flush()
        for k, kind, _, payload in self._db.execute(
                "SELECT k, kind, seq, payload FROM rows ORDER BY k, kind, seq"):
            yield k, kind, marshal.loads(payload)


_SPILLS = {"memory": _MemorySpill, "sqlite": _SqliteSpill}


def _one(export: str, endpoint: str, spill: str, run_rows: int) -> dict[str, Any]:
    """Audit ``export`` in this process with ``spill``; the measurements."""
    if spill in _SPILLS:
        _export_check._Spill = _SPILLS[spill]  # type: ignore[assignment,misc]
    BenchAccount.Meta.host = endpoint
    BenchAccount._connection = None
    samples: list[tuple[float, int, float]] = []
    done = [0, 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            samples.append((time.perf_counter(), done[0], _rss_mb()))

    def progress(read: int, total: int | None) -> None:
        done[0], done[1] = read, total or 0

    sampler = threading.Thread(target=sample, daemon=True)
    start_rss = _rss_mb()
    sampler.start()
    start, cpu = time.perf_counter(), time.process_time()
    report = audit.check_export([BenchAccount], export, progress=progress, run_rows=run_rows)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stop.set()
    sampler.join()
    total = done[1]
    read_end = next((t for t, n, _ in samples if n >= total), time.perf_counter())

    def rss_at(fraction: float) -> float:
        return next((rss for _, n, rss in samples if n >= fraction * total), _rss_mb())

    return {
        "spill": spill, "items": total, "seconds": round(elapsed, 1),
        "cpu_seconds": round(cpu, 1), "items_per_second": round(total / elapsed),
        "items_per_cpu_second": round(total / cpu),
        "read_items_per_second": round(total / max(read_end - start, 1e-9)),
        "rss_mb": {"start": round(start_rss, 1), "10%": round(rss_at(0.1), 1),
                   "50%": round(rss_at(0.5), 1), "100%": round(rss_at(1.0), 1),
                   "end": round(_rss_mb(), 1),
                   "peak": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
        "suspects": report.export.suspects, "cleared": report.export.cleared,
        "findings": report.counts(), "cost": report.cost.describe(),
    }


def main(argv: list[str] | None = None) -> None:
    """Write the export once, then audit it with each strategy in a process of its own."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--spill", default="runs,sqlite,memory")
    parser.add_argument("--run-rows", type=int, default=_export_check.RUN_ROWS)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", nargs=2, metavar=("EXPORT", "ENDPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    fake_credentials()
    if args.one:
        print(json.dumps(_one(args.one[0], args.one[1], args.spill, args.run_rows)))
        return
    results = []
    with local_dynamodb() as endpoint, tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        fresh_table(endpoint)
        for n in range(LIVE_DRIFT):
            BenchAccount(pk=f"LIVE#{n}", email=f"live{n}@example.com", username=f"live{n}").save()
        client = point_at(endpoint)
        for n in range(LIVE_DRIFT):
            client.delete_item(TableName=TABLE, Key={"PK": {"S": lock_key(
                "USERNAME", (f"live{n}",))}, "SK": {"S": "LOCK"}})
        live = list(client.scan(TableName=TABLE)["Items"])
        start = time.perf_counter()
        write_export(tmp, TABLE, _items(args.items, live), files=8)
        written = time.perf_counter() - start
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.json.gz"))
        print(f"export of {args.items} items written in {written:.1f} s "
              f"({size / 2**20:.1f} MB gzip'd)", file=sys.stderr)
        for spill in args.spill.split(","):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.export_audit", "--spill", spill,
                 "--run-rows", str(args.run_rows), "--one", tmp, endpoint],
                check=True, capture_output=True, text=True)
            result = json.loads(out.stdout)
            result["export_mb"] = round(size / 2**20, 1)
            print(json.dumps(result), file=sys.stderr)
            results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    for r in results:
        rss = r["rss_mb"]
        print(f"{r['spill']:>6}: {r['items']} items in {r['seconds']} s, {r['cpu_seconds']} s "
              f"CPU ({r['items_per_second']}/s, {r['items_per_cpu_second']}/CPU-s; reading "
              f"{r['read_items_per_second']}/s); RSS MB "
              f"10% {rss['10%']}, 50% {rss['50%']}, 100% {rss['100%']}, end {rss['end']}, "
              f"peak {rss['peak']}; {r['suspects']} suspects, {r['cleared']} cleared")


if __name__ == "__main__":
    main()
