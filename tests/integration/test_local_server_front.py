"""The local server's HTTP front (dynaunique.testing._moto_front): it keeps a connection open
across requests, and answers each raw HTTP request exactly as the stock server (werkzeug's own
handler, stock moto) does: status, headers and body, byte for byte, but for the headers that
differ per response (the date, the request id) and ``Connection: close``."""

from __future__ import annotations

import binascii
import http.client
import json
import re
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from dynaunique.testing import LocalDynamoDB, _moto_front

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

AUTH = ("AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0")
# Differ from one response to the next, or by design (the stock server closes every connection).
UNCOMPARED = {"date", "x-amzn-requestid", "connection"}
# A table's creation time differs between the servers, and so the body's CRC32 (checked apart).
_CREATED = re.compile(rb'"CreationDateTime": [0-9.e+]+')


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    with LocalDynamoDB(stock_moto=True) as stock, LocalDynamoDB() as patched:
        yield stock, patched


def _address(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.split("//", 1)[1].split(":")
    return host, int(port)


def _request(target: str, body: dict[str, Any] | bytes, *, close: bool = False,
             extra: bytes = b"", version: bytes = b"HTTP/1.1", chunked: bool = False) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = [b"POST / " + version, b"Host: 127.0.0.1", b"Authorization: " + AUTH.encode(),
            b"X-Amz-Target: DynamoDB_20120810." + target.encode(),
            b"Content-Type: application/x-amz-json-1.0"]
    if chunked:
        head.append(b"Transfer-Encoding: chunked")
        data = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
    else:
        head.append(b"Content-Length: %d" % len(data))
    if close:
        head.append(b"Connection: close")
    return b"\r\n".join(head) + b"\r\n" + extra + b"\r\n" + data


def _exchange(endpoint: str, raw: bytes) -> tuple[int, list[tuple[str, str]], bytes, bool]:
    """Send one raw request on a new connection: (status, headers, body, connection closed)."""
    with socket.create_connection(_address(endpoint), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        crc = response.getheader("x-amz-crc32")
        assert crc is None or int(crc) == binascii.crc32(body)
        length = response.getheader("Content-Length")
        assert length is None or int(length) == len(body)
        # Both are checked against each server's own body above: a CreationDateTime's digits
        # (compared as a placeholder below) change the length and the checksum.
        headers = [(k, v if k.lower() not in ("x-amz-crc32", "content-length") else "(the body's)")
                   for k, v in response.getheaders() if k.lower() not in UNCOMPARED]
        body = _CREATED.sub(b'"CreationDateTime": (a time)', body)
        closed = response.will_close
        sock.settimeout(0.2)
        try:
            rest = sock.recv(1)
        except TimeoutError:
            rest = None  # still open
        return response.status, headers, body, closed or rest == b""


TABLE = {"TableName": "front", "BillingMode": "PAY_PER_REQUEST",
         "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}],
         "AttributeDefinitions": [{"AttributeName": "PK", "AttributeType": "S"}]}
ITEM = {"PK": {"S": "a"}, "n": {"N": "1.50"}, "b": {"B": "AAE="}, "l": {"L": [{"S": "x"}]}}
SCRIPT: list[tuple[str, bytes]] = [
    ("a table", _request("CreateTable", TABLE)),
    ("a put", _request("PutItem", {"TableName": "front", "Item": ITEM})),
    ("a read", _request("GetItem", {"TableName": "front", "Key": {"PK": {"S": "a"}}})),
    ("a missing table", _request("GetItem", {"TableName": "nope", "Key": {"PK": {"S": "a"}}})),
    ("a failed guard", _request("PutItem", {"TableName": "front", "Item": ITEM,
                                            "ConditionExpression": "attribute_not_exists(PK)"})),
    ("malformed JSON", _request("GetItem", b"{not json")),
    ("no body", _request("ListTables", b"")),
    ("a POST without a length", _request("ListTables", b"").replace(b"Content-Length: 0\r\n", b"")),
    ("an operation moto lacks (a 500)", _request("NoSuchOperation", {})),
    ("Connection: close", _request("ListTables", {}, close=True)),
    ("HTTP/1.0", _request("ListTables", {}, version=b"HTTP/1.0")),
    ("a chunked body", _request("ListTables", {}, chunked=True)),
    ("a duplicated Content-Length", _request("ListTables", {}, extra=b"Content-Length: 2\r\n")),
    ("a folded header", _request("ListTables", {}, extra=b"X-Folded: a\r\n b\r\n")),
    ("a scan", _request("Scan", {"TableName": "front"})),
    ("the table deleted", _request("DeleteTable", {"TableName": "front"})),
]


def test_each_raw_request_is_answered_as_the_stock_server_answers_it(
        servers: tuple[str, str]) -> None:
    stock, patched = servers
    for what, raw in SCRIPT:
        expected, actual = _exchange(stock, raw), _exchange(patched, raw)
        assert actual[:3] == expected[:3], what
        assert expected[3], what  # the stock server closes every connection


@pytest.mark.skipif(sys.version_info[:3] != _moto_front.VERIFIED_PYTHON,
                    reason="keep-alive is verified on CPython "
                           + ".".join(map(str, _moto_front.VERIFIED_PYTHON))
                           + " (elsewhere it is left out: test_local_server_other_python.py)")
def test_the_patched_server_keeps_the_connection_and_the_stock_one_closes_it(
        servers: tuple[str, str]) -> None:
    stock, patched = servers
    kept = {label: _exchange(endpoint, _request("ListTables", {}))[3] is False
            for label, endpoint in (("stock", stock), ("patched", patched))}
    assert kept == {"stock": False, "patched": True}
    # ... and one connection then carries many requests, each answered in turn.
    host, port = _address(patched)
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        sockets = set()
        for n in range(5):
            connection.request("POST", "/", body=json.dumps({"Limit": n + 1}), headers={
                "Authorization": AUTH, "X-Amz-Target": "DynamoDB_20120810.ListTables",
                "Content-Type": "application/x-amz-json-1.0"})
            response = connection.getresponse()
            assert (response.status, response.read()) == (200, b'{"TableNames": []}')
            assert response.getheader("Connection") is None and not response.will_close
            sockets.add(id(connection.sock))
        assert len(sockets) == 1
    finally:
        connection.close()


def test_a_request_the_front_answers_for_werkzeug_closes_the_connection(
        servers: tuple[str, str]) -> None:
    _, patched = servers
    for raw in (_request("ListTables", {}, close=True), _request("ListTables", {}, chunked=True),
                _request("ListTables", {}, version=b"HTTP/1.0"),
                _request("ListTables", b"").replace(b"Content-Length: 0\r\n", b""),
                _request("NoSuchOperation", {})):
        assert _exchange(patched, raw)[3] is True
