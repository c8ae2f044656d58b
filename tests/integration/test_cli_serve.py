"""``dynaunique serve``: the local server as a person starts it, in the foreground, from an EMPTY
environment (no ``AWS_*``, no ``HOME``, not even ``PATH``), its output piped; one ready line, real
requests served, Ctrl-C stops it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

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
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0


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
