"""The stream guard against the local server's DynamoDB stream: ``dynaunique watch`` (through
click's CliRunner), the :class:`~dynaunique.streams.Reader`'s checkpoints, and the
:class:`~dynaunique.streams.Checker` fed stream records in an order of the test's choosing."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs
import boto3
import pytest
import support.stream_models as sm
from click.testing import CliRunner, Result
from support.invariants import assert_clean
from support.log_events import configured_by_the_application, events
from support.tables import raw_tables, scan_all

from dynaunique.cli import cli
from dynaunique.streams import BatchResult, Checker, Reader

MODULE = sm.__name__
Account = sm.StreamAccount
Note = sm.StreamNote
TABLE = sm.TABLE


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, *sm.MODELS)


def watch(endpoint: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["watch", MODULE, "--once", "--endpoint", endpoint, *args])


def watch_json(endpoint: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = watch(endpoint, "--json", *args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines()]


def summary(findings: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """(kind, constraint, value, holders, lock owner's hash key) of each finding."""
    return {(f["kind"], f["constraint"], f["value"],
             tuple(h["key"]["PK"] for h in f["holders"]),
             f["lock"]["owner"]["PK"] if f["lock"] and f["lock"]["owner"] else None)
            for f in findings}


def stream_records(endpoint: str) -> list[dict[str, Any]]:
    """Every record of the table's stream so far, in order (GetRecords' shape)."""
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1")
    arn = client.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            if not page["Records"]:
                break
            records.extend(page["Records"])
            iterator = page.get("NextShardIterator")
    return records


def after(records: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    return records[count:]


# --- each kind of drift, reported after one `watch --once` ----------------------------------------


def test_a_clean_history_gives_no_finding_and_exit_0(raw: Any, dynaunique_db: str) -> None:
    ada = Account(pk="ACCT#1", email="Ada@X.io", username="ada", phone="+15550001")
    ada.save()
    ada.email = "ada@analytical.engine"
    ada.save()
    Account(pk="ACCT#2", email="grace@x.io").save()
    Account.get("ACCT#2", "PROFILE").delete()
    result = watch(dynaunique_db)
    assert result.exit_code == 0, result.output
    assert "No findings" in result.stderr


def test_a_record_written_without_its_lock_is_missing(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "B@x.io"}})
    code, findings = watch_json(dynaunique_db)
    assert code == 1
    assert summary(findings) == {("missing", "EMAIL", "b@x.io", ("ACCT#2",), None)}
    (finding,) = findings
    assert finding["lock_key"] == "UNIQ#EMAIL#b@x.io" and finding["repairable"] is True
    assert len(finding["sequences"]) == 1  # the raw put's stream record


def test_a_lock_deleted_by_hand_is_missing(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io", username="ada").save()
    assert watch_json(dynaunique_db) == (0, [])  # the save's records are read and checkpointed
    raw.delete_item(TableName=TABLE, Key=sm.lock_pk("UNIQ#HANDLE#ada"))
    code, findings = watch_json(dynaunique_db)
    assert code == 1
    assert summary(findings) == {("missing", "HANDLE", "ada", ("ACCT#1",), None)}
    # Found from the lock's REMOVE alone (the record did not change).
    (removed,) = [r for r in stream_records(dynaunique_db)
                  if r["dynamodb"]["Keys"]["PK"]["S"] == "UNIQ#HANDLE#ada"
                  and r["eventName"] == "REMOVE"]
    assert findings[0]["sequences"] == [removed["dynamodb"]["SequenceNumber"]]


def test_a_value_changed_by_hand_leaves_an_orphan_and_a_missing_lock(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="old@x.io").save()
    raw.update_item(TableName=TABLE, Key=sm.account_key("ACCT#1"),
                    UpdateExpression="SET email = :e",
                    ExpressionAttributeValues={":e": {"S": "new@x.io"}})
    code, findings = watch_json(dynaunique_db)
    assert code == 1
    assert summary(findings) == {("missing", "EMAIL", "new@x.io", ("ACCT#1",), None),
                                 ("orphan", "EMAIL", "old@x.io", (), "ACCT#1")}
    orphan = next(f for f in findings if f["kind"] == "orphan")
    assert orphan["owner_state"] == "changed"


def test_a_lock_planted_for_a_value_nobody_holds_is_an_orphan(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    for value, owner in (("ghost@x.io", "ACCT#NOBODY"), ("ada2@x.io", "ACCT#1")):
        raw.put_item(TableName=TABLE, Item={
            **sm.lock_pk(f"UNIQ#EMAIL#{value}"), "owner": {"M": sm.account_key(owner)},
            "model": {"S": "StreamAccount"}, "value": {"S": value}})
    code, findings = watch_json(dynaunique_db)
    assert code == 1
    assert summary(findings) == {("orphan", "EMAIL", "ada2@x.io", (), "ACCT#1"),
                                 ("orphan", "EMAIL", "ghost@x.io", (), "ACCT#NOBODY")}
    assert {f["owner_state"] for f in findings} == {"changed", "gone"}


def test_a_duplicate_written_raw_beside_a_locked_record(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="dup@x.io").save()
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "DUP@x.io"}})
    code, findings = watch_json(dynaunique_db)
    assert code == 1
    assert summary(findings) == {("duplicate", "EMAIL", "dup@x.io", ("ACCT#1", "ACCT#2"),
                                  "ACCT#1")}


