"""dynaunique._transport.wire: the library's requests serialized without botocore's shape walk give
byte for byte botocore's own request (URL, method, headers, body), for every operation the
library sends; a client without the private hooks keeps botocore's serializer.

No server: the models' connection answers every request with ``{}`` from a ``before-send``
handler, after botocore built, serialized and signed it. Every request serialized on the way
is serialized twice, by the fast path and by botocore's serializer, and the two compared.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.serialize import JSONSerializer
from pynamodb.attributes import MapAttribute

import dynaunique
from dynaunique import audit
from dynaunique._transport import clients as _clients
from dynaunique._transport import connection as _connection
from dynaunique._transport import wire as _wire
from dynaunique.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from dynaunique.testing import FAKE_AWS_ENV

STUB = "http://127.0.0.1:9"


class _Raw:
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield b"{}"


def _answer(request: Any, **_: Any) -> AWSResponse:
    return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.0"}, _Raw())


class Address(MapAttribute[str, Any]):
    street = UnicodeAttribute()
    number = NumberAttribute(null=True)


_META = {"region": "us-east-1", "host": STUB}


class Wired(dynaunique.Model):
    """Every kind of attribute value DynamoDB has, and unique values of three types."""

    class Meta:
        table_name = "wire_records"
        region = _META["region"]
        host = _META["host"]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="R")
    email = UnicodeAttribute(unique=True, null=True)
    badge = BinaryAttribute(unique=True, null=True, legacy_encoding=False)
    seat = NumberAttribute(unique=True, null=True)
    old_blob = BinaryAttribute(null=True, legacy_encoding=True)
    blobs = BinarySetAttribute(null=True, legacy_encoding=False)
    numbers = NumberSetAttribute(null=True)
    tags = UnicodeSetAttribute(null=True)
    flag = BooleanAttribute(null=True)
    doc = JSONAttribute(null=True)
    items = ListAttribute(null=True)
    address = Address(null=True)
    name = UnicodeAttribute(null=True)


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Every request serialized by the fast path, compared with botocore's; op → count."""
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    seen: dict[str, int] = {}
    original = _wire.FastSerializer.serialize_to_request

    def both(self: _wire.FastSerializer, parameters: Any, operation_model: Any) -> Any:
        fast = original(self, parameters, operation_model)
        slow = self.inner.serialize_to_request(parameters, operation_model)
        assert fast == slow, operation_model.name
        assert fast["body"] == slow["body"]
        template = self._template(operation_model)
        if template is not None and parameters.keys() <= template.members:
            seen[operation_model.name] = seen.get(operation_model.name, 0) + 1
        return fast

    monkeypatch.setattr(_wire.FastSerializer, "serialize_to_request", both)
    _clients.forget()
    client = _clients.client_for(Wired)
    assert isinstance(client._serializer, _wire.FastSerializer)
    client.meta.events.register_last("before-send.dynamodb", _answer)
    yield seen
    _clients.forget()


def _full(pk: str) -> Wired:
    return Wired(pk=pk, email=f"Zoë+\U0001f600{pk}@example.com",
                 badge=b"\x00\xff\x10" + pk.encode(), seat=Decimal("12.50") + ord(pk[-1]),
                 old_blob=b"legacy\x01", blobs={b"\x01", b"\x02\x03"},
                 numbers={1, 2.5, -3}, tags={"a", "ü"}, flag=False,
                 doc={"k": [1, "two", None, {"n": 3.5}]}, items=["x", 2, True, None],
                 address=Address(street="Main \"St\"\n\t\\", number=7), name="n\u2028")


def test_every_operation_the_library_sends_serializes_as_botocore_does(
        checked: dict[str, int]) -> None:
    record = _full("W#1")
    record.save()                                   # TransactWriteItems: record + 3 locks
    record.name = "m"
    record.save()                                   # PutItem: no lock input changed
    with pytest.raises(Wired.DoesNotExist):     # UpdateItem, then the read-back finds {}
        record.update([Wired.name.set("u"), Wired.numbers.add({9})])
    record.email = "other@example.com"
    record.save()                                   # TransactWriteItems: lock hand-over
    with dynaunique.atomic():                       # TransactWriteItems: several records
        for i in range(3):
            _full(f"W#a{i}").save()
    record.delete()                                 # TransactWriteItems: record + locks
    Wired(pk="W#gone").delete()                     # GetItem (consistent), nothing to delete
    with pytest.raises(Wired.DoesNotExist):         # GetItem of the lock
        Wired.get_by_unique("email", "nobody@example.com")
    plain = Wired(pk="W#plain")
    plain.save()                                    # no unique value: PutItem
    plain.delete()                                  # DeleteItem
    audit.check([Wired])                            # Scan

    # The reads and batch writes of the audit and the migrations, with the library's items.
    rendered = _full("W#r").save(dry_run=True)["TransactItems"]
    items = [slot["Put"]["Item"] for slot in rendered]
    keys = [{"PK": item["PK"], "SK": item["SK"]} for item in items]
    connection = _clients.connection_for(Wired)
    send = _connection.send
    send(connection, "BatchWriteItem", {"RequestItems": {"wire_records": [
        {"PutRequest": {"Item": item}} for item in items] + [
        {"DeleteRequest": {"Key": key}} for key in keys]}})
    send(connection, "BatchGetItem", {"RequestItems": {"wire_records": {
        "Keys": keys, "ConsistentRead": True, "ProjectionExpression": "#k",
        "ExpressionAttributeNames": {"#k": "PK"}}}})
    send(connection, "TransactGetItems", {"TransactItems": [
        {"Get": {"TableName": "wire_records", "Key": key}} for key in keys]})
    send(connection, "Query", {"TableName": "wire_records", "KeyConditionExpression": "#p = :p",
                               "ExpressionAttributeNames": {"#p": "PK"},
                               "ExpressionAttributeValues": {":p": items[1]["PK"]},
                               "ExclusiveStartKey": keys[0], "Limit": 10,
                               "ConsistentRead": True, "ScanIndexForward": False})
    send(connection, "Scan", {"TableName": "wire_records", "Segment": 1, "TotalSegments": 4,
                              "ExclusiveStartKey": {"PK": {"B": b"\x00"}}})

    assert set(checked) == _wire.OPERATIONS
    assert checked["TransactWriteItems"] == 4 and checked["PutItem"] == 2


