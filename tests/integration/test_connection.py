"""dynaunique._transport.connection: every request goes through a PynamoDB connection, as PynamoDB's
would.

Against the local server: a model with no ``Meta.region`` writes to the region botocore's chain
gives (where PynamoDB writes); PynamoDB's signals fire for dynaunique's transactions; a mock of
``Connection._make_api_call`` (how PynamoDB's own tests mock) sees them; ``extra_headers`` reach
the wire; ``max_retry_attempts``/``base_backoff_ms`` become the retry policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any
from unittest import mock

import pytest
from pynamodb.connection import Connection
from pynamodb.models import Model as PynamoModel
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send
from support.declare import declare
from support.recorders import listening, requests_sent

from dynaunique import DynauniqueError, aio
from dynaunique._transport import botocore as _botocore
from dynaunique._transport import clients, connection
from dynaunique._transport import wire as _wire
from dynaunique._transport.clients import connection_for
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables

# No Meta.region: the region comes from botocore's chain (AWS_DEFAULT_REGION here).
Regional = declare("Regional", "conn_regional", pk=UnicodeAttribute(hash_key=True),
                   email=UnicodeAttribute(unique=True, null=True))


class PlainRegional(PynamoModel):
    """PynamoDB's own model on the same table: where PynamoDB reads, dynaunique must write."""

    class Meta:
        table_name = "conn_regional"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)


Signalled = declare("Signalled", "conn_signalled",
                    meta={"region": "us-east-1",
                          "extra_headers": {"X-Dynaunique-Test": "signalled"}},
                    pk=UnicodeAttribute(hash_key=True),
                    email=UnicodeAttribute(unique=True, null=True))


