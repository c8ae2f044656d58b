"""The local server's compiled response serializer (dynaunique.testing._moto_json) against moto's
own, differentially: every success response of a wide script of requests (every operation the
tests send, every attribute type, numbers, binaries, empty results, pagination keys, projections,
return values, indexes, consumed capacity), and of a sample of the recorded corpus (every 40th
case; every 4th with ``-m slow``), is serialized both ways from the same result, and the two
must be the same bytes, status and headers.

moto runs in this process, behind its own WSGI app (werkzeug's test client, no socket), with the
compiled serializer in front of moto's: each response is serialized by moto's ``_serialize_result``
(which is what the client gets) and by the compiled one, and the pair is kept for the assertions.
moto's functions are put back after each test.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynaunique.testing import _moto_json

CORPUS = Path(__file__).resolve().parents[1] / "simulation" / "corpus.jsonl.gz"
_AUTH = ("AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/dynamodb/aws4_request, "
         "SignedHeaders=host, Signature=0")


class Shadow:
    """moto's DynamoDB app in this process; each response serialized by moto and compiled."""

    def __init__(self) -> None:
        from moto.moto_server import werkzeug_app
        from werkzeug.test import Client

        self.client = Client(werkzeug_app.DomainDispatcherApplication(
            werkzeug_app.create_backend_app))
        self.pairs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        self.handed_to_moto: list[str] = []  # the operations the compiled walk did not take
        self.operation = ""

    def send(self, operation: str, request: dict[str, Any]) -> tuple[int, Any]:
        self.operation = operation
        response = self.client.post("/", data=json.dumps(request), headers={
            "X-Amz-Target": f"DynamoDB_20120810.{operation}", "Authorization": _AUTH,
            "Content-Type": "application/x-amz-json-1.0", "Host": "127.0.0.1"})
        return response.status_code, json.loads(response.get_data() or b"{}")

    def reset(self) -> None:
        self.client.post("/moto-api/reset")


@pytest.fixture
def shadow(monkeypatch: pytest.MonkeyPatch) -> Iterator[Shadow]:
    from moto.core.serialize import JSONSerializer

    original = JSONSerializer._serialize_result
    compiled = _moto_json.serialize_result(original)
    server = Shadow()

    def both(self: Any, resp: dict[str, Any], result: Any) -> Any:
        expected = original(self, copy.deepcopy(resp), result)
        before = dict(_moto_json.STATS)
        actual = compiled(self, copy.deepcopy(resp), result)
        if _moto_json.STATS["fast"] == before["fast"]:
            server.handed_to_moto.append(server.operation)
        else:
            # (a copy: moto adds its request id to the headers of what it is returned)
            server.pairs.append((server.operation, copy.deepcopy(expected), actual))
        return expected

    monkeypatch.setattr(JSONSerializer, "_serialize_result", both)
    server.reset()
    yield server
    server.reset()


def _assert_identical(pairs: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> None:
    for operation, expected, actual in pairs:
        assert actual == expected, operation
        assert actual["body"].encode() == expected["body"].encode(), operation


def _binary(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


ITEM = {
    "PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "GSI": {"S": "g1"}, "LSI": {"N": "7"},
    "s": {"S": "héllo ☃ \"quoted\" \\ slash"}, "empty": {"S": ""},
    "n": {"N": "-12.500"}, "big": {"N": "12345678901234567890123456789012345678"},
    "small": {"N": "1E-130"}, "b": {"B": _binary(b"\x00\xff binary")}, "eb": {"B": ""},
    "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5", "-3"]},
    "bs": {"BS": [_binary(b"\x01"), _binary(b"\x02\x03")]},
    "m": {"M": {"inner": {"S": "x"}, "deep": {"M": {"l": {"L": [{"N": "1"}, {"NULL": True}]}}},
                "em": {"M": {}}}},
    "l": {"L": [{"S": "x"}, {"BOOL": False}, {"B": _binary(b"\x07")}, {"L": []},
                {"SS": ["z"]}, {"M": {"k": {"BOOL": True}}}]},
    "null": {"NULL": True}, "t": {"BOOL": True}, "f": {"BOOL": False},
}


