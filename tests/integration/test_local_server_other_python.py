"""The local server on a Python whose standard library is not the one its HTTP front was verified
on (CPython 3.10.13 and Debian's 3.11.2 have another ``http.server`` ``parse_request`` than
3.11.7): it starts, leaves the keep-alive piece out and answers as werkzeug does. Before, it
refused to start (``MotoPatchError``), and so did ``dynaunique demo``, the README's first
command, with the system's ``python3``."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from support.local_server import client, create_table, server_state

from dynaunique.testing import LocalDynamoDB

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

# In the server's process, before it patches anything: http.server's parse_request with the same
# parameters and another source, as another Python has.
_OTHER_STDLIB = '''
import http.server

_stock = http.server.BaseHTTPRequestHandler.parse_request


def parse_request(self):
    return _stock(self)


http.server.BaseHTTPRequestHandler.parse_request = parse_request
'''


def test_a_server_on_another_standard_library_starts_and_closes_connections(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sitecustomize.py").write_text(_OTHER_STDLIB, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with LocalDynamoDB(startup_timeout=30) as endpoint:
        state = server_state(endpoint)
        assert state["moto_patched"] is True  # moto's DynamoDB patch fits all the same
        assert state["front"] == ["header_parser", "request_id"]
        ddb = client(endpoint)
        create_table(ddb, "other_python")
        ddb.put_item(TableName="other_python", Item={"PK": {"S": "a"}, "n": {"N": "1"}})
        assert ddb.get_item(TableName="other_python", Key={"PK": {"S": "a"}})["Item"] == {
            "PK": {"S": "a"}, "n": {"N": "1"}}
        host, port = endpoint.split("//", 1)[1].split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("POST", "/", body=json.dumps({}), headers={
            "X-Amz-Target": "DynamoDB_20120810.ListTables",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/dynamodb/"
                             "aws4_request, SignedHeaders=host, Signature=0"})
        response = connection.getresponse()
        assert json.loads(response.read()) == {"TableNames": ["other_python"]}
        assert response.getheader("Connection") == "close"  # werkzeug's handler, not the lean one
        connection.close()


def test_the_server_on_the_verified_standard_library_keeps_connections(dynaunique_db: str
                                                                       ) -> None:
    import sys

    from dynaunique.testing import _moto_front

    if sys.version_info[:3] != _moto_front.VERIFIED_PYTHON:
        pytest.skip("the front is verified on CPython "
                    + ".".join(map(str, _moto_front.VERIFIED_PYTHON)))
    assert server_state(dynaunique_db)["front"] == ["header_parser", "keep_alive", "request_id"]
