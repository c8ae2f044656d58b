"""The stream guard's pure parts: a stream record as a Change, the shard reader's order,
shard ends, children and checkpoints over an in-memory stream (no server), and a double grant's
report."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from dynaunique.audit._stored import RecordRef
from dynaunique.audit._tables import Cost, _Table
from dynaunique.streams import (
    BatchResult,
    Change,
    DoubleGrant,
    Position,
    Reader,
    RegionGrant,
    StreamRecordError,
    StreamsError,
    change_of,
)
from dynaunique.streams._changes import table_of_arn

ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/accounts/stream/2026-12-01T00:00:00.000"


# --- change_of ------------------------------------------------------------------------------------


def lambda_record(**dynamodb: Any) -> dict[str, Any]:
    return {"eventID": "1", "eventName": "MODIFY", "eventSource": "aws:dynamodb",
            "eventSourceARN": ARN, "awsRegion": "eu-west-1",
            "dynamodb": {"Keys": {"PK": {"S": "A"}}, "SequenceNumber": "111",
                         "StreamViewType": "NEW_AND_OLD_IMAGES", **dynamodb}}


def test_a_lambda_record_becomes_a_change_with_binaries_decoded() -> None:
    record = lambda_record(
        OldImage={"PK": {"S": "A"}, "n": {"N": "1"}},
        NewImage={"PK": {"S": "A"}, "b": {"B": "AP8="}, "bs": {"BS": ["AQ=="]},
                  "m": {"M": {"x": {"L": [{"B": "Ag=="}, {"S": "s"}]}}}})
    assert change_of(record) == Change(
        "MODIFY", "111", "accounts", {"PK": {"S": "A"}},
        {"PK": {"S": "A"}, "n": {"N": "1"}},
        {"PK": {"S": "A"}, "b": {"B": b"\x00\xff"}, "bs": {"BS": [b"\x01"]},
         "m": {"M": {"x": {"L": [{"B": b"\x02"}, {"S": "s"}]}}}})


def test_a_get_records_record_keeps_its_bytes_and_takes_the_table_it_was_read_from() -> None:
    record = {"eventName": "INSERT", "dynamodb": {
        "Keys": {"PK": {"S": "A"}}, "SequenceNumber": "5",
        "NewImage": {"PK": {"S": "A"}, "b": {"B": b"\x00"}}}}
    change = change_of(record, "t")
    assert (change.table, change.event, change.old, change.new) == (
        "t", "INSERT", None, {"PK": {"S": "A"}, "b": {"B": b"\x00"}})


@pytest.mark.parametrize(("record", "message"), [
    ({"eventName": "INSERT"}, "not a DynamoDB stream record (eventName 'INSERT')"),
    ({"eventName": "TRUNCATE", "dynamodb": {}}, "not a DynamoDB stream record"),
    (lambda_record(Keys={}), "a stream record without SequenceNumber or Keys"),
    (lambda_record(NewImage={"PK": {"S": "A"}}),
     "stream record 111 (MODIFY) lacks its images: the stream's view type must be "
     "NEW_AND_OLD_IMAGES"),
    ({**lambda_record(OldImage={}, NewImage={}), "eventSourceARN": None},
     "stream record 111 names no eventSourceARN"),
    (lambda_record(OldImage={"b": {"B": "not base64!"}}, NewImage={}),
     "a binary value is not base64: 'not base64!'"),
    (lambda_record(OldImage={"b": "plain"}, NewImage={}),
     "not a DynamoDB attribute value: 'plain'"),
    ("x", "not a DynamoDB stream record: 'x'"),
    (None, "not a DynamoDB stream record: None"),
    (5, "not a DynamoDB stream record: 5"),
    (lambda_record(OldImage={"m": {"M": "x"}}, NewImage={}),
     "not a DynamoDB attribute value: {'M': 'x'}"),
    (lambda_record(OldImage={"l": {"L": 5}}, NewImage={}),
     "not a DynamoDB attribute value: {'L': 5}"),
    (lambda_record(OldImage={}, NewImage={}, Keys={"PK": 5}),
     "not a DynamoDB attribute value: 5"),
])
def test_a_record_dynamodb_would_not_deliver_is_refused_by_name(record: Any,
                                                              message: str) -> None:
    with pytest.raises(StreamRecordError) as raised:
        change_of(record)
    assert str(raised.value).startswith(message)


def test_the_table_of_an_arn() -> None:
    assert table_of_arn(ARN) == "accounts"
    assert table_of_arn("arn:aws:dynamodb:us-east-1:1:table/t") == "t"
    with pytest.raises(StreamRecordError, match="not a DynamoDB table or stream ARN"):
        table_of_arn("arn:aws:s3:::bucket")


# --- the reader over an in-memory stream ----------------------------------------------------------


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "GetRecords")


class FakeTable:
    """DescribeTable, GetItem and PutItem of one table's ledger items (conditions checked)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.puts = 0

    def dispatch(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "DescribeTable":
            return {"Table": {"LatestStreamArn": ARN, "LatestStreamLabel": "L",
                              "StreamSpecification": {"StreamEnabled": True,
                                                      "StreamViewType": "NEW_AND_OLD_IMAGES"}}}
        if operation == "GetItem":
            item = self.items.get(params["Key"]["PK"]["S"])
            return {"Item": item} if item is not None else {}
        assert operation == "PutItem"
        key = params["Item"]["PK"]["S"]
        stored = self.items.get(key, {}).get("ledger", {}).get("M", {}).get("sequence")
        expected = params.get("ExpressionAttributeValues", {}).get(":s")
        if stored != expected:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException",
                                         "Message": "no"}}, "PutItem")
        self.items[key] = params["Item"]
        self.puts += 1
        return {}


