"""The gaps of writes on a table several models share (issue 21), each attacked.

A write on such a table may send a second request: a never-loaded save that met an item
(adopted, or judged after its guard off the other models' locks failed), a never-loaded delete
(read first). Between the two, another writer turns the item into a record of another model
holding a lock (``FaultProxy.intercept``). The second request must fail on its guard and the
call be refused naming both models: no lock orphaned, no request unguarded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_item
from support.mixed_models import account_and_handle

from dynaunique import Model, OtherModelRecordError
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables
from reliability import point
from reliability.gaps import unguarded_followups
from reliability.proxy import FaultProxy

TABLE = "rel_mixed"
Account, Handle = account_and_handle(TABLE)
# No constraint, but an attribute named like Account's unique one: its own records fail the
# cheap guard and are judged, so its saves over them take two requests.
Note = declare("Note", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"),
               email=UnicodeAttribute(null=True), text=UnicodeAttribute(null=True),
               title=UnicodeAttribute(null=True))
MODELS: list[type[Model]] = [Account, Handle, Note]
KEY = {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}}


@pytest.fixture
def wire(proxy: FaultProxy) -> FaultProxy:
    point(proxy.url, *MODELS)
    create_tables(*MODELS)
    return proxy


def _account_takes_k() -> None:
    """The adversary: K becomes an Account holding the email taken@x.io (whatever K was)."""
    try:
        record: Any = Account.get("K", "PROFILE", consistent_read=True)
    except Account.DoesNotExist:
        record = Account(pk="K")
    record.email, record.name = "taken@x.io", "acct"
    record.save()


def _refused(wire: FaultProxy, call_it: Callable[[], Any], adversary: Callable[[], None]) -> None:
    with wire.intercept(adversary, before=2) as call, \
            pytest.raises(OtherModelRecordError, match="Account"):
        call_it()
    assert call.fired, f"the call sent only {call.operations()}"
    assert not unguarded_followups(call.requests, [KEY], ("PK", "SK")), call.operations()
    assert raw_item(wire.url, TABLE, KEY)["email"] == {"S": "taken@x.io"}
    assert_clean(MODELS, wire.url)


def test_a_save_judged_after_its_cheap_guard_failed(wire: FaultProxy) -> None:
    """Note over its own record (which has an email attribute): request 1 fails the cheap
    guard, request 2 is guarded on exactly the item judged; Account takes K in between."""
    Note(pk="K", email="n@x.io", text="t", title="x").save()

    def account_over_note() -> None:
        Note(pk="K").delete()
        Account(pk="K", email="taken@x.io", name="acct").save()

    _refused(wire, lambda: Note(pk="K", email="m@x.io", text="u").save(), account_over_note)


def test_an_adopting_save(wire: FaultProxy) -> None:
    """Handle over an Account holding no lock: request 1 is the create, request 2 the update
    of the adopted item; the Account takes an email in between."""
    Account(pk="K", name="no email").save()
    _refused(wire, lambda: Handle(pk="K", handle="h").save(), _account_takes_k)
    assert raw_item(wire.url, TABLE, {"PK": {"S": "UNIQ#HANDLE#h"}, "SK": {"S": "LOCK"}}) is None


def test_a_never_loaded_delete(wire: FaultProxy) -> None:
    """Handle deletes K: request 1 reads an Account holding no lock, request 2 deletes it; the
    Account takes an email in between."""
    Account(pk="K", name="no email").save()
    _refused(wire, lambda: Handle(pk="K").delete(), _account_takes_k)


def test_a_delete_of_a_model_without_constraints_after_its_guard_failed(
        wire: FaultProxy) -> None:
    Note(pk="K", email="n@x.io", text="t", title="x").save()

    def account_over_note() -> None:
        Note(pk="K").delete()
        Account(pk="K", email="taken@x.io", name="acct").save()

    _refused(wire, lambda: Note(pk="K").delete(), account_over_note)


def test_an_adopting_save_whose_item_became_another_models_record_keeps_its_lock(
        wire: FaultProxy) -> None:
    """A never-loaded Account save meets its own record (request 1, the create, fails) and
    adopts it; before request 2 the record is deleted as an Account (its email lock freed) and
    K is written again as a Note with the same email. Request 2 fails its guard; the save then
    adopts the Note (no lock of another model) and must plan from THAT item, not the first one:
    planned from the first, "email unchanged" passed and K became an Account without the lock
    of its email (another Account could then take it)."""
    Account(pk="K", email="x@x.io", name="old").save()

    def note_over_account() -> None:
        Account.get("K", "PROFILE", consistent_read=True).delete()
        Note(pk="K", email="x@x.io", text="t").save()

    with wire.intercept(note_over_account, before=2) as call:
        Account(pk="K", email="x@x.io", name="new").save()
    assert call.fired, f"the call sent only {call.operations()}"
    assert not unguarded_followups(call.requests, [KEY], ("PK", "SK")), call.operations()
    assert raw_item(wire.url, TABLE, KEY)["name"] == {"S": "new"}
    lock = raw_item(wire.url, TABLE, {"PK": {"S": "UNIQ#EMAIL#x@x.io"}, "SK": {"S": "LOCK"}})
    assert lock is not None and lock["owner"]["M"]["PK"] == {"S": "K"}
    assert_clean(MODELS, wire.url)


@pytest.mark.anyio
async def test_an_adopting_asave_whose_item_became_another_models_record_keeps_its_lock(
        wire: FaultProxy) -> None:
    """The same through the async driver (``asave``: the same flush and settle steps)."""
    Account(pk="K", email="x@x.io", name="old").save()

    def note_over_account() -> None:
        Account.get("K", "PROFILE", consistent_read=True).delete()
        Note(pk="K", email="x@x.io", text="t").save()

    with wire.intercept(note_over_account, before=2) as call:
        await Account(pk="K", email="x@x.io", name="new").asave()
    assert call.fired, f"the call sent only {call.operations()}"
    assert not unguarded_followups(call.requests, [KEY], ("PK", "SK")), call.operations()
    assert raw_item(wire.url, TABLE, KEY)["name"] == {"S": "new"}
    lock = raw_item(wire.url, TABLE, {"PK": {"S": "UNIQ#EMAIL#x@x.io"}, "SK": {"S": "LOCK"}})
    assert lock is not None and lock["owner"]["M"]["PK"] == {"S": "K"}
    assert_clean(MODELS, wire.url)
