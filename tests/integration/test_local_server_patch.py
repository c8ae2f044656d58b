"""The moto patch (dynaunique.testing._moto_patch): it fits the installed moto, the server runs
with it, it fails loudly when moto moves, and it answers exactly as stock moto does.

The last point is checked differentially: one script of requests (transactions that land, that are
cancelled after writing, that are refused mid-way; paginated and segmented scans, queries with
limits and start keys, deletes between pages) runs against a stock-moto server and against the
patched one, and the two transcripts must be equal.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.local_server import client, create_table, server_state

from dynaunique.testing import LocalDynamoDB, LocalServerError

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external


def test_the_server_runs_the_patched_moto(dynaunique_db: str) -> None:
    state = server_state(dynaunique_db)
    assert state["moto"] == importlib.metadata.version("moto")
    assert state["moto_patched"] is True


def test_stock_moto_server_is_reported_unpatched(stock_endpoint: str) -> None:
    assert server_state(stock_endpoint)["moto_patched"] is False  # (a GET: the server stays fresh)


def test_a_server_refuses_to_start_when_the_patch_does_not_fit(tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    # A sitecustomize in the child breaks one signature before the server patches moto.
    (tmp_path / "sitecustomize.py").write_text(
        "from moto.dynamodb.models.table import Table\n"
        "Table.delete_item = lambda self, key: None\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(LocalServerError, match=r"MotoPatchError[\s\S]*Table\.delete_item takes"):
        LocalDynamoDB(startup_timeout=30).start()


# --- same answers as stock moto -------------------------------------------------------------------


@pytest.fixture(scope="module")
def stock_endpoint() -> Iterator[str]:
    with LocalDynamoDB(stock_moto=True) as endpoint:
        yield endpoint


def answer(call: Any, **kwargs: Any) -> dict[str, Any]:
    """A request's answer without its request id: the response, or the error's code and body."""
    try:
        response = dict(call(**kwargs))
    except ClientError as exc:
        response = {"error": exc.response["Error"], **{
            k: v for k, v in exc.response.items() if k not in ("Error", "ResponseMetadata")}}
        response["error"] = {k: v for k, v in response["error"].items() if k != "Message"} | {
            "Message": exc.response["Error"].get("Message")}
    response.pop("ResponseMetadata", None)
    return response


def pages(ddb: Any, operation: str, **kwargs: Any) -> list[dict[str, Any]]:
    call = getattr(ddb, operation)
    out = []
    while True:
        page = answer(call, **kwargs)
        out.append(page)
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def put(table: str, pk: str, sk: str | None = None, **attrs: str) -> dict[str, Any]:
    item = {"PK": {"S": pk}, **{k: {"S": v} for k, v in attrs.items()}}
    if sk is not None:
        item["SK"] = {"S": sk}
    return {"Put": {"TableName": table, "Item": item}}


def update(table: str, pk: str, value: dict[str, str], **extra: str) -> dict[str, Any]:
    """An Update that sets ``v`` on a hash-only table's item."""
    return {"Update": {"TableName": table, "Key": {"PK": {"S": pk}},
                       "UpdateExpression": "SET v = :v",
                       "ExpressionAttributeValues": {":v": value}, **extra}}


