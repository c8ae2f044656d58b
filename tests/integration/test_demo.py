"""Tests of ``dynaunique demo``: the scenario's reports, its pure helpers, and the command."""

from __future__ import annotations

import boto3
import pytest
from click.testing import CliRunner

from dynaunique.cli import cli
from dynaunique.cli._demo import (
    ADA_KEY,
    GRACE_KEY,
    open_demo,
)

OWNER_GUARD = "attribute_not_exists(PK) OR (owner.PK = 'ACCT#a1f9c3' AND owner.SK = 'PROFILE')"


def _tables(endpoint: str) -> list[str]:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    return list(client.list_tables()["TableNames"])


# --- pure helpers --------------------------------------------------------------------------------


# --- the scenario against the local server -------------------------------------------------------


def test_scenario_reports_what_was_sent_and_stored(dynaunique_db: str) -> None:
    with open_demo(dynaunique_db, racers=6, rounds=2) as run:
        tables = sorted(_tables(dynaunique_db))
        assert tables == sorted([run.table, run.naive_table])

        signup = run.sign_up()
        assert [s.operation for s in signup.sent] == ["TransactWriteItems"]
        assert signup.request is not None
        items = signup.request.body["TransactItems"]
        assert [next(iter(i)) for i in items] == ["Put", "Put", "Put", "Put"]
        assert items[0]["Put"]["ConditionExpression"] == "attribute_not_exists(#g0)"
        assert "ClientRequestToken" in signup.request.body
        assert signup.matches_dry_run
        assert signup.locks == ("UNIQ#EMAIL#ada@lovelace.io", "UNIQ#HANDLE#ada",
                                "UNIQ#TENANT_SLUG#t1#home")
        assert signup.problems == ()

        violation = run.duplicate_signup()
        assert violation.message == "email 'ada@lovelace.io' is already taken (held by ACCT#a1f9c3)"
        assert violation.fields == ("email",)
        assert violation.constraint == "EMAIL"
        assert violation.owner == {"PK": ADA_KEY, "SK": "PROFILE"}
        assert (violation.record_written, violation.locks_written) == (False, 0)

        race = run.race()
        assert len(race.rounds) == 2
        for r in race.rounds:
            assert (r.guarded.winners, r.guarded.refused, r.guarded.records) == (1, 5, 1)
            assert (r.guarded.stray_locks, r.guarded.errors) == (0, ())
            # Every naive "winner" stored a record: duplicates are exactly the extra winners.
            assert r.naive.records == r.naive.winners >= 1
        assert race.problems == ()

        change = run.change_email()
        assert [s.operation for s in change.sent] == ["TransactWriteItems"]
        assert [(i.action, i.key) for i in change.items] == [
            ("Put", ADA_KEY),
            ("Put", "UNIQ#EMAIL#ada@analytical.engine"),
            ("Delete", "UNIQ#EMAIL#ada@lovelace.io"),
        ]
        assert change.items[2].condition == OWNER_GUARD
        assert (change.old_email_holder, change.new_email_holder) == (GRACE_KEY, ADA_KEY)

        deletion = run.delete()
        assert [(i.action, i.key) for i in deletion.items] == [
            ("Delete", ADA_KEY),
            ("Delete", "UNIQ#EMAIL#ada@analytical.engine"),
            ("Delete", "UNIQ#HANDLE#ada"),
            ("Delete", "UNIQ#TENANT_SLUG#t1#home"),
        ]
        assert (deletion.locks_left, deletion.record_left) == ((), False)

        locks = run.lock_items()
        grace = [(r.constraint, r.value) for r in locks.rows if r.owner == GRACE_KEY]
        assert grace == [("EMAIL", "ada@lovelace.io"), ("HANDLE", "grace"),
                         ("TENANT_SLUG", ("t1", "grace"))]
        assert not [r for r in locks.rows if r.owner == ADA_KEY]
        # grace's three locks plus three for each round's single winner, none orphaned.
        assert len(locks.rows) == 3 + 3 * 2
        assert all(r.owner_holds_it and r.model == "Account" for r in locks.rows)
    assert run.cleanup_errors == []
    assert _tables(dynaunique_db) == []


def test_demo_tables_are_deleted_when_a_step_fails(dynaunique_db: str) -> None:
    with pytest.raises(RuntimeError, match="boom"), open_demo(dynaunique_db, racers=2, rounds=1):
        assert len(_tables(dynaunique_db)) == 2
        raise RuntimeError("boom")
    assert _tables(dynaunique_db) == []


# --- the command ---------------------------------------------------------------------------------


def _assert_story(output: str, rounds: int, *, verbose: bool) -> None:
    # The signup's request as JSON only with --verbose (issue 40: it was ~190 of ~280 lines);
    # without it, its items as a table.
    assert ('"TransactItems"' in output) is verbose
    assert ('"ClientRequestToken"' in output) is verbose
    assert ("Its items (`dynaunique demo --verbose` prints the request" in output) is not verbose
    assert "attribute_not_exists" in output
    assert "UNIQ#TENANT_SLUG#t1#home" in output
    assert "It is what ada.save(dry_run=True) returned just before" in output
    assert "email 'ada@lovelace.io' is already taken (held by ACCT#a1f9c3)" in output
    assert f"dynaunique: exactly one winner in each of {rounds} rounds" in output
    assert "naive: " in output
    assert "Left after the delete: none; record left: no." in output
    assert "each one's owner exists and holds that value: yes." in output


def test_demo_command_against_an_endpoint(dynaunique_db: str) -> None:
    result = CliRunner().invoke(cli, ["demo", "--endpoint", dynaunique_db, "--racers", "4",
                                      "--rounds", "2"])
    assert result.exit_code == 0, result.output
    _assert_story(result.output, rounds=2, verbose=False)
    assert len(result.output.splitlines()) < 120
    assert f"against {dynaunique_db} (region us-east-1)" in result.output
    assert _tables(dynaunique_db) == []


def test_demo_command_starts_the_embedded_server_without_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    result = CliRunner().invoke(cli, ["demo", "--racers", "3", "--rounds", "1", "--verbose"])
    assert result.exit_code == 0, result.output
    _assert_story(result.output, rounds=1, verbose=True)
    assert "against the embedded local server at http://127.0.0.1:" in result.output