def _table(shadow: Shadow) -> None:
    status, _ = shadow.send("CreateTable", {
        "TableName": "t",
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"},
                      {"AttributeName": "SK", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in
                                 (("PK", "S"), ("SK", "S"), ("GSI", "S"), ("LSI", "N"))],
        "GlobalSecondaryIndexes": [{
            "IndexName": "by-gsi", "KeySchema": [{"AttributeName": "GSI", "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["s", "n"]}}],
        "LocalSecondaryIndexes": [{
            "IndexName": "by-lsi", "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"},
                                                 {"AttributeName": "LSI", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"}}],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        "BillingMode": "PAY_PER_REQUEST",
        "Tags": [{"Key": "team", "Value": "core"}],
    })
    assert status == 200


def _key(pk: str, sk: str = "PROFILE") -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def test_every_operation_and_attribute_type_serializes_as_moto_does(shadow: Shadow) -> None:
    send = shadow.send
    _table(shadow)
    send("CreateTable", {"TableName": "plain", "BillingMode": "PROVISIONED",
                         "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                         "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "B"}],
                         "ProvisionedThroughput": {"ReadCapacityUnits": 5,
                                                   "WriteCapacityUnits": 2}})
    send("DescribeTable", {"TableName": "t"})
    send("DescribeTable", {"TableName": "plain"})
    send("ListTables", {})
    send("ListTables", {"Limit": 1})
    send("ListTables", {"Limit": 1, "ExclusiveStartTableName": "plain"})
    for capacity in ("NONE", "TOTAL", "INDEXES"):
        send("PutItem", {"TableName": "t", "Item": ITEM, "ReturnConsumedCapacity": capacity})
    send("PutItem", {"TableName": "t", "Item": {**ITEM, "n": {"N": "3"}},
                     "ReturnValues": "ALL_OLD"})
    send("PutItem", {"TableName": "plain", "Item": {"id": {"B": _binary(b"\x10key")},
                                                    "v": {"N": "0"}}})
    for n in range(12):
        send("PutItem", {"TableName": "t", "Item": {**_key(f"ACCT#{n % 3}", f"R#{n:03}"),
                                                    "GSI": {"S": f"g{n % 2}"},
                                                    "LSI": {"N": str(n)}, "n": {"N": str(n)}}})
    send("GetItem", {"TableName": "t", "Key": _key("ACCT#1")})
    send("GetItem", {"TableName": "t", "Key": _key("ACCT#1"), "ConsistentRead": True,
                     "ReturnConsumedCapacity": "TOTAL"})
    send("GetItem", {"TableName": "t", "Key": _key("nobody")})
    send("GetItem", {"TableName": "t", "Key": _key("ACCT#1"),
                     "ProjectionExpression": "#s, m.deep, l[1], b", "ExpressionAttributeNames":
                         {"#s": "s"}})
    send("GetItem", {"TableName": "plain", "Key": {"id": {"B": _binary(b"\x10key")}}})
    for returned in ("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"):
        send("UpdateItem", {"TableName": "t", "Key": _key("ACCT#1"),
                            "UpdateExpression": "SET n = n + :one, ss = :ss REMOVE empty",
                            "ExpressionAttributeValues": {":one": {"N": "1"},
                                                          ":ss": {"SS": ["c"]}},
                            "ReturnValues": returned, "ReturnConsumedCapacity": "INDEXES"})
    send("UpdateItem", {"TableName": "t", "Key": _key("ACCT#new"),
                        "UpdateExpression": "SET v = :v", "ReturnValues": "ALL_NEW",
                        "ExpressionAttributeValues": {":v": {"L": []}}})
    send("UpdateItem", {"TableName": "t", "Key": _key("ACCT#1"),  # a failed condition
                        "UpdateExpression": "SET v = :v", "ConditionExpression": "n = :v",
                        "ExpressionAttributeValues": {":v": {"N": "-1"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    send("BatchGetItem", {"RequestItems": {"t": {"Keys": [
        _key("ACCT#1"), _key("nobody"), _key("ACCT#0", "R#000")]}}})
    send("BatchGetItem", {"RequestItems": {"t": {"Keys": [_key("ACCT#1")],
                                                 "ProjectionExpression": "PK, ns, bs"},
                                           "plain": {"Keys": [{"id": {"B": _binary(b"none")}}]}},
                          "ReturnConsumedCapacity": "TOTAL"})
    send("BatchWriteItem", {"RequestItems": {"t": [
        {"PutRequest": {"Item": {**_key(f"BW#{n}"), "v": {"N": str(n)}}}} for n in range(5)]
        + [{"DeleteRequest": {"Key": _key("ACCT#0", "R#003")}}]},
        "ReturnConsumedCapacity": "TOTAL", "ReturnItemCollectionMetrics": "SIZE"})
    pages: list[dict[str, Any]] = [{}]
    for request in (
        {"KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {
            ":p": {"S": "ACCT#1"}}},
        {"KeyConditionExpression": "PK = :p", "Limit": 2, "ScanIndexForward": False,
         "ExpressionAttributeValues": {":p": {"S": "ACCT#1"}}},
        {"KeyConditionExpression": "PK = :p AND begins_with(SK, :r)", "Select": "COUNT",
         "ExpressionAttributeValues": {":p": {"S": "ACCT#2"}, ":r": {"S": "R#"}}},
        {"IndexName": "by-gsi", "KeyConditionExpression": "GSI = :g", "Limit": 3,
         "ExpressionAttributeValues": {":g": {"S": "g1"}}},
        {"IndexName": "by-lsi", "KeyConditionExpression": "PK = :p AND LSI > :n",
         "ExpressionAttributeValues": {":p": {"S": "ACCT#1"}, ":n": {"N": "2"}}},
        {"KeyConditionExpression": "PK = :p", "FilterExpression": "n > :n",
         "ProjectionExpression": "SK, n", "ReturnConsumedCapacity": "TOTAL",
         "ExpressionAttributeValues": {":p": {"S": "ACCT#2"}, ":n": {"N": "4"}}},
        {"KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {
            ":p": {"S": "nobody"}}},
    ):
        status, answer = send("Query", {"TableName": "t", **request})
        assert status == 200, answer
    start: dict[str, Any] | None = None
    while True:  # a paginated scan: LastEvaluatedKey on every page but the last
        status, page = send("Scan", {"TableName": "t", "Limit": 4,
                                     **({"ExclusiveStartKey": start} if start else {})})
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if start is None:
            break
    assert len(pages) > 3
    for request in ({"Segment": 0, "TotalSegments": 2}, {"Segment": 1, "TotalSegments": 2},
                    {"Select": "COUNT"}, {"FilterExpression": "attribute_exists(bs)"},
                    {"IndexName": "by-gsi"}, {"ReturnConsumedCapacity": "INDEXES"}):
        send("Scan", {"TableName": "t", **request})
    send("Scan", {"TableName": "plain"})
    send("TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": "t", "Key": _key("ACCT#1")}},
        {"Get": {"TableName": "t", "Key": _key("nobody")}},
        {"Get": {"TableName": "t", "Key": _key("ACCT#1"), "ProjectionExpression": "m"}}],
        "ReturnConsumedCapacity": "TOTAL"})
    send("TransactWriteItems", {"TransactItems": [
        {"Put": {"TableName": "t", "Item": {**_key("TX#1"), "v": {"S": "x"}},
                 "ConditionExpression": "attribute_not_exists(PK)"}},
        {"Update": {"TableName": "t", "Key": _key("ACCT#1"), "UpdateExpression": "SET w = :w",
                    "ExpressionAttributeValues": {":w": {"BOOL": True}}}},
        {"Delete": {"TableName": "t", "Key": _key("BW#0")}},
        {"ConditionCheck": {"TableName": "t", "Key": _key("BW#1"),
                            "ConditionExpression": "attribute_exists(PK)"}}]})
    status, _ = send("TransactWriteItems", {"TransactItems": [  # cancelled: an error answer
        {"Put": {"TableName": "t", "Item": {**_key("TX#1"), "v": {"S": "y"}},
                 "ConditionExpression": "attribute_not_exists(PK)",
                 "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}]})
    assert status == 400
    for n in range(3):
        send("DeleteItem", {"TableName": "t", "Key": _key(f"BW#{n + 2}"),
                            "ReturnValues": "ALL_OLD" if n else "NONE",
                            "ReturnConsumedCapacity": "TOTAL"})
    send("DeleteItem", {"TableName": "t", "Key": _key("nobody"), "ReturnValues": "ALL_OLD"})
    send("UpdateTimeToLive", {"TableName": "t", "TimeToLiveSpecification": {
        "Enabled": True, "AttributeName": "expires"}})
    send("DescribeTimeToLive", {"TableName": "t"})
    send("DescribeContinuousBackups", {"TableName": "t"})
    arn = send("DescribeTable", {"TableName": "t"})[1]["Table"]["TableArn"]
    send("ListTagsOfResource", {"ResourceArn": arn})
    send("UpdateTable", {"TableName": "plain", "ProvisionedThroughput": {
        "ReadCapacityUnits": 6, "WriteCapacityUnits": 3}})
    send("DescribeLimits", {})
    send("DescribeEndpoints", {})
    send("DeleteTable", {"TableName": "plain"})
    send("GetItem", {"TableName": "missing", "Key": _key("x")})  # errors: moto's, untouched

    operations = {operation for operation, _, _ in shadow.pairs}
    assert shadow.handed_to_moto == []
    assert {"CreateTable", "DescribeTable", "ListTables", "PutItem", "GetItem", "UpdateItem",
            "DeleteItem", "BatchGetItem", "BatchWriteItem", "Query", "Scan",
            "TransactGetItems", "TransactWriteItems", "DeleteTable", "UpdateTable",
            "DescribeTimeToLive", "UpdateTimeToLive"} <= operations
    _assert_identical(shadow.pairs)


def _corpus_cases(every: int) -> list[list[dict[str, Any]]]:
    cases: list[list[dict[str, Any]]] = []
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            if "case" in entry:
                cases.append([])
            elif "op" in entry and cases:
                cases[-1].append(entry)
    return cases[::every]


@pytest.mark.parametrize("every", [
    pytest.param(40, id="every 40th case"),
    pytest.param(4, id="every 4th case", marks=pytest.mark.slow),
])
def test_the_recorded_corpus_serializes_as_moto_does(shadow: Shadow, every: int) -> None:
    requests = 0
    for case in _corpus_cases(every):
        shadow.reset()
        for entry in case:
            shadow.send(entry["op"], entry["request"])
            requests += 1
    assert requests > 4000 // every
    assert shadow.handed_to_moto == []
    assert len(shadow.pairs) > requests // 2
    _assert_identical(shadow.pairs)
