"""dynaunique._transport.wire.FastPath against the local server: the same parsed answers and the
same errors as botocore's full path, for every operation the library sends.

Each request goes both ways on the library's own client — botocore's ``BaseClient._make_api_call``
and the fast path — on the same state (reads), or on two records holding the same values
(writes); answers are compared whole but for what differs per request by nature (the request id
and the response's HTTP headers: date, id, length).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.declare import declare
from support.fence import require_fast_path

from dynaunique._transport import botocore as _botocore
from dynaunique._transport import clients
from dynaunique._transport import wire as _wire
from dynaunique.attributes import BinaryAttribute, UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint

Blobs = declare("Blobs", "fastpath_blobs", pk=UnicodeAttribute(hash_key=True),
                blob=BinaryAttribute(null=True, legacy_encoding=False))

_T = "fastpath_blobs"
_ITEM = {"blob": {"B": b"\x00\xff"}, "bs": {"BS": [b"\x01", b"\x02\x03"]},
         "m": {"M": {"x": {"L": [{"B": b"\x00"}, {"N": "1.50"}, {"NULL": True}]},
                     "s": {"SS": ["a", "b"]}, "t": {"BOOL": False}}}}


def _key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}}


def _same(answer: Any) -> Any:
    if isinstance(answer, ClientError):
        response = dict(answer.response)
        return type(answer), str(answer).replace(
            response["ResponseMetadata"].get("RequestId", "?"), ""), _same(response)
    if "Attributes" in answer:   # the two records of a write differ in their key only
        answer = {**answer, "Attributes": {k: v for k, v in answer["Attributes"].items()
                                           if k != "pk"}}
    meta = dict(answer.get("ResponseMetadata", {}))
    meta.pop("RequestId", None)
    meta["HTTPHeaders"] = sorted(meta.get("HTTPHeaders", {}))
    return {**answer, "ResponseMetadata": meta}


@pytest.fixture
def client(dynaunique_db: str) -> Any:
    require_fast_path()
    use_endpoint(dynaunique_db, Blobs)
    create_tables(Blobs)
    made = clients.client_for(Blobs)
    assert isinstance(made.__dict__["_make_api_call"], _wire.FastPath)
    return made


def _both(client: Any, operation: str, slow: dict[str, Any], fast: dict[str, Any] | None = None
          ) -> Any:
    answers = []
    path = client.__dict__["_make_api_call"]
    assert path.begin(operation, dict(fast or slow)) is not None, operation
    for call, params in ((lambda o, p: _botocore.ORIGINAL_CALL(client, o, p), slow),
                         (path, fast or slow)):
        try:
            answers.append(call(operation, dict(params)))
        except ClientError as exc:
            answers.append(exc)
    assert _same(answers[0]) == _same(answers[1]), operation
    return answers[1]


def test_answers_and_errors_are_botocores(client: Any) -> None:
    for pk in ("a", "b"):
        client._make_api_call("PutItem", {"TableName": _T, "Item": {**_key(pk), **_ITEM}})
    read = _both(client, "GetItem", {"TableName": _T, "Key": _key("a"), "ConsistentRead": True,
                                     "ReturnConsumedCapacity": "TOTAL"})
    assert read["Item"]["blob"] == {"B": b"\x00\xff"}
    assert read["Item"]["m"]["M"]["x"]["L"][0] == {"B": b"\x00"}

    def put(pk: str) -> dict[str, Any]:
        return {"TableName": _T, "Item": {**_key(pk), **_ITEM, "n": {"N": "2"}},
                "ReturnValues": "ALL_OLD"}

    _both(client, "PutItem", put("a"), put("b"))
    refused = _both(client, "PutItem", {
        **put("a"), "ConditionExpression": "attribute_not_exists(pk)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    assert isinstance(refused, ClientError)
    assert refused.response["Error"]["Code"] == "ConditionalCheckFailedException"

    def update(pk: str) -> dict[str, Any]:
        return {"TableName": _T, "Key": _key(pk), "UpdateExpression": "SET #b = :b",
                "ExpressionAttributeNames": {"#b": "b2"},
                "ExpressionAttributeValues": {":b": {"B": b"\x09"}}, "ReturnValues": "ALL_NEW"}

    assert _both(client, "UpdateItem", update("a"), update("b"))["Attributes"]["b2"] == {
        "B": b"\x09"}
    cancelled = _both(client, "TransactWriteItems", {"TransactItems": [
        {"Put": {"TableName": _T, "Item": {**_key("a"), **_ITEM},
                 "ConditionExpression": "attribute_not_exists(pk)",
                 "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"ConditionCheck": {"TableName": _T, "Key": _key("b"),
                            "ConditionExpression": "attribute_exists(pk)"}}],
        "ClientRequestToken": "t-26"})
    assert isinstance(cancelled, ClientError)
    reasons = cancelled.response["CancellationReasons"]
    assert reasons[0]["Code"] == "ConditionalCheckFailed"
    assert reasons[0]["Item"]["blob"] == {"B": b"\x00\xff"}
    _both(client, "Query", {"TableName": _T, "KeyConditionExpression": "pk = :p",
                            "ExpressionAttributeValues": {":p": {"S": "a"}}})
    _both(client, "Scan", {"TableName": _T, "Limit": 1})
    _both(client, "BatchGetItem", {"RequestItems": {_T: {"Keys": [_key("a"), _key("b")],
                                                         "ConsistentRead": True}}})
    _both(client, "TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": _T, "Key": _key("a")}}, {"Get": {"TableName": _T,
                                                                "Key": _key("zz")}}]})
    _both(client, "BatchWriteItem", {"RequestItems": {_T: [
        {"PutRequest": {"Item": {**_key("c"), **_ITEM}}}]}})
    _both(client, "DeleteItem", {"TableName": _T, "Key": _key("zz"),
                                 "ConditionExpression": "attribute_exists(pk)"})

    def delete(pk: str) -> dict[str, Any]:
        return {"TableName": _T, "Key": _key(pk), "ReturnValues": "ALL_OLD"}

    _both(client, "DeleteItem", delete("a"), delete("b"))
    missing = _both(client, "GetItem", {"TableName": "no_such_table", "Key": _key("a")})
    assert isinstance(missing, ClientError)
    assert missing.response["Error"]["Code"] == "ResourceNotFoundException"
