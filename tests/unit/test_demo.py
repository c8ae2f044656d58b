"""The demo's pure parts: region and loopback detection, readable conditions, summaries, the
race report, and the demo command's own checks (no server)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dynaunique.cli import _demo as demo
from dynaunique.cli import cli
from dynaunique.cli._demo import (
    ItemSummary,
    RaceOutcome,
    RaceReport,
    RaceRound,
)

OWNER_GUARD = "attribute_not_exists(PK) OR (owner.PK = 'ACCT#a1f9c3' AND owner.SK = 'PROFILE')"


def _round(number: int, winners: int, records: int, naive_records: int) -> RaceRound:
    return RaceRound(number, f"race-{number}@example.com",
                     RaceOutcome(winners=winners, refused=3 - winners, errors=(), records=records),
                     RaceOutcome(winners=naive_records, refused=3 - naive_records, errors=(),
                                 records=naive_records))


def test_region_for_reads_the_region_out_of_an_aws_endpoint() -> None:
    assert demo.region_for("https://dynamodb.eu-west-1.amazonaws.com") == "eu-west-1"
    assert demo.region_for("https://dynamodb-fips.us-gov-west-1.amazonaws.com/") == "us-gov-west-1"


def test_region_for_falls_back_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert demo.region_for("http://127.0.0.1:8000") == "ap-south-1"


def test_is_loopback() -> None:
    assert demo.is_loopback("http://127.0.0.1:8000")
    assert demo.is_loopback("http://localhost:8000")
    assert not demo.is_loopback("https://dynamodb.eu-west-1.amazonaws.com")


def test_readable_condition_fills_in_names_and_values() -> None:
    params = {
        "ConditionExpression": "attribute_not_exists(#g0) OR (#g1.#g0 = :g0 AND #g1.#g2 = :g1)",
        "ExpressionAttributeNames": {"#g0": "PK", "#g1": "owner", "#g2": "SK"},
        "ExpressionAttributeValues": {":g0": {"S": "ACCT#a1f9c3"}, ":g1": {"S": "PROFILE"}},
    }
    assert demo.readable_condition(params) == OWNER_GUARD


def test_summarize_names_each_item_by_its_hash_key() -> None:
    request = {"TransactItems": [
        {"Put": {"TableName": "t", "Item": {"email": {"S": "a@x.io"}, "PK": {"S": "ACCT#1"}},
                 "ConditionExpression": "attribute_not_exists(#g0)",
                 "ExpressionAttributeNames": {"#g0": "PK"}}},
        {"Delete": {"TableName": "t", "Key": {"PK": {"S": "UNIQ#EMAIL#a@x.io"},
                                              "SK": {"S": "LOCK"}}}},
    ]}
    assert demo.summarize(request, "PK") == (
        ItemSummary("Put", "ACCT#1", "attribute_not_exists(PK)"),
        ItemSummary("Delete", "UNIQ#EMAIL#a@x.io", ""),
    )
    single = {"Operation": "PutItem", "TableName": "t", "Item": {"PK": {"S": "ACCT#1"}}}
    assert demo.summarize(single, "PK") == (ItemSummary("Put", "ACCT#1", ""),)


def test_comparable_ignores_only_the_token_and_the_locks_created_time() -> None:
    lock = {"PK": {"S": "UNIQ#EMAIL#a"}, "owner": {"M": {}}, "created": {"S": "2024-01-01"}}
    sent = {"TransactItems": [{"Put": {"Item": lock}}], "ClientRequestToken": "abc"}
    planned = {"TransactItems": [{"Put": {"Item": {**lock, "created": {"S": "2024-01-02"}}}}]}
    assert demo.comparable(sent) == demo.comparable(planned)
    other = {"TransactItems": [{"Put": {"Item": {**lock, "PK": {"S": "UNIQ#EMAIL#b"}}}}]}
    assert demo.comparable(sent) != demo.comparable(other)


def test_race_report_counts_naive_duplicates_and_flags_a_second_winner() -> None:
    clean = RaceReport(3, (_round(1, 1, 1, 3), _round(2, 1, 1, 1)))
    assert clean.guarded_exactly_one
    assert clean.problems == ()
    assert clean.naive_duplicate_rounds == 1
    assert clean.naive_duplicates == 2
    broken = RaceReport(3, (_round(1, 2, 2, 1),))
    assert not broken.guarded_exactly_one
    assert broken.problems == ("round 1: dynaunique had 2 winners and 2 records",)


def test_demo_command_without_moto_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.setattr(demo, "moto_available", lambda: False)
    result = CliRunner().invoke(cli, ["demo"])
    assert result.exit_code == 2
    assert "pip install -e '/path/to/clone[local]'" in result.output
    assert "--endpoint URL" in result.output


def test_demo_command_refuses_a_single_racer() -> None:
    result = CliRunner().invoke(cli, ["demo", "--racers", "1"])
    assert result.exit_code == 2
    assert "--racers" in result.output


def test_the_demo_runs_on_the_endpoints_target_and_describes_it() -> None:
    """The demo holds the one endpoint ``Target`` (issue 39: its copy with an ``embedded``
    field is gone) and its own flag for the server it started."""
    from dynaunique._transport.endpoint import LOCAL_CREDENTIALS, Target

    local = Target("http://127.0.0.1:8000", "us-east-1", LOCAL_CREDENTIALS)
    assert demo.describe(local, embedded=True) == \
        "the embedded local server at http://127.0.0.1:8000 (moto, requests serialized)"
    assert demo.describe(local, embedded=False) == "http://127.0.0.1:8000 (region us-east-1)"
    remote = demo.remote_target("http://127.0.0.1:8000")  # signed as the environment says
    assert type(remote) is Target and remote.endpoint == "http://127.0.0.1:8000"
    assert not hasattr(demo, "Target")
