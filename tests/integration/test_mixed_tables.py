"""Tables several models share (issue 21): no model, constrained or not, can write over a lock
item or over another model's record and leave its locks behind; sync and async alike.

The accounts table holds ``Account`` (a unique email), ``Handle`` (a unique handle, another
model's records on the same keys) and ``Membership`` (no constraint at all, the docs' own
example). The family table holds a polymorphic family: ``Being`` declares a unique email,
``Robot`` adds a unique serial.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.connection import Connection
from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_item
from support.mixed_models import account_and_handle, polymorphic_family
from support.recorders import Wire
from support.tables import raw_tables

from dynaunique import (
    ConcurrentModificationError,
    InvalidValueError,
    Model,
    OtherModelRecordError,
    UniqueViolation,
    atomic,
)
from dynaunique._transport import clients
from dynaunique.attributes import UnicodeAttribute

pytestmark = pytest.mark.anyio

TABLE = "mixed_accounts"
Account, Handle = account_and_handle(TABLE)
Membership = declare("Membership", TABLE, pk=pk_attr(), sk=sk_attr(),
                     role=UnicodeAttribute(null=True))
# Not on a table that holds locks: PynamoDB's own writes.
Plain = declare("Plain", "mixed_plain", pk=pk_attr(), sk=sk_attr(),
                role=UnicodeAttribute(null=True))
Being, Robot, Human = polymorphic_family("mixed_family", "EMAIL")

ACCOUNTS = [Account, Handle, Membership]
FAMILY = [Being, Robot, Human]
LOCK = ("UNIQ#EMAIL#ada@x.io", "LOCK")


@pytest.fixture
def db(dynaunique_aio_db: str) -> str:
    raw_tables(dynaunique_aio_db, *ACCOUNTS, *FAMILY, Plain)
    return dynaunique_aio_db


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def call(mode: str, obj: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.<method>(...)`` in sync mode, ``await obj.a<method>(...)`` in async mode."""
    if mode == "sync":
        return getattr(obj, method)(*args, **kwargs)
    result: Awaitable[Any] = getattr(obj, "a" + method)(*args, **kwargs)
    return await result


def clean(endpoint: str) -> None:
    assert_clean(ACCOUNTS, endpoint)
    assert_clean(FAMILY, endpoint)


@contextmanager
def wire(*models: type[Model]) -> Iterator[Wire]:
    """What the models' clients (dynaunique's and PynamoDB's) send inside the block."""
    recorder = Wire()
    for model in models:
        recorder.hook(clients.client_for(model))
        recorder.hook(model._get_connection().connection.client)
    try:
        yield recorder
    finally:
        recorder.unhook()


def _key(pk: str, sk: str = "PROFILE") -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


# --- 1. a model without constraints on a table that holds locks ----------------------------------


