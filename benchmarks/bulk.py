"""Part 4: bulk cost per record — migration backfill and audit, at 1, 2 and 4 scan segments.

A table of N records without locks (as after deploying a new unique constraint) is backfilled
by ``dynaunique.migrations`` (``Project.make_migrations`` then ``MigrationExecutor.migrate``);
a table of N records with their locks is audited by ``dynaunique.audit.check``. Every request
is counted; write units follow DynamoDB's rules for items up to 1 KB (plain write 1, a
transactional item 2). ``max_wcu`` accuracy: the write units actually spent per second under a
cap, over the cap. Both modules are imported lazily: while they are missing (or fail), the part
is reported as not measured, with the reason — never with made-up numbers.
"""

from __future__ import annotations

import importlib
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from benchmarks.consistency import table_state
from benchmarks.counting import RequestLog, Sent
from benchmarks.handwritten import make_client
from benchmarks.models import TABLE, BenchAccount, fresh_table, point_at

SEGMENTS = (1, 2, 4)


@attrs.frozen
class BulkRun:
    """One backfill or audit run."""

    kind: str
    segments: int
    records: int
    seconds: float
    requests: dict[str, int]
    written: int
    wcu: float
    scanned: int
    #: The table (backfill) or the report (audit) was exactly right afterwards.
    correct: bool
    max_wcu: float | None = None

    @property
    def requests_per_record(self) -> float:
        """Requests sent per record of the table."""
        return sum(self.requests.values()) / self.records

    @property
    def wcu_per_record(self) -> float:
        """Write units spent per record."""
        return self.wcu / self.records

    @property
    def records_per_second(self) -> float:
        """Records processed per second (machine-specific)."""
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def wcu_per_second(self) -> float:
        """Write units spent per second."""
        return self.wcu / self.seconds if self.seconds else 0.0


@attrs.frozen
class Bulk:
    """Part 4's result: the runs, or why there are none."""

    runs: tuple[BulkRun, ...] = ()
    #: part ("backfill", "audit", "max_wcu") → why it was not measured.
    not_measured: dict[str, str] = attrs.field(factory=dict)


def _records_without_locks(endpoint: str, n: int) -> None:
    raw = make_client(endpoint)
    for start in range(0, n, 25):
        batch = [{"PutRequest": {"Item": {
            "PK": {"S": f"ACCT#{i}"}, "SK": {"S": "PROFILE"},
            "email": {"S": f"User{i}@Example.com"}, "username": {"S": f"user{i}"},
            "name": {"S": "n"}}}} for i in range(start, min(n, start + 25))]
        raw.batch_write_item(RequestItems={TABLE: batch})


def _records_with_locks(endpoint: str, n: int) -> None:
    """Records and their locks exactly as dynaunique writes them, loaded in bulk."""
    raw = make_client(endpoint)
    puts: list[dict[str, Any]] = []
    for i in range(n):
        account = BenchAccount(pk=f"ACCT#{i}", email=f"User{i}@Example.com",
                               username=f"user{i}", name="n")
        request = account.save(dry_run=True)
        puts.extend({"PutRequest": {"Item": slot["Put"]["Item"]}}
                    for slot in request["TransactItems"])
    for start in range(0, len(puts), 25):
        raw.batch_write_item(RequestItems={TABLE: puts[start:start + 25]})


def _summary(kind: str, segments: int, records: int, seconds: float, sent: list[Sent],
             scanned: int, correct: bool, max_wcu: float | None = None) -> BulkRun:
    return BulkRun(kind, segments, records, seconds, dict(Counter(s.operation for s in sent)),
                   sum(s.written for s in sent), sum(s.wcu for s in sent), scanned, correct,
                   max_wcu)


def _backfill(endpoint: str, records: int, segments: int, log: RequestLog,
              max_wcu: float | None = None) -> BulkRun:
    from dynaunique.migrations import Project

    fresh_table(endpoint)
    _records_without_locks(endpoint, records)
    with tempfile.TemporaryDirectory() as directory:
        project = Project("benchmarks.models", [BenchAccount], migrations_dir=Path(directory))
        project.make_migrations()
        executor = project.executor(segments=segments, max_wcu=max_wcu)
        scanned = log.scanned
        with log.window() as sent:
            start = time.perf_counter()
            executor.migrate()
            seconds = time.perf_counter() - start
        scanned = log.scanned - scanned
    state = table_state(make_client(endpoint), TABLE)
    correct = state.clean and state.locks == 2 * records
    return _summary("backfill", segments, records, seconds, sent, scanned, correct, max_wcu)


def _audit(endpoint: str, records: int, segments: int, log: RequestLog) -> BulkRun:
    from dynaunique import audit

    fresh_table(endpoint)
    _records_with_locks(endpoint, records)
    scanned = log.scanned
    with log.window() as sent:
        start = time.perf_counter()
        report = audit.check([BenchAccount], segments=segments)
        seconds = time.perf_counter() - start
    return _summary("audit", segments, records, seconds, sent, log.scanned - scanned,
                    bool(report.clean))


def _reason(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return (f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}:{where.lineno} "
            f"in {where.name})")


def run(endpoint: str, records: int, cap_records: int, cap: float) -> Bulk:
    """Backfill and audit ``records`` records per segment count; then one capped backfill."""
    with RequestLog() as log:
        log.attach(point_at(endpoint))
        return _run(endpoint, records, cap_records, cap, log)


def _run(endpoint: str, records: int, cap_records: int, cap: float, log: RequestLog) -> Bulk:
    runs: list[BulkRun] = []
    missing: dict[str, str] = {}
    for module, parts in (("dynaunique.migrations", ("backfill", "max_wcu")),
                          ("dynaunique.audit", ("audit",))):
        try:
            importlib.import_module(module)  # only: is it there yet?
        except ImportError as exc:
            for part in parts:
                missing[part] = f"{module} is missing ({exc})"
    for kind, job in (("backfill", _backfill), ("audit", _audit)):
        if kind in missing:
            continue
        try:
            for segments in SEGMENTS:
                runs.append(job(endpoint, records, segments, log))
        except Exception as exc:
            missing[kind] = f"the run failed — {_reason(exc)}"
    if "max_wcu" not in missing:
        if "backfill" in missing:
            missing["max_wcu"] = "needs a working backfill"
        else:
            try:
                runs.append(_backfill(endpoint, cap_records, 2, log, max_wcu=cap))
            except Exception as exc:
                missing["max_wcu"] = f"the run failed — {_reason(exc)}"
    return Bulk(tuple(runs), missing)
