"""The asyncio API against the local server: the same requests, errors and state as the sync API.

Every request is recorded on the wire (botocore's ``before-send``, which both senders emit on the
model's one botocore client) so the sync and async runs of one operation can be compared body by
body, the per-call ``ClientRequestToken`` and the locks' ``created`` timestamps aside.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.connection import Connection
from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send
from support.declare import declare, pk_attr, sk_attr
from support.recorders import listening, operation_of
from support.tables import point

from dynaunique import (
    ConcurrentModificationError,
    UniqueViolation,
    UnsupportedOperationError,
    aio,
    atomic,
)
from dynaunique._transport import clients
from dynaunique.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from dynaunique.testing import create_tables, reset_local_dynamodb

pytestmark = pytest.mark.anyio


Person = declare("Person", "aio_people", meta={"extra_headers": {"X-Dynaunique-Test": "aio"}},
                 pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(unique=True, null=True), note=UnicodeAttribute(null=True),
                 visits=NumberAttribute(default=0), version=VersionAttribute())


@pytest.fixture
def people(dynaunique_aio_db: str) -> str:
    point(dynaunique_aio_db, Person)
    create_tables(Person)
    return dynaunique_aio_db


# --- recording the wire --------------------------------------------------------------------------

_CREATED = re.compile(r'"created": \{"S": "[^"]*"\}')


@contextmanager
def wire() -> Iterator[list[tuple[str, Any]]]:
    """Record (operation, JSON body) of every request sent through Person's botocore client."""
    sent: list[tuple[str, Any]] = []

    def record(request: Any, **_: Any) -> None:
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        body = _CREATED.sub('"created": {"S": "<now>"}', body)
        parsed = json.loads(body)
        parsed.pop("ClientRequestToken", None)
        sent.append((operation_of(request), parsed))

    with listening([clients.client_for(Person)], record, last=True):
        yield sent


def _seed() -> None:
    Person(pk="A", email="a@x.io", note="n").save()
    Person(pk="B", email="b@x.io", note="n").save()


def _load(pk: str) -> Person:
    return Person.get(pk, "PROFILE", consistent_read=True)


#: name → (setup, returning the objects; the sync operation; the async operation).
Scenario = tuple[Callable[[], Any], Callable[[Any], object], Callable[[Any], Awaitable[object]]]


def _set(obj: Person, **values: Any) -> Person:
    for name, value in values.items():
        setattr(obj, name, value)
    return obj


async def _aswap(objs: tuple[Person, Person]) -> None:
    a, b = objs
    async with atomic():
        await _set(a, email="b@x.io").asave()
        await _set(b, email="a@x.io").asave()


def _swap(objs: tuple[Person, Person]) -> None:
    a, b = objs
    with atomic():
        _set(a, email="b@x.io").save()
        _set(b, email="a@x.io").save()


def _moved(a: Person) -> Person:
    return _set(a, email="c@x.io")


SCENARIOS: dict[str, Scenario] = {
    "create": (lambda: Person(pk="C", email="c@x.io", note="new"),
               lambda p: p.save(), lambda p: p.asave()),
    "update moving a lock": (lambda: _load("A"),
                             lambda p: _moved(p).save(), lambda p: _moved(p).asave()),
    "plain update": (lambda: _load("A"),
                     lambda p: _set(p, note="m").save(), lambda p: _set(p, note="m").asave()),
    "delete loaded": (lambda: _load("A"), lambda p: p.delete(), lambda p: p.adelete()),
    "delete never loaded": (lambda: Person(pk="A"), lambda p: p.delete(),
                            lambda p: p.adelete()),
    "save never loaded over an existing key": (
        lambda: Person(pk="A", email="c@x.io"), lambda p: p.save(), lambda p: p.asave()),
    "update(actions) of a unique field": (
        lambda: _load("A"), lambda p: p.update([Person.email.set("c@x.io")]),
        lambda p: p.aupdate([Person.email.set("c@x.io")])),
    "update(actions) of a plain field": (
        lambda: _load("A"), lambda p: p.update([Person.visits.add(2)]),
        lambda p: p.aupdate([Person.visits.add(2)])),
    "get_by_unique": (lambda: None, lambda _: Person.get_by_unique("email", "b@x.io"),
                      lambda _: Person.aget_by_unique("email", "b@x.io")),
    "atomic swap": (lambda: (_load("A"), _load("B")), _swap, _aswap),
    "unique violation": (lambda: Person(pk="C", email="a@x.io"),
                         lambda p: p.save(), lambda p: p.asave()),
}