def test_records_of_a_model_without_constraints_on_the_lock_table_are_not_findings(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    note = Note(pk="NOTE#1", body="hello", email="ada@x.io")
    note.save()
    note.body = "edited"
    note.save()
    raw.put_item(TableName=TABLE, Item={"PK": {"S": "NOTE#2"}, "SK": {"S": "NOTE"},
                                        "body": {"S": "raw"}, "email": {"S": "ada@x.io"}})
    raw.delete_item(TableName=TABLE, Key={"PK": {"S": "NOTE#1"}, "SK": {"S": "NOTE"}})
    code, findings = watch_json(dynaunique_db)
    assert (code, findings) == (0, [])


# --- hashed locks: found, never shown -------------------------------------------------------------


def _hashed_lock_key(raw: Any) -> str:
    (key,) = [i["PK"]["S"] for i in scan_all(raw, TABLE) if i["PK"]["S"].startswith("UNIQ#PHONE#")]
    return key


def test_a_hashed_lock_deleted_by_hand_is_found_and_its_value_is_never_logged(
        raw: Any, dynaunique_db: str, caplog: pytest.LogCaptureFixture) -> None:
    Account(pk="ACCT#1", email="ada@x.io", phone="+15550001").save()
    key = _hashed_lock_key(raw)
    raw.delete_item(TableName=TABLE, Key=sm.lock_pk(key))
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"},
                                        "phone": {"S": "+15550002"}})
    checker = Checker(sm.MODELS)
    with caplog.at_level(logging.DEBUG, logger="dynaunique"):
        result = checker.judge(stream_records(dynaunique_db), table=TABLE)
    found = {(f.kind, f.constraint, f.hashed, f.value) for f in result.findings}
    assert found == {("missing", "PHONE", True, None), ("missing", "EMAIL", False, "b@x.io")}
    assert sum(f.lock_key == key for f in result.findings) == 1
    logged = events(caplog, "stream_finding")
    assert len(logged) == 3
    everything = json.dumps([r.getMessage() for r in caplog.records]) + json.dumps(
        [getattr(r, "dynaunique", None) for r in caplog.records], default=str)
    assert "+15550001" not in everything and "+15550002" not in everything
    assert "5550001" not in everything and "5550002" not in everything
    assert "PHONE (hashed)" in everything


# --- a finding is never made from a stream record alone -------------------------------------------


