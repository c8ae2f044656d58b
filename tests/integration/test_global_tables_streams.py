"""The stream guard on a global table (dynaunique/streams/_across.py): run per region, it reads
each replica's stream and every lock key a change touches in each region, and reports a value
granted in two regions — a raw boto3 write in the non-home region racing a save in the home
region — naming both regions; saves routed home from both regions, hand-overs included, are
never reported, though the replicas disagree while replication is in flight."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import support.global_stream_models as gsm
from click.testing import CliRunner
from support.global_tables import (
    EAST,
    WEST,
    make_global,
    member_model,
    regional_client,
    replica_stream,
)
from support.log_events import configured_by_the_application, events

from dynaunique.cli import cli
from dynaunique.errors import ConfigurationError
from dynaunique.streams import BatchResult, Checker, Reader, _across
from dynaunique.testing import create_tables, replication_state, set_replication_delay

#: Replication held back: nothing reaches the other replica until the test releases it.
HELD = 60.0
LOCK = "UNIQ#EMAIL#ada@x.io"


@pytest.fixture
def pauses(dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The checker's waits for the replicas to agree: the first releases the held replication
    (delay 0: everything in flight is applied before the next read), so the checker's first read
    of the regions surely comes before replication and its second after — on any machine."""
    waited: list[float] = []

    def pause(seconds: float) -> None:
        if not waited:
            set_replication_delay(dynaunique_db, 0)
        waited.append(seconds)

    monkeypatch.setattr(_across, "_pause", pause)
    return waited


def bypass_in_west(endpoint: str, table: str, pk: str, lock: dict[str, Any]) -> None:
    """Another application in eu-west-1: the record and a lock naming it, the lock put with
    ``attribute_not_exists`` in eu-west-1's replica (which has not seen the home region's)."""
    regional_client(endpoint, WEST).transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": {"PK": {"S": pk}, "email": {"S": "ada@x.io"}}}},
        {"Put": {"TableName": table, "Item": {**lock, "owner": {"M": {"PK": {"S": pk}}}},
                 "ConditionExpression": "attribute_not_exists(PK)"}}])


def home_lock(endpoint: str, table: str) -> dict[str, Any]:
    item: dict[str, Any] = regional_client(endpoint, EAST).get_item(
        TableName=table, Key={"PK": {"S": LOCK}}, ConsistentRead=True)["Item"]
    return item


def test_watch_regions_names_both_regions_of_a_bypass_double_grant(
        dynaunique_db: str, pauses: list[float]) -> None:
    home = member_model("gt_watch", EAST, dynaunique_db, home=EAST, stream=True)
    make_global(home, dynaunique_db)
    set_replication_delay(dynaunique_db, HELD)
    home(pk="M1", email="ada@x.io").save()   # us-east-1, the home region
    bypass_in_west(dynaunique_db, "gt_watch", "M2", home_lock(dynaunique_db, "gt_watch"))
    assert replication_state(dynaunique_db)["pending"] > 0   # the race is still in flight
    result = CliRunner().invoke(cli, [
        "watch", gsm.__name__, "--once", "--json", "--regions", f"{EAST},{WEST}", "--settle",
        "10", "--endpoint", dynaunique_db])
    assert result.exit_code == 1, result.output
    assert pauses == [_across.POLL_SECONDS]   # split at the first read, agreed at the second
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    grants = [line for line in lines if line["kind"] == "double_grant"]
    assert [(g["lock_key"], g["regions"],
             [(x["region"], x["holder"]["key"]["PK"], x["lock_owner"]) for x in g["grants"]])
            for g in grants] == [
        (LOCK, [EAST, WEST], [(EAST, "M1", "M1"), (WEST, "M2", "M2")])]
    assert grants[0]["message"] == (
        "EMAIL 'ada@x.io' was granted in 2 regions before replication settled: us-east-1 to "
        "M1 (the lock there names M1), eu-west-1 to M2 (the lock there names M2); once the "
        "replicas agreed, 2 records hold it (a write bypassed the home region)")
    # Once converged, each replica holds the duplicate itself: the other region's stream,
    # read after that, reports it as the ordinary duplicate.
    assert {(line["kind"], line["lock_key"]) for line in lines if line is not grants[0]} == {
        ("duplicate", LOCK)}


def test_saves_routed_home_from_both_regions_are_never_reported(
        dynaunique_db: str, pauses: list[float]) -> None:
    east = member_model("gt_quiet", EAST, dynaunique_db, home=EAST, stream=True)
    west = member_model("gt_quiet", WEST, dynaunique_db, home=EAST, stream=True)
    make_global(east, dynaunique_db)
    set_replication_delay(dynaunique_db, HELD)
    checker = Checker([east], regions=[EAST, WEST], settle_seconds=10)
    batches: list[BatchResult] = []
    readers = [Reader(checker, checker.tables["gt_quiet"], region=r, consumer="quiet")
               for r in (EAST, WEST)]
    ada = east(pk="A", email="ada@x.io")
    ada.save()
    west(pk="B", email="bob@x.io").save()
    for reader in readers:   # us-east-1 holds A and B, eu-west-1 nothing yet: no split
        reader.read_all(batches.append)
    assert pauses == []
    set_replication_delay(dynaunique_db, 0)
    assert replication_state(dynaunique_db)["pending"] == 0
    set_replication_delay(dynaunique_db, HELD)
    ada.email = "ann@x.io"
    ada.save()                                  # ada@x.io released in the home region ...
    west(pk="C", email="ADA@x.io").save()       # ... and taken there, from eu-west-1
    # eu-west-1's replica still grants ada@x.io to A: the replicas disagree until it settles.
    assert regional_client(dynaunique_db, WEST).get_item(
        TableName="gt_quiet", Key={"PK": {"S": LOCK}}, ConsistentRead=True,
    )["Item"]["owner"]["M"]["PK"] == {"S": "A"}
    for reader in readers:   # split (C in us-east-1, A in eu-west-1) until released
        reader.read_all(batches.append)
    assert pauses == [_across.POLL_SECONDS]
    assert replication_state(dynaunique_db)["pending"] == 0
    for reader in readers:   # the replicated writes in each stream
        reader.read_all(batches.append)
    assert sum(b.records for b in batches) > 0
    assert [(b.findings, b.double_grants, b.failed) for b in batches
            if b.findings or b.double_grants or b.failed] == []


