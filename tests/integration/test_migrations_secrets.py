"""Migrations of a hashed constraint run with another lock secret than the application's: a
sweep deletes none of the real locks and a backfill doubles none of them — the migration stops
with the fingerprints, unless told to accept the other secret (rotate). Against the local
server, through the Python API and ``dynaunique migrate``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.migrations_workspace import Workspace, open_workspace

from dynaunique._lock.locks import lock_key, secret_id
from dynaunique.cli import cli
from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.migrations import LockSecretError

TABLE = "mig_secret_accounts"
HASHED = ", unique=True, hashed=True, normalize=normalizers.casefold"
#: The same constraint with another normalizer: an alter, so a sweep then a fill.
HASHED_STRIPPED = ", unique=True, hashed=True, normalize=strip_casefold"
RIGHT, WRONG = "the-real-secret", "a-wrong-secret"
ENV = "DYNAUNIQUE_LOCK_SECRET"


@pytest.fixture
def ws(dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv(ENV, RIGHT)
    yield open_workspace(tmp_path, dynaunique_db, TABLE, monkeypatch)


def _key(email: str, secret: str) -> str:
    return lock_key("EMAIL", (email,), secret=secret.encode())


def _fingerprints(ws: Workspace) -> dict[str, str | None]:
    """Every EMAIL lock → the fingerprint it carries."""
    return {i["PK"]["S"]: i.get("secret_id", {}).get("S") for i in ws.scan()
            if i["PK"]["S"].startswith("UNIQ#EMAIL#")}


def _locked_under_right(ws: Workspace) -> dict[str, str]:
    """Two records backfilled under the right secret; returns their locks."""
    ws.put_raw("ACCT#001", email="Ada@X.io")
    ws.put_raw("ACCT#002", email="bob@x.io")
    ws.deploy(email=HASHED)
    ws.project().make_migrations()
    ws.project().executor().migrate()
    locks = {_key("ada@x.io", RIGHT): "ACCT#001", _key("bob@x.io", RIGHT): "ACCT#002"}
    assert ws.locks() == locks
    return locks


def _altered(ws: Workspace) -> None:
    ws.deploy(email=HASHED_STRIPPED)
    assert ws.project().make_migrations().name == "0002_alter_account_email"


def _drop_fingerprints(ws: Workspace) -> None:
    """Make the EMAIL locks look written before locks carried their secret's fingerprint."""
    for key in _fingerprints(ws):
        ws.client.update_item(TableName=TABLE, Key={"PK": {"S": key}, "SK": {"S": "LOCK"}},
                              UpdateExpression="REMOVE secret_id")


def _migration_recorded(ws: Workspace, name: str) -> bool:
    return f"UNIQ#~MIGRATION#{name}" in ws.ledger()