def test_interleaved_records_of_valid_transactions_give_no_finding(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io", username="ada").save()       # T1: record + 2 locks
    grace = Account(pk="ACCT#2", email="grace@x.io", username="grace")
    grace.save()                                                         # T2
    grace.email = "hopper@x.io"
    grace.save()                                                         # T3: moves a lock
    Account.get("ACCT#1", "PROFILE").delete()                                       # T4
    records = stream_records(dynaunique_db)
    assert len(records) == 3 + 3 + 3 + 3
    checker = Checker(sm.MODELS)
    # Each transaction's records one at a time, the others' in between, newest first: a
    # record's INSERT without its lock's, a lock's REMOVE without its record's, ...
    interleaved = [records[i] for i in (9, 3, 6, 0, 10, 4, 7, 1, 11, 5, 8, 2)]
    for record in interleaved:
        result = checker.judge([record], table=TABLE)
        assert (result.findings, result.failed) == ((), ()), record["dynamodb"]["Keys"]
    assert checker.judge(interleaved, table=TABLE).findings == ()


def test_a_record_judged_alone_between_two_writes_gives_no_finding(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    (insert, _lock) = sorted(stream_records(dynaunique_db),
                             key=lambda r: r["dynamodb"]["Keys"]["PK"]["S"])
    checker = Checker(sm.MODELS)
    # The record's INSERT, judged before its lock's record arrives: the lock is there.
    assert checker.judge([insert], table=TABLE).findings == ()
    # The table moves on between two records: the old image's value is now free, the record
    # gone — judged on what is stored now, still nothing.
    Account.get("ACCT#1", "PROFILE").delete()
    assert checker.judge([insert], table=TABLE).findings == ()
    # And what happened since is judged from its own records.
    assert checker.judge(after(stream_records(dynaunique_db), 2), table=TABLE).findings == ()


# --- checkpoints: a restart neither misses nor repeats --------------------------------------------


def _judged(reader: Reader) -> list[str]:
    """Run ``reader`` once; the sequence numbers of the records it judged (checkpoints aside)."""
    seen: list[str] = []
    original = reader.checker.judge

    def judge(records: Any, *, table: str | None = None,
              region: str | None = None) -> BatchResult:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in records
                    if not r["dynamodb"]["Keys"]["PK"]["S"].startswith("UNIQ#~"))
        return original(records, table=table, region=region)

    reader.checker.judge = judge  # type: ignore[method-assign]
    reader.read_all(lambda result: None)
    return seen


def _reader(**options: Any) -> Reader:
    checker = Checker(sm.MODELS)
    return Reader(checker, checker.tables[TABLE], **options)


def test_a_restarted_reader_resumes_from_its_checkpoint(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    first = _judged(_reader())
    assert len(first) == 2
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"}})
    Account(pk="ACCT#3", email="c@x.io").save()
    written = [r["dynamodb"]["SequenceNumber"] for r in stream_records(dynaunique_db)
               if not r["dynamodb"]["Keys"]["PK"]["S"].startswith("UNIQ#~")]
    second = _judged(_reader())
    assert second == written[2:]           # no repeat, no miss
    assert _judged(_reader()) == []        # and nothing twice
    checkpoints = [i for i in scan_all(raw, TABLE) if i["PK"]["S"].startswith("UNIQ#~STREAM#")]
    (item,) = checkpoints
    assert item["PK"]["S"].startswith("UNIQ#~STREAM#watch#")
    assert item["ledger"]["M"]["sequence"]["S"] == written[-1]


def test_a_record_that_failed_is_read_again_and_those_before_it_are_not(
        raw: Any, dynaunique_db: str) -> None:
    for n in range(3):
        raw.put_item(TableName=TABLE, Item={**sm.account_key(f"ACCT#{n}"),
                                            "email": {"S": f"u{n}@x.io"}})
    sequences = [r["dynamodb"]["SequenceNumber"] for r in stream_records(dynaunique_db)]
    reader = _reader()
    original = reader.checker.judge

    def failing(records: Any, *, table: str | None = None,
                region: str | None = None) -> BatchResult:
        result = original(records, table=table, region=region)
        return attrs.evolve(result, failed=(sequences[1],))

    reader.checker.judge = failing  # type: ignore[method-assign]
    assert reader.read_all(lambda result: None) is False
    assert _judged(_reader()) == sequences[1:]


def test_watch_resumes_and_reports_only_new_drift(raw: Any, dynaunique_db: str) -> None:
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#1"), "email": {"S": "a@x.io"}})
    assert summary(watch_json(dynaunique_db)[1]) == {("missing", "EMAIL", "a@x.io",
                                                      ("ACCT#1",), None)}
    assert watch_json(dynaunique_db) == (0, [])
    raw.delete_item(TableName=TABLE, Key=sm.account_key("ACCT#1"))
    assert watch_json(dynaunique_db) == (0, [])   # the drift went away with the record
    # --from latest on a fresh consumer sees nothing that was written before it started.
    assert watch_json(dynaunique_db, "--consumer", "late", "--from", "latest") == (0, [])


def test_watch_on_a_table_without_a_stream_exits_2(dynaunique_db: str) -> None:
    raw_tables(dynaunique_db, *sm.MODELS)
    client = boto3.client("dynamodb", endpoint_url=dynaunique_db, region_name="us-east-1")
    client.update_table(TableName=TABLE, StreamSpecification={"StreamEnabled": False})
    result = watch(dynaunique_db)
    assert result.exit_code == 2, result.output
    assert "has no stream" in result.output


# --- repair, only when asked ----------------------------------------------------------------------


def test_watch_repair_fixes_what_it_found(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="old@x.io", username="ada").save()
    raw.update_item(TableName=TABLE, Key=sm.account_key("ACCT#1"),
                    UpdateExpression="SET email = :e",
                    ExpressionAttributeValues={":e": {"S": "new@x.io"}})
    raw.delete_item(TableName=TABLE, Key=sm.lock_pk("UNIQ#HANDLE#ada"))
    result = watch(dynaunique_db, "--json", "--repair")
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(line["repair"]["status"] for line in lines if "repair" in line) == [
        "fixed", "fixed", "fixed"]
    assert_clean(sm.MODELS, dynaunique_db)


def test_repair_of_a_hashed_missing_lock_waits_for_the_secret_to_be_confirmed(
        raw: Any, dynaunique_db: str) -> None:
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"},
                                        "phone": {"S": "+15550002"}})
    checker = Checker(sm.MODELS, repair=True)
    refused = checker.judge(stream_records(dynaunique_db), table=TABLE)
    assert refused.repairs == () and refused.refused is not None
    assert "PHONE" in refused.refused and "+1555" not in refused.refused
    # A lock the current secret made is read: the secret is confirmed, the repair goes out.
    Account(pk="ACCT#1", email="ada@x.io", phone="+15550001").save()
    done = checker.judge(stream_records(dynaunique_db), table=TABLE)
    assert done.refused is None
    assert sorted(r.status for r in done.repairs) == ["fixed", "fixed"]
    assert_clean(sm.MODELS, dynaunique_db)


