"""``dynaunique serve``: the local server as a person starts it, in the foreground, from an EMPTY
environment (no ``AWS_*``, no ``HOME``, not even ``PATH``), its output piped; one ready line, real
requests served, Ctrl-C stops it cleanly; and SIGTERM/SIGINT stop it whenever they arrive (two of
those tests fork the command, with one thing changed in it: see each)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner
from support import cli_process

from dynaunique.cli import cli
from dynaunique.testing._local_server import READY_PREFIX


def _command() -> list[str]:
    script = Path(sys.executable).parent / "dynaunique"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dynaunique.cli"]


def test_serve_prints_one_ready_line_serves_requests_and_stops_on_ctrl_c() -> None:
    process = subprocess.Popen([*_command(), "serve", "--port", "0"], env={},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()  # stdin is closed at once: serve does not stop on EOF
        assert ready.startswith(f"{READY_PREFIX} http://127.0.0.1:"), ready
        endpoint = ready.split()[1]
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="eu-west-1",
                              aws_access_key_id="any", aws_secret_access_key="any")
        table = f"serve_{uuid.uuid4().hex[:8]}"
        client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}])
        client.put_item(TableName=table, Item={"PK": {"S": "a"}},
                        ConditionExpression="attribute_not_exists(PK)")
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(TableName=table, Item={"PK": {"S": "a"}},
                            ConditionExpression="attribute_not_exists(PK)")
        assert client.list_tables()["TableNames"] == [table]
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == "", out  # the ready line was the only one on stdout
    assert "Traceback" not in err, err
    assert err.endswith("local server stopped (SIGINT)\n"), err


def test_serve_binds_the_host_it_is_given_and_names_it_in_the_ready_line() -> None:
    process = subprocess.Popen([*_command(), "serve", "--host", "localhost", "--port", "0"],
                               env={}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith(f"{READY_PREFIX} http://localhost:"), ready
        client = boto3.client("dynamodb", endpoint_url=ready.split()[1], region_name="us-east-1",
                              aws_access_key_id="any", aws_secret_access_key="any")
        assert client.list_tables()["TableNames"] == []
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert err.endswith("local server stopped (SIGTERM)\n"), err


# `dynaunique serve` with threading.Event's timed wait changed in the main thread only: it holds
# the Event's lock for the whole wait instead of for the few bytecodes around the real wait (the
# window in which a signal handler that calls `Event.set()` waits for a lock its own thread holds,
# forever: seen twice in loaded full runs, the docs runner's SIGTERM sent at the ready line).
_LOCK_HELD_IN_WAIT = """
import sys, threading, time
from dynaunique.cli import main
plain_wait = threading.Event.wait
def held(self, timeout=None):
    if timeout is None or threading.current_thread() is not threading.main_thread():
        return plain_wait(self, timeout)
    with self._cond:
        time.sleep(timeout)
        return self._flag
threading.Event.wait = held
main()
"""


def _forked_serve(code: str, tmp_path: Path) -> tuple[cli_process.Forked, Path, Path]:
    """``python -c CODE serve --port 0`` forked (``support.cli_process``: the docs runner's
    way); its stdout and stderr files."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    return cli_process.shared(env).start(
        [sys.executable, "-c", code, "serve", "--port", "0"], cwd=tmp_path, env=env,
        stdout=out, stderr=err), out, err


def _ready_line(path: Path, process: cli_process.Forked, within: float = 60.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and process.poll() is None:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.endswith("\n"):
            return text
        time.sleep(0.02)
    raise AssertionError(f"no ready line within {within} s: {process.poll()=}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_stops_on_a_signal_that_arrives_while_its_main_thread_holds_a_lock(
        tmp_path: Path, signum: signal.Signals) -> None:
    """The signal is handled between two bytecodes of the main thread, whatever lock that
    thread holds then: the handler must take none. (Failed before the fix: still running 20 s
    after the signal, both signals.)"""
    process, out, err = _forked_serve(_LOCK_HELD_IN_WAIT, tmp_path)
    try:
        assert _ready_line(out, process).startswith(f"{READY_PREFIX} http://127.0.0.1:")
        time.sleep(0.3)  # inside its wait by now
        process.send_signal(signum)
        try:
            code = process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve still running 20 s after {signum.name}") from None
    finally:
        process.send_signal(signal.SIGKILL)
    assert code == 0, err.read_text(encoding="utf-8")
    assert err.read_text(encoding="utf-8").endswith(f"local server stopped ({signum.name})\n")


# `dynaunique serve` that receives SIGTERM {times} while it builds its server (moto's import, the
# patch): a signal to oneself is handled at the next bytecode, before the next `os.kill`.
_SIGNALLED_WHILE_STARTING = """
import os, signal
from dynaunique.cli import main
from dynaunique.testing import _local_server
make_server = _local_server._make_server
def signalled(*args, **kwargs):
    for _ in range({times}):
        os.kill(os.getpid(), signal.SIGTERM)
    return make_server(*args, **kwargs)
_local_server._make_server = signalled
main()
"""


@pytest.mark.parametrize(("times", "code", "stderr"), [
    (1, 0, "local server stopped (SIGTERM) before it was ready\n"),
    (2, -signal.SIGTERM, ""),  # a second signal: killed at once, before it built its server
], ids=["once: exits 0", "twice: killed"])
def test_serve_signalled_while_it_starts_prints_no_ready_line(
        tmp_path: Path, times: int, code: int, stderr: str) -> None:
    process, out, err = _forked_serve(_SIGNALLED_WHILE_STARTING.format(times=times), tmp_path)
    try:
        exited = process.wait(timeout=60)
    finally:
        process.send_signal(signal.SIGKILL)
    assert (exited, out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")) == (
        code, "", stderr)


def test_serve_without_moto_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "moto", None)  # `import moto` raises ImportError
    result = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert result.exit_code == 1
    assert "dynaunique serve needs the local extra" in result.output
    assert "pip install -e '/path/to/clone[local]'" in result.output


def test_serve_help_names_the_environment_variable() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    assert "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000" in result.output
    assert "--stock-moto" in result.output
