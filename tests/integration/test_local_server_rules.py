"""DynamoDB's rules on the local server (dynaunique.testing._server_rules): item sizes, limits,
ClientRequestToken idempotency and the injected-conflict knob — sizes as pure functions, the rest
end to end over HTTP with boto3 against the session's server.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.declare import declare, pk_attr
from support.local_server import client, create_table, server_state
from support.tables import raw_items

from dynaunique import TransactionTooLargeError, aio, atomic
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import (
    LocalServerError,
    create_tables,
    reset_local_dynamodb,
    set_conflict_rate,
    set_token_window,
    use_endpoint,
)
from dynaunique.testing._server_rules import MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, item_size

TABLE = "rules"

# --- sizes, as DynamoDB counts them -------------------------------------------------------------


# --- limits ---------------------------------------------------------------------------------------


@pytest.fixture
def ddb(dynaunique_db: str) -> Any:
    raw = client(dynaunique_db)
    create_table(raw, TABLE)
    return raw


def error_of(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


def keys_in(ddb: Any) -> list[str]:
    pages = ddb.get_paginator("scan").paginate(TableName=TABLE, ConsistentRead=True)
    return sorted(item["PK"]["S"] for page in pages for item in page["Items"])


def item_of_size(pk: str, size: int) -> dict[str, Any]:
    """An item DynamoDB counts as exactly ``size`` bytes: ``PK`` plus a string ``pad``."""
    fixed = item_size({"PK": {"S": pk}, "pad": {"S": ""}})
    return {"PK": {"S": pk}, "pad": {"S": "x" * (size - fixed)}}


def test_item_of_400_kb_is_accepted_and_one_byte_more_refused(ddb: Any) -> None:
    exact = item_of_size("exact", MAX_ITEM_BYTES)
    assert item_size(exact) == 409_600
    ddb.put_item(TableName=TABLE, Item=exact)
    got = ddb.get_item(TableName=TABLE, Key={"PK": {"S": "exact"}}, ConsistentRead=True)
    assert got["Item"] == exact
    too_big = item_of_size("big", MAX_ITEM_BYTES + 1)
    refused = ("ValidationException", "Item size has exceeded the maximum allowed size")
    assert error_of(ddb.put_item, TableName=TABLE, Item=too_big) == refused
    assert error_of(ddb.batch_write_item,
                    RequestItems={TABLE: [{"PutRequest": {"Item": too_big}}]}) == refused
    assert error_of(ddb.transact_write_items,
                    TransactItems=[{"Put": {"TableName": TABLE, "Item": too_big}}]) == refused
    assert keys_in(ddb) == ["exact"]


def test_an_update_may_not_grow_an_item_past_400_kb(ddb: Any) -> None:
    item = item_of_size("grow", MAX_ITEM_BYTES - 10)
    ddb.put_item(TableName=TABLE, Item=item)
    code, message = error_of(
        ddb.update_item, TableName=TABLE, Key={"PK": {"S": "grow"}},
        UpdateExpression="SET more = :m", ExpressionAttributeValues={":m": {"S": "y" * 20}},
    )
    assert (code, message) == (
        "ValidationException", "Item size to update has exceeded the maximum allowed size"
    )
    got = ddb.get_item(TableName=TABLE, Key={"PK": {"S": "grow"}}, ConsistentRead=True)
    assert got["Item"] == item
    ddb.update_item(  # growing up to the limit is fine
        TableName=TABLE, Key={"PK": {"S": "grow"}},
        UpdateExpression="SET m = :m", ExpressionAttributeValues={":m": {"S": "y" * 9}},
    )


def check(pk: str) -> dict[str, Any]:
    return {"ConditionCheck": {"TableName": TABLE, "Key": {"PK": {"S": pk}},
                               "ConditionExpression": "attribute_not_exists(PK)"}}


def test_a_transaction_has_at_most_100_actions(ddb: Any) -> None:
    ddb.transact_write_items(TransactItems=[check(f"c{n}") for n in range(99)]
                             + [{"Put": {"TableName": TABLE, "Item": {"PK": {"S": "in"}}}}])
    code, message = error_of(
        ddb.transact_write_items,
        TransactItems=[check(f"c{n}") for n in range(100)]
        + [{"Put": {"TableName": TABLE, "Item": {"PK": {"S": "out"}}}}],
    )
    assert code == "ValidationException"
    assert message.endswith("Member must have length less than or equal to 100")
    assert keys_in(ddb) == ["in"]


def test_a_transaction_carries_at_most_4_mb(ddb: Any) -> None:
    # Ten 400 KB items are 4,096,000 bytes, under 4 MB (4,194,304); an eleventh goes over.
    puts = [{"Put": {"TableName": TABLE, "Item": item_of_size(f"p{n:02}", MAX_ITEM_BYTES)}}
            for n in range(11)]
    assert error_of(ddb.transact_write_items, TransactItems=puts) == (
        "ValidationException", "Transaction request cannot be larger than 4 MB"
    )
    assert keys_in(ddb) == []
    ddb.transact_write_items(TransactItems=puts[:10])
    assert len(keys_in(ddb)) == 10


# --- strings must be valid UTF-8 -----------------------------------------------------------------

NOT_UTF8 = ("ValidationException", "One or more parameter values were invalid: a string is not "
            "valid UTF-8 (it holds a lone surrogate)")
LONE = "ada\ud800"

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "a value": ("put_item", {"TableName": TABLE, "Item": {"PK": {"S": "k"}, "v": {"S": LONE}}}),
    "the key": ("put_item", {"TableName": TABLE, "Item": {"PK": {"S": LONE}}}),
    "a name": ("put_item", {"TableName": TABLE, "Item": {"PK": {"S": "k"}, LONE: {"S": "v"}}}),
    "a set in a map in a list": ("put_item", {"TableName": TABLE, "Item": {
        "PK": {"S": "k"}, "l": {"L": [{"M": {"s": {"SS": ["ok", "\udfff"]}}}]}}}),
    "an update's value": ("update_item", {
        "TableName": TABLE, "Key": {"PK": {"S": "k"}}, "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"S": LONE}}}),
    "a read's key": ("get_item", {"TableName": TABLE, "Key": {"PK": {"S": LONE}}}),
    "a transaction": ("transact_write_items", {"TransactItems": [
        {"Put": {"TableName": TABLE, "Item": {"PK": {"S": "t1"}}}},
        {"Put": {"TableName": TABLE, "Item": {"PK": {"S": "t2"}, "v": {"S": LONE}}}}]}),
    "a batch": ("batch_write_item", {"RequestItems": {TABLE: [
        {"PutRequest": {"Item": {"PK": {"S": "b1"}}}},
        {"PutRequest": {"Item": {"PK": {"S": "b2"}, "v": {"S": LONE}}}}]}}),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_a_string_that_is_not_utf8_is_refused_anywhere_in_a_request(ddb: Any, case: str) -> None:
    """botocore sends a lone surrogate as a JSON ``\\ud800`` escape, which decodes to a string
    UTF-8 cannot encode: DynamoDB refuses it, so does the local server, and nothing is
    written."""
    operation, params = REQUESTS[case]
    assert error_of(getattr(ddb, operation), **params) == NOT_UTF8
    assert keys_in(ddb) == []


def test_valid_text_that_looks_like_a_surrogate_is_accepted(ddb: Any) -> None:
    """A surrogate pair (an emoji, escaped as two ``\\udXXX``) is one valid character; a
    backslash followed by "ud800" is plain text."""
    item = {"PK": {"S": "k"}, "emoji": {"S": "\U0001f600"}, "text": {"S": "\\ud800"}}
    ddb.put_item(TableName=TABLE, Item=item)
    assert ddb.get_item(TableName=TABLE, Key={"PK": {"S": "k"}},
                        ConsistentRead=True)["Item"] == item


# --- the library's 4 MB guard and the server agree, byte for byte ---------------------------------

Padded = declare("Padded", "rules_padded", pk=pk_attr(), pad=UnicodeAttribute())
#: 4 MiB of items: ten of 400,000 bytes and one of 194,304 ("PK" + "p00" + "pad" + the pad).
SIZES = [400_000] * 10 + [194_304]


def padded(sizes: list[int]) -> list[Any]:
    """Records whose items DynamoDB counts as exactly ``sizes`` bytes (ASCII: a byte a char)."""
    return [Padded(pk=f"p{n:02}", pad="x" * (size - len("PK") - 3 - len("pad")))
            for n, size in enumerate(sizes)]


def _commit(how: str, records: list[Any]) -> None:
    if how == "atomic":
        with atomic():
            for record in records:
                record.save()
        return

    async def run() -> None:
        try:
            async with atomic():
                for record in records:
                    await record.asave()
        finally:
            await aio.close()

    asyncio.run(run())


@pytest.mark.parametrize("how", ["atomic", "async atomic"])
def test_the_library_sends_exactly_4_mb_of_items_and_refuses_one_byte_more(
        dynaunique_db: str, how: str) -> None:
    """DynamoDB counts the items' sizes, not the request's bytes: a transaction of exactly
    4 MiB of items is sent (and the server, counting as DynamoDB does, applies it); one more
    byte is refused before anything is sent."""
    assert sum(SIZES) == MAX_TRANSACTION_BYTES == 4 * 1024 * 1024
    use_endpoint(dynaunique_db, Padded)
    create_tables(Padded)
    over = [*SIZES[:-1], SIZES[-1] + 1]
    with pytest.raises(TransactionTooLargeError) as refused:
        _commit(how, padded(over))
    assert (refused.value.items, refused.value.size_bytes) == (11, MAX_TRANSACTION_BYTES + 1)
    assert str(refused.value) == (
        "the transaction would have 11 items and 4194305 bytes of items; DynamoDB allows at "
        "most 100 items and 4194304 bytes. Nothing was sent: split the work into smaller "
        "atomic() blocks yourself if they need not be all-or-nothing.")
    assert raw_items(Padded) == []
    _commit(how, padded(SIZES))
    assert sorted(item["PK"]["S"] for item in raw_items(Padded)) == [
        f"p{n:02}" for n in range(11)]


def test_a_batch_write_has_at_most_25_requests(ddb: Any) -> None:
    def batch(count: int, prefix: str) -> list[dict[str, Any]]:
        return [{"PutRequest": {"Item": {"PK": {"S": f"{prefix}{n:02}"}}}} for n in range(count)]

    ddb.batch_write_item(RequestItems={TABLE: batch(25, "a")})
    code, message = error_of(ddb.batch_write_item, RequestItems={TABLE: batch(26, "b")})
    assert code == "ValidationException"
    assert "Member must have length less than or equal to 25" in message
    create_table(ddb, "other")
    assert error_of(ddb.batch_write_item,
                    RequestItems={TABLE: batch(13, "c"), "other": batch(13, "d")}) == (
        "ValidationException", "Too many items requested for the BatchWriteItem call"
    )
    assert len(keys_in(ddb)) == 25


# --- ClientRequestToken ---------------------------------------------------------------------------


def bump(pk: str, by: int = 1) -> dict[str, Any]:
    return {"Update": {"TableName": TABLE, "Key": {"PK": {"S": pk}},
                       "UpdateExpression": "ADD n :by",
                       "ExpressionAttributeValues": {":by": {"N": str(by)}}}}


def count_of(ddb: Any, pk: str) -> int | None:
    item = ddb.get_item(TableName=TABLE, Key={"PK": {"S": pk}}, ConsistentRead=True).get("Item")
    return None if item is None else int(item["n"]["N"])


def test_a_resend_with_the_same_token_is_not_applied_again(ddb: Any) -> None:
    token = str(uuid.uuid4())
    first = ddb.transact_write_items(TransactItems=[bump("a"), bump("b")],
                                     ClientRequestToken=token)
    again = ddb.transact_write_items(TransactItems=[bump("a"), bump("b")],
                                     ClientRequestToken=token)
    assert (count_of(ddb, "a"), count_of(ddb, "b")) == (1, 1)
    assert {k: v for k, v in again.items() if k != "ResponseMetadata"} == {
        k: v for k, v in first.items() if k != "ResponseMetadata"
    }
    # Without a token, or with another, the same request is a new one.
    ddb.transact_write_items(TransactItems=[bump("a"), bump("b")])
    ddb.transact_write_items(TransactItems=[bump("a"), bump("b")],
                             ClientRequestToken=str(uuid.uuid4()))
    assert (count_of(ddb, "a"), count_of(ddb, "b")) == (3, 3)


def test_the_same_token_with_another_body_is_a_mismatch(ddb: Any) -> None:
    token = str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    code, _ = error_of(ddb.transact_write_items, TransactItems=[bump("a", by=2)],
                       ClientRequestToken=token)
    assert code == "IdempotentParameterMismatchException"
    code, _ = error_of(ddb.transact_write_items, TransactItems=[bump("a"), bump("c")],
                       ClientRequestToken=token)
    assert code == "IdempotentParameterMismatchException"
    assert (count_of(ddb, "a"), count_of(ddb, "c")) == (1, None)


def test_a_cancelled_transaction_does_not_use_up_its_token(ddb: Any) -> None:
    token = str(uuid.uuid4())
    guarded = [bump("a"), {"ConditionCheck": {"TableName": TABLE, "Key": {"PK": {"S": "gate"}},
                                              "ConditionExpression": "attribute_exists(PK)"}}]
    code, _ = error_of(ddb.transact_write_items, TransactItems=guarded, ClientRequestToken=token)
    assert code == "TransactionCanceledException"
    ddb.put_item(TableName=TABLE, Item={"PK": {"S": "gate"}})
    ddb.transact_write_items(TransactItems=guarded, ClientRequestToken=token)
    ddb.transact_write_items(TransactItems=guarded, ClientRequestToken=token)
    assert count_of(ddb, "a") == 1


def test_a_token_expires_after_its_window(ddb: Any, dynaunique_db: str) -> None:
    assert server_state(dynaunique_db)["token_window"] == 600.0
    set_token_window(dynaunique_db, 0.5)
    token = str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    assert count_of(ddb, "a") == 1
    time.sleep(0.6)
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    assert count_of(ddb, "a") == 2
    reset_local_dynamodb(dynaunique_db)
    assert server_state(dynaunique_db)["token_window"] == 600.0


def test_reset_forgets_tokens(ddb: Any, dynaunique_db: str) -> None:
    token = str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    assert server_state(dynaunique_db)["tokens"] == 1
    reset_local_dynamodb(dynaunique_db)
    create_table(ddb, TABLE)
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    assert count_of(ddb, "a") == 1
    assert server_state(dynaunique_db)["tokens"] == 1


def test_negative_token_window_is_refused(dynaunique_db: str) -> None:
    with pytest.raises(LocalServerError, match=r"HTTP 400.*must not be negative"):
        set_token_window(dynaunique_db, -1)


# --- the conflict knob ----------------------------------------------------------------------------


def outcomes(ddb: Any, rounds: int) -> list[str]:
    result = []
    for n in range(rounds):
        try:
            ddb.transact_write_items(TransactItems=[bump(f"r{n}"), bump("total")])
            result.append("ok")
        except ClientError as exc:
            reasons = [r["Code"] for r in exc.response["CancellationReasons"]]
            result.append(",".join(reasons))
    return result


def test_every_transaction_is_cancelled_at_rate_one(ddb: Any, dynaunique_db: str) -> None:
    set_conflict_rate(dynaunique_db, 1.0, seed=3)
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(TransactItems=[bump("a"), bump("b"), bump("c")])
    error = raised.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    reasons = error["CancellationReasons"]
    assert sorted(r["Code"] for r in reasons) == ["None", "None", "TransactionConflict"]
    assert [r for r in reasons if r["Code"] == "TransactionConflict"] == [
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
    ]
    assert keys_in(ddb) == []
    # Only transactions: a plain write goes through.
    ddb.put_item(TableName=TABLE, Item={"PK": {"S": "plain"}})
    assert keys_in(ddb) == ["plain"]
    assert server_state(dynaunique_db)["conflicts_injected"] == 1


def test_a_seed_gives_the_same_cancellations_every_run(ddb: Any, dynaunique_db: str) -> None:
    set_conflict_rate(dynaunique_db, 0.3, seed=7)
    first = outcomes(ddb, 40)
    set_conflict_rate(dynaunique_db, 0.3, seed=7)
    second = outcomes(ddb, 40)
    assert first == second
    cancelled = [o for o in first if o != "ok"]
    assert 4 <= len(cancelled) <= 20, first
    assert set(cancelled) <= {"TransactionConflict,None", "None,TransactionConflict"}
    # Applied exactly the transactions that were not cancelled.
    assert count_of(ddb, "total") == 2 * first.count("ok")
    set_conflict_rate(dynaunique_db, 0.3, seed=8)
    assert outcomes(ddb, 40) != first


def test_reset_stops_the_conflicts(ddb: Any, dynaunique_db: str) -> None:
    set_conflict_rate(dynaunique_db, 1.0)
    reset_local_dynamodb(dynaunique_db)
    create_table(ddb, TABLE)
    assert outcomes(ddb, 5) == ["ok"] * 5
    assert server_state(dynaunique_db)["conflicts"] == {"fraction": 0.0, "seed": None}


def test_a_fraction_outside_0_to_1_is_refused(dynaunique_db: str) -> None:
    with pytest.raises(LocalServerError, match=r"HTTP 400.*between 0 and 1"):
        set_conflict_rate(dynaunique_db, 1.5)


def test_a_replayed_token_is_never_cancelled(ddb: Any, dynaunique_db: str) -> None:
    token = str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    set_conflict_rate(dynaunique_db, 1.0, seed=1)
    ddb.transact_write_items(TransactItems=[bump("a")], ClientRequestToken=token)
    assert count_of(ddb, "a") == 1
