"""The local server's global tables (dynaunique/testing/_replicas.py), through raw boto3: replicas
made by UpdateTable, each request served by the replica of its credential scope's region,
eventual consistency replicated after the delay (last writer wins), strong consistency at once
with transactions refused."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from dynaunique.testing import (
    LocalServerError,
    replication_state,
    reset_local_dynamodb,
    set_replication_delay,
)

TABLE = "global_locks"
LOCK = {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}}


def regional(endpoint: str, region: str) -> Any:
    return boto3.client(
        "dynamodb", endpoint_url=endpoint, region_name=region, aws_access_key_id="testing",
        aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 1}))


def make_global(endpoint: str, *, mode: str | None = None, stream: bool = False) -> tuple[Any, Any]:
    east, west = regional(endpoint, "us-east-1"), regional(endpoint, "eu-west-1")
    extra: dict[str, Any] = {}
    if stream:
        extra["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    east.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                   {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}], **extra)
    east.put_item(TableName=TABLE, Item={"PK": {"S": "before"}, "SK": {"S": "R"}})
    update: dict[str, Any] = {"ReplicaUpdates": [{"Create": {"RegionName": "eu-west-1"}}]}
    if mode is not None:
        update["MultiRegionConsistency"] = mode
    answer = east.update_table(TableName=TABLE, **update)
    assert answer["TableDescription"]["Replicas"] == [
        {"RegionName": "eu-west-1", "ReplicaStatus": "ACTIVE"}]
    return east, west


def items(ddb: Any) -> list[dict[str, Any]]:
    found = ddb.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return sorted(found, key=lambda item: (item["PK"]["S"], item["SK"]["S"]))


def put_lock(ddb: Any, owner: str) -> None:
    ddb.put_item(TableName=TABLE, Item={**LOCK, "owner": {"S": owner}},
                 ConditionExpression="attribute_not_exists(PK)")


def test_two_regions_both_grant_one_lock_and_replication_keeps_the_last(
        dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db)
    set_replication_delay(dynaunique_db, 0.3)
    put_lock(east, "account-1")  # each region's condition passes: neither sees the other yet
    put_lock(west, "account-2")
    assert west.get_item(TableName=TABLE, Key=LOCK)["Item"]["owner"] == {"S": "account-2"}
    assert replication_state(dynaunique_db)["pending"] == 2
    time.sleep(0.35)
    assert items(east) == items(west)
    locks = [item for item in items(east) if item["SK"]["S"] == "LOCK"]
    assert locks == [{**LOCK, "owner": {"S": "account-2"}}]  # the last writer's, everywhere
    assert replication_state(dynaunique_db)["pending"] == 0


def test_a_replica_copies_the_items_and_describes_the_group(dynaunique_db: str) -> None:
    _, west = make_global(dynaunique_db)
    assert items(west) == [{"PK": {"S": "before"}, "SK": {"S": "R"}}]
    table = west.describe_table(TableName=TABLE)["Table"]
    assert table["Replicas"] == [{"RegionName": "us-east-1", "ReplicaStatus": "ACTIVE"}]
    assert table["MultiRegionConsistency"] == "EVENTUAL"
    assert table["GlobalTableVersion"] == "2019.11.21"
    assert "Replicas" not in regional(dynaunique_db, "ap-south-1").create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}])["TableDescription"]
    assert replication_state(dynaunique_db)["tables"] == {
        TABLE: {"regions": ["eu-west-1", "us-east-1"], "mode": "EVENTUAL"}}


def test_eventual_writes_wait_out_the_delay_and_the_later_write_wins(dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db)
    set_replication_delay(dynaunique_db, 0.3)
    key = {"PK": {"S": "r"}, "SK": {"S": "R"}}
    east.put_item(TableName=TABLE, Item={**key, "v": {"S": "east"}})
    assert "Item" not in west.get_item(TableName=TABLE, Key=key)
    west.update_item(TableName=TABLE, Key=key, UpdateExpression="SET v = :v",
                     ExpressionAttributeValues={":v": {"S": "west"}})
    time.sleep(0.35)
    assert east.get_item(TableName=TABLE, Key=key)["Item"]["v"] == {"S": "west"}
    assert west.get_item(TableName=TABLE, Key=key)["Item"]["v"] == {"S": "west"}
    east.delete_item(TableName=TABLE, Key=key)  # a delete replicates too
    time.sleep(0.35)
    assert "Item" not in west.get_item(TableName=TABLE, Key=key)


def test_batch_and_transaction_writes_replicate(dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db)
    east.batch_write_item(RequestItems={TABLE: [
        {"PutRequest": {"Item": {"PK": {"S": "b1"}, "SK": {"S": "R"}}}},
        {"DeleteRequest": {"Key": {"PK": {"S": "before"}, "SK": {"S": "R"}}}}]})
    east.transact_write_items(TransactItems=[
        {"Put": {"TableName": TABLE, "Item": {"PK": {"S": "t1"}, "SK": {"S": "R"}}}},
        {"Update": {"TableName": TABLE, "Key": {"PK": {"S": "b1"}, "SK": {"S": "R"}},
                    "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "1"}}}}])
    assert items(west) == items(east) == [
        {"PK": {"S": "b1"}, "SK": {"S": "R"}, "n": {"N": "1"}},
        {"PK": {"S": "t1"}, "SK": {"S": "R"}}]


def test_strong_consistency_replicates_at_once_and_refuses_transactions(
        dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db, mode="STRONG")
    set_replication_delay(dynaunique_db, 30)  # ignored: strong replication is synchronous
    put_lock(east, "account-1")
    with pytest.raises(ClientError) as lost:
        put_lock(west, "account-2")
    assert lost.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert west.describe_table(TableName=TABLE)["Table"]["MultiRegionConsistency"] == "STRONG"
    for call in (
        lambda: east.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": {"PK": {"S": "t"}, "SK": {"S": "R"}}}}]),
        lambda: west.transact_get_items(TransactItems=[
            {"Get": {"TableName": TABLE, "Key": LOCK}}]),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert "multi-Region strong consistency" in refused.value.response["Error"]["Message"]
    assert [item["PK"]["S"] for item in items(west)] == ["UNIQ#EMAIL#ada@x.io", "before"]


def test_the_replica_stream_carries_replicated_writes(dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db, stream=True)
    put_lock(east, "account-1")
    arn = west.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    streams = boto3.client("dynamodbstreams", endpoint_url=dynaunique_db, region_name="eu-west-1",
                           aws_access_key_id="testing", aws_secret_access_key="testing")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    keys = [r["dynamodb"]["Keys"]["PK"]["S"] for r in records]
    assert keys[-1] == "UNIQ#EMAIL#ada@x.io"


def test_a_bad_delay_is_refused_and_reset_forgets_global_tables(dynaunique_db: str) -> None:
    with pytest.raises(LocalServerError, match="negative"):
        set_replication_delay(dynaunique_db, -1)
    make_global(dynaunique_db)
    set_replication_delay(dynaunique_db, 5)
    reset_local_dynamodb(dynaunique_db)
    assert replication_state(dynaunique_db) == {
        "delay": 0.0, "tables": {}, "pending": 0, "replicated": 0}


def test_a_new_delay_applies_to_the_versions_in_flight(dynaunique_db: str) -> None:
    east, west = make_global(dynaunique_db)
    set_replication_delay(dynaunique_db, 30)
    put_lock(east, "M1")
    assert "Item" not in west.get_item(TableName=TABLE, Key=LOCK, ConsistentRead=True)
    assert replication_state(dynaunique_db)["pending"] == 1
    set_replication_delay(dynaunique_db, 0)   # released: due now, applied before the next read
    assert west.get_item(TableName=TABLE, Key=LOCK, ConsistentRead=True)["Item"]["owner"] == {
        "S": "M1"}
    assert replication_state(dynaunique_db)["pending"] == 0
