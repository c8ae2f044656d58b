"""What one request costs the local server's CPU, per operation: ``python -m benchmarks.server
--per-operation`` (this module holds that mode of the server benchmark).

Each server under test is a real local server process (``python -m dynaunique.testing``) with
one table (a hash and a range key, 200 items). For each operation, in interleaved rounds (the
order reversed every other round), one client sends each server ``requests`` requests of that
kind, and the server's CPU (user + system, ``/proc/<pid>/stat``) over them, divided by their
number, is one sample; a figure is the median of the rounds. The servers:

- ``patched``: this tree's server, as the tests run it;
- ``stock`` (``--stock``): the same with stock moto (no speed patch, the rules still on; its
  transactions copy the whole table, so they take a while);
- ``baseline`` (``--baseline DIR``): a server run from another dynaunique source tree, e.g.
  ``git archive <commit> dynaunique | tar -x -C /tmp/before``, to compare a change with what
  it changed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs

from dynaunique.testing import READY_PREFIX, LocalDynamoDB

TABLE = "bench_ops"
SEEDED = 200
_TICK = os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> float:
    """CPU-seconds (user + system) process ``pid`` has spent so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _key(n: int) -> dict[str, Any]:
    return {"PK": {"S": f"ACCT#{n:08}"}, "SK": {"S": "PROFILE"}}


def _record(n: int) -> dict[str, Any]:
    return {**_key(n), "email": {"S": f"user{n}@example.com"}, "n": {"N": str(n)},
            "tags": {"SS": ["a", "b"]}, "photo": {"B": b"\x00\x01"},
            "owner": {"M": {"PK": {"S": f"ACCT#{n:08}"}, "SK": {"S": "PROFILE"}}}}


def create_items(n: int, table: str = TABLE) -> list[dict[str, Any]]:
    """A dynaunique-shaped create: the record and two locks, each put only if absent."""
    guard = "attribute_not_exists(PK)"
    record = {"PK": {"S": f"BENCH#{n:08}"}, "SK": {"S": "PROFILE"},
              "email": {"S": f"b{n}@example.com"}, "username": {"S": f"b{n}"}}
    locks = [{"PK": {"S": f"UNIQ#{name}#{value}"}, "SK": {"S": "LOCK"},
              "owner": {"M": {"PK": {"S": f"BENCH#{n:08}"}, "SK": {"S": "PROFILE"}}}}
             for name, value in (("EMAIL", f"b{n}@example.com"), ("USERNAME", f"b{n}"))]
    return [{"Put": {"TableName": table, "Item": item, "ConditionExpression": guard}}
            for item in (record, *locks)]


def create_table(ddb: Any, name: str) -> None:
    """The benchmarks' table: PK and SK strings, on demand."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                   {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _cancelled(ddb: Any, n: int) -> None:
    """A create whose record exists: cancelled, the old item returned (``ALL_OLD``)."""
    items = create_items(1_000_000 + n)
    items[0]["Put"]["Item"] = _record(n % SEEDED)
    items[0]["Put"]["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    try:
        ddb.transact_write_items(TransactItems=items)
    except ddb.exceptions.TransactionCanceledException:
        return
    raise AssertionError("the transaction was not cancelled")


def _reset(endpoint: str) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(endpoint + "/moto-api/reset", data=b"", method="POST")
    with opener.open(request) as response:
        response.read()


# name -> (requests per call, call(client, endpoint, n)); n counts the operation's calls to a
# server from 0 (so DeleteItem deletes what PutItem put).
Call = Callable[[Any, str, int], object]
OPERATIONS: dict[str, tuple[int, Call]] = {
    "TransactWriteItems (a create: 3 guarded puts)":
        (1, lambda d, e, n: d.transact_write_items(TransactItems=create_items(n))),
    "TransactWriteItems, cancelled (ALL_OLD)": (1, lambda d, e, n: _cancelled(d, n)),
    "PutItem": (1, lambda d, e, n: d.put_item(TableName=TABLE, Item=_record(10_000 + n))),
    "UpdateItem (SET, ALL_NEW)": (1, lambda d, e, n: d.update_item(
        TableName=TABLE, Key=_key(n % SEEDED), UpdateExpression="SET email = :e",
        ExpressionAttributeValues={":e": {"S": f"z{n}@example.com"}}, ReturnValues="ALL_NEW")),
    "DeleteItem": (1, lambda d, e, n: d.delete_item(TableName=TABLE, Key=_key(10_000 + n))),
    "GetItem": (1, lambda d, e, n: d.get_item(TableName=TABLE, Key=_key(n % SEEDED),
                                              ConsistentRead=True)),
    "BatchGetItem (5 keys)": (1, lambda d, e, n: d.batch_get_item(RequestItems={
        TABLE: {"Keys": [_key((n + k) % SEEDED) for k in range(5)]}})),
    "BatchWriteItem (5 puts)": (1, lambda d, e, n: d.batch_write_item(RequestItems={
        TABLE: [{"PutRequest": {"Item": _record(100_000 + 5 * n + k)}} for k in range(5)]})),
    "Query (one partition)": (1, lambda d, e, n: d.query(
        TableName=TABLE, KeyConditionExpression="PK = :p",
        ExpressionAttributeValues={":p": {"S": f"ACCT#{n % SEEDED:08}"}})),
    "Scan (a page of 10)": (1, lambda d, e, n: d.scan(TableName=TABLE, Limit=10)),
    "TransactGetItems (3 keys)": (1, lambda d, e, n: d.transact_get_items(TransactItems=[
        {"Get": {"TableName": TABLE, "Key": _key((n + k) % SEEDED)}} for k in range(3)])),
    "DescribeTable": (1, lambda d, e, n: d.describe_table(TableName=TABLE)),
    "CreateTable + DeleteTable": (2, lambda d, e, n: (
        create_table(d, "bench_ops_tmp"), d.delete_table(TableName="bench_ops_tmp"))),
    # Last: it wipes the table the others use (the dynaunique_db fixture sends it per test).
    "reset (POST /moto-api/reset)": (1, lambda d, e, n: _reset(e)),
}


@attrs.frozen
class Row:
    """One operation's figures: ms of server CPU per request, the median over rounds."""

    operation: str
    ms: dict[str, float]  # server label -> ms per request