# --- the Lambda handler, with the event Lambda delivers -------------------------------------------


def _lambda_event(records: list[dict[str, Any]], arn: str) -> dict[str, Any]:
    """GetRecords' records as Lambda hands them to a function: JSON, binaries in base64."""
    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            import base64
            return base64.b64encode(value).decode()
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value if not hasattr(value, "timestamp") else value.timestamp()

    return json.loads(json.dumps({"Records": [
        {**plain(r), "eventSourceARN": arn} for r in records]}))


def _handled(event: dict[str, Any], endpoint: str, monkeypatch: pytest.MonkeyPatch,
             caplog: pytest.LogCaptureFixture) -> Any:
    """The Lambda handler's answer to ``event`` (a fresh checker of ``MODULE`` at ``endpoint``),
    its WARNING events in ``caplog``."""
    from dynaunique.streams import aws_lambda

    monkeypatch.setenv("DYNAUNIQUE_MODULE", MODULE)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    # The application's logging is configured (here: pytest's), so the handler adds none.
    configured_by_the_application(aws_lambda.streams_logger, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="dynaunique.streams"):
        return aws_lambda.handler(event, None)


def test_the_lambda_handler_reports_findings_and_only_the_failed_record(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:

    Account(pk="ACCT#1", email="ada@x.io").save()
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"},
                                        "blob": {"B": b"\x00\xff"}})
    arn = raw.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    event = _lambda_event(stream_records(dynaunique_db), arn)
    assert event["Records"][2]["dynamodb"]["NewImage"]["blob"] == {"B": "AP8="}
    broken = json.loads(json.dumps(event["Records"][0]))
    del broken["dynamodb"]["Keys"]
    broken["dynamodb"]["SequenceNumber"] = "999"
    event["Records"].insert(1, broken)
    answer = _handled(event, dynaunique_db, monkeypatch, caplog)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "999"}]}
    (finding,) = events(caplog, "stream_finding")
    assert (finding["kind"], finding["lock_key"]) == ("missing", "UNIQ#EMAIL#b@x.io")
    (failed,) = events(caplog, "stream_record_failed")
    assert failed["sequence"] == "999"


