"""get_by_unique against the local server, and two models sharing one lock namespace."""

from __future__ import annotations

import pytest

from dynaunique import (
    ConfigurationError,
    UniqueViolation,
)

from .declared import (
    Account,
    Folder,
    Member,
    Page,
    Person,
    Robot,
    Wire,
    assert_consistent,
    lock_owners,
    raw_items,
    tables,
)

# --- lookups -------------------------------------------------------------------------------------


def test_get_by_unique_for_composite_constraints(wire: Wire) -> None:
    tables(wire, Page, Folder)
    Page(pk="PAGE#1", tenant="acme", slug="home").save()
    Page(pk="PAGE#2", tenant="acme", slug="about").save()
    assert Page.get_by_unique("TENANT_SLUG", ("acme", "home")).pk == "PAGE#1"
    assert Page.get_by_unique(tenant="acme", slug="about").pk == "PAGE#2"
    assert Page.get_by_unique(slug="about", tenant="acme").pk == "PAGE#2"
    with pytest.raises(Page.DoesNotExist):
        Page.get_by_unique(tenant="globex", slug="home")
    Folder(pk="F#1", tenant="Acme", name="Docs").save()
    assert Folder.get_by_unique(tenant="Acme", name="DOCS").pk == "F#1"
    with pytest.raises(Folder.DoesNotExist):
        Folder.get_by_unique(tenant="acme", name="Docs")
    assert_consistent(Page, Folder)


def test_get_by_unique_one_field_forms(wire: Wire) -> None:
    tables(wire, Account)
    Account(pk="ACCT#1", email="ada@x.io", handle="ada").save()
    assert Account.get_by_unique("email", "ADA@X.io").pk == "ACCT#1"
    assert Account.get_by_unique(email="ADA@X.io").pk == "ACCT#1"
    assert Account.get_by_unique("HANDLE", "ada").pk == "ACCT#1"   # by lock name
    assert Account.get_by_unique("handle", "ada").pk == "ACCT#1"   # by field
    with pytest.raises(Account.DoesNotExist):
        Account.get_by_unique("handle", "Ada")
    assert_consistent(Account)


def test_get_by_unique_rejects_what_is_not_a_constraint(wire: Wire) -> None:
    tables(wire, Page)
    with pytest.raises(ConfigurationError, match="TENANT_SLUG"):
        Page.get_by_unique("title", "x")
    with pytest.raises(ConfigurationError):
        Page.get_by_unique(tenant="acme")
    with pytest.raises(TypeError):
        Page.get_by_unique("TENANT_SLUG", "acme")
    assert raw_items(Page) == []


def test_get_by_unique_skips_a_lock_whose_condition_no_longer_holds(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io")
    member.save()
    assert Member.get_by_unique("ACTIVE_EMAIL", "ADA@x.io").pk == "M#1"
    member.status = "deleted"
    member.save()
    with pytest.raises(Member.DoesNotExist):
        Member.get_by_unique("email", "ada@x.io")
    assert_consistent(Member)


# --- two models sharing a lock namespace ---------------------------------------------------------


def test_explicitly_shared_lock_name_is_one_namespace(wire: Wire) -> None:
    tables(wire, Person, Robot)
    Person(pk="PERSON#1", email="ada@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        Robot(pk="ROBOT#1", email="ada@x.io").save()
    assert caught.value.model == "Robot"
    assert caught.value.owner == {"PK": "PERSON#1"}
    assert lock_owners(Person) == {"UNIQ#EMAIL#ada@x.io": {"PK": "PERSON#1"}}
    assert_consistent(Person)
