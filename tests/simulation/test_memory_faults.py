"""The in-memory model's pages, batches, tokens and injectable faults: exact answers."""

from __future__ import annotations

from typing import Any

import botocore.exceptions
import pytest

from dynaunique._transport.connection import Request

from .memory import TOKEN_WINDOW, Fault, MemoryDynamoDB

T = "t"


def _db(n: int = 0) -> MemoryDynamoDB:
    db = MemoryDynamoDB({T: ("PK", "SK")})
    for i in range(n):
        db.handle("PutItem", {"TableName": T, "Item": _item(i)})
    return db


def _item(i: int, sk: str = "A") -> dict[str, Any]:
    return {"PK": {"S": f"R{i}"}, "SK": {"S": sk}, "v": {"N": str(i)}}


def _key(i: int, sk: str = "A") -> dict[str, Any]:
    return {"PK": {"S": f"R{i}"}, "SK": {"S": sk}}


def _refusal(call: Any) -> dict[str, Any]:
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        call()
    response = dict(refused.value.response)
    response.pop("ResponseMetadata")
    return response


def test_a_scan_reads_pages_of_limit_items_in_key_order_with_filter_and_projection() -> None:
    db = _db(5)
    page = db.handle("Scan", {"TableName": T, "Limit": 2, "FilterExpression": "#v >= :two",
                              "ProjectionExpression": "#v", "ExpressionAttributeNames": {"#v": "v"},
                              "ExpressionAttributeValues": {":two": {"N": "1"}}})
    assert page == {"Count": 1, "ScannedCount": 2, "Items": [{"v": {"N": "1"}}],
                    "LastEvaluatedKey": _key(1)}
    rest = db.handle("Scan", {"TableName": T, "Limit": 3, "ExclusiveStartKey": _key(1),
                              "Select": "COUNT"})
    # It stopped at Limit on the last item: DynamoDB still says where (the next page is empty).
    assert rest == {"Count": 3, "ScannedCount": 3, "LastEvaluatedKey": _key(4)}
    assert db.handle("Scan", {"TableName": T, "ExclusiveStartKey": _key(4)}) == {
        "Count": 0, "ScannedCount": 0, "Items": []}


def test_scan_segments_split_the_table_by_hash_key() -> None:
    db = _db(8)
    segments = [[i["PK"]["S"] for i in db.handle("Scan", {
        "TableName": T, "Segment": s, "TotalSegments": 3})["Items"]] for s in range(3)]
    assert sorted(pk for segment in segments for pk in segment) == [f"R{i}" for i in range(8)]
    # The local server's split (moto: the first byte of the MD5 of the key's text, modulo 3).
    assert segments == [["R4", "R5", "R6"], ["R1"], ["R0", "R2", "R3", "R7"]]


def test_a_query_reads_one_partition_in_range_key_order_both_ways() -> None:
    db = _db(2)
    for sk in ("C", "B"):
        db.handle("PutItem", {"TableName": T, "Item": _item(1, sk)})
    params = {"TableName": T, "KeyConditionExpression": "#p = :p AND #s > :a",
              "ExpressionAttributeNames": {"#p": "PK", "#s": "SK"},
              "ExpressionAttributeValues": {":p": {"S": "R1"}, ":a": {"S": "A"}}}
    forward = db.handle("Query", params)
    assert [i["SK"]["S"] for i in forward["Items"]] == ["B", "C"]
    backward = db.handle("Query", {**params, "ScanIndexForward": False, "Limit": 1})
    assert backward == {"Count": 1, "ScannedCount": 1, "Items": [_item(1, "C")],
                        "LastEvaluatedKey": _key(1, "C")}
    assert db.handle("Query", {**params, "ScanIndexForward": False,
                               "ExclusiveStartKey": _key(1, "C")})["Items"] == [_item(1, "B")]