def test_a_record_that_is_not_an_object_fails_alone(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A record that is not a JSON object ("x", null, 5) is listed in batchItemFailures by its
    place in the batch; the batch's other records are judged all the same."""

    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"}})
    arn = raw.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    event = _lambda_event(stream_records(dynaunique_db), arn)
    event["Records"][:0] = ["x", None, 5]
    answer = _handled(event, dynaunique_db, monkeypatch, caplog)
    assert answer == {"batchItemFailures": [{"itemIdentifier": f"#{i}"} for i in range(3)]}
    (finding,) = events(caplog, "stream_finding")
    assert (finding["kind"], finding["lock_key"]) == ("missing", "UNIQ#EMAIL#b@x.io")
    assert [e["reason"] for e in events(caplog, "stream_record_failed")] == [
        f"not a DynamoDB stream record: {v!r}" for v in ("x", None, 5)]


def test_the_lambda_handler_logs_json_lines_when_nothing_else_is_configured(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from dynaunique.streams import aws_lambda

    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"}})
    arn = raw.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    monkeypatch.setenv("DYNAUNIQUE_MODULE", MODULE)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynaunique_db)
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    monkeypatch.setattr(aws_lambda.streams_logger, "handlers", [])
    monkeypatch.setattr(aws_lambda.streams_logger, "propagate", True)
    monkeypatch.setattr(aws_lambda.streams_logger, "level", logging.NOTSET)
    answer = aws_lambda.handler(_lambda_event(stream_records(dynaunique_db), arn), None)
    assert answer == {"batchItemFailures": []}
    (line,) = capsys.readouterr().err.splitlines()
    logged = json.loads(line)
    assert (logged["event"], logged["kind"], logged["level"]) == (
        "stream_finding", "missing", "WARNING")
    assert logged["message"] == "ACCT#2 / PROFILE holds EMAIL 'b@x.io' but no lock protects it"


def test_a_change_that_keeps_the_records_lock_keys_costs_no_read(
        raw: Any, dynaunique_db: str) -> None:
    ada = Account(pk="ACCT#1", email="ada@x.io", username="ada")
    ada.save()
    before = len(stream_records(dynaunique_db))
    raw.update_item(TableName=TABLE, Key=sm.account_key("ACCT#1"),
                    UpdateExpression="SET note = :n",
                    ExpressionAttributeValues={":n": {"S": "hello"}})
    ada.refresh()
    ada.username = "countess"
    ada.save()
    checker = Checker(sm.MODELS)
    untouched, moved = after(stream_records(dynaunique_db), before)[:1], after(
        stream_records(dynaunique_db), before + 1)
    assert checker.judge(untouched, table=TABLE).cost.total == 0
    # A moved handle: the record's MODIFY names the old and new HANDLE keys, not EMAIL's.
    result = checker.judge(moved, table=TABLE)
    assert (result.findings, result.cost.count("TransactGetItems")) == ((), 2)


def test_watch_of_models_without_constraints_exits_2(dynaunique_db: str, tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain_models.py").write_text(
        "from dynaunique import Model\n"
        "from dynaunique.attributes import UnicodeAttribute\n\n"
        "class Plain(Model):\n"
        "    class Meta:\n"
        "        table_name = 'plain'\n\n"
        "    pk = UnicodeAttribute(hash_key=True)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(cli, ["watch", "plain_models", "--once", "--endpoint",
                                      dynaunique_db])
    assert result.exit_code == 2, result.output
    assert "declares a unique constraint: nothing to watch" in result.output


def test_watch_prints_the_findings_as_check_does_when_piped(raw: Any, dynaunique_db: str) -> None:
    raw.put_item(TableName=TABLE, Item={**sm.account_key("ACCT#2"), "email": {"S": "b@x.io"}})
    result = watch(dynaunique_db)
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "kind\tconstraint\tvalue\tlock owner\trecords holding it\twhy",
        "missing lock\tEMAIL\tb@x.io\t-\tACCT#2 / PROFILE\tno lock"]
    assert "1 finding(s)" in result.stderr


def test_a_record_whose_reads_fail_is_failed_and_the_others_are_judged(
        dynaunique_db: str) -> None:
    from reliability.proxy import Fault, FaultProxy

    with FaultProxy(dynaunique_db) as proxy:
        raw = raw_tables(proxy.url, *sm.MODELS)
        for n in (1, 2):
            raw.put_item(TableName=TABLE, Item={**sm.account_key(f"ACCT#{n}"),
                                                "email": {"S": f"u{n}@x.io"}})
        records = stream_records(dynaunique_db)
        # Every read of u1's lock is dropped: the retries run out, that record is retried.
        proxy.inject(Fault.DROP_BEFORE, times=100, operations=frozenset({"TransactGetItems"}),
                     when=lambda _, body: "UNIQ#EMAIL#u1@x.io" in json.dumps(body))
        result = Checker(sm.MODELS).judge(records, table=TABLE)
    assert result.failed == (records[0]["dynamodb"]["SequenceNumber"],)
    assert [(f.kind, f.lock_key) for f in result.findings] == [("missing", "UNIQ#EMAIL#u2@x.io")]