def _fresh(endpoint: str) -> None:
    reset_local_dynamodb(endpoint)
    create_tables(Person)
    _seed()


def _outcome(run: Callable[[], object]) -> str:
    try:
        run()
    except Exception as exc:
        return type(exc).__name__
    return "ok"


async def _aoutcome(run: Callable[[], Awaitable[object]]) -> str:
    try:
        await run()
    except Exception as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_the_async_path_sends_the_same_requests_as_the_sync_path(people: str,
                                                                        name: str) -> None:
    setup, sync_op, async_op = SCENARIOS[name]
    _fresh(people)
    subject = setup()
    with wire() as sync_sent:
        sync_outcome = _outcome(lambda: sync_op(subject))
    sync_table = _table()
    _fresh(people)
    subject = setup()
    with wire() as async_sent:
        async_outcome = await _aoutcome(lambda: async_op(subject))
    assert async_sent == sync_sent
    assert async_outcome == sync_outcome
    assert _table() == sync_table
    assert sync_sent, "the operation sent nothing: the comparison would prove nothing"


def _table() -> list[dict[str, Any]]:
    """The table's items, lock timestamps aside, in key order."""
    items = clients.client_for(Person).scan(TableName="aio_people",
                                                    ConsistentRead=True)["Items"]
    for item in items:
        item.pop("created", None)
    return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))


# --- behaviour -----------------------------------------------------------------------------------


async def test_aget_returns_a_loaded_object_whose_next_save_is_guarded(people: str) -> None:
    await Person(pk="A", email="a@x.io").asave()
    first = await Person.aget("A", "PROFILE", consistent_read=True)
    second = await Person.aget("A", "PROFILE", consistent_read=True)
    assert (first.email, first.version) == ("a@x.io", 1)
    await _set(first, email="b@x.io").asave()
    with pytest.raises(ConcurrentModificationError):
        await _set(second, email="c@x.io").asave()
    with pytest.raises(Person.DoesNotExist):
        await Person.aget("nobody", "PROFILE")
    assert (await Person.aget_by_unique("email", "b@x.io")).pk == "A"
    with pytest.raises(Person.DoesNotExist):
        await Person.aget_by_unique("email", "a@x.io")


async def test_a_taken_value_is_a_unique_violation_naming_its_holder(people: str) -> None:
    await Person(pk="A", email="a@x.io").asave()
    with pytest.raises(UniqueViolation) as raised:
        await Person(pk="B", email="a@x.io").asave()
    assert raised.value.owner == {"PK": "A", "SK": "PROFILE"}


async def test_aupdate_refreshes_the_object_and_moves_the_lock(people: str) -> None:
    person = Person(pk="A", email="a@x.io")
    await person.asave()
    await person.aupdate([Person.email.set("b@x.io"), Person.visits.add(1)],)
    assert (person.email, person.visits, person.version) == ("b@x.io", 1, 2)
    await Person(pk="B", email="a@x.io").asave()  # a@x.io was freed