def test_batch_get_answers_found_items_and_the_unprocessed_keys_a_fault_chooses() -> None:
    db = _db(3)
    request = {"RequestItems": {T: {"Keys": [_key(0), _key(9), _key(2)],
                                    "ConsistentRead": True}}}
    assert db.handle("BatchGetItem", request) == {"Responses": {T: [_item(0), _item(2)]},
                                                  "UnprocessedKeys": {}}
    assert db.handle("BatchGetItem", request, fault=Fault.unprocessed(keep=1)) == {
        "Responses": {T: [_item(0)]},
        "UnprocessedKeys": {T: {"ConsistentRead": True, "Keys": [_key(9), _key(2)]}}}


def test_batch_write_applies_only_what_a_fault_leaves_processed() -> None:
    db = _db(2)
    writes = [{"DeleteRequest": {"Key": _key(0)}}, {"PutRequest": {"Item": _item(5)}}]
    assert db.handle("BatchWriteItem", {"RequestItems": {T: writes}},
                     fault=Fault.unprocessed(keep=1)) == {"UnprocessedItems": {T: [writes[1]]}}
    assert db.get(T, _key(0)) is None and db.get(T, _key(5)) is None


def test_transact_get_reads_each_item_or_nothing() -> None:
    db = _db(1)
    assert db.handle("TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": T, "Key": _key(0)}}, {"Get": {"TableName": T, "Key": _key(7)}}]}
    ) == {"Responses": [{"Item": _item(0)}, {}]}


def _transaction(token: str, i: int = 3) -> dict[str, Any]:
    return {"ClientRequestToken": token, "TransactItems": [
        {"Put": {"TableName": T, "Item": _item(i),
                 "ConditionExpression": "attribute_not_exists(#p)",
                 "ExpressionAttributeNames": {"#p": "PK"}}}]}


def test_an_injected_conflict_cancels_everything_and_leaves_the_token_unused() -> None:
    db = _db()
    two = _transaction("tok")
    two["TransactItems"].append({"Put": {"TableName": T, "Item": _item(4)}})
    refused = _refusal(lambda: db.handle("TransactWriteItems", two, fault=Fault.conflict(1)))
    assert refused == {"Error": {"Code": "TransactionCanceledException", "Message": (
        "Transaction cancelled, please refer cancellation reasons for specific reasons "
        "[None, TransactionConflict]")}, "CancellationReasons": [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}]}
    assert db.get(T, _key(3)) is None and db.tokens == {}
    assert db.handle("TransactWriteItems", two) == {}
    assert db.get(T, _key(4)) == _item(4)


def test_a_token_repeats_its_answer_for_ten_minutes_then_is_forgotten() -> None:
    db = _db()
    assert db.handle("TransactWriteItems", _transaction("tok")) == {}
    db.handle("DeleteItem", {"TableName": T, "Key": _key(3)})
    assert db.handle("TransactWriteItems", _transaction("tok")) == {}   # not applied again
    assert db.get(T, _key(3)) is None
    mismatch = _refusal(lambda: db.handle("TransactWriteItems", _transaction("tok", 4)))
    assert mismatch["Error"]["Code"] == "IdempotentParameterMismatchException"
    db.advance(TOKEN_WINDOW)
    assert db.handle("TransactWriteItems", _transaction("tok", 4)) == {}  # a new request now
    assert db.get(T, _key(4)) == _item(4)


@pytest.mark.parametrize(("code", "status"), [
    ("ProvisionedThroughputExceededException", 400), ("ThrottlingException", 400),
    ("InternalServerError", 500)])
def test_a_refusal_fault_applies_nothing(code: str, status: int) -> None:
    db = _db()
    request = Request(None, "PutItem", {"TableName": T, "Item": _item(0)})  # type: ignore[arg-type]
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        db.answer(request, fault=Fault.refuse(code))
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert db.get(T, _key(0)) is None
    assert db.answer(request) == {}
    conflict = _refusal(lambda: db.answer(request, fault=Fault.conflict()))
    assert conflict["Error"]["Code"] == "TransactionConflictException"


def test_the_snapshot_holds_items_and_live_tokens() -> None:
    db = _db()
    empty = db.snapshot()
    db.handle("TransactWriteItems", _transaction("tok"))
    db.handle("DeleteItem", {"TableName": T, "Key": _key(3)})
    assert db.snapshot() != empty     # the token still changes what a resend does
    db.advance(TOKEN_WINDOW)
    assert db.snapshot() == empty
