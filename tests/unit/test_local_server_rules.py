"""The local server's DynamoDB rules without a server: attribute and item sizes, and each rule
that refuses a request or mends an answer as DynamoDB does."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from support.recorded_answers import CASES, COMPOSITE, HASH, Case

from dynaunique.testing._answer_rules import amend, reworded
from dynaunique.testing._request_rules import check_request
from dynaunique.testing._server_rules import attribute_value_size, item_size
from dynaunique.testing._value_rules import Refusal


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "abc"}, 3),
        ({"S": "é€"}, 5),  # UTF-8 bytes, not characters
        ({"N": "123.45"}, 4),  # 5 significant digits: 3 bytes, plus 1
        ({"N": "100"}, 2),  # trailing zeroes do not count
        ({"N": "0.001"}, 2),  # nor leading ones
        ({"N": "-12345678901"}, 7),
        ({"N": "1.5E+10"}, 2),
        ({"B": base64.b64encode(b"\x00\x01\x02\x03").decode()}, 4),  # decoded bytes
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"SS": ["a", "bc"]}, 3),
        ({"NS": ["1", "22", "333"]}, 2 + 2 + 3),
        ({"L": [{"S": "a"}, {"N": "1"}]}, 3 + (1 + 1) + (1 + 2)),
        ({"M": {"ab": {"S": "c"}}}, 3 + 1 + 2 + 1),
        ({"L": []}, 3),
        ({"M": {"x": {"L": [{"NULL": True}]}}}, 3 + 1 + 1 + (3 + 1 + 1)),
    ],
)
def test_attribute_value_size(value: dict[str, Any], size: int) -> None:
    assert attribute_value_size(value) == size


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"PK": {"S": "k"}, "count": {"N": "42"}}) == (2 + 1) + (5 + 2)


# --- DynamoDB's refusals, each rule against the answer DynamoDB recorded (support/recorded_answers)


KEYS = {HASH: ("pk",), COMPOSITE: ("pk", "sk")}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_rule_refuses_as_dynamodb(case: Case) -> None:
    with pytest.raises(Refusal) as raised:
        check_request(case.operation, case.request, KEYS.get)
    assert (raised.value.code, raised.value.message) == (case.code, case.message)


def test_an_empty_key_cancels_a_transact_get_with_a_reason_per_item() -> None:
    with pytest.raises(Refusal) as raised:
        check_request("TransactGetItems", {"TransactItems": [
            {"Get": {"TableName": HASH, "Key": {"pk": {"S": "a"}}}},
            {"Get": {"TableName": HASH, "Key": {}}}]}, KEYS.get)
    message = ("Transaction cancelled, please refer cancellation reasons for specific reasons "
               "[None, ValidationError]")
    assert raised.value.extra == {"Message": message, "CancellationReasons": [
        {"Code": "None"},
        {"Code": "ValidationError",
         "Message": "The provided key element does not match the schema"}]}
    assert raised.value.message == message


def _writes(count: int, table: str = HASH) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": {"pk": {"S": f"{table}{n}"}}}} for n in range(count)]


@pytest.mark.parametrize(("operation", "request_"), [
    # every limit is the real one: at the limit, accepted
    ("BatchWriteItem", {"RequestItems": {HASH: _writes(25)}}),
    ("BatchGetItem", {"RequestItems": {HASH: {"Keys": [{"pk": {"S": f"g{n}"}}
                                                       for n in range(100)]}}}),
    ("TransactGetItems", {"TransactItems": [{"Get": {"TableName": HASH,
                                                     "Key": {"pk": {"S": f"g{n}"}}}}
                                            for n in range(100)]}),
    ("TransactWriteItems", {"TransactItems": [{"ConditionCheck": {
        "TableName": HASH, "Key": {"pk": {"S": f"c{n}"}},
        "ConditionExpression": "attribute_not_exists(pk)"}} for n in range(100)]}),
    # one key in two tables, or two items of one partition, are not duplicates
    ("BatchWriteItem", {"RequestItems": {HASH: _writes(1, "x"), COMPOSITE: [
        {"PutRequest": {"Item": {"pk": {"S": "p"}, "sk": {"S": "1"}}}},
        {"DeleteRequest": {"Key": {"pk": {"S": "p"}, "sk": {"S": "2"}}}}]}}),
    ("TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": HASH, "Key": {"pk": {"S": "k"}}}},
        {"Get": {"TableName": COMPOSITE, "Key": {"pk": {"S": "k"}, "sk": {"S": "k"}}}}]}),
    # numbers at the edges of DynamoDB's range, and a set of numbers spelled apart
    ("PutItem", {"TableName": HASH, "Item": {
        "pk": {"S": "k"}, "big": {"N": "9.9999999999999999999999999999999999999E+125"},
        "small": {"N": "-1E-130"}, "digits": {"N": "1" * 38}, "zero": {"N": "0E+999"},
        "set": {"NS": ["1", "2.5", "-9.9999999999999999999999999999999999999E+125"]}}}),
    ("Query", {"TableName": HASH, "KeyConditionExpression": "#p = :v", "Limit": 1,
               "ExpressionAttributeNames": {"#p": "pk"},
               "ExpressionAttributeValues": {":v": {"S": "k"}}}),
    ("Scan", {"TableName": "a.b-c_1", "Segment": 3, "TotalSegments": 4}),
    ("GetItem", {"TableName": HASH, "Key": {"pk": {"S": "k"}},
                 "ProjectionExpression": " #m.#n, #l[1][2],a_b.c0 ",
                 "ExpressionAttributeNames": {"#m": "m", "#n": "n", "#l": "l"}}),
    ("PutItem", {"TableName": "arn:aws:dynamodb:us-east-1:123456789012:table/t",
                 "Item": {"pk": {"S": "k"}, "null": {"NULL": True}, "s": {"SS": ["a", "A"]}}}),
])
def test_what_dynamodb_accepts_passes_every_rule(operation: str, request_: dict[str, Any]) -> None:
    check_request(operation, request_, KEYS.get)


def test_a_batch_of_one_table_unknown_to_the_server_is_left_to_moto() -> None:
    writes = [{"PutRequest": {"Item": {"pk": {"S": "d"}}}},
              {"DeleteRequest": {"Key": {"pk": {"S": "d"}}}}]
    check_request("BatchWriteItem", {"RequestItems": {"missing": writes}}, KEYS.get)


@pytest.mark.parametrize(("moto", "dynamodb"), [
    ("1 validation error detected: Value provided in ExpressionAttributeNames unused in "
     "expressions: keys: {#unused}",
     "Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}"),
    ("1 validation error detected: Invalid UpdateExpression: The expression can not be empty;",
     "Invalid UpdateExpression: The expression can not be empty;"),
    ("1 validation error detected: One or more parameter values were invalid: An number set  "
     "may not be empty", "One or more parameter values were invalid: An number set  may not be "
     "empty"),
    ("Validation Exception", "The provided key element does not match the schema"),
    # DynamoDB's own prefixed messages are left alone
    ("1 validation error detected: Value 'INVALID' at 'select' failed to satisfy constraint: x",
     "1 validation error detected: Value 'INVALID' at 'select' failed to satisfy constraint: x"),
])
def test_moto_s_words_are_put_back_as_dynamodb_s(moto: str, dynamodb: str) -> None:
    assert reworded(moto) == dynamodb
    body = json.dumps({"__type": "x#ValidationException", "message": moto}).encode()
    amended = amend("UpdateItem", {}, "400 Bad Request", body, lambda table: None)
    assert (json.loads(amended)["message"] if amended is not None else moto) == dynamodb


def test_item_collection_metrics_come_back_for_a_table_with_a_local_index() -> None:
    described = {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                               {"AttributeName": "sk", "KeyType": "RANGE"}],
                 "LocalSecondaryIndexes": [{"IndexName": "l"}]}
    request = {"TableName": COMPOSITE, "Key": {"pk": {"S": "p"}, "sk": {"S": "s"}},
               "ReturnItemCollectionMetrics": "SIZE"}
    amended = amend("DeleteItem", request, "200 OK", b"{}", {COMPOSITE: described}.get)
    assert amended is not None
    assert json.loads(amended) == {"ItemCollectionMetrics": {
        "ItemCollectionKey": {"pk": {"S": "p"}}, "SizeEstimateRangeGB": [0.0, 1.0]}}
    # no local index, NONE, or another operation: nothing added
    plain = {**described, "LocalSecondaryIndexes": []}
    assert amend("DeleteItem", request, "200 OK", b"{}", {COMPOSITE: plain}.get) is None
    assert amend("DeleteItem", {**request, "ReturnItemCollectionMetrics": "NONE"}, "200 OK",
                 b"{}", {COMPOSITE: described}.get) is None
    assert amend("GetItem", request, "200 OK", b"{}", {COMPOSITE: described}.get) is None