async def test_async_atomic_commits_one_transaction_without_sync_io(
        people: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = Person(pk="A", email="a@x.io"), Person(pk="B", email="b@x.io")
    await a.asave()
    await b.asave()

    def no_sync_io(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a sync request from inside `async with atomic()`")

    monkeypatch.setattr(Connection, "dispatch", no_sync_io)
    with wire() as sent:
        async with atomic() as tx:
            _set(a, email="b@x.io").save()  # the sync save is collected too
            await _set(b, email="a@x.io").asave()
            await Person(pk="C", email="c@x.io").asave()
    assert [operation for operation, _ in sent] == ["TransactWriteItems"]
    assert tx.request is not None and len(tx.request["TransactItems"]) == 6
    monkeypatch.undo()
    assert (await Person.aget_by_unique("email", "a@x.io")).pk == "B"


async def test_an_exception_in_an_async_atomic_block_sends_nothing(people: str) -> None:
    with wire() as sent, pytest.raises(RuntimeError):
        async with atomic():
            await Person(pk="A", email="a@x.io").asave()
            raise RuntimeError("changed my mind")
    assert sent == []


async def test_each_task_has_its_own_atomic_unit(people: str) -> None:
    async def claim(pk: str, email: str) -> None:
        async with atomic() as tx:
            await Person(pk=pk, email=email).asave()
            await asyncio.sleep(0)  # let the other task run inside its own block
        assert tx.request is not None and len(tx.request["TransactItems"]) == 2

    await asyncio.gather(claim("A", "a@x.io"), claim("B", "b@x.io"))
    assert (await Person.aget_by_unique("email", "b@x.io")).pk == "B"


async def test_a_task_started_inside_a_block_cannot_write_into_it(people: str) -> None:
    with pytest.raises(UnsupportedOperationError, match="another asyncio task"):
        async with atomic():
            await asyncio.gather(Person(pk="A", email="a@x.io").asave())
    # ... but may open a block of its own.
    async with atomic():
        await asyncio.create_task(_own_block())
    assert (await Person.aget("D", "PROFILE")).email == "d@x.io"


async def _own_block() -> None:
    async with atomic():
        await Person(pk="D", email="d@x.io").asave()


async def test_signals_fire_and_extra_headers_reach_the_wire(people: str) -> None:
    seen: list[tuple[str, str, str | None]] = []

    def pre(sender: Any, operation_name: str, table_name: str | None, req_uuid: Any) -> None:
        seen.append(("pre", operation_name, table_name))

    def post(sender: Any, operation_name: str, table_name: str | None, req_uuid: Any) -> None:
        seen.append(("post", operation_name, table_name))

    headers: list[Any] = []

    def record(request: Any, **_: Any) -> None:
        headers.append(request.headers.get("X-Dynaunique-Test"))

    client = clients.client_for(Person)
    client.meta.events.register_last("before-send.dynamodb", record)
    pre_dynamodb_send.connect(pre)
    post_dynamodb_send.connect(post)
    try:
        person = Person(pk="S", email="s@x.io")
        await person.asave()
        await Person.aget_by_unique("email", "s@x.io")
        await person.adelete()
    finally:
        pre_dynamodb_send.disconnect(pre)
        post_dynamodb_send.disconnect(post)
        client.meta.events.unregister("before-send.dynamodb", record)
    assert seen == [
        ("pre", "TransactWriteItems", None), ("post", "TransactWriteItems", None),
        ("pre", "GetItem", "aio_people"), ("post", "GetItem", "aio_people"),
        ("pre", "GetItem", "aio_people"), ("post", "GetItem", "aio_people"),
        ("pre", "TransactWriteItems", None), ("post", "TransactWriteItems", None),
    ]
    assert headers == ["aio"] * 4


# No Meta.region: the region comes from botocore's chain (AWS_DEFAULT_REGION here).
Regional = declare("Regional", "aio_regional", pk=UnicodeAttribute(hash_key=True),
                   email=UnicodeAttribute(unique=True, null=True))


async def test_a_model_without_region_is_signed_for_botocores_region(
        dynaunique_aio_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    Regional.Meta.host = dynaunique_aio_db
    Regional.Meta.region = None
    clients.forget()
    try:
        create_tables(Regional)  # PynamoDB's own connection: botocore's region too
        signed: list[str] = []

        def record(request: Any, **_: Any) -> None:
            signed.append(str(request.headers.get("Authorization")))

        client = clients.client_for(Regional)
        client.meta.events.register_last("before-send.dynamodb", record)
        await Regional(pk="R", email="r@x.io").asave()
        assert (await Regional.aget("R", consistent_read=True)).email == "r@x.io"
        assert len(signed) == 2 and all("/eu-west-1/dynamodb/" in s for s in signed)
    finally:
        clients.forget()


async def test_close_drops_the_loops_clients_and_they_come_back(people: str) -> None:
    await Person(pk="A", email="a@x.io").asave()
    await aio.close()
    assert (await Person.aget("A", "PROFILE")).email == "a@x.io"


Mocked = declare("Mocked", "aio_mocked", meta={"region": "us-west-2"},
                 pk=UnicodeAttribute(hash_key=True), email=UnicodeAttribute(unique=True, null=True))


async def test_mock_aws_answers_the_async_path_too() -> None:
    """moto's mock_aws answers from botocore's before-send event, which the async path emits."""
    from moto import mock_aws

    with mock_aws():
        Mocked.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        await Mocked(pk="A", email="a@x.io").asave()
        with pytest.raises(UniqueViolation):
            await Mocked(pk="B", email="a@x.io").asave()
        assert (await Mocked.aget_by_unique("email", "a@x.io")).pk == "A"