def test_a_blob_becomes_base64_and_text_stays_as_json_dumps_writes_it() -> None:
    params = {"TableName": "t", "Item": {"b": {"B": b"\xff\x00"}, "bs": {"BS": [b"a"]},
                                          "s": {"S": "é\U0001f600\ud800"}}}
    assert _wire.body(params) == (
        b'{"TableName": "t", "Item": {"b": {"B": "/wA="}, "bs": {"BS": ["YQ=="]}, '
        b'"s": {"S": "\\u00e9\\ud83d\\ude00\\ud800"}}}')
    assert json.loads(_wire.body(params))["Item"]["b"]["B"] == base64.b64encode(b"\xff\x00"
                                                                                ).decode()


def test_what_the_fast_path_does_not_know_goes_to_botocore(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    client = _clients.client_for(Wired)
    fast: _wire.FastSerializer = client._serializer
    model = client.meta.service_model
    calls: list[str] = []
    inner = fast.inner

    class Spy:
        def serialize_to_request(self, parameters: Any, operation_model: Any) -> Any:
            calls.append(operation_model.name)
            return inner.serialize_to_request(parameters, operation_model)

    spy = _wire.FastSerializer(Spy())
    spy._templates = dict(fast._templates)
    describe = model.operation_model("DescribeTable")
    spy.serialize_to_request({"TableName": "t"}, describe)          # not a library operation
    put = model.operation_model("PutItem")
    spy._template(put)
    calls.clear()
    with pytest.raises(KeyError):   # not a member of the input: botocore's own error
        spy.serialize_to_request({"TableName": "t", "Item": {}, "Bogus": 1}, put)
    with pytest.raises(TypeError):  # not a JSON value: botocore's own error
        spy.serialize_to_request({"TableName": "t", "Item": {"n": {"N": Decimal(1)}}}, put)
    spy.serialize_to_request({"TableName": "t", "Item": {}}, put)    # the fast path
    assert calls == ["PutItem", "PutItem"]


def test_without_the_private_hooks_botocore_serializes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    _clients.forget()
    # A botocore whose clients have no _serializer (or another kind of serializer) is left alone.
    original = _clients.install

    def hookless(client: Any) -> bool:
        del client._serializer
        return original(client)

    monkeypatch.setattr(_clients, "install", hookless)
    try:
        client = _clients.client_for(Wired)
    finally:
        _clients.forget()
    assert not hasattr(client, "_serializer")
    assert original(client) is False

    class Other:
        def serialize_to_request(self, parameters: Any, operation_model: Any) -> Any:
            raise AssertionError("not used")

    client._serializer = Other()
    assert original(client) is False and isinstance(client._serializer, Other)


def test_without_the_private_hooks_requests_still_go_out(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_clients, "install", lambda client: False)
    _clients.forget()
    try:
        client = _clients.client_for(Wired)
        assert isinstance(client._serializer, JSONSerializer)
        bodies: list[bytes] = []

        def answer(request: Any, **kwargs: Any) -> AWSResponse:
            bodies.append(request.body)
            return _answer(request, **kwargs)

        client.meta.events.register_last("before-send.dynamodb", answer)
        record = Wired(pk="W#h", email="h@example.com")
        record.save()
        assert len(bodies) == 1
        sent = json.loads(bodies[0])
        assert [list(slot) for slot in sent["TransactItems"]] == [["Put"], ["Put"]]
        assert sent["TransactItems"][1]["Put"]["Item"]["PK"] == {"S": "UNIQ#EMAIL#h@example.com"}
    finally:
        _clients.forget()


def test_a_unit_is_rendered_once_and_shows_the_request_it_sent(
        checked: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    from dynaunique._write import flush as _flush
    from dynaunique._write import render as _render
    from dynaunique._write import transaction as _transaction

    rendered: list[object] = []
    original = _render.render

    def counting(plan: Any) -> Any:
        rendered.append(plan)
        return original(plan)

    monkeypatch.setattr(_render, "render", counting)
    for module in (_flush, _transaction):
        monkeypatch.setattr(module, "render", counting, raising=False)
    sent: list[dict[str, Any]] = []
    client = _clients.client_for(Wired)
    client.meta.events.register_first(
        "before-call.dynamodb.TransactWriteItems",
        lambda params, **_: sent.append(json.loads(params["body"])))
    with dynaunique.atomic() as tx:
        _full("W#once1").save()
        _full("W#once2").save()
    assert len(rendered) == 1
    assert tx.request is not None
    assert json.loads(_wire.body(tx.request)) == {
        k: v for k, v in sent[0].items() if k != "ClientRequestToken"}
    # A dry run renders once too, and sends nothing.
    with dynaunique.atomic(dry_run=True) as dry:
        _full("W#once3").save()
    assert len(rendered) == 2 and len(sent) == 1 and dry.request is not None
