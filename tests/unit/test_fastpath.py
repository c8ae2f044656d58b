"""dynaunique._transport.wire.FastPath: the request path below PynamoDB's dispatch puts botocore's
very request on the wire and gives botocore's very answer.

No server: a ``before-send`` handler records every request and answers it. Every request the
library sends goes both ways — botocore's full ``BaseClient._make_api_call`` and the fast path —
under a frozen clock and a frozen uuid, and the two requests (method, URL, every header in
order, body, context) and the two answers (parsed, or the ClientError's response) are compared.
"""

from __future__ import annotations

import contextvars
import copy
import datetime
import json
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import botocore.auth
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from support.fence import require_fast_path

from dynaunique import audit
from dynaunique._transport import botocore as _botocore
from dynaunique._transport import clients as _clients
from dynaunique._transport import connection as _connection
from dynaunique._transport import regions as _regions
from dynaunique._transport import wire as _wire
from dynaunique.testing import FAKE_AWS_ENV
from tests.unit.test_wire import Wired, _full

_NOW = datetime.datetime(2026, 12, 2, 3, 4, 5)
_ITEM = {"PK": {"S": "W#1"}, "SK": {"S": "PROFILE"}, "b": {"B": "AP8="},
         "bs": {"BS": ["AQ==", "AgM="]}, "m": {"M": {"x": {"L": [{"B": "AA=="}, {"N": "1"}]},
                                                      "B": {"NULL": True}}},
         "owner": {"M": {"PK": {"S": "W#1"}}}, "odd": {"S": "s", "N": "1", "Z": "unknown"},
         "two": {"B": "AQ==", "BS": ["AA=="], "S": None}}
#: What the stub answers, per operation: items with blobs everywhere a shape can hold them.
_ANSWERS: dict[str, dict[str, Any]] = {
    "GetItem": {"Item": _ITEM, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 1.0}},
    "PutItem": {"Attributes": _ITEM, "Unknown": 1},
    "UpdateItem": {"Attributes": _ITEM},
    "DeleteItem": {"Attributes": _ITEM, "ItemCollectionMetrics": {
        "ItemCollectionKey": {"PK": {"B": "AQ=="}}, "SizeEstimateRangeGB": [0.0, 1.0]}},
    "Query": {"Items": [_ITEM, _ITEM], "Count": 2, "ScannedCount": 2,
              "LastEvaluatedKey": {"PK": {"B": "AQ=="}}},
    "Scan": {"Items": [_ITEM], "Count": 1, "ScannedCount": 1},
    "BatchGetItem": {"Responses": {"t": [_ITEM]}, "UnprocessedKeys": {
        "t": {"Keys": [{"PK": {"B": "AQ=="}}], "ConsistentRead": True}}},
    "BatchWriteItem": {"UnprocessedItems": {"t": [{"PutRequest": {"Item": _ITEM}},
                                                  {"DeleteRequest": {"Key": {"PK": {"S": "k"}}}}]}},
    "TransactGetItems": {"Responses": [{"Item": _ITEM}, {}]},
    "TransactWriteItems": {"ConsumedCapacity": [], "ItemCollectionMetrics": {}},
}
_HEADERS = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "rid"}


def _headers(body: bytes) -> dict[str, str]:
    """DynamoDB's headers of an answer, its ``x-amz-crc32`` the body's (the library checks it)."""
    return {**_HEADERS, "x-amz-crc32": str(zlib.crc32(body) & 0xFFFFFFFF)}


class _Raw:
    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


