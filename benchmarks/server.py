"""The embedded local server at scale: transactions per second against tables of 0 to 50,000 items,
with dynaunique's patched moto and, in the same run, with stock moto.

    python -m benchmarks.server [--quick] [--out docs/performance.md]

Each point has its own server (``LocalDynamoDB``, stock or patched), with one table (a hash and a
range key) filled with N items through ``BatchWriteItem`` (``benchmarks.run --quick`` gives the
patched points its own server instead, a table each). All the servers run side by side, and
the measurement goes round them: in each round, one thread sends each server in turn a batch of
transactions shaped like a dynaunique create with two unique values (a record put and two lock
puts, each guarded by ``attribute_not_exists``). Interleaving the points this way spreads the
load of a shared machine evenly over them, so their ratios hold even when absolute rates drift.
The tables grow by what earlier rounds wrote (a few thousand items at most).
With ``--out`` the section is written at the end of that page (replacing an earlier copy of it);
``python -m benchmarks.run`` renders the same section in the full report.

    python -m benchmarks.server --per-operation [--baseline DIR] [--requests N] [--rounds R]

measures instead what one request costs the server's CPU, per operation (the server process's
user + system time from ``/proc/<pid>/stat`` over N requests of one kind, a few hundred requests
a point): this tree's patched server, with ``--stock`` stock moto, and with ``--baseline`` a
server run from another source tree (e.g. ``git archive main dynaunique | tar -x -C /tmp/b``),
side by side in interleaved rounds, as above. Its operations are what the tests send: a
dynaunique create (3 guarded puts), the same cancelled, the single-item and batch reads and
writes, a query, a scan page, a table's creation and deletion, and the ``dynaunique_db``
fixture's reset.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs

if __package__ in (None, ""):  # run as a script: python benchmarks/server.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import server_cpu
from benchmarks.models import fake_credentials
from benchmarks.report import D, X
from benchmarks.server_cpu import create_items, create_table
from dynaunique.testing import LocalDynamoDB

HEADING = "## The embedded server at scale"
TABLE = "bench_scale"


@attrs.frozen
class Plan:
    """One measured point: a server, a table size, how many transactions per round."""

    items: int
    stock_moto: bool
    transactions: int


@attrs.frozen
class Point:
    """What one point measured."""

    items: int
    stock_moto: bool
    transactions: int
    rates: tuple[float, ...]  # transactions per second, one per round
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
    Plan(0, False, 80),
    Plan(5_000, False, 80),
    Plan(50_000, False, 80),
    Plan(5_000, True, 3),
)
FULL_ROUNDS = 12
QUICK = (
    Plan(0, False, 20),
    Plan(1_000, False, 20),
    Plan(1_000, True, 3),
)
QUICK_ROUNDS = 1


def _client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": 1}))


def _fill(ddb: Any, items: int, table: str = TABLE) -> None:
    create_table(ddb, table)
    for start in range(0, items, 25):
        batch = [{"PutRequest": {"Item": {
            "PK": {"S": f"ACCT#{n:08}"}, "SK": {"S": "PROFILE"},
            "email": {"S": f"user{n}@example.com"}, "name": {"S": "A. N. Other"},
        }}} for n in range(start, min(items, start + 25))]
        ddb.batch_write_item(RequestItems={table: batch})


def _send(ddb: Any, first: int, count: int, table: str = TABLE) -> float:
    """Send ``count`` creates numbered from ``first``; return transactions per second."""
    started = time.perf_counter()
    for n in range(first, first + count):
        ddb.transact_write_items(TransactItems=create_items(n, table))
    return count / (time.perf_counter() - started)


def run(*, quick: bool = False, say: Any = None, endpoint: str | None = None) -> Scaling:
    """Start a server per point, fill them, then measure them round by round, interleaved.

    With ``endpoint`` (a running patched server, e.g. ``benchmarks.run --quick``'s), the patched
    points share it instead, each with a table of its own (deleted at the end); the stock-moto
    points still get a server each.
    """
    plans = QUICK if quick else FULL
    rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    with ExitStack() as stack:
        clients, fills = [], []
        for number, plan in enumerate(plans):
            if say is not None:
                say(f"embedded server: {plan.items:,} items, "
                    f"{'stock' if plan.stock_moto else 'patched'} moto: filling")
            table = TABLE
            if endpoint is not None and not plan.stock_moto:
                ddb, table = _client(endpoint), f"{TABLE}_{number}"
                stack.callback(ddb.delete_table, TableName=table)
            else:
                ddb = _client(stack.enter_context(LocalDynamoDB(stock_moto=plan.stock_moto)))
            started = time.perf_counter()
            _fill(ddb, plan.items, table)
            fills.append(time.perf_counter() - started)
            _send(ddb, 0, 3, table)  # warm up the connection and the server's code paths
            clients.append((ddb, table))
        rates: list[list[float]] = [[] for _ in plans]
        sent = 3
        for number in range(rounds):
            if say is not None:
                say(f"round {number + 1} of {rounds}")
            order = list(zip(plans, clients, rates, strict=True))
            if number % 2:  # every other round the other way round: no point always goes first
                order.reverse()
            for plan, (ddb, table), measured in order:
                measured.append(_send(ddb, sent, plan.transactions, table))
            sent += max(plan.transactions for plan in plans)
    return Scaling(quick, tuple(
        Point(plan.items, plan.stock_moto, plan.transactions, tuple(measured), fill)
        for plan, measured, fill in zip(plans, rates, fills, strict=True)))


def render(scaling: Scaling) -> str:
    """The Markdown section for docs/performance.md."""
    lines = [f"{HEADING}\n",
             "Every test, the demo and the pytest plugin run on the embedded server "
             "(`dynaunique.testing`: moto in server mode, one request at a time). Stock moto "
             "deep-copies the whole table for every item of every transaction, so a transaction "
             "costs O(table size); the server patches that (an undo log of the touched items; "
             "see [Decisions](decisions.md#the-local-server)). One thread sends "
             "TransactWriteItems shaped like a create with two unique values (3 guarded puts) "
             "to a server whose table was first filled with N items. The servers run side by "
             "side and are measured in interleaved rounds (in alternating order), so a shared "
             "machine's changing load falls on all of them alike; each figure is the median "
             "over the rounds, with their range.\n",
             "| moto | items in the table | transactions per round | rounds | tx/s (median) "
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
    parser.add_argument("--per-operation", action="store_true",
                        help="measure the server's CPU per request, per operation, instead")
    parser.add_argument("--baseline", type=Path,
                        help="--per-operation: also a server run from this dynaunique source tree")
    parser.add_argument("--stock", action="store_true",
                        help="--per-operation: also a server on stock moto")
    parser.add_argument("--requests", type=int, default=200,
                        help="--per-operation: requests of one kind a round (default 200)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="--per-operation: rounds per operation (default 3)")
    args = parser.parse_args(argv)
    fake_credentials()
    clock = time.perf_counter()

    def say(text: str) -> None:
        print(f"[server benchmark {time.perf_counter() - clock:6.1f} s] {text}", file=sys.stderr,
              flush=True)

    if args.per_operation:

        rows = server_cpu.run(baseline=args.baseline, stock=args.stock, requests=args.requests,
                              rounds=args.rounds, say=say)
        print(server_cpu.render(rows, requests=args.requests, rounds=args.rounds))
        return 0
    section = render(run(quick=args.quick, say=say))
    if args.out is None:
        print(section)
    else:
        write_section(args.out, section)
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
