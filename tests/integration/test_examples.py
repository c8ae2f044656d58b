"""examples/: each script runs as a user runs it (a process of its own) and prints what it claims.

``signup_service.py`` runs as a real ``python examples/signup_service.py`` with its own embedded
server, as a user first runs it; the others are the same command forked from a Python that
imported dynaunique once (``support.cli_process``), so they cost their own work, not Python's
start-up again, and they are pointed at the worker's running local server (``dynaunique_db``)
through ``AWS_ENDPOINT_URL_DYNAMODB``, as a user points them at a DynamoDB of their own: no server
start each (in ``add_constraint.py``, the ``dynaunique`` commands it runs are real processes
either way). Only the embedded server's first line (``embedded local DynamoDB: URL``) is then
not printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli_process

from dynaunique.testing import FAKE_AWS_ENV

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(script: str, *, real: bool = False, endpoint: str | None = None) -> str:
    """Run ``script``: with ``endpoint``, against that server (``AWS_ENDPOINT_URL_DYNAMODB`` and
    fake credentials: the recipe of docs/getting-started.md), else its embedded one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.pop("DYNAUNIQUE_ENDPOINT", None)
    if endpoint is not None:
        env.update(FAKE_AWS_ENV, AWS_ENDPOINT_URL_DYNAMODB=endpoint)
    argv = [sys.executable, str(EXAMPLES / script)]
    if real:
        result = subprocess.run(argv, env=env, cwd=EXAMPLES.parent, capture_output=True,
                                text=True, timeout=300, check=False)
    else:
        result = cli_process.shared(env).run(argv, cwd=EXAMPLES.parent, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_signup_service() -> None:
    out = run("signup_service.py", real=True).splitlines()
    assert out[1:] == [
        "signup ada: 201",
        "signup with ADA@lovelace.io and handle ADA: 409 "
        "{'errors': {'email': 'is already taken', 'handle': 'is already taken'}}",
        "signup grace: 201",
        "grace takes ada's email: 409 {'errors': {'email': 'is already taken'}}",
        "ada moves: 200",
        "grace takes the freed email: 200",
        "find ADA@LOVELACE.IO is grace: True",
        "find grace@hopper.io: 404",
        "records: 2",
    ]


def test_add_constraint_reports_the_duplicate_then_applies(dynaunique_db: str) -> None:
    out = run("add_constraint.py", endpoint=dynaunique_db)
    assert "embedded local DynamoDB" not in out  # it used the server it was given
    assert "6 customers, two of them with customer3@shop.io" in out
    assert "Wrote " in out and "0001_initial.py" in out
    assert "Duplicates found by 0001_initial" in out
    assert "'customer3@shop.io'" in out and "CUST#dup" in out
    assert "migrate: exit status 1 (the duplicate stopped it)" in out
    assert "Applied 0001_initial" in out
    assert out.index("migrate: exit status 1") < out.index("migrate: exit status 0")
    assert " [X] 0001_initial" in out


def test_async_app(dynaunique_db: str) -> None:
    out = run("async_app.py", endpoint=dynaunique_db).splitlines()
    assert out == [
        "signups: 50, winners: 10, refused: 40",
        "member3@club.io is held by one of its five racers: True",
        "swapped in one transaction: True",
    ]