@pytest.fixture
def paired(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Every call made both ways and compared; what was seen, per operation."""
    require_fast_path()
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: _NOW)
    state: dict[str, Any] = {"ops": {}, "error": None, "sent": []}

    def answer(request: Any, **_: Any) -> AWSResponse:
        state["sent"].append(request)
        operation = request.headers["X-Amz-Target"].decode().split(".")[1]
        if state["error"] is not None:
            return AWSResponse(request.url, 400, _headers(state["error"]), _Raw(state["error"]))
        content = json.dumps(_ANSWERS[operation]).encode()
        return AWSResponse(request.url, 200, _headers(content), _Raw(content))

    original = _wire.FastPath.__call__

    def both(self: _wire.FastPath, operation: str, params: dict[str, Any]) -> Any:
        results = []
        for way in ("botocore", "fast"):
            monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=26))
            sent = len(state["sent"])
            copied = copy.deepcopy(params)
            try:
                if way == "botocore":
                    result: Any = _botocore.ORIGINAL_CALL(self.client, operation, copied)
                else:
                    assert self.begin(operation, copy.deepcopy(params)) is not None, operation
                    result = original(self, operation, copied)
            except ClientError as exc:
                result = exc
            assert len(state["sent"]) == sent + 1
            results.append(result)
        slow_request, fast_request = state["sent"][-2:]
        assert (fast_request.method, fast_request.url, fast_request.body) == (
            slow_request.method, slow_request.url, slow_request.body)
        assert list(fast_request.headers.items()) == list(slow_request.headers.items())
        assert fast_request.context == slow_request.context
        slow, fast = results
        if isinstance(slow, ClientError):
            assert type(fast) is type(slow) and fast.response == slow.response
            assert str(fast) == str(slow)
            raise fast
        assert fast == slow
        state["ops"][operation] = state["ops"].get(operation, 0) + 1
        return fast

    monkeypatch.setattr(_wire.FastPath, "__call__", both)
    state["answer"] = answer
    _clients.forget()
    client = _clients.client_for(Wired)
    client.meta.events.register_last("before-send.dynamodb", answer)
    # Known to have no replica: the first write asks nothing (dynaunique._transport.regions).
    _regions.remember(Wired.Meta.table_name, client.meta.region_name, Wired.Meta.host, {})
    yield state
    _clients.forget()


def _every_operation() -> None:
    connection = _clients.connection_for(Wired)
    record = _full("W#1")
    record.save()
    record.name = "m"
    record.save()
    record.email = "other@example.com"
    record.save()
    record.delete()
    Wired(pk="W#gone").delete()
    audit.check([Wired])
    key = {"PK": {"S": "W#1"}, "SK": {"S": "PROFILE"}}
    send = _connection.send
    send(connection, "GetItem", {"TableName": "wire_records", "Key": key, "ConsistentRead": True})
    send(connection, "UpdateItem", {"TableName": "wire_records", "Key": key,
                                    "UpdateExpression": "SET #n = :n",
                                    "ExpressionAttributeNames": {"#n": "name"},
                                    "ExpressionAttributeValues": {":n": {"B": b"\x00"}}})
    send(connection, "DeleteItem", {"TableName": "wire_records", "Key": key})
    send(connection, "BatchWriteItem", {"RequestItems": {"wire_records": [
        {"PutRequest": {"Item": {**key, "b": {"B": b"\x01"}}}}]}})
    send(connection, "BatchGetItem", {"RequestItems": {"wire_records": {"Keys": [key]}}})
    send(connection, "TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": "wire_records", "Key": key}}]})
    send(connection, "Query", {"TableName": "wire_records", "KeyConditionExpression": "#p = :p",
                               "ExpressionAttributeNames": {"#p": "PK"},
                               "ExpressionAttributeValues": {":p": {"S": "W#1"}}})


def test_every_operation_sends_botocores_request_and_gets_its_answer(
        paired: dict[str, Any]) -> None:
    _every_operation()
    assert set(paired["ops"]) == _wire.OPERATIONS


def test_with_a_session_token_and_an_outer_user_agent_feature(
        paired: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.context import start_as_current_context
    from botocore.useragent import register_feature_id

    monkeypatch.setenv("AWS_SESSION_TOKEN", "token/with+chars=")
    _clients.forget()
    client = _clients.client_for(Wired)
    client.meta.events.register_last("before-send.dynamodb", paired["answer"])
    with start_as_current_context():
        register_feature_id("WAITER")
        _full("W#t").save()
    sent = paired["sent"][-1]
    assert sent.headers["X-Amz-Security-Token"] == b"token/with+chars="
    assert b"x-amz-security-token" in sent.headers["Authorization"]


def test_errors_are_botocores_own(paired: dict[str, Any]) -> None:
    paired["error"] = json.dumps({
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "message": "Transaction cancelled", "CancellationReasons": [
            {"Code": "None"}, {"Code": "ConditionalCheckFailed", "Message": "failed",
                               "Item": _ITEM}]}).encode()
    connection = _clients.connection_for(Wired)
    with pytest.raises(ClientError) as caught:
        _wire.FastPath.__call__(connection.client.__dict__["_make_api_call"],
                                "TransactWriteItems", {"TransactItems": [
                                    {"Put": {"TableName": "wire_records", "Item": {
                                        "PK": {"S": "a"}}}}]})
    reasons = caught.value.response["CancellationReasons"]
    assert reasons[1]["Item"]["b"] == {"B": b"\x00\xff"}
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"


def test_a_handler_of_its_own_on_a_skipped_event_takes_botocores_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    require_fast_path()
    _clients.forget()
    try:
        client = _clients.client_for(Wired)
        client.meta.events.register_last("before-send.dynamodb",
                                         lambda request, **_: AWSResponse(
                                             request.url, 200, _headers(b"{}"),
                                             _Raw(b"{}")))
        fast = client.__dict__["_make_api_call"]
        params = {"TableName": "wire_records", "Item": {"PK": {"S": "a"}}}
        assert fast.begin("PutItem", dict(params)) is not None
        seen: list[str] = []
        client.meta.events.register("before-call.dynamodb.PutItem",
                                    lambda **_: seen.append("before-call"))
        assert fast.begin("PutItem", dict(params)) is None
        _clients.connection_for(Wired).dispatch("PutItem", dict(params))
        assert seen == ["before-call"]
        # Another operation, debug logging: botocore's path too.
        assert fast.begin("DescribeTable", {"TableName": "wire_records"}) is None
    finally:
        _clients.forget()


def test_a_patched_botocore_method_is_what_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    _clients.forget()
    calls: list[str] = []
    from botocore.client import BaseClient

    monkeypatch.setattr(BaseClient, "_make_api_call",
                        lambda self, operation, params: calls.append(operation) or {})
    try:
        _clients.connection_for(Wired).dispatch("GetItem", {
            "TableName": "wire_records", "Key": {"PK": {"S": "a"}}})
    finally:
        _clients.forget()
    assert calls == ["GetItem"]


def test_the_async_steps_make_the_same_request_fast_or_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``_wire.start`` (what ``dynaunique.aio`` sends): its fast request, and botocore's own
    steps when the fast path stands aside, are botocore's request."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: _NOW)
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=26))
    _clients.forget()
    try:
        client = _clients.client_for(Wired)
        sent: list[Any] = []

        def answer(request: Any, **_: Any) -> AWSResponse:
            sent.append(request)
            content = json.dumps(_ANSWERS["GetItem"]).encode()
            return AWSResponse(request.url, 200, _headers(content), _Raw(content))

        client.meta.events.register_last("before-send.dynamodb", answer)
        params = {"TableName": "wire_records", "Key": {"PK": {"S": "a"}}}
        expected = _botocore.ORIGINAL_CALL(client, "GetItem", dict(params))
        botocores = sent.pop()
        calls = [_wire.start(client, "GetItem", dict(params))]
        client.meta.events.register("before-sign.dynamodb.GetItem", lambda **_: None)
        calls.append(_wire.start(client, "GetItem", dict(params)))
        assert type(calls[0]) is type(calls[1]) and calls[0].op is not calls[1].op
        assert calls[1].op.decode is None          # botocore's own steps
        for call in calls:
            assert call.before_send() is not None
            request = sent.pop()
            assert (request.method, request.url, request.body) == (
                botocores.method, botocores.url, botocores.body)
            assert list(request.headers.items()) == list(botocores.headers.items())
            assert call.finish(answer(request)) == expected
    finally:
        _clients.forget()


def test_an_answer_not_matching_its_crc32_is_a_checksum_error_on_both_paths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore checks ``x-amz-crc32`` only in its retry handler (retries off here): the call
    checks it itself, fast or by botocore's steps; no header, nothing to check."""
    from botocore.exceptions import ChecksumError

    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    require_fast_path()
    _clients.forget()
    try:
        client = _clients.client_for(Wired)
        content = json.dumps(_ANSWERS["GetItem"]).encode()
        headers: dict[str, str] = {}
        client.meta.events.register_last("before-send.dynamodb", lambda request, **_: AWSResponse(
            request.url, 200, headers, _Raw(content)))
        errors: list[Any] = []
        client.meta.events.register("after-call-error.dynamodb",
                                    lambda exception, **_: errors.append(exception))
        params = {"TableName": "wire_records", "Key": {"PK": {"S": "a"}}}
        connection = _clients.connection_for(Wired)
        monkeypatch.setattr(_botocore, "once", contextvars.ContextVar("once", default=True))
        for fast in (True, False):
            if not fast:
                client.meta.events.register("before-sign.dynamodb", lambda **_: None)
            assert (client.__dict__["_make_api_call"].begin("GetItem", dict(params))
                    is not None) is fast
            headers.clear()
            headers.update(_HEADERS)
            assert connection.dispatch("GetItem", dict(params))["Item"]["PK"] == {"S": "W#1"}
            headers.update(_headers(content))
            assert connection.dispatch("GetItem", dict(params))["Item"]["PK"] == {"S": "W#1"}
            headers["x-amz-crc32"] = str(int(headers["x-amz-crc32"]) ^ 1)
            with pytest.raises(ChecksumError, match="crc32"):
                connection.dispatch("GetItem", dict(params))
            assert isinstance(errors.pop(), ChecksumError) and not errors
    finally:
        _clients.forget()


def _warnings_over_two_clients(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Two clients, each sending a GetItem (answered at before-send) by botocore's steps (the
    fast path stands aside): the WARNINGs logged meanwhile."""
    params = {"TableName": "wire_records", "Key": {"PK": {"S": "a"}}}
    content = json.dumps(_ANSWERS["GetItem"]).encode()
    with caplog.at_level("WARNING", logger="dynaunique.connection"):
        for _ in range(2):
            _clients.forget()
            client = _clients.client_for(Wired)
            client.meta.events.register_last("before-send.dynamodb", lambda request, **_: (
                AWSResponse(request.url, 200, _headers(content), _Raw(content))))
            assert _botocore.installed_call(client).begin("GetItem", dict(params)) is None
            got = _connection.send(_clients.connection_for(Wired), "GetItem", params)
            assert got["Item"]["PK"] == {"S": "W#1"}
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_a_changed_botocore_function_fences_the_fast_path_off_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The fence: a mirrored botocore function whose source hash matches no tested release's
    turns the fast path off (botocore's steps carry the calls) and says so once."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    require_fast_path()
    changed = "botocore.auth.SigV4Auth.canonical_request"
    monkeypatch.setitem(_botocore.ACCEPTED, changed, ("0" * 16,))
    _botocore.fence.cache_clear()
    try:
        warnings = _warnings_over_two_clients(caplog)
        assert len(warnings) == 1 and changed in warnings[0]
    finally:
        _botocore.fence.cache_clear()
        _clients.forget()


def test_a_missing_botocore_private_stands_the_fast_path_aside_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A private the fast path reads that this botocore lacks (here: a handler of KNOWN) is not
    a silent fallback: botocore's steps carry the calls and one WARNING names it."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    require_fast_path()
    monkeypatch.setattr(_botocore, "MISSING", ["MaxAttemptsSeeder.seed_max_attempts"])
    monkeypatch.setattr(_botocore, "_warned", set())
    try:
        warnings = _warnings_over_two_clients(caplog)
        assert len(warnings) == 1
        assert "MaxAttemptsSeeder.seed_max_attempts" in warnings[0]
    finally:
        _clients.forget()