def _handle_in_lambda(records: list[dict[str, Any]], endpoint: str,
                      monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """``records`` handed to the stream guard's Lambda handler, configured as a deployed
    function of a global table is (both regions named); its log events go to ``caplog``."""
    from dynaunique.streams import aws_lambda

    monkeypatch.setenv("DYNAUNIQUE_MODULE", gsm.__name__)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
    monkeypatch.setenv("DYNAUNIQUE_REGIONS", f"{EAST}, {WEST}")
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    configured_by_the_application(aws_lambda.streams_logger, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="dynaunique.streams"):
        assert aws_lambda.handler({"Records": records}) == {"batchItemFailures": []}


def test_the_lambda_handler_of_the_other_region_names_both_regions(
        dynaunique_db: str, pauses: list[float], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    home = member_model("gt_watch", EAST, dynaunique_db, home=EAST, stream=True)
    make_global(home, dynaunique_db)
    set_replication_delay(dynaunique_db, HELD)
    home(pk="M1", email="ada@x.io").save()
    bypass_in_west(dynaunique_db, "gt_watch", "M2", home_lock(dynaunique_db, "gt_watch"))
    # The bypass only: nothing replicated yet.
    records = replica_stream(dynaunique_db, WEST, "gt_watch")
    assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in records] == ["M2", LOCK]
    _handle_in_lambda(records, dynaunique_db, monkeypatch, caplog)
    assert pauses == [_across.POLL_SECONDS]
    (grant,) = events(caplog, "stream_double_grant")
    assert (grant["regions"], grant["sequences"]) == (
        [EAST, WEST], [r["dynamodb"]["SequenceNumber"] for r in records])


def test_the_lambda_handler_judges_a_record_in_the_region_of_its_stream(
        dynaunique_db: str, pauses: list[float], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The models name us-east-1 (the home region); the function runs on eu-west-1's stream. A
    record written there without its lock, not replicated yet, is judged on eu-west-1's replica,
    where it is, not where the models point (where it is not yet: nothing would be found)."""
    home = member_model("gt_watch", EAST, dynaunique_db, home=EAST, stream=True)
    make_global(home, dynaunique_db)
    set_replication_delay(dynaunique_db, HELD)
    regional_client(dynaunique_db, WEST).put_item(   # an application that knows nothing of locks
        TableName="gt_watch", Item={"PK": {"S": "M9"}, "email": {"S": "ada@x.io"}})
    records = replica_stream(dynaunique_db, WEST, "gt_watch")
    assert {r["awsRegion"] for r in records} == {WEST}
    _handle_in_lambda(records, dynaunique_db, monkeypatch, caplog)
    assert [(f["kind"], f["table"]) for f in events(caplog, "stream_finding")] == [
        ("missing", "gt_watch")]


def test_a_guard_needs_two_regions_to_compare(dynaunique_db: str) -> None:
    home = member_model("gt_one", EAST, dynaunique_db, home=EAST, stream=True)
    with pytest.raises(ConfigurationError, match=r"two regions or more, not \['us-east-1'\]"):
        Checker([home], regions=[EAST, EAST])


def test_a_record_written_in_another_region_beside_the_home_region_s_lock_is_named(
        dynaunique_db: str, pauses: list[float]) -> None:
    home = member_model("gt_record", EAST, dynaunique_db, home=EAST, stream=True)
    make_global(home, dynaunique_db)
    set_replication_delay(dynaunique_db, HELD)
    home(pk="M1", email="ada@x.io").save()
    # An application in eu-west-1 that knows nothing of locks: the record alone.
    regional_client(dynaunique_db, WEST).put_item(
        TableName="gt_record", Item={"PK": {"S": "M2"}, "email": {"S": "ada@x.io"}})
    checker = Checker([home], regions=[EAST, WEST])
    batches: list[BatchResult] = []
    Reader(checker, checker.tables["gt_record"], region=WEST).read_all(batches.append)
    assert pauses == [_across.POLL_SECONDS]
    (grant,) = [g for b in batches for g in b.double_grants]
    assert [(g.region, g.holder.label, g.lock_owner) for g in grant.grants] == [
        (EAST, "M1", "M1"), (WEST, "M2", "-")]
    assert "eu-west-1 to M2 (no lock there)" in grant.message
    # Its one suspect's reads (docs/global-tables.md states them): the local judge's 1; in each
    # region 1 (us-east-1's 2: its lock names M1), then eu-west-1 again with M1, then both once
    # more after the wait.
    assert batches[0].cost.count("TransactGetItems") == 7


def test_a_region_without_a_replica_is_named(dynaunique_db: str) -> None:
    create_tables(member_model("gt_watch", EAST, dynaunique_db, home=EAST, stream=True))
    result = CliRunner().invoke(cli, [
        "watch", gsm.__name__, "--once", "--regions", f"{EAST},{WEST}", "--endpoint",
        dynaunique_db])
    assert result.exit_code == 2, result.output
    assert "table 'gt_watch' has no replica in eu-west-1" in " ".join(result.output.split())
