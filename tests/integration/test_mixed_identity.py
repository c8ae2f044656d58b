"""A stale copy on a table several models share: "its lock inputs are unchanged" does not prove
"it is still a record of the model it was loaded as" (task ``ident``, sequence 2).

A copy of K is loaded as model A; K is deleted and written again by another model B of the
table holding the same constrained values (and, with a version attribute, the same version:
a new record restarts at 1). The copy's save, delete or ``update`` was guarded on its lock
inputs (and version) only, so it passed: it wrote B's record over as A's without the lock of
its value (freed by the delete) — another A could then take it, a duplicate — or deleted B's
record, or made B's record one the audit gives to A or to no model. Each is now refused as a
stale copy (``ConcurrentModificationError``) and leaves B's record as B wrote it.

B is a plain model with the same key schema (no constraint, or versioned), a sibling of A's
polymorphic family declaring no constraint, and a sibling sharing A's lock (whose lock then
named the wrong model).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, check, raw_item
from support.mixed_models import polymorphic_family
from support.tables import point, raw_tables

from dynaunique import ConcurrentModificationError, Model
from dynaunique.attributes import (
    DiscriminatorAttribute,
    UnicodeAttribute,
    VersionAttribute,
)

pytestmark = pytest.mark.anyio

# A plain model B on A's keys: an Invite carries an email too, but declares no constraint.
Account = declare("Account", "ident_plain", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, null=True),
                  name=UnicodeAttribute(null=True))
Invite = declare("Invite", "ident_plain", pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(null=True), inviter=UnicodeAttribute())

# The same, both versioned: B's new record restarts at version 1, as A's copy was loaded.
VAccount = declare("VAccount", "ident_versioned", pk=pk_attr(), sk=sk_attr("PROFILE"),
                   email=UnicodeAttribute(unique=True, null=True),
                   name=UnicodeAttribute(null=True), version=VersionAttribute())
VInvite = declare("VInvite", "ident_versioned", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(null=True), inviter=UnicodeAttribute(),
                  version=VersionAttribute())


class Pet(Model, discriminator="pet"):
    """A family whose siblings differ in their constraints: a Dog's tag is unique, a Cat's
    is not (the family's base declares none)."""

    class Meta:
        table_name = "ident_family"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    kind = DiscriminatorAttribute()
    name = UnicodeAttribute(null=True)


class Dog(Pet, discriminator="dog"):
    tag = UnicodeAttribute(unique=True, null=True, lock_name="DOG_TAG")


class Cat(Pet, discriminator="cat"):
    tag = UnicodeAttribute(null=True)


# Siblings sharing the family's lock: a Human's copy meeting a Robot (without a serial).
Being, Robot, Human = polymorphic_family("ident_beings", "BEING_EMAIL")

# Two unrelated models sharing a lock name, B holding a lock A does not declare: a Member's
# copy meeting a Staff record (its email's lock shared, its handle's lock its own).
Member = declare("Member", "ident_shared", pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(unique=True, null=True, lock_name="SHARED_EMAIL"),
                 name=UnicodeAttribute(null=True))
Staff = declare("Staff", "ident_shared", pk=pk_attr(), sk=sk_attr("PROFILE"),
                email=UnicodeAttribute(unique=True, null=True, lock_name="SHARED_EMAIL"),
                handle=UnicodeAttribute(unique=True, null=True))

MODELS = [Account, Invite, VAccount, VInvite, Pet, Dog, Cat, Being, Robot, Human, Member, Staff]


@pytest.fixture
def db(dynaunique_aio_db: str) -> str:
    point(dynaunique_aio_db, *MODELS)
    raw_tables(dynaunique_aio_db, Account, VAccount, Pet, Being, Member)
    return dynaunique_aio_db


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def call(mode: str, obj: Any, method: str, *args: Any) -> Any:
    if mode == "sync":
        return getattr(obj, method)(*args)
    result: Awaitable[Any] = getattr(obj, "a" + method)(*args)
    return await result


async def get(mode: str, model: Any, pk: str) -> Any:
    if mode == "sync":
        return model.get(pk, "PROFILE", consistent_read=True)
    return await model.aget(pk, "PROFILE", consistent_read=True)


#: (A's model as loaded, A's constructor values, B's record in its place, the value at stake as
#: A's model names it, the models of the table).
Case = tuple[Any, dict[str, Any], Callable[[], Any], Any, list[Any]]
CASES: dict[str, Case] = {
    "plain model": (Account, {"email": "ada@x.io"},
                    lambda: Invite(pk="K", email="ada@x.io", inviter="bob"), Account,
                    [Account, Invite]),
    "versioned plain model": (VAccount, {"email": "ada@x.io"},
                              lambda: VInvite(pk="K", email="ada@x.io", inviter="bob"),
                              VAccount, [VAccount, VInvite]),
    # Loaded through the family's base: PynamoDB's polymorphic get returns the Dog.
    "sibling without the constraint": (Pet, {}, lambda: Cat(pk="K", tag="t-1"), Dog,
                                       [Pet, Dog, Cat]),
    "sibling sharing the lock": (Human, {"email": "ada@x.io"},
                                 lambda: Robot(pk="K", email="ada@x.io"), Human,
                                 [Being, Robot, Human]),
    # Was OtherModelRecordError ("holding locks HANDLE"), which `except
    # ConcurrentModificationError: reload and retry` never sees: a stale copy is one first.
    "model sharing the lock, holding another": (
        Member, {"email": "ada@x.io"},
        lambda: Staff(pk="K", email="ada@x.io", handle="ada"), Member, [Member, Staff]),
}


def _first(case: str) -> Any:
    _, values, _, made_as, _ = CASES[case]
    if made_as is Dog:
        return Dog(pk="K", tag="t-1")
    return made_as(pk="K", **values)


async def _stale(db: str, mode: str, case: str) -> tuple[Any, Any]:
    """A's record saved and a copy of it loaded; A deleted; B's record saved on K with the same
    constrained values. Returns (the stale copy, B's record as stored)."""
    loaded_as, _, other, made_as, models = CASES[case]
    first = _first(case)
    await call(mode, first, "save")
    stale = await get(mode, loaded_as, "K")
    assert type(stale) is made_as
    await call(mode, first, "delete")
    await call(mode, other(), "save")
    stored = raw_item(db, models[0].Meta.table_name, _key())
    assert stored is not None
    return stale, stored


def _plain_field(stale: Any) -> str:
    """A field of the stale copy no constraint reads."""
    return "nickname" if isinstance(stale, Human) else "name"


def _key() -> dict[str, Any]:
    return {"PK": {"S": "K"}, "SK": {"S": "PROFILE"}}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("method", ["save", "delete", "update"])
async def test_a_stale_copy_does_not_write_over_another_models_record(
        db: str, mode: str, case: str, method: str) -> None:
    models = CASES[case][4]
    stale, stored = await _stale(db, mode, case)
    field = _plain_field(stale)
    args: tuple[Any, ...] = ()
    if method == "update":
        args = ([getattr(type(stale), field).set("n")],)
    else:
        setattr(stale, field, "n")
    with pytest.raises(ConcurrentModificationError):
        await call(mode, stale, method, *args)
    # B's record is as B wrote it, holding exactly the locks B's model requires of it.
    assert raw_item(db, models[0].Meta.table_name, _key()) == stored
    assert_clean(models, db)


@pytest.mark.parametrize("case", sorted(set(CASES) - {
    "sibling sharing the lock", "model sharing the lock, holding another"}))
async def test_after_the_refusal_the_value_stays_unique(db: str, mode: str, case: str) -> None:
    """What the refused save would have let happen: another record of A's model takes the
    value the stale copy would have written without its lock (B holds no lock of it)."""
    _, values, _, made_as, models = CASES[case]
    stale, _ = await _stale(db, mode, case)
    stale.name = "n"
    with pytest.raises(ConcurrentModificationError):
        await call(mode, stale, "save")
    other = Dog(pk="K2", tag="t-1") if made_as is Dog else made_as(pk="K2", **values)
    await call(mode, other, "save")
    report = check(models, db)
    assert report.clean, report.problems()


async def test_a_stale_copy_still_writes_over_its_own_models_changes(db: str, mode: str) -> None:
    """Last writer wins, as before: a copy whose record was changed (not replaced) by its own
    model since it was loaded still saves, though the change made an attribute present."""
    await call(mode, Account(pk="K", email="ada@x.io"), "save")
    stale = await get(mode, Account, "K")
    fresh = await get(mode, Account, "K")
    fresh.name = "first"
    await call(mode, fresh, "save")
    stale.email = "eve@x.io"
    await call(mode, stale, "save")
    stored = raw_item(db, "ident_plain", _key())
    assert stored is not None and stored["email"] == {"S": "eve@x.io"} and "name" not in stored
    assert_clean([Account, Invite], db)