@pytest.mark.parametrize("method", ["save", "delete", "update"])
async def test_a_model_without_constraints_cannot_touch_a_lock_item(db: str, mode: str,
                                                                  method: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    intruder = Membership(pk=LOCK[0], sk=LOCK[1], role="x")
    args: tuple[Any, ...] = ([Membership.role.set("y")],) if method == "update" else ()
    with pytest.raises(InvalidValueError, match="UNIQ#"):
        await call(mode, intruder, method, *args)
    assert raw_item(db, TABLE, _key(*LOCK))["owner"] == {"M": _key("ACCT#1")}
    with pytest.raises(UniqueViolation):
        Account(pk="ACCT#2", email="ada@x.io").save()
    clean(db)


@pytest.mark.parametrize("method", ["save", "delete", "update"])
async def test_a_model_without_constraints_cannot_overwrite_a_record_holding_locks(
        db: str, mode: str, method: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    intruder = Membership(pk="ACCT#1", sk="PROFILE", role="x")
    args: tuple[Any, ...] = ([Membership.role.set("y")],) if method == "update" else ()
    pynamodb_error = {"save": PutError, "delete": DeleteError, "update": UpdateError}[method]
    with pytest.raises(OtherModelRecordError) as caught:
        await call(mode, intruder, method, *args)
    assert isinstance(caught.value, pynamodb_error)
    message = str(caught.value)
    assert "Membership" in message and "Account" in message and "EMAIL" in message
    assert caught.value.other_model == "Account" and caught.value.locks == ("EMAIL",)
    assert raw_item(db, TABLE, _key("ACCT#1"))["email"] == {"S": "ada@x.io"}
    clean(db)


async def test_a_model_without_constraints_writes_over_a_record_holding_no_lock(
        db: str, mode: str) -> None:
    """An account without an email holds no lock: last writer wins, as in PynamoDB."""
    Account(pk="ACCT#1", name="no email").save()
    await call(mode, Membership(pk="ACCT#1", sk="PROFILE", role="x"), "save")
    assert raw_item(db, TABLE, _key("ACCT#1")) == {**_key("ACCT#1"), "role": {"S": "x"}}
    await call(mode, Membership(pk="ACCT#1", sk="PROFILE"), "delete")
    assert raw_item(db, TABLE, _key("ACCT#1")) is None
    clean(db)


async def test_a_model_without_constraints_saves_in_one_request(db: str, mode: str) -> None:
    with wire(Membership) as sent:
        await call(mode, Membership(pk="ACCT#1", sk="MEMBER#1", role="x"), "save")
        await call(mode, Membership(pk="ACCT#1", sk="MEMBER#1", role="y"), "save")
        await call(mode, Membership(pk="ACCT#1", sk="MEMBER#1"), "update",
                   [Membership.role.set("z")])
        await call(mode, Membership(pk="ACCT#1", sk="MEMBER#1"), "delete")
    assert sent.sent == ["PutItem", "PutItem", "UpdateItem", "DeleteItem"]
    clean(db)


async def test_a_false_condition_fails_alike_in_save_and_asave(db: str) -> None:
    """On a table holding locks and on one that holds none: a ConcurrentModificationError that
    is also PynamoDB's PutError, whose cause is the ConditionalCheckFailed."""
    for model in (Membership, Plain):
        model(pk="M#1", sk="S", role="x").save()
        failures = []
        for run in ("sync", "async"):
            with pytest.raises(ConcurrentModificationError) as caught:
                await call(run, model(pk="M#1", sk="S", role="y"), "save",
                           model.role == "nope")
            assert isinstance(caught.value, PutError)
            assert caught.value.cause_response_code == "ConditionalCheckFailedException"
            failures.append(type(caught.value))
        assert failures[0] is failures[1]


# --- 2. a never-loaded save over another model's record ------------------------------------------


async def test_a_never_loaded_save_does_not_orphan_another_models_locks(db: str,
                                                                     mode: str) -> None:
    Account(pk="K", email="e@x.io").save()
    with pytest.raises(OtherModelRecordError, match=r"Handle cannot replace .*Account.*EMAIL"):
        await call(mode, Handle(pk="K", handle="h"), "save")
    assert raw_item(db, TABLE, _key("K"))["email"] == {"S": "e@x.io"}
    assert raw_item(db, TABLE, _key("UNIQ#HANDLE#h", "LOCK")) is None
    clean(db)


async def test_the_refusal_over_a_record_from_before_the_constraint_says_what_is_true(
        db: str, mode: str) -> None:
    """An Account record written before Account's constraint (no migration yet): it holds no
    lock, but its model requires one of it. The save is refused, and its message says that,
    never that the record holds a lock that does not exist."""
    raw_tables(db, Account).put_item(TableName=TABLE, Item={**_key("K"),
                                                            "email": {"S": "e@x.io"}})
    with pytest.raises(OtherModelRecordError) as caught:
        await call(mode, Handle(pk="K", handle="h"), "save")
    assert str(caught.value) == (
        "Handle cannot replace {'PK': 'K', 'SK': 'PROFILE'}: it is a record of Account, whose "
        "constraint EMAIL requires a lock of it that this write does not carry; delete it as "
        "Account first, or do both in atomic()")
    assert caught.value.locks == ("EMAIL",)
    assert raw_item(db, TABLE, _key("UNIQ#EMAIL#e@x.io", "LOCK")) is None
    assert raw_item(db, TABLE, _key("K"))["email"] == {"S": "e@x.io"}


async def test_a_never_loaded_save_adopts_a_record_holding_no_lock_it_leaves(db: str,
                                                                          mode: str) -> None:
    Account(pk="K", name="no email").save()
    await call(mode, Handle(pk="K", handle="h"), "save")
    clean(db)
    # Delete it as the model it now is, then the other model may take the key.
    await call(mode, Handle(pk="K"), "delete")
    await call(mode, Account(pk="K", email="e@x.io"), "save")
    clean(db)


async def test_a_sibling_subclass_cannot_replace_a_record_holding_its_own_locks(
        db: str, mode: str) -> None:
    Robot(pk="K", email="r@x.io", serial="R2").save()
    with pytest.raises(OtherModelRecordError, match=r"Human cannot replace .*Robot.*SERIAL"):
        await call(mode, Human(pk="K", email="r@x.io", nickname="h"), "save")
    with pytest.raises(OtherModelRecordError, match=r"Being cannot delete .*Robot.*SERIAL"):
        await call(mode, Being(pk="K"), "delete")
    clean(db)
    # A subclass carrying every lock of the record may replace it (Robot over a Human).
    Human(pk="H", email="h@x.io").save()
    await call(mode, Robot(pk="H", email="h2@x.io", serial="C3"), "save")
    assert raw_item(db, "mixed_family", _key("UNIQ#EMAIL#h@x.io", "LOCK")) is None
    clean(db)


async def test_atomic_deletes_one_models_record_and_creates_anothers(db: str) -> None:
    Account(pk="K", email="e@x.io").save()
    with atomic():
        Account.get("K", "PROFILE").delete()
    with atomic():
        Handle(pk="K", handle="h").save()
        Membership(pk="K", sk="MEMBER#1", role="x").save()
    clean(db)


# --- 3. reads never return a lock item -----------------------------------------------------------


async def test_reads_refuse_lock_keys(db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    for model in ACCOUNTS:
        with pytest.raises(InvalidValueError):
            list(model.batch_get([LOCK]))
        with pytest.raises(InvalidValueError):
            model(pk=LOCK[0], sk=LOCK[1]).refresh()
        with pytest.raises(InvalidValueError):
            model.get(*LOCK)
        with pytest.raises(InvalidValueError):
            await model.aget(*LOCK)
    assert [a.pk for a in Account.batch_get([("ACCT#1", "PROFILE")])] == ["ACCT#1"]


# --- PynamoDB's batch_write and TransactWrite ----------------------------------------------------


async def test_batch_write_of_a_model_without_constraints_is_guarded(db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    with pytest.raises(InvalidValueError), Membership.batch_write() as batch:
        batch.delete(Membership(pk=LOCK[0], sk=LOCK[1]))
    with pytest.raises(OtherModelRecordError), Membership.batch_write() as batch:
        batch.save(Membership(pk="ACCT#1", sk="PROFILE", role="x"))
    with Membership.batch_write() as batch:
        batch.save(Membership(pk="ACCT#1", sk="MEMBER#1", role="x"))
        batch.save(Membership(pk="ACCT#1", sk="MEMBER#2", role="x"))
    assert raw_item(db, TABLE, _key("ACCT#1", "MEMBER#2")) is not None
    with Membership.batch_write() as batch:
        batch.delete(Membership(pk="ACCT#1", sk="MEMBER#2"))
    assert raw_item(db, TABLE, _key("ACCT#1", "MEMBER#2")) is None
    clean(db)


async def test_pynamodb_transact_write_of_a_model_without_constraints_is_guarded(db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    connection = Connection(host=db, region="us-east-1")
    with pytest.raises(InvalidValueError), TransactWrite(connection=connection) as tx:
        tx.delete(Membership(pk=LOCK[0], sk=LOCK[1]))
    with pytest.raises(TransactWriteError) as caught, \
            TransactWrite(connection=connection) as tx:
        tx.save(Membership(pk="ACCT#1", sk="PROFILE", role="x"))
    assert [r.code if r else None for r in caught.value.cancellation_reasons] == [
        "ConditionalCheckFailed"]
    with TransactWrite(connection=connection) as tx:
        tx.save(Membership(pk="ACCT#1", sk="MEMBER#1", role="x"))
    assert raw_item(db, TABLE, _key("ACCT#1", "MEMBER#1")) is not None
    clean(db)


# --- what is sent --------------------------------------------------------------------------------


async def test_a_write_on_a_shared_table_carries_the_cheap_guard_of_the_others_constraints(
        db: str) -> None:
    Account(pk="A", email="a@x.io").save()
    loaded: Any = Account.get("A", "PROFILE", consistent_read=True)
    loaded.name = "n"
    with wire(Account) as sent:
        loaded.save()
    put = sent.last("PutItem")
    # Account's own guard "unchanged since loaded", then the item still an Account's as loaded
    # (task ident): which attributes the table's models know are present — Handle's HANDLE
    # field absent among them, so it holds no lock of Handle's either.
    assert put["ExpressionAttributeNames"] == {
        "#g0": "PK", "#g1": "email", "#g2": "handle", "#g3": "name", "#g4": "role"}
    assert put["ConditionExpression"] == (
        "(attribute_exists(#g0) AND #g1 = :g0) AND (attribute_exists(#g0) AND "
        "attribute_not_exists(#g2) AND attribute_not_exists(#g3) AND attribute_not_exists(#g4))")
    assert sent.sent == ["PutItem"]


async def test_a_table_one_model_uses_gets_the_requests_it_always_got(db: str) -> None:
    Plain(pk="P", sk="S", role="x").save()
    with wire(Plain) as sent:
        Plain(pk="P", sk="S", role="y").save()
    put = sent.last("PutItem")
    assert "ConditionExpression" not in put
    assert "ReturnValuesOnConditionCheckFailure" not in put
