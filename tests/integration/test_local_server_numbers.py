"""The local server stores numbers as DynamoDB does, without insignificant zeros
(dynaunique.testing._numbers): ``1.0`` is ``1`` — read back, as a key, in a transaction, in a
batch — where stock moto kept the text it was sent (so ``1`` and ``1.0`` were two items).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from support.local_server import client

from dynaunique.testing._numbers import canonical_request, spelled

TABLE = "numbers"


@pytest.mark.parametrize(("sent", "stored"), [
    ("1.0", "1"), ("2.50", "2.5"), ("1E+2", "100"), ("-0.00", "0"), ("0.000123", "0.000123"),
    ("100", "100"), ("-7.10", "-7.1"), ("1e-3", "0.001"), ("not a number", "not a number"),
    ("1" + "0" * 38 + ".5", "1" + "0" * 38 + ".5"),   # 40 digits: left for the server to refuse
])
def test_a_number_is_spelled_as_dynamodb_stores_it(sent: str, stored: str) -> None:
    assert spelled(sent) == stored
    if stored != sent and stored[0] != "n":
        assert Decimal(stored) == Decimal(sent)


def test_every_typed_value_of_a_request_is_spelled() -> None:
    n = {"N": "1.0"}
    assert canonical_request({
        "TransactItems": [{"Put": {"Item": {"a": n, "m": {"M": {"x": {"L": [n]}}},
                                            "s": {"NS": ["2.0", "3"]}, "t": {"S": "1.0"}}}},
                          {"Update": {"Key": {"k": n}, "ExpressionAttributeValues": {":v": n}}}],
    }) == {"TransactItems": [
        {"Put": {"Item": {"a": {"N": "1"}, "m": {"M": {"x": {"L": [{"N": "1"}]}}},
                          "s": {"NS": ["2", "3"]}, "t": {"S": "1.0"}}}},
        {"Update": {"Key": {"k": {"N": "1"}}, "ExpressionAttributeValues": {":v": {"N": "1"}}}}]}
    assert canonical_request({"RequestItems": {"t": {"Keys": [{"k": n}]}}}) == {
        "RequestItems": {"t": {"Keys": [{"k": {"N": "1"}}]}}}
    assert canonical_request({"RequestItems": {"t": [{"PutRequest": {"Item": {"k": n}}}]}}) == {
        "RequestItems": {"t": [{"PutRequest": {"Item": {"k": {"N": "1"}}}}]}}


@pytest.fixture
def ddb(dynaunique_db: str) -> Any:
    raw = client(dynaunique_db)
    raw.create_table(TableName=TABLE, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "N"}],
                     BillingMode="PAY_PER_REQUEST")
    return raw


def test_the_server_stores_and_keys_numbers_without_insignificant_zeros(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={"k": {"N": "1.0"}, "v": {"N": "2.50"},
                                        "m": {"M": {"x": {"N": "3.00"}}}})
    assert ddb.get_item(TableName=TABLE, Key={"k": {"N": "1"}}, ConsistentRead=True)["Item"] == {
        "k": {"N": "1"}, "v": {"N": "2.5"}, "m": {"M": {"x": {"N": "3"}}}}
    ddb.transact_write_items(TransactItems=[{"Put": {
        "TableName": TABLE, "Item": {"k": {"N": "1.00"}, "v": {"N": "4"}}}}])
    items = ddb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    assert items == [{"k": {"N": "1"}, "v": {"N": "4"}}]   # one item, not two
