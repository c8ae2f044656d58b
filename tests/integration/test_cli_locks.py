"""``dynaunique locks``, ``check`` and ``repair`` through click's CliRunner, on the local server."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import support.audit_models as fm
from click.testing import CliRunner, Result
from support.recorders import listening, target_of
from support.tables import raw_tables

from dynaunique._transport import clients
from dynaunique.cli import cli, main
from dynaunique.testing import use_endpoint

MODULE = fm.__name__
Account = fm.AuditAccount


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, *fm.MODELS)


def run(endpoint: str, *args: str) -> Result:
    # CliRunner's stdout is not a terminal: the rows come as plain tab-separated lines on
    # stdout, every other line (summaries, costs, advice) on stderr.
    runner = CliRunner()
    return runner.invoke(cli, [*args[:1], MODULE, *args[1:], "--endpoint", endpoint])


def run_json(endpoint: str, *args: str) -> tuple[int, Any]:
    result = run(endpoint, *args, "--json")
    return result.exit_code, json.loads(result.stdout)


# --- locks ---------------------------------------------------------------------------------------


def test_locks_lists_every_lock_and_says_it_scanned(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="Ada@X.io", phone="+1555", tenant="acme", slug="home").save()
    result = run(dynaunique_db, "locks")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "constraint\tvalue\towner\tmodel\tcreated\texpiry"
    assert len(lines) == 4  # the header, then one lock a line
    assert any(line.startswith("EMAIL\tada@x.io\tACCT#1 / PROFILE\tAuditAccount\t")
               for line in lines)
    assert any("PHONE" in line and "hashed" in line for line in lines)
    assert any("TENANT_SLUG" in line and "acme / home" in line for line in lines)
    assert "3 lock(s)" in result.stderr
    assert "cost: scan of 4 items (1 Scan request, eventually consistent)" in result.stderr


def test_locks_exact_is_one_consistent_get_item(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(target_of(request))

    with listening([clients.client_for(Account)], record):
        result = run(dynaunique_db, "locks", "--constraint", "email", "--value", "ADA@x.io",
                     "--exact")
    assert result.exit_code == 0, result.output
    assert sent == ["DynamoDB_20120810.GetItem"]
    assert "ACCT#1 / PROFILE" in result.stdout
    assert "cost: 1 GetItem (strongly consistent)" in result.stderr


def test_locks_exact_of_a_free_value_and_of_a_composite(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="a@x.io", tenant="acme", slug="home").save()
    free = run(dynaunique_db, "locks", "--constraint", "EMAIL", "--value", "b@x.io", "--exact")
    assert (free.exit_code, free.stderr.splitlines()[0]) == (0, "No lock: EMAIL 'b@x.io' is free.")
    code, data = run_json(dynaunique_db, "locks", "--constraint", "TENANT_SLUG", "--value", "acme",
                          "--value", "home", "--exact")
    assert code == 0
    assert data["lock"]["key"] == "UNIQ#TENANT_SLUG#acme#home"
    assert data["lock"]["owner"] == {"PK": "ACCT#1", "SK": "PROFILE"}
    assert data["cost"]["requests"] == {"GetItem": 1}


def test_locks_prefix_filter_as_json(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    Account(pk="ACCT#2", email="bob@x.io").save()
    code, data = run_json(dynaunique_db, "locks", "--constraint", "EMAIL", "--value", "AD")
    assert code == 0
    assert [(lock["key"], lock["value"], lock["model"]) for lock in data["locks"]] == [
        ("UNIQ#EMAIL#ada@x.io", "ada@x.io", "AuditAccount")]
    assert data["cost"]["items_scanned"] == 4


def test_locks_owner_shows_held_and_missing_locks_without_a_scan(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="a@x.io", username="ada").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#HANDLE#ada"))
    result = run(dynaunique_db, "locks", "--owner", "ACCT#1", "--model", "AuditAccount")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any("EMAIL" in line and "held" in line for line in lines)
    assert any("HANDLE" in line and "missing" in line for line in lines)
    assert ("cost: 1 GetItem (strongly consistent), 1 BatchGetItem (strongly consistent)"
            in result.stderr)
    code, data = run_json(dynaunique_db, "locks", "--owner", "ACCT#1", "--owner-range", "PROFILE")
    assert code == 0
    assert [(e["constraint"], e["status"]) for e in data["locks"]] == [
        ("EMAIL", "held"), ("HANDLE", "missing")]


@pytest.mark.parametrize(("args", "message"), [
    (("--exact",), "--exact needs --constraint and --value"),
    (("--owner", "ACCT#1", "--exact"), "--owner lists one record's locks"),
    (("--owner-range", "PROFILE"), "--owner-range needs --owner"),
    (("--model", "Nope"), "no loaded model is named 'Nope'"),
])
def test_locks_refuses_options_that_do_not_go_together(
        raw: Any, dynaunique_db: str, args: tuple[str, ...], message: str) -> None:
    result = run(dynaunique_db, "locks", *args)
    assert result.exit_code == 2
    assert message in result.output


# --- check ---------------------------------------------------------------------------------------


def test_check_of_a_clean_table_exits_zero(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="a@x.io").save()
    result = run(dynaunique_db, "check")
    assert result.exit_code == 0, result.output
    assert "No findings: locks and records agree." in result.stderr
    assert "cost: scan of 2 items (1 Scan request, eventually consistent)" in result.stderr
    assert result.stdout == "kind\tconstraint\tvalue\tlock owner\trecords holding it\twhy\n"


def test_check_reports_the_drift_and_exits_one(raw: Any, dynaunique_db: str) -> None:
    fm.seed_drift(raw)
    result = run(dynaunique_db, "check", "--segments", "3")
    assert result.exit_code == 1, result.output
    assert ("8 finding(s): 1 duplicate, 3 missing lock, 1 foreign owner, 2 orphan lock, "
            "1 unknown constraint") in result.stderr
    assert "3 Scan requests" in result.stderr and "8 TransactGetItems" in result.stderr
    rows = result.stdout.splitlines()
    assert len(rows) == 1 + 8  # the header, then one finding a line
    assert any(row.startswith("duplicate\tEMAIL\tdup@x.io\t") and
               "ACCT#DUP1 / PROFILE; ACCT#DUP2 / PROFILE" in row for row in rows)
    code, data = run_json(dynaunique_db, "check")
    assert code == 1
    assert data["counts"] == {"duplicate": 1, "missing": 3, "foreign_owner": 1, "orphan": 2,
                              "foreign_secret": 0, "unknown_constraint": 1, "unreadable": 0}
    assert data["secret_warnings"] == []
    duplicate = next(f for f in data["findings"] if f["kind"] == "duplicate")
    assert [h["key"]["PK"] for h in duplicate["holders"]] == ["ACCT#DUP1", "ACCT#DUP2"]
    assert duplicate["value"] == "dup@x.io"


def test_check_of_an_unknown_module_exits_two(dynaunique_db: str) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["check", "no_such_module_here", "--endpoint", dynaunique_db])
    assert result.exit_code == 2
    assert "cannot import 'no_such_module_here'" in result.output


def test_check_of_a_missing_table_exits_two(dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, *fm.MODELS)
    result = run(dynaunique_db, "check")
    assert result.exit_code == 2
    assert "ResourceNotFoundException" in result.output


# --- repair --------------------------------------------------------------------------------------


def test_repair_without_yes_changes_nothing(raw: Any, dynaunique_db: str) -> None:
    fm.seed_drift(raw)
    before = sorted(json.dumps(i, sort_keys=True) for i in raw.scan(TableName=fm.TABLE)["Items"])
    result = run(dynaunique_db, "repair")
    assert result.exit_code == 1, result.output  # the duplicate cannot be fixed
    assert "Planned fixes (6)" in result.stderr
    assert "Left for a person (2)" in result.stderr
    assert "Dry run: nothing was changed. Run again with --yes to apply 6 fix(es)." in (
        result.stderr)
    assert result.stdout.splitlines()[0] == "fix\tconstraint\tvalue\tguarded write"
    after = sorted(json.dumps(i, sort_keys=True) for i in raw.scan(TableName=fm.TABLE)["Items"])
    assert after == before


def test_repair_yes_fixes_the_drift_and_check_then_shows_only_the_duplicate(
        raw: Any, dynaunique_db: str) -> None:
    fm.seed_drift(raw)
    result = run(dynaunique_db, "repair", "--yes", "--drop-unknown", "OLDNAME")
    assert result.exit_code == 1, result.output
    assert "7 fixed; 1 left for a person" in result.stderr
    code, data = run_json(dynaunique_db, "check")
    assert code == 1
    assert [(f["kind"], f["lock_key"]) for f in data["findings"]] == [
        ("duplicate", "UNIQ#EMAIL#dup@x.io")]
    # The duplicate resolved (the lock holder moves on), repair completes and exits 0.
    holder = Account.get("ACCT#DUP1", "PROFILE", consistent_read=True)
    holder.email = "dup1@x.io"
    holder.save()
    code, data = run_json(dynaunique_db, "repair", "--yes")
    assert code == 0
    assert [(o["action"]["kind"], o["status"]) for o in data["result"]["outcomes"]] == [
        ("put_missing", "fixed")]
    assert run(dynaunique_db, "check").exit_code == 0


def test_repair_of_a_clean_table(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="a@x.io").save()
    result = run(dynaunique_db, "repair", "--yes")
    assert result.exit_code == 0, result.output
    assert "No findings: nothing to repair." in result.stderr


def test_the_console_script_exits_one_when_check_finds_drift(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dynaunique check`` run as the installed script: CliRunner would hide a lost exit code
    (``cli(standalone_mode=False)`` returns ``ctx.exit(1)``'s code instead of raising)."""
    fm.seed_drift(raw)
    monkeypatch.setattr(sys, "argv", ["dynaunique", "check", MODULE, "--endpoint", dynaunique_db])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1


# --- found on the way (issue 14) -----------------------------------------------------------------


def test_check_shows_an_orphan_lock_value_from_its_key_when_it_lacks_a_value(
        raw: Any, dynaunique_db: str) -> None:
    """A lock item without a ``value`` attribute still spells its value in its key: the report
    shows that value, not "hashed" (the constraint is not hashed)."""
    raw.put_item(TableName=fm.TABLE, Item={
        **fm.lock_pk("UNIQ#EMAIL#ghost@x.io"),
        "owner": {"M": {"PK": {"S": "ACCT#404"}, "SK": {"S": "PROFILE"}}},
        "model": {"S": "AuditAccount"}, "constraint": {"S": "EMAIL"},
        "created": {"S": "2026-01-01T00:00:00+00:00"},
    })
    code, data = run_json(dynaunique_db, "check")
    assert code == 1
    [finding] = data["findings"]
    assert (finding["kind"], finding["value"], finding["hashed"]) == ("orphan", "ghost@x.io", False)
    shown = run(dynaunique_db, "check")
    assert "ghost@x.io" in shown.stdout
    assert "hashed" not in shown.stdout


