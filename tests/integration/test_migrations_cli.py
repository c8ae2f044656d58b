"""``dynaunique makemigrations``, ``migrate`` and ``showmigrations`` through click's CliRunner,
against the local server."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner, Result
from support.migrations_workspace import Workspace, workspace_fixture

from dynaunique.cli import cli
from dynaunique.errors import MigrationError
from dynaunique.migrations import MigrationExecutor

TABLE = "mig_cli_accounts"
UNIQUE_EMAIL = ", unique=True, normalize=normalizers.casefold"


ws = workspace_fixture(TABLE)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def migrate(ws: Workspace, *args: str) -> Result:
    return run("migrate", ws.module, *args, "--endpoint", ws.endpoint)


def _seed(ws: Workspace, count: int) -> None:
    ws.put_raw_many({f"ACCT#{i:03d}": {"email": f"user{i}@x.io"} for i in range(count)})


def _migration_items(ws: Workspace) -> set[str]:
    return {k.rsplit("#", 1)[1] for k in ws.ledger() if k.startswith("UNIQ#~MIGRATION#")}


# --- makemigrations ------------------------------------------------------------------------------


def test_makemigrations_writes_the_initial_migration_then_finds_nothing(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    result = run("makemigrations", ws.module)
    assert result.exit_code == 0
    path = ws.migrations / "0001_initial.py"
    assert result.stdout == (f"Wrote {path}\n"
                             "  + Add unique constraint EMAIL (email; normalize casefold) to "
                             "Account\n")
    assert path.read_text(encoding="utf-8") == f'''\
"""Migration 0001_initial of {ws.module}, written by `dynaunique makemigrations`."""

from __future__ import annotations

from dynaunique.migrations import operations as ops

dependencies = []

operations = [
    ops.AddUniqueConstraint(
        model="Account",
        table="{TABLE}",
        constraint={{
            "name": "EMAIL",
            "fields": ["email"],
            "normalize": "dynaunique.normalizers.casefold",
            "condition": None,
            "hashed": False,
        }},
    ),
]
'''
    again = run("makemigrations", ws.module)
    assert again.exit_code == 0
    assert again.stdout == f"No changes detected in {ws.module}: its migrations are up to date.\n"
    assert sorted(p.name for p in ws.migrations.iterdir()) == ["0001_initial.py", "__init__.py"]


def test_makemigrations_names_the_next_migration_after_its_change(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    ws.deploy(email=", unique=True")
    result = run("makemigrations", ws.module)
    assert result.exit_code == 0
    source = (ws.migrations / "0002_alter_account_email.py").read_text(encoding="utf-8")
    assert 'dependencies = ["0001_initial"]' in source
    assert "ops.AlterUniqueConstraint(" in source
    run("makemigrations", ws.module, "--name", "drop_email")
    ws.deploy()
    assert run("makemigrations", ws.module, "--name", "drop_email").exit_code == 0
    assert (ws.migrations / "0003_drop_email.py").exists()


def test_makemigrations_check_exits_1_and_writes_nothing(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    result = run("makemigrations", ws.module, "--check")
    assert result.exit_code == 1
    assert "0001_initial would hold" in result.stdout
    assert not ws.migrations.exists()
    run("makemigrations", ws.module)
    assert run("makemigrations", ws.module, "--check").exit_code == 0


def test_a_lambda_normalizer_is_a_clear_error(ws: Workspace) -> None:
    ws.deploy(email=", unique=True, normalize=lambda v: v.lower()")
    result = run("makemigrations", ws.module)
    assert result.exit_code == 2  # a configuration mistake, not a finding
    assert result.stderr.startswith(
        "Error: Account.EMAIL normalize= is a lambda, which has no import path; migrations "
        "store callables by import path: define a named function at module level"
    )
    assert not ws.migrations.exists()


def test_migrations_dir_and_settings_from_pyproject(ws: Workspace) -> None:
    _seed(ws, 3)
    (ws.root / "pyproject.toml").write_text(
        "[tool.dynaunique]\n"
        f'endpoint = "{ws.endpoint}"\n'
        "segments = 2\n"
        f'[tool.dynaunique.modules."{ws.module}"]\n'
        'migrations_dir = "migs"\n', encoding="utf-8")
    ws.deploy(email=UNIQUE_EMAIL)
    assert run("makemigrations", ws.module).exit_code == 0
    assert (ws.root / "migs" / "0001_initial.py").exists()
    result = run("migrate", ws.module)  # the endpoint comes from pyproject.toml too
    assert result.exit_code == 0, result.output
    assert ws.locks() == ws.expected_locks()
    assert ws.project().recorder().job_total("0001_initial#0#F#0") is None  # cleaned up


def test_an_unknown_pyproject_key_is_refused(ws: Workspace) -> None:
    (ws.root / "pyproject.toml").write_text("[tool.dynaunique]\nsegmnets = 2\n",
                                            encoding="utf-8")
    ws.deploy(email=UNIQUE_EMAIL)
    result = run("makemigrations", ws.module)
    assert result.exit_code == 2
    assert "unknown [tool.dynaunique] key 'segmnets'" in result.stderr


# --- migrate: duplicates -------------------------------------------------------------------------


def test_duplicates_stop_the_migration_and_a_rerun_after_the_fix_finishes(ws: Workspace) -> None:
    _seed(ws, 20)
    ws.put_raw("ACCT#dup1", email="USER3@x.io")  # same as user3@x.io once casefolded
    ws.put_raw("ACCT#dup2", email="user7@x.io")
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    records_before = ws.records()

    result = migrate(ws, "--segments", "2")
    assert result.exit_code == 1
    assert "Duplicates found by 0001_initial" in result.stderr
    assert "'user3@x.io'" in result.stdout and "'user7@x.io'" in result.stdout
    rows = result.stdout.splitlines()  # piped: a header, then one duplicate a line
    assert rows[0] == "constraint\tvalue\tlock held by\talso holding the value"
    assert sorted(row.split("\t")[1] for row in rows[1:]) == ["'user3@x.io'", "'user7@x.io'"]
    assert "ACCT#dup1 / PROFILE" in result.stdout or "ACCT#003 / PROFILE" in result.stdout
    assert result.stderr.splitlines()[-1].startswith(
        "Error: migration 0001_initial stopped: 2 value(s) of Account.EMAIL are held by more "
        "than one record. No record was changed.")
    assert ws.records() == records_before  # no record touched
    assert _migration_items(ws) == set()
    status = run("showmigrations", ws.module, "--endpoint", ws.endpoint)
    assert (" [ ] 0001_initial  (partly applied: fill Account.EMAIL 2/2 segments done, "
            "2 duplicate(s) to fix)") in status.stdout

    # Fix the data with plain writes (as a data fix script might): drop one of each pair.
    for pk in ("ACCT#dup1", "ACCT#dup2"):
        ws.client.delete_item(TableName=TABLE, Key={"PK": {"S": pk}, "SK": {"S": "PROFILE"}})
    result = migrate(ws)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("Applied 0001_initial\n")
    # The progress lines count the duplicates standing, never a negative difference.
    assert "duplicates -" not in result.stderr
    assert "duplicates 0" in result.stderr
    assert ws.locks() == ws.expected_locks()
    assert len(ws.locks()) == 20
    assert ws.ledger() == ws.applied_only()
    status = run("showmigrations", ws.module, "--endpoint", ws.endpoint)
    assert status.stdout.splitlines()[1:] == [" [X] 0001_initial"]


def test_duplicates_as_json(ws: Workspace) -> None:
    ws.put_raw("ACCT#1", email="a@x.io")
    ws.put_raw("ACCT#2", email="A@X.IO")
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    result = migrate(ws, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["error"] == "duplicates"
    assert report["migration"] == "0001_initial"
    (duplicate,) = report["duplicates"]
    holders = [duplicate["holder"], *duplicate["others"]]
    assert sorted(h["PK"] for h in holders) == ["ACCT#1", "ACCT#2"]
    assert {k: duplicate[k] for k in ("model", "constraint", "value", "hashed", "lock")} == {
        "model": "Account", "constraint": "EMAIL", "value": "a@x.io", "hashed": False,
        "lock": "UNIQ#EMAIL#a@x.io"}


# --- migrate: plan, fake, remove, zero -----------------------------------------------------------


def test_plan_prints_the_operations_and_sends_no_write(ws: Workspace) -> None:
    _seed(ws, 5)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    client = ws.project().connection_for(TABLE).client
    sent: list[str] = []

    def record(model: Any, **_: Any) -> None:
        sent.append(model.name)

    client.meta.events.register("before-call.dynamodb", record)
    try:
        result = migrate(ws, "--plan")
    finally:
        client.meta.events.unregister("before-call.dynamodb", record)
    assert result.exit_code == 0
    assert result.stdout == (
        f"Planned operations for {ws.module}:\n"
        "  Apply 0001_initial\n"
        "    Add unique constraint EMAIL (email; normalize casefold) to Account (table "
        f"{TABLE}): backfill its locks\n"
    )
    assert sent and set(sent) <= {"DescribeTable", "BatchGetItem", "GetItem"}
    assert ws.locks() == {} and ws.ledger() == set()
    plan = json.loads(migrate(ws, "--plan", "--json").stdout)
    assert plan == {"plan": [{"migration": "0001_initial", "backwards": False,
                              "operations": [plan["plan"][0]["operations"][0]],
                              "phases": ["fill Account.EMAIL"]}]}


def test_fake_records_without_writing_and_fake_zero_unrecords(ws: Workspace) -> None:
    _seed(ws, 4)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    result = migrate(ws, "--fake")
    assert result.exit_code == 0
    assert result.stdout == "Faked 0001_initial\n"
    assert ws.locks() == {}
    assert _migration_items(ws) == {"0001_initial"}
    status = run("showmigrations", ws.module, "--endpoint", ws.endpoint)
    assert status.stdout.splitlines()[1:] == [" [X] 0001_initial (fake)"]
    assert migrate(ws, "zero", "--fake").stdout == "Faked unapplying 0001_initial\n"
    assert ws.ledger() == set()


def test_remove_deletes_the_constraints_locks_only(ws: Workspace) -> None:
    _seed(ws, 6)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    assert migrate(ws).exit_code == 0
    # Another model's lock sharing the lock name (an explicit shared namespace) stays.
    ws.client.put_item(TableName=TABLE, Item={
        "PK": {"S": "UNIQ#EMAIL#admin@x.io"}, "SK": {"S": "LOCK"},
        "owner": {"M": {"PK": {"S": "ADMIN#1"}, "SK": {"S": "PROFILE"}}},
        "model": {"S": "Admin"}, "constraint": {"S": "EMAIL"}})
    ws.deploy()  # the app no longer declares the constraint
    made = run("makemigrations", ws.module)
    assert "0002_remove_account_email.py" in made.stdout
    result = migrate(ws)
    assert result.exit_code == 0, result.output
    assert ws.locks() == {"UNIQ#EMAIL#admin@x.io": "ADMIN#1"}
    assert _migration_items(ws) == {"0001_initial", "0002_remove_account_email"}
    # Removing is idempotent: unapplying 0002 backfills, applying it again removes.
    assert migrate(ws, "0001").exit_code == 0
    assert len(ws.locks()) == 7
    assert migrate(ws).exit_code == 0
    assert ws.locks() == {"UNIQ#EMAIL#admin@x.io": "ADMIN#1"}


def test_migrate_zero_runs_the_inverses_and_migrate_again_restores(ws: Workspace) -> None:
    _seed(ws, 5)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    migrate(ws)
    expected = ws.expected_locks()
    assert ws.locks() == expected
    result = migrate(ws, "zero")
    assert result.exit_code == 0
    assert result.stdout == "Unapplied 0001_initial\n"
    assert ws.locks() == {} and ws.ledger() == set()
    migrate(ws)
    assert ws.locks() == expected


def test_nothing_to_apply_says_so(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    migrate(ws)
    result = migrate(ws)
    assert result.exit_code == 0
    assert result.stdout == f"No migrations to apply for {ws.module}.\n"


def test_migrate_runs_no_autodetector_makemigrations_check_finds_the_change(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """``migrate`` applies what the files hold and never diffs the models (it used to, on every
    run, only to warn); ``makemigrations --check`` is the tool that finds a missing migration."""
    from dynaunique.migrations import autodetector, project

    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    ws.deploy(email=", unique=True")
    calls: list[object] = []
    real = autodetector.detect_changes

    def counted(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(project, "detect_changes", counted)
    for args in (("--plan",), ()):
        result = migrate(ws, *args)
        assert result.exit_code == 0
        assert "Warning" not in result.stderr
    assert calls == []
    assert _migration_items(ws) == {"0001_initial"}  # applied as the file holds it
    check = run("makemigrations", ws.module, "--check")
    assert check.exit_code == 1
    assert "~ Alter unique constraint" in check.stdout
    assert len(calls) == 1


# --- resuming, leases ----------------------------------------------------------------------------


def test_a_crashed_backfill_resumes_from_the_ledger(ws: Workspace) -> None:
    from support.migration_progress import Counting, InjectedCrash, crash_after_records

    _seed(ws, 40)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    executor = ws.project().executor(page_size=10, progress_callback=crash_after_records(25))
    with pytest.raises(InjectedCrash):
        executor.migrate()
    status = run("showmigrations", ws.module, "--endpoint", ws.endpoint)
    assert " [ ] 0001_initial  (partly applied: fill Account.EMAIL 0/1 segments done)" \
        in status.stdout
    recorder = ws.project().recorder()
    (progress,) = recorder.progress("0001_initial#0#F#0", 1)
    assert progress.last_key is not None and not progress.done
    assert progress.pending  # the crashed page's locks, named before they were written
    checkpointed = progress.counters.records
    assert 10 <= checkpointed < 25

    reporter = Counting()
    ws.project().executor(page_size=10, progress_callback=reporter).migrate()
    assert ws.locks() == ws.expected_locks()
    # The rerun started at the checkpoint, not at the beginning of the table.
    assert reporter.records == 40 - checkpointed
    assert ws.ledger() == ws.applied_only()
    final = run("showmigrations", ws.module, "--endpoint", ws.endpoint)
    assert final.stdout.splitlines()[1:] == [" [X] 0001_initial"]


def test_a_second_runner_gets_a_clear_lease_error(ws: Workspace) -> None:
    _seed(ws, 30)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    executor: MigrationExecutor = ws.project().executor(max_wcu=15)  # a slow first runner
    errors: list[BaseException] = []

    def first() -> None:
        try:
            executor.migrate()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    lease = f"UNIQ#~LEASE#{ws.module}"
    while lease not in ws.ledger():
        time.sleep(0.01)
    second = migrate(ws)
    thread.join()
    assert not errors
    assert second.exit_code == 1
    assert second.stderr.startswith(f"Error: another `dynaunique migrate` of '{ws.module}' is "
                                    "running:")
    assert "lease expires in" in second.stderr
    assert ws.locks() == ws.expected_locks()
    assert lease not in ws.ledger()  # released at the end


def test_an_expired_lease_of_a_crashed_runner_is_taken_over(ws: Workspace) -> None:
    _seed(ws, 3)
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    recorder = ws.project().recorder()
    # A runner holds the lease, then dies: nobody renews it. (Its lease is long while the
    # refusal is checked, however slow the machine, and its last renewal a short one.)
    crashed = recorder.acquire(seconds=30)
    crashed._stop.set()
    refused = migrate(ws)
    assert refused.exit_code == 1
    assert "another `dynaunique migrate`" in refused.stderr
    crashed.seconds = 0.3
    crashed.renew()  # its last renewal before it died
    assert not crashed.lost.is_set()
    time.sleep(0.4)  # the lease expires
    result = migrate(ws)
    assert result.exit_code == 0, result.output
    assert ws.locks() == ws.expected_locks()


def test_a_runner_whose_lease_was_taken_over_stops(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    recorder = ws.project().recorder()
    stalled = recorder.acquire(seconds=0.2)
    stalled._stop.set()  # it stalls: no renewal
    time.sleep(0.3)
    other = recorder.acquire(seconds=30)
    stalled.renew()
    with pytest.raises(MigrationError, match="lost the migrations lease"):
        stalled.check()
    other.release()


def test_segment_options_go_together(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    result = CliRunner().invoke(cli, ["migrate", ws.module, "--segment", "1"])
    assert result.exit_code == 2
    assert "--segment and --total-segments go together" in result.output


def test_models_on_several_tables_need_a_ledger_table_setting(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL, extra="")
    source = (ws.directory / "models.py").read_text(encoding="utf-8")
    source += (
        "\n\nclass Page(Model):\n"
        "    class Meta:\n"
        "        table_name = 'mig_cli_pages'\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    slug = UnicodeAttribute(unique=True)\n"
    )
    (ws.directory / "models.py").write_text(source, encoding="utf-8")
    sys.modules.pop(ws.module, None)
    run("makemigrations", ws.module)
    result = migrate(ws, "--plan")
    assert result.exit_code == 2
    assert "spans tables ['mig_cli_accounts', 'mig_cli_pages']" in result.stderr
    (ws.root / "pyproject.toml").write_text(
        f'[tool.dynaunique]\nledger_table = "{TABLE}"\n', encoding="utf-8")
    planned = migrate(ws, "--plan")
    assert planned.exit_code == 0, planned.output
    assert "to Page (table mig_cli_pages)" in planned.stdout


def test_showmigrations_as_json(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    result = run("showmigrations", ws.module, "--endpoint", ws.endpoint, "--json")
    assert json.loads(result.stdout) == [
        {"name": "0001_initial", "applied": False, "fake": False, "partial": None}]
    migrate(ws)
    result = run("showmigrations", ws.module, "--endpoint", ws.endpoint, "--json")
    assert json.loads(result.stdout) == [
        {"name": "0001_initial", "applied": True, "fake": False, "partial": None}]


def test_an_unknown_target_is_a_usage_error_on_stderr(ws: Workspace) -> None:
    """A target that names no migration is a usage mistake: one line on stderr, exit 2, and
    nothing applied."""
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    result = migrate(ws, "nosuchmigration")
    assert (result.exit_code, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: no migration called 'nosuchmigration' in ")
    assert line.endswith("(known: 0001_initial)")
    assert ws.ledger() == set()