def test_a_sweep_under_the_wrong_secret_deletes_nothing_and_stops(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = _locked_under_right(ws)
    _altered(ws)
    monkeypatch.setenv(ENV, WRONG)
    with pytest.raises(LockSecretError) as info:
        ws.project().executor().migrate()
    assert isinstance(info.value, MigrationError) and isinstance(info.value, ConfigurationError)
    message = str(info.value)
    assert "sweep Account.EMAIL" in message
    assert "the lock secret is probably wrong" in message
    assert (f"current secret ({secret_id(WRONG.encode())}; they carry "
            f"2 {secret_id(RIGHT.encode())})") in message
    assert ws.locks() == locks
    assert set(_fingerprints(ws).values()) == {secret_id(RIGHT.encode())}
    assert not _migration_recorded(ws, "0002_alter_account_email")
    # With the right secret the same migration goes on as it always did.
    monkeypatch.setenv(ENV, RIGHT)
    result = ws.project().executor().migrate()
    assert result.applied == ["0002_alter_account_email"]
    assert ws.locks() == locks  # the stripped, casefolded values lock the same keys


def test_a_backfill_under_the_wrong_secret_beside_real_locks_writes_nothing(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.put_raw("ACCT#001", email="ada@x.io")
    ws.put_raw("ACCT#002", email="bob@x.io")
    module = ws.deploy(email=HASHED)
    ws.project().make_migrations()
    # The application runs with the constraint (and the real secret) before the backfill.
    module.Account(pk="ACCT#003", email="cy@x.io").save()
    assert ws.locks() == {_key("cy@x.io", RIGHT): "ACCT#003"}
    monkeypatch.setenv(ENV, WRONG)
    with pytest.raises(MigrationError) as info:
        ws.project().executor().migrate()
    assert str(info.value).startswith(
        f"fill Account.EMAIL on table {TABLE!r}: the lock secret is probably wrong: 1 hashed "
        f"lock(s) of EMAIL were not made with the current secret ({secret_id(WRONG.encode())}; "
        f"they carry 1 {secret_id(RIGHT.encode())})")
    assert ws.locks() == {_key("cy@x.io", RIGHT): "ACCT#003"}
    assert not _migration_recorded(ws, "0001_initial")
    monkeypatch.setenv(ENV, RIGHT)
    ws.project().executor().migrate()
    assert ws.locks() == {_key("ada@x.io", RIGHT): "ACCT#001", _key("bob@x.io", RIGHT): "ACCT#002",
                          _key("cy@x.io", RIGHT): "ACCT#003"}


def test_accepting_the_other_secret_rotates_an_altered_constraint(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    _locked_under_right(ws)
    _altered(ws)
    monkeypatch.setenv(ENV, WRONG)  # the new secret, on purpose
    with pytest.raises(MigrationError):
        ws.project().executor().migrate()
    result = ws.project().executor(accept_other_secret=True).migrate()
    assert result.applied == ["0002_alter_account_email"]
    sweep = result.totals["0002_alter_account_email: sweep Account.EMAIL"]
    assert (sweep.records, sweep.present, sweep.deleted) == (2, 0, 2)
    assert ws.locks() == {_key("ada@x.io", WRONG): "ACCT#001", _key("bob@x.io", WRONG): "ACCT#002"}
    assert set(_fingerprints(ws).values()) == {secret_id(WRONG.encode())}


def test_accepting_the_other_secret_backfills_beside_its_locks(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.put_raw("ACCT#001", email="ada@x.io")
    module = ws.deploy(email=HASHED)
    ws.project().make_migrations()
    module.Account(pk="ACCT#002", email="bob@x.io").save()
    monkeypatch.setenv(ENV, WRONG)
    ws.project().executor(accept_other_secret=True).migrate()
    # Every record is locked under the current secret; the other secret's lock is left for
    # `dynaunique repair --accept-other-secret`.
    assert ws.locks() == {_key("ada@x.io", WRONG): "ACCT#001", _key("bob@x.io", WRONG): "ACCT#002",
                          _key("bob@x.io", RIGHT): "ACCT#002"}


def test_the_right_secret_sweeps_stale_hashed_locks_as_before(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    # A regression guard (it passes before the fix too): stale locks the current secret made
    # are deleted, and the fill writes the new shape.
    ws.put_raw("ACCT#001", email=" Ada@X.io")
    ws.put_raw("ACCT#002", email="bob@x.io")
    ws.deploy(email=HASHED)
    ws.project().make_migrations()
    ws.project().executor().migrate()
    _altered(ws)
    result = ws.project().executor().migrate()
    sweep = result.totals["0002_alter_account_email: sweep Account.EMAIL"]
    assert (sweep.records, sweep.present, sweep.deleted) == (2, 1, 1)
    assert ws.locks() == {_key("ada@x.io", RIGHT): "ACCT#001", _key("bob@x.io", RIGHT): "ACCT#002"}


def test_a_stale_lock_without_a_fingerprint_is_not_swept_unless_accepted(
        ws: Workspace) -> None:
    ws.put_raw("ACCT#001", email=" Ada@X.io")
    ws.deploy(email=HASHED)
    ws.project().make_migrations()
    ws.project().executor().migrate()
    _drop_fingerprints(ws)
    _altered(ws)
    with pytest.raises(MigrationError, match="they carry 1 no fingerprint"):
        ws.project().executor().migrate()
    assert ws.locks() == {_key(" ada@x.io", RIGHT): "ACCT#001"}
    ws.project().executor(accept_other_secret=True).migrate()
    assert ws.locks() == {_key("ada@x.io", RIGHT): "ACCT#001"}


def test_a_required_lock_without_a_fingerprint_vouches_for_the_secret(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.put_raw("ACCT#001", email="ada@x.io")
    module = ws.deploy(email=HASHED)
    ws.project().make_migrations()
    module.Account(pk="ACCT#002", email="bob@x.io").save()
    _drop_fingerprints(ws)
    monkeypatch.setenv(ENV, WRONG)
    # Under the wrong secret no record requires it: the backfill stops.
    with pytest.raises(MigrationError, match="they carry 1 no fingerprint"):
        ws.project().executor().migrate()
    assert ws.locks() == {_key("bob@x.io", RIGHT): "ACCT#002"}
    # Under the right one its owner requires it: the backfill goes on.
    monkeypatch.setenv(ENV, RIGHT)
    ws.project().executor().migrate()
    assert ws.locks() == {_key("ada@x.io", RIGHT): "ACCT#001", _key("bob@x.io", RIGHT): "ACCT#002"}


def _migrate_cli(ws: Workspace, *args: str) -> Any:
    return CliRunner().invoke(cli, ["migrate", ws.module, *args, "--endpoint", ws.endpoint],
                              catch_exceptions=False)


def test_migrate_under_the_wrong_secret_exits_2_in_one_line_then_accepts(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = _locked_under_right(ws)
    _altered(ws)
    monkeypatch.setenv(ENV, WRONG)
    result = _migrate_cli(ws)
    assert result.exit_code == 2
    # The progress lines, then the error in one line.
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("Error")]
    assert line == result.stderr.splitlines()[-1]
    assert line.startswith(
        "Error: sweep Account.EMAIL on table 'mig_secret_accounts': the lock secret is probably "
        "wrong")
    assert "Traceback" not in result.output
    assert ws.locks() == locks
    accepted = _migrate_cli(ws, "--accept-other-secret")
    assert accepted.exit_code == 0, accepted.output
    assert ws.locks() == {_key("ada@x.io", WRONG): "ACCT#001", _key("bob@x.io", WRONG): "ACCT#002"}
