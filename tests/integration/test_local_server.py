"""Tests of dynaunique.testing: the local server, its reset, its serialization, and its cleanup.

Everything here talks to a real server process over HTTP; nothing uses ``mock_aws``.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.indexes import (
    AllProjection,
    GlobalSecondaryIndex,
    KeysOnlyProjection,
    LocalSecondaryIndex,
)
from support import local_server as local_server_helpers
from support.declare import declare, pk_attr
from support.local_server import client
from support.recorders import requests_sent

from dynaunique.testing import (
    LocalDynamoDB,
    LocalServerError,
    create_tables,
    local_dynamodb,
    reset_local_dynamodb,
    use_endpoint,
)

TABLE = "testing-table"
THREADS = 12
ROUNDS = 10
# moto walks the whole table inside each transaction, so a fuller table widens the window in
# which unserialized requests interleave. With 1000 items, stock moto (`python -m moto.server`)
# failed every one of 80 measured rounds (HTTP 500 "dictionary changed size during iteration",
# or more than one winner); the serialized server must give exactly one winner every time.
FILL = 1000


def create_table(ddb: Any, name: str = TABLE) -> None:
    local_server_helpers.create_table(ddb, name)


def port_of(endpoint: str) -> int:
    port = urlsplit(endpoint).port
    assert port is not None
    return port


def refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def test_endpoint_is_local_http(dynaunique_db: str) -> None:
    parts = urlsplit(dynaunique_db)
    assert parts.scheme == "http"
    assert parts.hostname == "127.0.0.1"
    assert port_of(dynaunique_db) > 0


def test_boto3_can_create_put_and_get(dynaunique_db: str) -> None:
    ddb = client(dynaunique_db)
    create_table(ddb)
    ddb.put_item(TableName=TABLE, Item={"PK": {"S": "a"}, "v": {"N": "1"}})
    got = ddb.get_item(TableName=TABLE, Key={"PK": {"S": "a"}}, ConsistentRead=True)
    assert got["Item"] == {"PK": {"S": "a"}, "v": {"N": "1"}}


def test_reset_deletes_every_table(dynaunique_db: str) -> None:
    ddb = client(dynaunique_db)
    create_table(ddb)
    ddb.put_item(TableName=TABLE, Item={"PK": {"S": "a"}})
    reset_local_dynamodb(dynaunique_db)
    assert ddb.list_tables()["TableNames"] == []


def test_dynamodb_fixture_starts_each_test_clean(dynaunique_db: str) -> None:
    # Earlier tests in this module created TABLE on the same (session-wide) server.
    assert client(dynaunique_db).list_tables()["TableNames"] == []


def test_fake_credentials_are_set_for_the_session(dynaunique_db: str) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        assert os.environ.get(name)


def race_round(ddb: Any, round_no: int) -> list[str]:
    """THREADS threads race to take one lock item; return the outcome of each thread."""
    barrier = threading.Barrier(THREADS)
    outcomes: list[str] = [""] * THREADS

    def contend(i: int) -> None:
        items = [
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": {"PK": {"S": f"UNIQ#EMAIL#r{round_no}"}, "owner": {"S": f"t{i}"}},
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            },
            {"Put": {"TableName": TABLE, "Item": {"PK": {"S": f"REC#r{round_no}#t{i}"}}}},
        ]
        barrier.wait()
        try:
            ddb.transact_write_items(TransactItems=items)
            outcomes[i] = "won"
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if code == "TransactionCanceledException" and reasons[0] == "ConditionalCheckFailed":
                outcomes[i] = "lost"
            else:
                outcomes[i] = f"error {code} {reasons}"
        except Exception as exc:  # an HTTP 500 or a dropped connection is a failure too
            outcomes[i] = f"error {exc!r}"

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


def fill_table(ddb: Any, count: int) -> None:
    for start in range(0, count, 25):
        batch = [
            {"PutRequest": {"Item": {"PK": {"S": f"FILL#{n}"}}}}
            for n in range(start, min(count, start + 25))
        ]
        ddb.batch_write_item(RequestItems={TABLE: batch})


def test_serialized_server_has_exactly_one_winner_per_race(dynaunique_db: str) -> None:
    ddb = client(dynaunique_db, pool=THREADS * 2)
    create_table(ddb)
    fill_table(ddb, FILL)
    for round_no in range(ROUNDS):
        outcomes = race_round(ddb, round_no)
        assert outcomes.count("won") == 1, outcomes
        assert outcomes.count("lost") == THREADS - 1, outcomes

        # All or nothing: the winner's record landed, and no loser's record did.
        lock = ddb.get_item(
            TableName=TABLE, Key={"PK": {"S": f"UNIQ#EMAIL#r{round_no}"}}, ConsistentRead=True
        )["Item"]
        winner = f"t{outcomes.index('won')}"
        assert lock["owner"] == {"S": winner}
        keys = [{"PK": {"S": f"REC#r{round_no}#t{i}"}} for i in range(THREADS)]
        found = ddb.batch_get_item(RequestItems={TABLE: {"Keys": keys, "ConsistentRead": True}})[
            "Responses"
        ][TABLE]
        assert [item["PK"]["S"] for item in found] == [f"REC#r{round_no}#{winner}"]


def test_context_manager_stops_the_server() -> None:
    with local_dynamodb() as endpoint:
        port = port_of(endpoint)
        assert client(endpoint).list_tables()["TableNames"] == []
    assert refuses_connections(port)


def test_server_is_stopped_when_the_block_raises() -> None:
    server = LocalDynamoDB()
    with pytest.raises(ZeroDivisionError), server as endpoint:
        assert server.running
        port = port_of(endpoint)
        1 / 0  # noqa: B018
    assert not server.running
    assert server.returncode is not None
    assert refuses_connections(port)
    server.stop()  # idempotent


def test_start_failure_reports_the_servers_stderr() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = LocalDynamoDB(port=taken.getsockname()[1])
        with pytest.raises(LocalServerError, match=r"exited before it was ready[\s\S]*stderr"):
            server.start()
    assert not server.running


def test_reset_of_an_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(LocalServerError, match="could not reset"):
        reset_local_dynamodb(f"http://127.0.0.1:{port}")


Widget = declare("Widget", "widgets", pk=pk_attr(), colour=UnicodeAttribute(null=True))

# A second model on the same table, as lock items and records share one.
WidgetAlias = declare("WidgetAlias", "widgets", pk=pk_attr())


@pytest.fixture
def widgets(dynaunique_db: str) -> Iterator[str]:
    saved = {m: (m.Meta.host, m.Meta.region) for m in (Widget, WidgetAlias)}
    use_endpoint(dynaunique_db, Widget, WidgetAlias)
    yield dynaunique_db
    for model, (host, region) in saved.items():
        model.Meta.host, model.Meta.region = host, region
        model._connection = None


def test_use_endpoint_and_create_tables(widgets: str) -> None:
    assert Widget.Meta.host == widgets
    assert Widget.Meta.region == "us-east-1"
    create_tables(Widget, WidgetAlias)  # one table for both
    create_tables(Widget)  # already there: no error
    Widget(pk="w1", colour="red").save()
    assert Widget.get("w1", consistent_read=True).colour == "red"
    assert WidgetAlias.get("w1", consistent_read=True).pk == "w1"
    assert client(widgets).list_tables()["TableNames"] == ["widgets"]


def test_use_endpoint_drops_a_cached_connection(widgets: str) -> None:
    create_tables(Widget)
    Widget(pk="w1").save()
    with local_dynamodb() as other:
        use_endpoint(other, Widget)
        assert not Widget.exists()  # a fresh server: the cached connection was not reused
        create_tables(Widget)
        assert list(Widget.scan()) == []
    use_endpoint(widgets, Widget)
    assert [w.pk for w in Widget.scan()] == ["w1"]


class _ByColour(GlobalSecondaryIndex["Gadget"]):
    class Meta:
        index_name = "by-colour"
        projection = AllProjection()

    colour = UnicodeAttribute(hash_key=True)


class _ByMade(LocalSecondaryIndex["Gadget"]):
    class Meta:
        index_name = "by-made"
        projection = KeysOnlyProjection()

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    made = UnicodeAttribute(range_key=True)


def _gadget(table: str) -> Any:
    """A model with everything CreateTable carries: a range key, both kinds of index, a stream,
    tags and a TTL attribute (UpdateTimeToLive after the create)."""
    return declare("Gadget", table, meta={"stream_view_type": "NEW_AND_OLD_IMAGES",
                                          "tags": {"team": "tests"}},
                   pk=pk_attr(), sk=UnicodeAttribute(range_key=True, attr_name="SK"),
                   colour=UnicodeAttribute(), made=UnicodeAttribute(),
                   expires=TTLAttribute(null=True), by_colour=_ByColour(), by_made=_ByMade())


def _description(ddb: Any, table: str) -> dict[str, Any]:
    """What a table was created with: DescribeTable without its name, ARNs, dates and sizes."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in {"TableName", "TableArn", "TableId", "CreationDateTime",
                                 "IndexArn", "LatestStreamArn", "LatestStreamLabel",
                                 "LastUpdateToPayPerRequestDateTime", "ItemCount",
                                 "TableSizeBytes", "IndexSizeBytes"}}
        if isinstance(value, list):
            return sorted((strip(v) for v in value), key=repr)
        return value
    return {"table": strip(ddb.describe_table(TableName=table)["Table"]),
            "ttl": ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"],
            "tags": ddb.list_tags_of_resource(ResourceArn=ddb.describe_table(
                TableName=table)["Table"]["TableArn"])["Tags"]}


def test_create_tables_sends_one_create_table_with_pynamodbs_arguments(dynaunique_db: str) -> None:
    """One CreateTable (and the TTL update) where PynamoDB's create_table(wait=True) sends a
    DescribeTable before and after; the table is the one PynamoDB would have created."""
    ours, theirs = _gadget("gadgets"), _gadget("gadgets-by-pynamodb")
    use_endpoint(dynaunique_db, ours, theirs)
    with requests_sent(ours._get_connection().connection.client) as sent:
        create_tables(ours)
    assert [operation for operation, _ in sent] == ["CreateTable", "UpdateTimeToLive"]
    theirs.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    ddb = client(dynaunique_db)
    assert _description(ddb, "gadgets") == _description(ddb, "gadgets-by-pynamodb")
    assert _description(ddb, "gadgets")["table"]["TableStatus"] == "ACTIVE"

    with requests_sent(ours._get_connection().connection.client) as sent:
        create_tables(ours)  # it exists: PynamoDB's create_table(wait=True) takes over
    assert [operation for operation, _ in sent] == [
        "CreateTable", "DescribeTable", "DescribeTable", "UpdateTimeToLive"]
