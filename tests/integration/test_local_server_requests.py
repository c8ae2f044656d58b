"""Requests DynamoDB refuses, sent to the local server over HTTP: each gets DynamoDB's recorded
answer (tests/support/recorded_answers.py, from the public conformance suite), and what DynamoDB
accepts at its real limits is accepted — the audit's 100-item TransactGetItems and the
migrations' batches of 100 keys and 25 writes included.

The client sends each request as it is (botocore's own parameter validation is off, as the
JavaScript SDK's is), so the server's rules are what refuses it.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from support.declare import declare, pk_attr
from support.recorded_answers import CASES, COMPOSITE, HASH, Case
from support.recorders import requests_sent

from dynaunique._transport.clients import connection_for
from dynaunique.attributes import UnicodeAttribute
from dynaunique.audit._reads import _MAX_RECORDS_PER_READ, _read_key
from dynaunique.audit._tables import _Meter, _tables
from dynaunique.migrations._dynamo import batch_delete, batch_get
from dynaunique.testing import create_tables, use_endpoint

#: DynamoDB's limit of items in a TransactGetItems (the audit reads a lock and 99 records).
LOOKUP_BATCH = 100


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    """A client that sends what it is given, against a server holding HASH and COMPOSITE."""
    ddb = boto3.client("dynamodb", endpoint_url=dynaunique_db, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing",
                       config=Config(parameter_validation=False,
                                     retries={"total_max_attempts": 1}))
    ddb.create_table(TableName=HASH, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    ddb.create_table(
        TableName=COMPOSITE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"}
                              for n in ("pk", "sk", "l")],
        LocalSecondaryIndexes=[{"IndexName": "by_l", "Projection": {"ProjectionType": "ALL"},
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "l", "KeyType": "RANGE"}]}])
    return ddb


def send(ddb: Any, operation: str, request: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = ddb._make_api_call(operation, request)
    return result


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_server_answers_as_dynamodb(raw: Any, case: Case) -> None:
    with pytest.raises(ClientError) as raised:
        send(raw, case.operation, case.request)
    response = raised.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert (response["Error"]["Code"], response["Error"]["Message"]) == (case.code, case.message)
    # nothing was written
    assert raw.scan(TableName=HASH)["Items"] == []


Wide = declare("Wide", "wide_audit", pk=pk_attr(), email=UnicodeAttribute(unique=True))


def test_the_audit_reads_a_lock_and_99_records_in_one_transact_get(raw: Any,
                                                                     dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, Wide)
    create_tables(Wide)
    Wide(pk="u00", email="u00@x.io").save()  # a record and its lock, written by the library
    # 98 more records (raw, in batches: saving each costs seconds), as the audit would find them
    # when many records claim one value.
    records = [{"PutRequest": {"Item": {"PK": {"S": f"u{n:02}"}, "email": {"S": "u00@x.io"}}}}
               for n in range(1, _MAX_RECORDS_PER_READ)]
    for start in range(0, len(records), 25):
        raw.batch_write_item(RequestItems={"wide_audit": records[start:start + 25]})
    table = _tables([Wide])[0]
    records = [{"PK": {"S": f"u{n:02}"}} for n in range(_MAX_RECORDS_PER_READ)]
    meter = _Meter()
    raw_items = raw.scan(TableName="wide_audit")["Items"]
    lock = next(i["PK"]["S"] for i in raw_items if i["PK"]["S"].endswith("#u00@x.io"))
    lock_item, read = _read_key(table, lock, records, meter)
    assert meter.cost().requests == (("TransactGetItems", 1),)
    assert lock_item is not None and lock_item["PK"]["S"] == lock
    assert len(read) == _MAX_RECORDS_PER_READ == LOOKUP_BATCH - 1
    assert all(record is not None for record in read)


def test_a_batch_get_of_100_keys_and_a_batch_write_of_25_are_answered(raw: Any) -> None:
    raw.batch_write_item(RequestItems={HASH: [{"PutRequest": {"Item": {"pk": {"S": f"w{n}"}}}}
                                              for n in range(25)]})
    answer = raw.batch_get_item(RequestItems={HASH: {"Keys": [{"pk": {"S": f"w{n}"}}
                                                              for n in range(100)]}})
    assert sorted(item["pk"]["S"] for item in answer["Responses"][HASH]) == sorted(
        f"w{n}" for n in range(25))


def test_return_item_collection_metrics_size_on_a_table_with_a_local_index(raw: Any) -> None:
    item = {"pk": {"S": "p"}, "sk": {"S": "s"}, "l": {"S": "v"}}
    put = raw.put_item(TableName=COMPOSITE, Item=item, ReturnItemCollectionMetrics="SIZE")
    assert put["ItemCollectionMetrics"] == {"ItemCollectionKey": {"pk": {"S": "p"}},
                                            "SizeEstimateRangeGB": [0.0, 1.0]}
    deleted = raw.delete_item(TableName=COMPOSITE, Key={"pk": {"S": "p"}, "sk": {"S": "s"}},
                              ReturnItemCollectionMetrics="SIZE")
    assert deleted["ItemCollectionMetrics"]["ItemCollectionKey"] == {"pk": {"S": "p"}}
    plain = raw.put_item(TableName=HASH, Item={"pk": {"S": "p"}},
                         ReturnItemCollectionMetrics="SIZE")
    assert "ItemCollectionMetrics" not in plain


@pytest.mark.parametrize(("operation", "request_", "message"), [
    ("GetItem", {"TableName": COMPOSITE, "Key": {"pk": {"S": "p"}}},
     "The provided key element does not match the schema"),
    ("UpdateItem", {"TableName": HASH, "Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET a = :v",
                    "ExpressionAttributeNames": {"#unused": "x"},
                    "ExpressionAttributeValues": {":v": {"S": "1"}}},
     "Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}"),
])
def test_moto_s_messages_are_worded_as_dynamodb_s(raw: Any, operation: str,
                                                   request_: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientError) as raised:
        send(raw, operation, request_)
    assert raised.value.response["Error"]["Message"] == message


def test_numbers_at_the_edges_of_the_range_are_stored(raw: Any) -> None:
    big = "9.9999999999999999999999999999999999999E+125"
    raw.put_item(TableName=HASH, Item={"pk": {"S": "n"}, "big": {"N": big},
                                       "small": {"N": "1E-130"}, "digits": {"N": "1" * 38}})
    item = raw.get_item(TableName=HASH, Key={"pk": {"S": "n"}})["Item"]
    assert json.loads(json.dumps([item["digits"]["N"]])) == ["1" * 38]
    assert float(item["big"]["N"]) == float(big)


def test_a_batch_is_judged_by_the_key_of_the_table_as_it_is_now(raw: Any) -> None:
    # The server remembers a table's key names; deleting and re-creating it must not keep them.
    writes = [{"PutRequest": {"Item": {"pk": {"S": "a"}, "sk": {"S": str(n)}}}} for n in (1, 2)]
    with pytest.raises(ClientError, match="Provided list of item keys contains duplicates"):
        raw.batch_write_item(RequestItems={HASH: writes})
    raw.delete_table(TableName=HASH)
    raw.create_table(TableName=HASH, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"}],
                     AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"}
                                           for n in ("pk", "sk")])
    raw.batch_write_item(RequestItems={HASH: writes})
    assert len(raw.scan(TableName=HASH)["Items"]) == 2


# --- moto's expression functions, answered as DynamoDB answers (testing/_moto_exprs.py) ----------
# The suite's tier1/scan/filterOperators.test.ts, tier1/query/expressions.test.ts and
# tier1/getItem/projection.test.ts recorded these answers.


def _put_items(raw: Any, *items: dict[str, Any]) -> None:
    for item in items:
        raw.put_item(TableName=COMPOSITE, Item={"pk": {"S": "p"}, **item})


def test_begins_with_on_binary_values_compares_their_bytes(raw: Any) -> None:
    _put_items(raw, {"sk": {"S": "1"}, "bin": {"B": b"\x01\x02\x03"}},
               {"sk": {"S": "2"}, "bin": {"B": b"\x02\x01"}}, {"sk": {"S": "3"}})
    found = raw.scan(TableName=COMPOSITE, FilterExpression="begins_with(bin, :p)",
                     ExpressionAttributeValues={":p": {"B": b"\x01\x02"}})["Items"]
    assert [item["sk"]["S"] for item in found] == ["1"]


def test_size_of_an_attribute_an_item_lacks_makes_the_comparison_false(raw: Any) -> None:
    _put_items(raw, {"sk": {"S": "1"}, "bin": {"B": b"\x01\x02\x03\x04\x05"}},
               {"sk": {"S": "2"}, "bin": {"B": b"\x01"}}, {"sk": {"S": "3"}})
    found = raw.query(TableName=COMPOSITE, KeyConditionExpression="pk = :p",
                      FilterExpression="size(#b) > :n", ExpressionAttributeNames={"#b": "bin"},
                      ExpressionAttributeValues={":p": {"S": "p"}, ":n": {"N": "3"}})["Items"]
    assert [item["sk"]["S"] for item in found] == ["1"]


def test_a_projection_reaches_a_list_element_through_an_expression_name(raw: Any) -> None:
    _put_items(raw, {"sk": {"S": "1"}, "mylist": {"L": [{"S": "zero"}, {"S": "one"}]},
                     "m": {"M": {"n": {"S": "deep"}, "o": {"S": "other"}}}})
    got = raw.get_item(TableName=COMPOSITE, Key={"pk": {"S": "p"}, "sk": {"S": "1"}},
                       ProjectionExpression="#l[0]", ExpressionAttributeNames={"#l": "mylist"})
    assert got["Item"] == {"mylist": {"L": [{"S": "zero"}]}}
    queried = raw.query(TableName=COMPOSITE, KeyConditionExpression="pk = :p",
                        ProjectionExpression="#m.#n, #l[1]",
                        ExpressionAttributeNames={"#m": "m", "#n": "n", "#l": "mylist"},
                        ExpressionAttributeValues={":p": {"S": "p"}})
    assert queried["Items"] == [{"m": {"M": {"n": {"S": "deep"}}}, "mylist": {"L": [{"S": "one"}]}}]


def test_the_migrations_batches_are_sent_at_dynamodb_s_limits(raw: Any,
                                                               dynaunique_db: str) -> None:
    # migrations/_dynamo.py: BatchGetItem in chunks of 100 keys, BatchWriteItem of 25 deletes.
    use_endpoint(dynaunique_db, Wide)
    create_tables(Wide)
    keys = [{"PK": {"S": f"k{n:03}"}} for n in range(200)]
    for start in range(0, 200, 25):
        raw.batch_write_item(RequestItems={"wide_audit": [
            {"PutRequest": {"Item": key}} for key in keys[start:start + 25]]})
    connection = connection_for(Wide)
    with requests_sent(connection.client) as sent:
        found = batch_get(connection, "wide_audit", keys)
        batch_delete(connection, "wide_audit", keys[:50])
    assert sorted(item["PK"]["S"] for item in found) == [f"k{n:03}" for n in range(200)]
    assert [(operation, len(body["RequestItems"]["wide_audit"]["Keys"]
                            if operation == "BatchGetItem" else body["RequestItems"]["wide_audit"]))
            for operation, body in sent] == [("BatchGetItem", 100), ("BatchGetItem", 100),
                                             ("BatchWriteItem", 25), ("BatchWriteItem", 25)]
    assert len(raw.scan(TableName="wide_audit")["Items"]) == 150
