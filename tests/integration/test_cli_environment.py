"""Every ``dynaunique`` command run as a newcomer runs it: a subprocess with an EMPTY environment
(``PATH``, ``PYTHONPATH`` and a ``HOME`` with no ``~/.aws``; no AWS variable at all), against the
local server, with a models module whose ``Meta`` names neither a region nor a host.

Each command runs at least once as a real ``python -m dynaunique.cli`` subprocess
(``App.run_real``); the other runs are processes forked from one Python that has the same empty
environment and imported the CLI once (``support.cli_process``), so they cost their work only.

Asserts the exit codes (0 done, 1 a finding, 2 could not run), that an expected failure is ONE
line on stderr and never a traceback, and that piped output keeps every value whole.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_process import Forker
from support.tables import raw_tables, scan_all

import dynaunique
from dynaunique.testing._exports import write_export

WORKTREE = str(Path(dynaunique.__file__).resolve().parent.parent)
TABLE = "cli_env_members"
MODELS = '''\
"""A newcomer's models: no region, no host, no credentials in Meta."""

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute


class Member(Model):
    class Meta:
        table_name = "{table}"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
'''
#: A 120-character email: longer than any terminal width rich would wrap a table to.
LONG_EMAIL = "user10." + "x" * 108 + "@x.io"


class App:
    """A throw-away project directory with a models package, and the server it talks to."""

    def __init__(self, root: Path, endpoint: str) -> None:
        self.root = root
        self.endpoint = endpoint
        self.home = root / "home"
        self.home.mkdir()
        package = f"envapp_{uuid.uuid4().hex[:10]}"
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("", encoding="utf-8")
        (root / package / "models.py").write_text(MODELS.format(table=TABLE), encoding="utf-8")
        self.module = f"{package}.models"
        sys.path.insert(0, str(root))
        importlib.invalidate_caches()
        self.models = importlib.import_module(self.module)
        self.Member: Any = self.models.Member

    def env(self) -> dict[str, str]:
        """The empty environment: a ``PATH``, this checkout on ``PYTHONPATH``, a bare ``HOME``."""
        return {**EMPTY_ENV, "HOME": str(self.home)}

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``python -m dynaunique.cli ARGS`` in the project directory, with an empty environment,
        in a process of its own forked from :data:`FORKER` (the imports done once)."""
        return FORKER.run([sys.executable, "-m", "dynaunique.cli", *args], cwd=self.root,
                          env=self.env(), timeout=timeout)

    def run_real(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The same as a real subprocess, Python's start-up included: each command runs so at
        least once in this file."""
        return subprocess.run([sys.executable, "-m", "dynaunique.cli", *args], cwd=self.root,
                              env=self.env(), capture_output=True, text=True, timeout=timeout,
                              check=False)

    def close(self) -> None:
        sys.path.remove(str(self.root))
        sys.modules.pop(self.module, None)


EMPTY_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": WORKTREE}
#: Set by the module's fixture below: the forker the file's commands run from.
FORKER: Any = None


@pytest.fixture(scope="module", autouse=True)
def _forker() -> Iterator[None]:
    """One Python with the empty environment that forks a child per command
    (``support.cli_process``): a command costs its own work, not a CPU-second of imports."""
    global FORKER
    FORKER = Forker({**EMPTY_ENV, "HOME": "/nonexistent"})
    yield
    FORKER.close()
    FORKER = None


@pytest.fixture
def app(dynaunique_db: str, tmp_path: Path) -> Iterator[App]:
    project = App(tmp_path, dynaunique_db)
    yield project
    project.close()


@pytest.fixture
def raw(app: App) -> Any:
    """The table created (through the models, pointed at the server in this process)."""
    return raw_tables(app.endpoint, app.Member)


def _one_line_error(result: subprocess.CompletedProcess[str], code: int, *parts: str) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    for part in parts:
        assert part in errors[0], errors[0]
    return errors[0]


# --- every command works on the local server with no credentials --------------------------------


def test_the_lock_commands_need_no_credentials_and_keep_values_whole(app: App, raw: Any) -> None:
    app.Member(pk="M#1", email=LONG_EMAIL).save()
    app.Member(pk="M#2", email="short@x.io").save()

    locks = app.run_real("locks", app.module, "--endpoint", app.endpoint)
    assert locks.returncode == 0, locks.stderr
    assert "Traceback" not in locks.stderr
    rows = locks.stdout.splitlines()
    assert rows[0] == "constraint\tvalue\towner\tmodel\tcreated\texpiry"
    [row] = [row for row in rows if LONG_EMAIL in row]  # `| grep VALUE` finds it, whole
    assert row.split("\t")[:4] == ["EMAIL", LONG_EMAIL, "M#1 / PROFILE", "Member"]
    assert "2 lock(s)" in locks.stderr

    clean = app.run_real("check", app.module, "--endpoint", app.endpoint)
    assert clean.returncode == 0, clean.stderr
    assert "No findings" in clean.stderr

    # A missing lock: the finding names the long value on one line of its own.
    raw.delete_item(TableName=TABLE, Key={"PK": {"S": f"UNIQ#EMAIL#{LONG_EMAIL}"},
                                          "SK": {"S": "LOCK"}})
    drift = app.run("check", app.module, "--endpoint", app.endpoint)
    assert drift.returncode == 1, drift.stderr
    assert "Traceback" not in drift.stderr
    [finding] = [line for line in drift.stdout.splitlines() if LONG_EMAIL in line]
    assert finding.split("\t")[:3] == ["missing lock", "EMAIL", LONG_EMAIL]
    assert "M#1 / PROFILE" in finding
    assert "1 finding(s): 1 missing lock" in drift.stderr

    dry = app.run_real("repair", app.module, "--endpoint", app.endpoint)
    assert dry.returncode == 0, dry.stderr  # everything planned can be fixed
    assert any(LONG_EMAIL in line for line in dry.stdout.splitlines())
    fixed = app.run("repair", app.module, "--yes", "--endpoint", app.endpoint)
    assert fixed.returncode == 0, fixed.stderr
    assert "1 fixed; 0 left for a person" in fixed.stderr
    assert app.run("check", app.module, "--endpoint", app.endpoint).returncode == 0


def test_the_drift_commands_need_no_credentials_and_keep_values_whole(app: App, raw: Any,
                                                                       tmp_path: Path) -> None:
    app.Member(pk="M#1", email=LONG_EMAIL).save()
    raw.delete_item(TableName=TABLE, Key={"PK": {"S": f"UNIQ#EMAIL#{LONG_EMAIL}"},
                                          "SK": {"S": "LOCK"}})
    export = write_export(tmp_path / "export", TABLE, scan_all(raw, TABLE))

    # check --export: the finding, confirmed live, on one piped line holding the whole value
    # (forked: `check` runs as a real process in the test above).
    drift = app.run("check", app.module, "--export", str(export), "--endpoint", app.endpoint)
    assert drift.returncode == 1, drift.stderr
    assert "Traceback" not in drift.stderr
    [finding] = [line for line in drift.stdout.splitlines() if LONG_EMAIL in line]
    assert finding.split("\t")[:3] == ["missing lock", "EMAIL", LONG_EMAIL]

    # watch on a table without a stream: a configuration mistake, one line and exit 2.
    _one_line_error(app.run_real("watch", app.module, "--once", "--endpoint", app.endpoint), 2,
                    TABLE)


def test_the_migration_commands_need_no_credentials(app: App, raw: Any) -> None:
    for i in range(3):
        raw.put_item(TableName=TABLE, Item={"PK": {"S": f"M#{i}"}, "SK": {"S": "PROFILE"},
                                            "email": {"S": f"m{i}@x.io"}})
    made = app.run_real("makemigrations", app.module)
    assert made.returncode == 0, made.stderr
    assert "Wrote " in made.stdout
    shown = app.run_real("showmigrations", app.module, "--endpoint", app.endpoint)
    assert shown.returncode == 0, shown.stderr
    assert " [ ] 0001_initial" in shown.stdout
    migrated = app.run_real("migrate", app.module, "--endpoint", app.endpoint)
    assert migrated.returncode == 0, migrated.stderr
    assert "Traceback" not in migrated.stderr
    assert migrated.stdout.endswith("Applied 0001_initial\n")
    shown = app.run("showmigrations", app.module, "--endpoint", app.endpoint)
    assert shown.stdout.splitlines()[1:] == [" [X] 0001_initial"]


def test_migrate_finding_duplicates_exits_one(app: App, raw: Any) -> None:
    for pk, email in (("M#1", "dup@x.io"), ("M#2", "DUP@x.io")):
        raw.put_item(TableName=TABLE, Item={"PK": {"S": pk}, "SK": {"S": "PROFILE"},
                                            "email": {"S": email}})
    assert app.run("makemigrations", app.module).returncode == 0
    result = app.run("migrate", app.module, "--endpoint", app.endpoint)
    _one_line_error(result, 1, "held by more than one record")
    assert "'dup@x.io'" in result.stdout


def test_the_settings_of_pyproject_reach_every_command(app: App, raw: Any) -> None:
    app.Member(pk="M#1", email="a@x.io").save()
    (app.root / "pyproject.toml").write_text(
        f'[tool.dynaunique]\nendpoint = "{app.endpoint}"\nsegments = 2\n', encoding="utf-8")
    # No --endpoint: [tool.dynaunique] endpoint, for the lock commands as for migrations.
    locks = app.run("locks", app.module)
    assert locks.returncode == 0, locks.stderr
    assert locks.stdout.splitlines()[1].startswith("EMAIL\ta@x.io\tM#1 / PROFILE\t")
    check = app.run("check", app.module)
    assert check.returncode == 0, check.stderr
    assert "2 Scan requests" in check.stderr  # segments = 2
    assert app.run("makemigrations", app.module).returncode == 0
    assert app.run("migrate", app.module).returncode == 0
    assert app.run("showmigrations", app.module).stdout.splitlines()[1:] == [" [X] 0001_initial"]
    (app.root / "pyproject.toml").write_text("[tool.dynaunique]\nendpont = 'x'\n",
                                             encoding="utf-8")
    for command in ("locks", "check", "repair", "showmigrations", "ui"):
        _one_line_error(app.run(command, app.module), 2, "unknown [tool.dynaunique] key")


def test_demo_needs_no_credentials_against_a_local_endpoint(app: App) -> None:
    result = app.run_real("demo", "--endpoint", app.endpoint, "--racers", "2", "--rounds", "1")
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr)
    assert "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ui_needs_no_credentials_and_a_taken_port_is_one_line(app: App, raw: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        busy = app.run("ui", app.module, "--endpoint", app.endpoint, "--port", port)
        _one_line_error(busy, 2, f"cannot serve on 127.0.0.1:{port}", "--port")
    process = subprocess.Popen(  # a real process: ui's one of this file
        [sys.executable, "-m", "dynaunique.cli", "ui", app.module, "--endpoint", app.endpoint,
         "--port", str(_free_port())], cwd=app.root, env=app.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("dynaunique ui: http://127.0.0.1:"), first
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr


# --- what stops a command is one line and exit 2 -------------------------------------------------


COMMANDS = ["locks", "check", "repair", "showmigrations", "migrate", "ui"]


def _each(app: App, runs: list[tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Run several commands at once (each its own process), results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: app.run(*args), runs))


def test_a_malformed_endpoint_is_one_line(app: App) -> None:
    runs = [(command, app.module, "--endpoint", "not a url") for command in COMMANDS]
    for result in _each(app, runs):
        _one_line_error(result, 2, "'not a url' is not an http(s) URL")


def test_aws_without_a_region_or_credentials_is_one_line(app: App) -> None:
    # Without an endpoint, ui starts its embedded server: not part of this.
    no_region = [(command, app.module) for command in COMMANDS if command != "ui"]
    for result in _each(app, no_region):
        _one_line_error(result, 2, "no AWS region for AWS")
    # A real endpoint never gets the fake keys: no credentials, no request.
    aws = "https://dynamodb.eu-west-1.amazonaws.com"
    no_keys = [(command, app.module, "--endpoint", aws) for command in COMMANDS]
    no_keys.append(("demo", "--endpoint", aws))
    for result in _each(app, no_keys):
        _one_line_error(result, 2, f"no AWS credentials found for {aws}")


def test_a_missing_table_is_one_line(app: App) -> None:
    runs = [(command, app.module, "--endpoint", app.endpoint) for command in COMMANDS[:-1]]
    results = _each(app, runs)
    for result in results[:3]:  # the audit's scan
        _one_line_error(result, 2, f"Scan on {TABLE} failed: ResourceNotFoundException")
    for result in results[3:]:
        _one_line_error(result, 2, f"table '{TABLE}' does not exist")


def test_a_module_that_cannot_be_imported_is_one_line(app: App) -> None:
    runs = [(command, "no_such_models_here") for command in [*COMMANDS, "makemigrations"]]
    for result in _each(app, runs):
        _one_line_error(result, 2, "cannot import 'no_such_models_here'")


def test_an_unreachable_endpoint_is_one_line(app: App) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    check, show = _each(app, [("check", app.module, "--endpoint", dead),
                              ("showmigrations", app.module, "--endpoint", dead)])
    # As many attempts as a save makes (1 + 3), and the message counts them.
    _one_line_error(check, 2, "DynamoDB could not be reached after 4 attempts")
    _one_line_error(show, 2, "DynamoDB could not be reached after")


def test_a_lambda_normalizer_is_a_configuration_mistake(app: App) -> None:
    models = app.root / app.module.replace(".", "/")
    source = models.with_suffix(".py").read_text(encoding="utf-8")
    models.with_suffix(".py").write_text(
        source.replace("normalize=normalizers.casefold", "normalize=lambda v: v.lower()"),
        encoding="utf-8")
    result = app.run("makemigrations", app.module)
    _one_line_error(result, 2, "is a lambda, which has no import path")
