"""The embedded local server at scale: transactions per second against tables of 0 to 50,000 items,
with dynaunique's patched moto and, in the same run, with stock moto.

    python -m benchmarks.server [--quick] [--out docs/performance.md]

Each point starts its own server (``LocalDynamoDB``, stock or patched), creates one table with a
hash and a range key, fills it with N items through ``BatchWriteItem`` and then sends, from one
thread, transactions shaped like a dynaunique create with two unique values: a record put and two
lock puts, each guarded by ``attribute_not_exists``. A point is measured ``repeats`` times; the
table keeps growing by what the earlier repeats wrote (a few hundred items, nothing next to N).
With ``--out`` the section is written at the end of that page (replacing an earlier copy of it);
``python -m benchmarks.run`` renders the same section in the full report.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

if __package__ in (None, ""):  # run as a script: python benchmarks/server.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.models import fake_credentials
from benchmarks.report import D, X
from dynaunique.testing import LocalDynamoDB

HEADING = "## The embedded server at scale"
TABLE = "bench_scale"


@attrs.frozen
class Plan:
    """One measured point: a server, a table size, how many transactions."""

    items: int
    stock_moto: bool
    transactions: int
    repeats: int


@attrs.frozen
class Point:
    """What one point measured."""

    items: int
    stock_moto: bool
    transactions: int
    rates: tuple[float, ...]  # transactions per second, one per repeat
    fill_seconds: float

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


@attrs.frozen
class Scaling:
    """Every point of one run."""

    quick: bool
    points: tuple[Point, ...]

    def rate(self, items: int, *, stock_moto: bool = False) -> float:
        """The median rate measured at ``items`` items, patched or stock."""
        for point in self.points:
            if (point.items, point.stock_moto) == (items, stock_moto):
                return point.median
        raise KeyError((items, stock_moto))


FULL = (
    Plan(0, False, 400, 3),
    Plan(5_000, False, 400, 3),
    Plan(50_000, False, 400, 3),
    Plan(5_000, True, 15, 3),
)
QUICK = (
    Plan(0, False, 20, 1),
    Plan(1_000, False, 20, 1),
    Plan(1_000, True, 3, 1),
)


def _client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": 1}))


def _fill(ddb: Any, items: int) -> None:
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                   {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    for start in range(0, items, 25):
        batch = [{"PutRequest": {"Item": {
            "PK": {"S": f"ACCT#{n:08}"}, "SK": {"S": "PROFILE"},
            "email": {"S": f"user{n}@example.com"}, "name": {"S": "A. N. Other"},
        }}} for n in range(start, min(items, start + 25))]
        ddb.batch_write_item(RequestItems={TABLE: batch})


def _create(n: int) -> list[dict[str, Any]]:
    """A dynaunique-shaped create: the record and two locks, each put only if absent."""
    guard = "attribute_not_exists(PK)"
    record = {"PK": {"S": f"BENCH#{n:08}"}, "SK": {"S": "PROFILE"},
              "email": {"S": f"b{n}@example.com"}, "username": {"S": f"b{n}"}}
    locks = [{"PK": {"S": f"UNIQ#{name}#{value}"}, "SK": {"S": "LOCK"},
              "owner": {"M": {"PK": {"S": f"BENCH#{n:08}"}, "SK": {"S": "PROFILE"}}}}
             for name, value in (("EMAIL", f"b{n}@example.com"), ("USERNAME", f"b{n}"))]
    return [{"Put": {"TableName": TABLE, "Item": item, "ConditionExpression": guard}}
            for item in (record, *locks)]


def measure(plan: Plan) -> Point:
    """Start a server, fill its table, and time ``plan.repeats`` runs of transactions."""
    with LocalDynamoDB(stock_moto=plan.stock_moto) as endpoint:
        ddb = _client(endpoint)
        started = time.perf_counter()
        _fill(ddb, plan.items)
        fill_seconds = time.perf_counter() - started
        counter = 0
        for _ in range(3 if plan.transactions < 50 else 20):  # warm up pools and code paths
            ddb.transact_write_items(TransactItems=_create(counter))
            counter += 1
        rates = []
        for _ in range(plan.repeats):
            started = time.perf_counter()
            for _ in range(plan.transactions):
                ddb.transact_write_items(TransactItems=_create(counter))
                counter += 1
            rates.append(plan.transactions / (time.perf_counter() - started))
    return Point(plan.items, plan.stock_moto, plan.transactions, tuple(rates), fill_seconds)


def run(*, quick: bool = False, say: Any = None) -> Scaling:
    """Measure every point of the full (or quick) plan, in this order, in this process."""
    points = []
    for plan in QUICK if quick else FULL:
        if say is not None:
            say(f"embedded server: {plan.items} items, {'stock' if plan.stock_moto else 'patched'}"
                " moto")
        points.append(measure(plan))
    return Scaling(quick, tuple(points))


def render(scaling: Scaling) -> str:
    """The Markdown section for docs/performance.md."""
    lines = [f"{HEADING}\n",
             "Every test, the demo and the pytest plugin run on the embedded server "
             "(`dynaunique.testing`: moto in server mode, one request at a time). Stock moto "
             "deep-copies the whole table for every item of every transaction, so a transaction "
             "costs O(table size); the server patches that (an undo log of the touched items; "
             "see docs/decisions.md). One thread sends TransactWriteItems shaped like a create "
             "with two unique values (3 guarded puts) to a fresh server whose table was first "
             "filled with N items; each figure is the median of the repeats, with their range.\n",
             "| moto | items in the table | transactions per repeat | repeats | tx/s (median) "
             "| range | fill time |",
             "|---|---|---|---|---|---|---|"]
    for point in scaling.points:
        lines.append(
            f"| {'stock 5.x' if point.stock_moto else 'patched'} | {point.items:,} "
            f"| {point.transactions} | {len(point.rates)} | {point.median:.1f} "
            f"| {min(point.rates):.1f}{D}{max(point.rates):.1f} | {point.fill_seconds:.1f} s |")
    lines.append("")
    patched = sorted(p.items for p in scaling.points if not p.stock_moto)
    stock = [p.items for p in scaling.points if p.stock_moto]
    if patched and stock:
        empty, largest, compared = patched[0], patched[-1], stock[0]
        flat = scaling.rate(largest) / scaling.rate(empty)
        gain = scaling.rate(largest) / scaling.rate(compared, stock_moto=True)
        lines.append(
            f"At {largest:,} items the patched server runs **{flat:.2f}{X}** its rate on "
            f"{empty:,} items, and **{gain:.0f}{X}** stock moto's rate at {compared:,} items."
            + (" (A `--quick` run: small tables, few transactions.)" if scaling.quick else "")
            + "\n")
    return "\n".join(lines)


def write_section(page: Path, section: str) -> None:
    """Put ``section`` at the end of ``page``, replacing an earlier copy of it."""
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    at = text.find("\n" + HEADING + "\n")
    if at >= 0:
        text = text[: at + 1]
    page.write_text(text.rstrip("\n") + "\n\n" + section, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.server``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small tables, a few seconds")
    parser.add_argument("--out", type=Path, help="write the section at the end of this page")
    args = parser.parse_args(argv)
    fake_credentials()
    clock = time.perf_counter()

    def say(text: str) -> None:
        print(f"[server benchmark {time.perf_counter() - clock:6.1f} s] {text}", file=sys.stderr,
              flush=True)

    section = render(run(quick=args.quick, say=say))
    if args.out is None:
        print(section)
    else:
        write_section(args.out, section)
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