def script(endpoint: str) -> list[Any]:
    """Run the same requests on a fresh server; return everything it answered."""
    ddb = client(endpoint)
    create_table(ddb, "pairs", range_key=True)
    create_table(ddb, "singles")
    for n in range(40):
        ddb.put_item(TableName="pairs", Item={"PK": {"S": f"P{n % 7}"}, "SK": {"S": f"S{n:02}"},
                                              "v": {"N": str(n)}})
        ddb.put_item(TableName="singles", Item={"PK": {"S": f"K{n:02}"}, "v": {"N": str(n)}})
    out: list[Any] = []
    tx = ddb.transact_write_items
    # Lands: a put, an update, a delete and a condition check across both tables.
    out.append(answer(tx, TransactItems=[
        put("pairs", "P1", "NEW", w="x"),
        update("singles", "K03", {"S": "y"}),
        {"Delete": {"TableName": "singles", "Key": {"PK": {"S": "K04"}}}},
        {"ConditionCheck": {"TableName": "pairs", "Key": {"PK": {"S": "P2"}, "SK": {"S": "S02"}},
                            "ConditionExpression": "attribute_exists(PK)"}},
    ]))
    # Cancelled by its last item, after the others were written: every one is undone.
    out.append(answer(tx, TransactItems=[
        put("pairs", "P1", "NEWER"),
        put("singles", "K05", v="replaced"),
        update("singles", "K06", {"N": "0"}),
        {"Delete": {"TableName": "pairs", "Key": {"PK": {"S": "P0"}, "SK": {"S": "S00"}}}},
        update("singles", "NOPE", {"N": "1"}, ConditionExpression="attribute_exists(PK)"),
        {"Put": {"TableName": "singles", "Item": {"PK": {"S": "K07"}},
                 "ConditionExpression": "attribute_not_exists(PK)",
                 "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
    ]))
    # Refused mid-way (two operations on one item): what was written before is undone.
    out.append(answer(tx, TransactItems=[
        put("singles", "K08", v="first"),
        put("singles", "MID"),
        put("singles", "K08", v="again"),
    ]))
    for table in ("pairs", "singles"):
        out.append(pages(ddb, "scan", TableName=table, Limit=7))
        out.append(pages(ddb, "scan", TableName=table, Limit=5, Segment=1, TotalSegments=3))
        out.append(pages(ddb, "scan", TableName=table, Limit=4,
                         FilterExpression="v > :v", ExpressionAttributeValues={":v": {"N": "20"}}))
    for forward in (True, False):
        out.append(pages(ddb, "query", TableName="pairs", Limit=2, ScanIndexForward=forward,
                         KeyConditionExpression="PK = :p",
                         ExpressionAttributeValues={":p": {"S": "P3"}}))
    out.append(pages(ddb, "query", TableName="pairs", KeyConditionExpression="PK = :p AND SK > :s",
                     ExpressionAttributeValues={":p": {"S": "P1"}, ":s": {"S": "S10"}}))
    out.append(pages(ddb, "query", TableName="singles", KeyConditionExpression="PK = :p",
                     ExpressionAttributeValues={":p": {"S": "K09"}}))
    out.append(pages(ddb, "query", TableName="singles", KeyConditionExpression="PK = :p",
                     ExpressionAttributeValues={":p": {"S": "absent"}}))
    # Deletes and inserts between the pages of one scan.
    first = answer(ddb.scan, TableName="singles", Limit=10)
    ddb.delete_item(TableName="singles", Key=first["LastEvaluatedKey"])
    ddb.delete_item(TableName="singles", Key={"PK": {"S": "K15"}})
    ddb.put_item(TableName="singles", Item={"PK": {"S": "K125"}})
    out.append([first, *pages(ddb, "scan", TableName="singles", Limit=10,
                              ExclusiveStartKey=first["LastEvaluatedKey"])])
    out.append(answer(ddb.scan, TableName="singles", ExclusiveStartKey={"PK": {"S": "K33x"}}))
    # Incomplete keys: moto's own answers, whatever they are.
    out.append(answer(ddb.scan, TableName="pairs", Limit=3, ExclusiveStartKey={"PK": {"S": "P3"}}))
    out.append(answer(ddb.update_item, TableName="pairs", Key={"PK": {"S": "P1"}},
                      UpdateExpression="SET w = :w", ExpressionAttributeValues={":w": {"S": "z"}}))
    return out


def test_patched_server_answers_exactly_as_stock_moto(
        dynaunique_db: str, stock_endpoint: str) -> None:
    patched = script(dynaunique_db)
    stock = script(stock_endpoint)
    assert patched == stock
    # The script is not vacuous: the cancelled transaction changed nothing it had written.
    cancelled = patched[1]
    assert cancelled["error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in cancelled["CancellationReasons"]]
    assert reasons == ["None", "None", "None", "None", "ConditionalCheckFailed",
                       "ConditionalCheckFailed"]
    ddb = client(dynaunique_db)
    assert ddb.get_item(TableName="singles", Key={"PK": {"S": "K06"}})["Item"]["v"] == {"N": "6"}
    assert ddb.get_item(TableName="singles", Key={"PK": {"S": "K05"}})["Item"]["v"] == {"N": "5"}
    assert "Item" in ddb.get_item(TableName="pairs", Key={"PK": {"S": "P0"}, "SK": {"S": "S00"}})
    assert "Item" not in ddb.get_item(TableName="singles", Key={"PK": {"S": "NOPE"}})
    assert "Item" not in ddb.get_item(TableName="singles", Key={"PK": {"S": "MID"}})
    assert ddb.get_item(TableName="singles", Key={"PK": {"S": "K08"}})["Item"]["v"] == {"N": "8"}


def resident_megabytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_cancelled_transactions_do_not_grow_the_servers_memory() -> None:
    # Stock moto keeps ~0.4 MB per cancelled transaction on this table (measured: 208, 325 and
    # 442 MB after 300, 600 and 900); the undo log keeps nothing.
    server = LocalDynamoDB()
    with server as endpoint:
        assert server.pid is not None
        ddb = client(endpoint)
        create_table(ddb, "mem")
        for start in range(0, 300, 25):  # 300 items, 25 a request
            ddb.batch_write_item(RequestItems={"mem": [
                {"PutRequest": {"Item": {"PK": {"S": f"F{n}"}, "pad": {"S": "x" * 500}}}}
                for n in range(start, start + 25)]})
        doomed = [put("mem", "new"), {"ConditionCheck": {
            "TableName": "mem", "Key": {"PK": {"S": "F1"}},
            "ConditionExpression": "attribute_not_exists(PK)"}}]
        sizes = []
        for _ in range(3):
            for _ in range(200):
                assert answer(ddb.transact_write_items, TransactItems=doomed)["error"]["Code"] == (
                    "TransactionCanceledException")
            sizes.append(resident_megabytes(server.pid))
    assert sizes[-1] - sizes[0] < 15, sizes


# --- stream records: the patch keeps moto's shard as moto keeps it --------------------------------


def stream_script(endpoint: str) -> list[Any]:
    """Writes on a table with a NEW_AND_OLD_IMAGES stream; then its records, without what
    differs between two runs (event ids, times)."""
    import boto3

    ddb = client(endpoint)
    create_table(ddb, "streamed")
    ddb.update_table(TableName="streamed", StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    ddb.put_item(TableName="streamed", Item={"PK": {"S": "A"}, "v": {"N": "1"}})
    ddb.put_item(TableName="streamed", Item={"PK": {"S": "A"}, "v": {"N": "2"}})
    ddb.update_item(TableName="streamed", Key={"PK": {"S": "A"}}, UpdateExpression="SET w = :w",
                    ExpressionAttributeValues={":w": {"S": "x"}})
    # Refused: the update would make the item larger than DynamoDB allows.
    out: list[Any] = [answer(ddb.update_item, TableName="streamed", Key={"PK": {"S": "A"}},
                             UpdateExpression="SET big = :b",
                             ExpressionAttributeValues={":b": {"S": "x" * 500_000}})["error"]
                      ["Code"]]
    tx = ddb.transact_write_items
    out.append(answer(tx, TransactItems=[put("streamed", "B"), update("streamed", "A",
                                                                      {"S": "t"})]))
    out.append(answer(tx, TransactItems=[  # cancelled after writing
        put("streamed", "C"), update("streamed", "B", {"S": "u"}),
        update("streamed", "NOPE", {"N": "1"}, ConditionExpression="attribute_exists(PK)")])
        ["error"]["Code"])
    out.append(answer(tx, TransactItems=[put("streamed", "D"), put("streamed", "D")])
               ["error"]["Code"])  # refused mid-way
    ddb.delete_item(TableName="streamed", Key={"PK": {"S": "B"}})
    arn = ddb.describe_table(TableName="streamed")["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    for record in streams.get_records(ShardIterator=iterator)["Records"]:
        data = record["dynamodb"]
        out.append((record["eventName"], data["SequenceNumber"], data["Keys"],
                    data.get("OldImage"), data.get("NewImage")))
    return out


def test_the_patched_server_keeps_the_stream_records_stock_moto_keeps(
        dynaunique_db: str, stock_endpoint: str) -> None:
    patched = stream_script(dynaunique_db)
    assert patched == stream_script(stock_endpoint)
    events = [(entry[0], entry[2]["PK"]["S"]) for entry in patched[4:]]
    # Every write that landed, once, in order; nothing of the refused or cancelled ones.
    assert events == [("INSERT", "A"), ("MODIFY", "A"), ("MODIFY", "A"), ("INSERT", "B"),
                      ("MODIFY", "A"), ("REMOVE", "B")]
