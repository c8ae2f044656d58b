"""The cost and the speed of a backfill (issue 23), on the local server:

    python -m benchmarks.migrate [--records 400] [--json results.json] [--endpoint URL]

1. **Cost per record-constraint**: a table of N records without locks is backfilled for a
   model with k = 1 and k = 3 unique constraints (one worker, one write at a time). Every
   request is counted as it goes over the wire, with its write and read units by DynamoDB's
   rules for items up to 1 KB / 4 KB (:mod:`benchmarks.counting`).
2. **Speed-up**: the same backfill (k = 1) by 1, 2 and 4 workers (threads of this process,
   each a ``MigrationExecutor`` worker of 4 segments) at ``--concurrency`` 1, 4 and 16.

Each run ends with the table checked: exactly k locks per record, no ledger item left but the
applied migration. Absolute times are this machine's: the local server is one process that
serializes requests (moto behind one lock), so it — not DynamoDB — bounds the speed-up.
Short by design (about a minute or two); not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

if __package__ in (None, ""):  # run as a script: python benchmarks/migrate.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.counting import RequestLog
from benchmarks.handwritten import make_client
from benchmarks.models import fake_credentials
from benchmarks.report import machine
from dynaunique import Model, normalizers
from dynaunique._transport import clients
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, local_dynamodb, reset_local_dynamodb, use_endpoint

TABLES = {1: "bench_migrate_k1", 3: "bench_migrate_k3"}
WORKERS = (1, 2, 4)
CONCURRENCY = (1, 4, 16)
TOTAL_SEGMENTS = 4


class One(Model):
    """k = 1: a unique, normalized email."""

    class Meta:
        table_name = TABLES[1]
        region = "us-east-1"
        host = "http://127.0.0.1:9"  # replaced before any request

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    username = UnicodeAttribute(null=True)
    phone = UnicodeAttribute(null=True)


class Three(Model):
    """k = 3: email, username and phone each unique."""

    class Meta:
        table_name = TABLES[3]
        region = "us-east-1"
        host = "http://127.0.0.1:9"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    username = UnicodeAttribute(unique=True)
    phone = UnicodeAttribute(unique=True)


@attrs.frozen
class Backfill:
    """One measured backfill."""

    k: int
    workers: int
    concurrency: int
    records: int
    seconds: float
    requests: dict[str, int]
    wcu: float
    rcu: float
    #: Exactly k locks per record and a clean ledger afterwards.
    correct: bool

    @property
    def per_record_constraint(self) -> dict[str, float]:
        """Requests, write and read units per record and constraint."""
        n = self.records * self.k
        return {"requests": round(sum(self.requests.values()) / n, 3),
                "wcu": round(self.wcu / n, 3), "rcu": round(self.rcu / n, 3)}

    @property
    def records_per_second(self) -> float:
        """Records backfilled per second (all constraints)."""
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def requests_per_second(self) -> float:
        """Requests the server answered per second: what saturates first here."""
        return sum(self.requests.values()) / self.seconds if self.seconds else 0.0


def _fresh(endpoint: str, model: type[Model], records: int) -> None:
    reset_local_dynamodb(endpoint)
    use_endpoint(endpoint, model)
    create_tables(model)
    raw = make_client(endpoint)
    for start in range(0, records, 25):
        raw.batch_write_item(RequestItems={model.Meta.table_name: [{"PutRequest": {"Item": {
            "PK": {"S": f"ACCT#{i:07d}"}, "SK": {"S": "PROFILE"},
            "email": {"S": f"User{i}@Example.com"}, "username": {"S": f"user{i}"},
            "phone": {"S": f"+1555{i:07d}"}}}} for i in range(start, min(records, start + 25))]})


def _correct(endpoint: str, k: int, records: int) -> bool:
    raw = make_client(endpoint)
    locks = ledger = 0
    params: dict[str, Any] = {"TableName": TABLES[k]}
    while True:
        page = raw.scan(**params)
        for item in page["Items"]:
            key = item["PK"]["S"]
            ledger += key.startswith("UNIQ#~")
            locks += key.startswith("UNIQ#") and not key.startswith("UNIQ#~")
        if "LastEvaluatedKey" not in page:
            break
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return locks == k * records and ledger == 1


def backfill(endpoint: str, log: RequestLog, model: type[Model], k: int, records: int, *,
             workers: int, concurrency: int) -> Backfill:
    """Backfill ``records`` records of ``model`` (``k`` constraints) with ``workers`` workers
    (threads), each keeping ``concurrency`` lock writes in flight."""
    from dynaunique.migrations import Project, RunState

    _fresh(endpoint, model, records)
    log.attach(clients.client_for(model))
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory() as directory:
        project = Project("benchmarks.migrate", [model], migrations_dir=Path(directory))
        project.make_migrations()

        def work(index: int) -> None:
            try:
                executor = project.executor(worker=(index, TOTAL_SEGMENTS),
                                            concurrency=concurrency, wait_seconds=60,
                                            poll_seconds=0.2)
                while executor.migrate().state == RunState.MORE:
                    pass
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
        with log.window() as sent:
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=600)
            seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    return Backfill(k, workers, concurrency, records, seconds,
                    dict(Counter(s.operation for s in sent)), sum(s.wcu for s in sent),
                    sum(s.rcu for s in sent), _correct(endpoint, k, records))


def run(endpoint: str, records: int) -> list[Backfill]:
    """Both parts (see the module docstring)."""
    runs: list[Backfill] = []
    with RequestLog() as log:
        for model, k in ((One, 1), (Three, 3)):
            _say(f"cost: k={k}, {records} records")
            runs.append(backfill(endpoint, log, model, k, records, workers=1, concurrency=1))
        for workers in WORKERS:
            for concurrency in CONCURRENCY:
                if workers == 1 and concurrency == 1:
                    continue  # measured above
                _say(f"speed: {workers} worker(s), concurrency {concurrency}")
                runs.append(backfill(endpoint, log, One, 1, records, workers=workers,
                                     concurrency=concurrency))
    return runs


def render(runs: Sequence[Backfill]) -> str:
    """The results as Markdown."""
    lines = ["| k | workers | concurrency | records | s | records/s | requests/s | speed-up | "
             "requests / record-constraint | WCU / r-c | RCU / r-c | exact |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = next((r for r in runs if r.k == 1 and r.workers == 1 and r.concurrency == 1), None)
    for r in runs:
        per = r.per_record_constraint
        speed = (f"{base.seconds / r.seconds:.2f}x" if base is not None and r.k == 1 else "")
        lines.append(f"| {r.k} | {r.workers} | {r.concurrency} | {r.records} | {r.seconds:.1f} "
                     f"| {r.records_per_second:.0f} | {r.requests_per_second:.0f} | {speed} "
                     f"| {per['requests']} | {per['wcu']} | {per['rcu']} | "
                     f"{'yes' if r.correct else 'NO'} |")
    return "\n".join(lines)


_clock = time.perf_counter()


def _say(text: str) -> None:
    print(f"[migrate benchmark {time.perf_counter() - _clock:6.1f} s] {text}", file=sys.stderr,
          flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print the Markdown table, optionally write JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.migrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--json", type=Path, help="also write the raw results as JSON")
    parser.add_argument("--endpoint", help="use this running local server (it is RESET)")
    args = parser.parse_args(argv)
    fake_credentials()
    if args.endpoint:
        runs = run(args.endpoint, args.records)
    else:
        with local_dynamodb() as endpoint:
            runs = run(endpoint, args.records)
    print(render(runs))
    if args.json:
        args.json.write_text(json.dumps({
            "machine": machine(),
            "runs": [{**attrs.asdict(r), "per_record_constraint": r.per_record_constraint,
                      "records_per_second": r.records_per_second} for r in runs]},
            indent=2), encoding="utf-8")
    return 0 if all(r.correct for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