class FakeStreams:
    """DescribeStream (two shards a page), GetShardIterator and GetRecords (two a page)."""

    def __init__(self, shards: list[dict[str, Any]]) -> None:
        #: id → {"parent", "closed", "records": [sequence numbers]}
        self.shards = {s["id"]: s for s in shards}
        self.expire_next = False
        self.trimmed = False

    def record(self, sequence: str) -> dict[str, Any]:
        return {"eventName": "INSERT", "dynamodb": {
            "Keys": {"PK": {"S": f"R{sequence}"}}, "SequenceNumber": sequence,
            "NewImage": {"PK": {"S": f"R{sequence}"}}}}

    def dispatch(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation == "DescribeStream":
            ids = list(self.shards)
            start = ids.index(params["ExclusiveStartShardId"]) + 1 \
                if "ExclusiveStartShardId" in params else 0
            page = ids[start:start + 2]
            shards = []
            for shard_id in page:
                shard = self.shards[shard_id]
                numbers = {"StartingSequenceNumber": "0"}
                if shard["closed"]:
                    numbers["EndingSequenceNumber"] = "999"
                shards.append({"ShardId": shard_id, "SequenceNumberRange": numbers,
                               **({"ParentShardId": shard["parent"]} if shard["parent"] else {})})
            more = {"LastEvaluatedShardId": page[-1]} if start + 2 < len(ids) else {}
            return {"StreamDescription": {"Shards": shards, **more}}
        if operation == "GetShardIterator":
            records = self.shards[params["ShardId"]]["records"]
            kind = params["ShardIteratorType"]
            at = {"TRIM_HORIZON": 0, "LATEST": len(records)}.get(kind)
            if at is None:
                at = records.index(params["SequenceNumber"]) + 1
            return {"ShardIterator": f"{params['ShardId']}|{at}"}
        assert operation == "GetRecords"
        if self.trimmed:
            raise _error("TrimmedDataAccessException")
        if self.expire_next:
            self.expire_next = False
            raise _error("ExpiredIteratorException")
        shard_id, at = params["ShardIterator"].split("|")
        shard = self.shards[shard_id]
        page = shard["records"][int(at):int(at) + 2]
        following = f"{shard_id}|{int(at) + len(page)}"
        if shard["closed"] and int(at) + len(page) >= len(shard["records"]) and not page:
            return {"Records": []}
        return {"Records": [self.record(s) for s in page], "NextShardIterator": following}


class RecordingChecker:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def judge(self, records: Any, *, table: str | None = None,
              region: str | None = None) -> BatchResult:
        self.batches.append([r["dynamodb"]["SequenceNumber"] for r in records])
        return BatchResult(len(self.batches[-1]), (), (), (), None, Cost())


def reader(ledger: FakeTable, streams: FakeStreams, checker: RecordingChecker,
           start: str = "trim-horizon") -> Reader:
    table = _Table("accounts", ledger, (), "PK", "SK", None, frozenset())
    return Reader(checker, table, start=start, connection=streams)  # type: ignore[arg-type]


def lineage() -> FakeStreams:
    # Listed child first: the reader must still read the parent to its end before it.
    return FakeStreams([
        {"id": "child", "parent": "parent", "closed": False, "records": ["30", "31", "32"]},
        {"id": "other", "parent": None, "closed": True, "records": []},
        {"id": "parent", "parent": None, "closed": True, "records": ["10", "11", "12"]},
    ])


def test_parents_are_read_to_their_end_before_their_children() -> None:
    ledger, streams, checker = FakeTable(), lineage(), RecordingChecker()
    assert reader(ledger, streams, checker).read_all(lambda result: None) is True
    assert checker.batches == [["10", "11"], ["12"], ["30", "31"], ["32"]]
    positions = {k.rsplit("#", 1)[-1]: v["ledger"]["M"] for k, v in ledger.items.items()}
    assert positions["parent"]["done"] == {"BOOL": True}
    assert positions["parent"]["sequence"] == {"S": "12"}
    assert positions["other"]["done"] == {"BOOL": True} and "sequence" not in positions["other"]
    assert positions["child"]["done"] == {"BOOL": False}
    assert positions["child"]["sequence"] == {"S": "32"}
    assert set(ledger.items) == {"UNIQ#~STREAM#watch#L#child", "UNIQ#~STREAM#watch#L#other",
                                 "UNIQ#~STREAM#watch#L#parent"}


def test_a_restart_reads_only_what_came_after_its_checkpoints() -> None:
    ledger, streams = FakeTable(), lineage()
    reader(ledger, streams, RecordingChecker()).read_all(lambda result: None)
    streams.shards["child"]["records"].append("33")
    again = RecordingChecker()
    reader(ledger, streams, again).read_all(lambda result: None)
    assert again.batches == [["33"]]


def test_latest_skips_closed_shards_and_what_an_open_one_holds() -> None:
    ledger, streams, checker = FakeTable(), lineage(), RecordingChecker()
    first = reader(ledger, streams, checker, start="latest")
    first.read_all(lambda result: None)
    assert checker.batches == []
    streams.shards["child"]["records"].append("33")
    first.read_all(lambda result: None)     # the same reader keeps its iterator
    assert checker.batches == [["33"]]


def test_an_expired_iterator_is_taken_again_from_the_position() -> None:
    ledger, streams, checker = FakeTable(), lineage(), RecordingChecker()
    first = reader(ledger, streams, checker)
    first.read_all(lambda result: None)
    streams.shards["child"]["records"].append("33")
    streams.expire_next = True
    first.read_all(lambda result: None)
    assert checker.batches[-1] == ["33"]


def test_trimmed_records_stop_the_reader_with_what_to_do() -> None:
    streams = lineage()
    streams.trimmed = True
    with pytest.raises(StreamsError, match=r"were trimmed .* run dynaunique check"):
        reader(FakeTable(), streams, RecordingChecker()).read_all(lambda result: None)


def test_a_second_consumer_of_the_same_name_is_refused() -> None:
    from dynaunique.errors import ConfigurationError

    ledger, streams = FakeTable(), lineage()
    stale = reader(ledger, streams, RecordingChecker())
    stale.checkpoints.get("child")
    stale._stored["child"] = None
    reader(ledger, streams, RecordingChecker()).read_all(lambda result: None)
    with pytest.raises(ConfigurationError, match="another consumer of that name"):
        stale._checkpoint(Position("child", "31"))


def test_a_pass_reads_at_most_max_pages_of_a_shard_and_the_next_goes_on() -> None:
    ledger, streams, checker = FakeTable(), lineage(), RecordingChecker()
    streams.shards["child"]["records"].extend(str(n) for n in range(33, 40))
    table = _Table("accounts", ledger, (), "PK", "SK", None, frozenset())
    bounded = Reader(checker, table, max_pages=3, connection=streams)  # type: ignore[arg-type]
    bounded.read_all(lambda result: None)
    # The parent's third read is its end (no page counted); the child stops after three pages.
    assert checker.batches == [["10", "11"], ["12"], ["30", "31"], ["32", "33"], ["34", "35"]]
    bounded.read_all(lambda result: None)
    assert checker.batches[5:] == [["36", "37"], ["38", "39"]]


# --- a double grant (dynaunique/streams/_across.py) -----------------------------------------------


def test_a_double_grant_names_each_region_and_what_it_granted() -> None:
    def ref(pk: str) -> RecordRef:
        return RecordRef("accounts", {"PK": {"S": pk}}, "Account")

    grant = DoubleGrant("accounts", "UNIQ#EMAIL#ada@x.io", "EMAIL", "ada@x.io", False, (
        RegionGrant("us-east-1", ref("M1"), "M1"), RegionGrant("eu-west-1", ref("M2"), "-")))
    assert grant.regions == ("us-east-1", "eu-west-1")
    assert grant.message == (
        "EMAIL 'ada@x.io' was granted in 2 regions before replication settled: us-east-1 to M1 "
        "(the lock there names M1), eu-west-1 to M2 (no lock there); once the replicas agreed, "
        "2 records hold it (a write bypassed the home region)")
    assert grant.to_dict() == {
        "kind": "double_grant", "table": "accounts", "lock_key": "UNIQ#EMAIL#ada@x.io",
        "constraint": "EMAIL", "value": "ada@x.io", "hashed": False,
        "regions": ["us-east-1", "eu-west-1"],
        "grants": [
            {"region": "us-east-1", "lock_owner": "M1",
             "holder": {"table": "accounts", "key": {"PK": "M1"}, "model": "Account"}},
            {"region": "eu-west-1", "lock_owner": "-",
             "holder": {"table": "accounts", "key": {"PK": "M2"}, "model": "Account"}}],
        "message": grant.message}
    hashed = DoubleGrant("accounts", "UNIQ#PHONE#x", "PHONE", None, True, grant.grants)
    assert hashed.message.startswith("PHONE (hashed) was granted in 2 regions")
    assert hashed.to_dict()["value"] is None


# --- the class's old name (issue 39: Guard → Checker) ---------------------------------------------


def test_the_old_guard_names_still_work_with_a_deprecation_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import dynaunique.streams as streams
    from dynaunique.errors import ConfigurationError
    from dynaunique.streams import Checker, aws_lambda

    with pytest.warns(DeprecationWarning, match=r"dynaunique\.streams\.Guard is deprecated: use "
                      r"dynaunique\.streams\.Checker"):
        from dynaunique.streams import Guard  # type: ignore[attr-defined]
    assert Guard is Checker
    assert "Guard" not in streams.__all__ and "Checker" in streams.__all__
    with pytest.raises(AttributeError, match="has no attribute 'Guardian'"):
        streams.Guardian  # noqa: B018
    checker = RecordingChecker()
    old = reader(FakeTable(), lineage(), checker)
    assert old.checker is checker
    with pytest.warns(DeprecationWarning, match=r"Reader\.guard is deprecated: use "
                      r"Reader\.checker"):
        assert old.guard is checker
    monkeypatch.delenv("DYNAUNIQUE_MODULE", raising=False)
    with pytest.warns(DeprecationWarning, match=r"aws_lambda\.guard\(\) is deprecated: use "
                      r"checker\(\)"), pytest.raises(ConfigurationError, match="DYNAUNIQUE_MODULE"):
        aws_lambda.guard()