@contextmanager
def _server_from(source: Path) -> Iterator[tuple[str, int]]:
    """A local server run from another dynaunique source tree: (endpoint, pid)."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    process = subprocess.Popen(
        [sys.executable, "-m", "dynaunique.testing", "--port", "0"], cwd=source, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode().strip()
            if line.startswith(READY_PREFIX + " "):
                yield line.split(" ", 1)[1], process.pid
                return
        raise RuntimeError(f"the server from {source} exited before it was ready")
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the server stops when its stdin closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        config=Config(retries={"total_max_attempts": 1}))


def _prepare(ddb: Any) -> None:
    create_table(ddb, TABLE)
    for start in range(0, SEEDED, 25):
        ddb.batch_write_item(RequestItems={TABLE: [
            {"PutRequest": {"Item": _record(n)}} for n in range(start, start + 25)]})


def run(*, baseline: Path | None = None, stock: bool = False, requests: int = 200,
        rounds: int = 3, say: Callable[[str], None] | None = None) -> list[Row]:
    """Measure every operation of :data:`OPERATIONS` on each server, in interleaved rounds."""
    with ExitStack() as stack:
        servers: list[tuple[str, str, int]] = []  # (label, endpoint, pid)
        for label, stock_moto in (("patched", False), ("stock", True))[:2 if stock else 1]:
            local = LocalDynamoDB(stock_moto=stock_moto)
            endpoint = stack.enter_context(local)
            assert local.pid is not None
            servers.append((label, endpoint, local.pid))
        if baseline is not None:
            servers.append(("baseline", *stack.enter_context(_server_from(baseline))))
        clients = [_client(endpoint) for _, endpoint, _ in servers]
        for ddb in clients:
            _prepare(ddb)
        rows = []
        for operation, (per_call, call) in OPERATIONS.items():
            if say is not None:
                say(operation)
            calls = [0] * len(servers)
            samples: dict[str, list[float]] = {label: [] for label, _, _ in servers}
            order = list(range(len(servers)))
            for number in range(rounds + 1):  # round 0 warms the operation's code paths up
                for at in order if number % 2 else reversed(order):
                    label, endpoint, pid = servers[at]
                    count = max(1, requests // per_call) if number else 3
                    before = server_cpu(pid)
                    for _ in range(count):
                        call(clients[at], endpoint, calls[at])
                        calls[at] += 1
                    if number:
                        samples[label].append(
                            (server_cpu(pid) - before) * 1000 / (count * per_call))
            rows.append(Row(operation, {k: statistics.median(v) for k, v in samples.items()}))
    return rows


def render(rows: list[Row], *, requests: int, rounds: int) -> str:
    """A Markdown table: one row per operation, one column per server."""
    labels = list(rows[0].ms) if rows else []
    lines = [f"Server CPU per request (ms; median of {rounds} rounds of {requests} requests "
             "each, user + system of the server process):\n",
             "| operation | " + " | ".join(labels) + " |",
             "|---|" + "---|" * len(labels)]
    for row in rows:
        lines.append(f"| {row.operation} | "
                     + " | ".join(f"{row.ms[label]:.2f}" for label in labels) + " |")
    return "\n".join(lines) + "\n"