@pytest.fixture
def regional(dynaunique_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    for model in (Regional, PlainRegional):
        model.Meta.host = dynaunique_endpoint
        model.Meta.region = None
        model._connection = None
    # Connections are cached by settings; this test changes the environment under one key.
    clients.forget()
    create_tables(PlainRegional)
    yield dynaunique_endpoint
    clients.forget()


def test_a_model_without_region_writes_where_pynamodb_writes(regional: str) -> None:
    assert connection_for(Regional).client.meta.region_name == "eu-west-1"
    Regional(pk="R#1", email="ada@x.io").save()
    # PynamoDB's own model, same settings, reads the record back: same region, same table.
    assert PlainRegional.get("R#1", consistent_read=True).email == "ada@x.io"
    assert PlainRegional.get("UNIQ#EMAIL#ada@x.io", consistent_read=True) is not None
    # The table exists only in eu-west-1 on the server: us-east-1 has no such table.
    PlainRegional.Meta.region = "us-east-1"
    PlainRegional._connection = None
    assert not PlainRegional.exists()


@pytest.fixture
def signalled(dynaunique_db: str) -> str:
    Signalled.Meta.host = dynaunique_db
    Signalled._connection = None
    create_tables(Signalled)
    return dynaunique_db


def test_pynamodb_signals_fire_for_every_dynaunique_request(signalled: str) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def pre(sender: Any, operation_name: str, table_name: str | None, req_uuid: Any) -> None:
        seen.append(("pre", operation_name, table_name))

    def post(sender: Any, operation_name: str, table_name: str | None, req_uuid: Any) -> None:
        seen.append(("post", operation_name, table_name))

    pre_dynamodb_send.connect(pre)
    post_dynamodb_send.connect(post)
    try:
        account = Signalled(pk="S#1", email="ada@x.io")
        account.save()
        Signalled.get_by_unique("email", "ada@x.io")
        account.delete()
    finally:
        pre_dynamodb_send.disconnect(pre)
        post_dynamodb_send.disconnect(post)
    assert seen == [
        ("pre", "TransactWriteItems", None), ("post", "TransactWriteItems", None),
        ("pre", "GetItem", "conn_signalled"), ("post", "GetItem", "conn_signalled"),
        ("pre", "GetItem", "conn_signalled"), ("post", "GetItem", "conn_signalled"),
        ("pre", "TransactWriteItems", None), ("post", "TransactWriteItems", None),
    ]


def test_a_mock_of_make_api_call_sees_dynaunique_requests(signalled: str) -> None:
    """PynamoDB's own tests mock Connection._make_api_call: dynaunique's writes go through it."""
    with mock.patch.object(Connection, "_make_api_call", return_value={}) as called:
        Signalled(pk="S#2", email="grace@x.io").save()
    operation, params = called.call_args.args
    assert operation == "TransactWriteItems"
    assert [next(iter(item)) for item in params["TransactItems"]] == ["Put", "Put"]
    assert params["ReturnConsumedCapacity"] == "TOTAL"
    assert params["ClientRequestToken"]


def test_extra_headers_reach_the_wire(signalled: str) -> None:
    headers: list[str | None] = []

    def record(request: Any, **_: Any) -> None:
        headers.append(request.headers.get("X-Dynaunique-Test"))

    with listening([clients.client_for(Signalled)], record):
        Signalled(pk="S#3", email="x@x.io").save()
    assert headers == ["signalled"]


def _models_client() -> Any:
    """What PynamoDB writes through: the client of the model's own connection."""
    return Signalled._get_connection().connection.client


def test_the_models_own_connection_carries_every_request(signalled: str) -> None:
    assert connection_for(Signalled) is Signalled._get_connection().connection
    with requests_sent(_models_client()) as sent:
        Signalled(pk="S#20", email="hook@x.io").save()
        Signalled(pk="S#20").delete()          # never loaded: read, then the transaction
    assert [op for op, _ in sent] == ["TransactWriteItems", "GetItem", "TransactWriteItems"]


@pytest.mark.anyio
async def test_the_models_own_connection_carries_every_async_request(signalled: str) -> None:
    with requests_sent(_models_client()) as sent:
        async with aio.session():
            await Signalled(pk="S#21", email="ahook@x.io").asave()
            with pytest.raises(Signalled.DoesNotExist):
                await Signalled.aget_by_unique("email", "nobody@x.io")
    assert [op for op, _ in sent] == ["TransactWriteItems", "GetItem"]


@pytest.mark.parametrize("way", ["sync", "async"])
def test_a_stubber_on_the_models_connection_intercepts_a_save(signalled: str, way: str) -> None:
    import asyncio

    from botocore.stub import Stubber
    from support.invariants import raw_item

    with Stubber(_models_client()) as stub:
        stub.add_response("transact_write_items", {})
        record_ = Signalled(pk=f"S#stub-{way}", email=f"stub-{way}@x.io")
        if way == "sync":
            record_.save()
        else:
            asyncio.run(record_.asave())
        stub.assert_no_pending_responses()
    # Nothing reached the server.
    assert raw_item(signalled, "conn_signalled", {"pk": {"S": f"S#stub-{way}"}}) is None


def test_botocores_retries_are_the_loops_so_dynaunique_decides_every_resend(
        signalled: str) -> None:
    """The model's client retries PynamoDB's calls as PynamoDB configures it; the library's
    calls through it are sent once each, resent by its one retry loop only."""
    from botocore.awsrequest import AWSResponse

    from dynaunique import OutcomeUnknownError

    config = connection_for(Signalled).client.meta.config
    assert config.retries["total_max_attempts"] > 1             # PynamoDB's own setting
    sent: list[object] = []

    class Raw:
        def stream(self, **_: Any) -> Iterator[bytes]:
            yield b"{}"

    def failing(request: Any, **_: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, 500, {}, Raw())

    client = _models_client()
    client.meta.events.register_last("before-send.dynamodb", failing)
    try:
        with pytest.raises(OutcomeUnknownError):
            Signalled(pk="S#22", email="retry@x.io").save()
    finally:
        client.meta.events.unregister("before-send.dynamodb", failing)
    assert len(sent) == connection.policy_for(Signalled.Meta).max_network_retries + 1


def test_a_token_reused_for_another_request_is_a_clear_error(signalled: str) -> None:
    """The same ClientRequestToken with another body (IdempotentParameterMismatchException, as
    DynamoDB and the embedded server answer) is a DynauniqueError that says nothing was applied.
    dynaunique never reuses a token across calls; this forces one to show the mapping."""
    first = Signalled(pk="S#10", email="first@x.io")
    second = Signalled(pk="S#11", email="second@x.io")
    with mock.patch("dynaunique._write.render.new_token", return_value="fixed-token-1"):
        first.save()
        with pytest.raises(DynauniqueError, match=r"ClientRequestToken .* different request"):
            second.save()
    assert Signalled.count("S#11") == 0
    with pytest.raises(Signalled.DoesNotExist):
        Signalled.get_by_unique("email", "second@x.io")


def test_handlers_on_the_models_connection_see_its_home_region_writes(
        dynaunique_db: str) -> None:
    """A global table's writes go to the home region through a second client
    (``connection_in``): every handler registered on the model's own connection runs on it
    too — a before-send hook registered before or after that client was made, and a Stubber."""
    import asyncio

    from botocore.stub import Stubber
    from support.global_tables import EAST, WEST, make_global, member_model

    async def _asave(record: Any) -> None:
        async with aio.session():
            await record.asave()

    from support.invariants import raw_item

    west = member_model("conn_home", WEST, dynaunique_db, home=EAST)
    make_global(member_model("conn_home", EAST, dynaunique_db), dynaunique_db)
    own = connection_for(west).client
    with requests_sent(own) as sent:
        west(pk="M1", email="m1@x.io").save()                 # the home client made here
        west(pk="M2", email="m2@x.io").save()
    # Written at home (EAST) through the home client, which is not the model's own (WEST).
    assert [op for op, _ in sent].count("TransactWriteItems") == 2
    assert raw_item(dynaunique_db, "conn_home", {"PK": {"S": "M1"}}, region=EAST) is not None
    # (On a botocore the fence does not know, every call takes botocore's steps: CI's oldest.)
    fast = _botocore.fence() == () and not _botocore.MISSING
    with requests_sent(own) as later, mock.patch.object(     # registered after it was made
            _wire, "botocore_steps",
            side_effect=AssertionError("the fast path stood aside")) if fast else nullcontext():
        # (a before-send hook is on an event the fast path emits: it stays on)
        west(pk="M3", email="m3@x.io").save()
        asyncio.run(_asave(west(pk="M5", email="m5@x.io")))    # and async alike
    assert [op for op, _ in later] == ["TransactWriteItems", "TransactWriteItems"]
    with Stubber(own) as stub:
        stub.add_response("transact_write_items", {})
        west(pk="M4", email="m4@x.io").save()
        stub.assert_no_pending_responses()
    assert raw_item(dynaunique_db, "conn_home", {"PK": {"S": "M4"}}, region=EAST) is None


def test_use_endpoint_where_a_model_already_points_keeps_the_handlers_on_its_client(
        signalled: str) -> None:
    """``use_endpoint`` drops a model's connection only when host, region or credentials
    change: a hook registered on its client before a call that changes nothing still sees
    its writes."""
    from dynaunique.testing import use_endpoint

    use_endpoint(signalled, Signalled)
    with requests_sent(connection_for(Signalled).client) as sent:
        use_endpoint(signalled, Signalled)
        Signalled(pk="S#kept", email="kept@x.io").save()
    assert [op for op, _ in sent] == ["TransactWriteItems"]


def test_use_endpoint_elsewhere_warns_that_the_handlers_on_the_old_client_are_dropped(
        signalled: str, caplog: pytest.LogCaptureFixture) -> None:
    """Re-pointed to another endpoint, a model gets a new client (botocore's endpoint is fixed
    per client): a hook registered on the old one does not follow, and one WARNING says so,
    naming it. Without a hook of the user's, nothing is logged."""
    from dynaunique.testing import use_endpoint

    def hook(**_: Any) -> None:
        return None

    other = signalled.replace("127.0.0.1", "localhost")
    with caplog.at_level("WARNING", logger="dynaunique.testing"):
        use_endpoint(signalled, Signalled)
        connection_for(Signalled)
        use_endpoint(other, Signalled)                      # no hook: nothing to say
        assert caplog.records == []
        connection_for(Signalled).client.meta.events.register("before-send.dynamodb", hook)
        use_endpoint(signalled, Signalled)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "before-send" in warnings[0] and "hook" in warnings[0]
