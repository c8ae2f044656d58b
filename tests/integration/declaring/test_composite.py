"""Composite and scoped constraints against the local server: one lock per tuple, moved
when any field of it changes."""

from __future__ import annotations

from typing import Any

import pytest

from dynaunique import (
    UniqueViolation,
)

from .declared import (
    Page,
    Wire,
    assert_consistent,
    lock_items,
    lock_owners,
    raw_items,
    records,
    tables,
    transact_keys,
)


def acme_home(wire: Wire) -> Any:
    """Page's tables made, and PAGE#1 saved with (acme, home): the record the tests change."""
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
    return page


# --- composite and scoped constraints ------------------------------------------------------------


def test_composite_save_puts_one_lock_for_the_tuple(wire: Wire) -> None:
    tables(wire, Page)
    Page(pk="PAGE#1", tenant="acme", slug="home").save()
    assert wire.sent == ["TransactWriteItems"]
    assert transact_keys(wire.last("TransactWriteItems")) == [
        ("Put", "PAGE#1"), ("Put", "UNIQ#TENANT_SLUG#acme#home")]
    lock = lock_items(Page)["UNIQ#TENANT_SLUG#acme#home"]
    assert lock["SK"] == {"S": "LOCK"}
    assert lock["owner"] == {"M": {"PK": {"S": "PAGE#1"}, "SK": {"S": "PAGE"}}}
    assert lock["model"] == {"S": "Page"}
    assert lock["constraint"] == {"S": "TENANT_SLUG"}
    assert lock["value"] == {"L": [{"S": "acme"}, {"S": "home"}]}
    assert set(lock) == {"PK", "SK", "owner", "model", "constraint", "value", "created"}
    assert_consistent(Page)


def test_composite_encoding_is_injective_on_the_server(wire: Wire) -> None:
    tables(wire, Page)
    Page(pk="PAGE#1", tenant="acme", slug="x#y").save()
    Page(pk="PAGE#2", tenant="acme#x", slug="y").save()
    assert lock_owners(Page) == {
        "UNIQ#TENANT_SLUG#acme#x\\#y": {"PK": "PAGE#1", "SK": "PAGE"},
        "UNIQ#TENANT_SLUG#acme\\#x#y": {"PK": "PAGE#2", "SK": "PAGE"},
    }
    assert_consistent(Page)


def test_same_slug_in_another_tenant_is_allowed(wire: Wire) -> None:
    tables(wire, Page)
    Page(pk="PAGE#1", tenant="acme", slug="home").save()
    Page(pk="PAGE#2", tenant="globex", slug="home").save()
    assert set(lock_owners(Page)) == {"UNIQ#TENANT_SLUG#acme#home",
                                      "UNIQ#TENANT_SLUG#globex#home"}
    assert_consistent(Page)


def test_composite_violation_names_every_field_and_the_constraint(wire: Wire) -> None:
    tables(wire, Page)
    Page(pk="PAGE#1", tenant="acme", slug="home").save()
    with pytest.raises(UniqueViolation) as caught:
        Page(pk="PAGE#2", tenant="acme", slug="home").save()
    error = caught.value
    assert error.model == "Page"
    assert error.fields == ("tenant", "slug")
    assert error.constraint == "TENANT_SLUG"
    assert error.value == ("acme", "home")
    assert error.owner == {"PK": "PAGE#1", "SK": "PAGE"}
    assert "tenant, slug" in str(error)
    assert "PAGE#1" in str(error)
    assert [r["PK"]["S"] for r in records(Page)] == ["PAGE#1"]
    assert_consistent(Page)


def test_changing_one_field_of_the_tuple_moves_the_lock(wire: Wire) -> None:
    page = acme_home(wire)
    wire.clear()
    page.slug = "about"
    page.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#TENANT_SLUG#acme#home"),
        ("Put", "PAGE#1"),
        ("Put", "UNIQ#TENANT_SLUG#acme#about"),
    ]
    assert lock_owners(Page) == {"UNIQ#TENANT_SLUG#acme#about": {"PK": "PAGE#1", "SK": "PAGE"}}
    assert_consistent(Page)


@pytest.mark.parametrize("loaded_by", ["save", "get", "query"])
def test_scope_move_deletes_the_lock_built_from_the_old_values(wire: Wire, loaded_by: str) -> None:
    page = acme_home(wire)
    if loaded_by == "get":
        page = Page.get("PAGE#1", "PAGE")
    elif loaded_by == "query":
        (page,) = Page.query("PAGE#1")
    wire.clear()
    page.tenant = "globex"
    page.save()
    request = wire.last("TransactWriteItems")
    deletes = [key for kind, key in transact_keys(request) if kind == "Delete"]
    assert deletes == ["UNIQ#TENANT_SLUG#acme#home"]
    (delete,) = [e["Delete"] for e in request["TransactItems"] if "Delete" in e]
    assert delete["Key"] == {"PK": {"S": "UNIQ#TENANT_SLUG#acme#home"}, "SK": {"S": "LOCK"}}
    assert lock_owners(Page) == {"UNIQ#TENANT_SLUG#globex#home": {"PK": "PAGE#1", "SK": "PAGE"}}
    # The old scope's value is free again.
    Page(pk="PAGE#2", tenant="acme", slug="home").save()
    assert_consistent(Page)


def test_moving_both_fields_at_once_moves_the_lock_once(wire: Wire) -> None:
    page = acme_home(wire)
    wire.clear()
    page.tenant, page.slug = "globex", "about"
    page.save()
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#TENANT_SLUG#acme#home"),
        ("Put", "PAGE#1"),
        ("Put", "UNIQ#TENANT_SLUG#globex#about"),
    ]
    assert_consistent(Page)


def test_scope_move_onto_a_taken_value_fails_and_keeps_the_old_lock(wire: Wire) -> None:
    tables(wire, Page)
    Page(pk="PAGE#1", tenant="globex", slug="home").save()
    page = Page(pk="PAGE#2", tenant="acme", slug="home")
    page.save()
    page.tenant = "globex"
    with pytest.raises(UniqueViolation) as caught:
        page.save()
    assert caught.value.owner == {"PK": "PAGE#1", "SK": "PAGE"}
    assert Page.get("PAGE#2", "PAGE").tenant == "acme"
    assert_consistent(Page)
    # The failed save left the snapshot alone: moving elsewhere still frees the old lock.
    page.tenant = "initech"
    page.save()
    assert lock_owners(Page) == {
        "UNIQ#TENANT_SLUG#globex#home": {"PK": "PAGE#1", "SK": "PAGE"},
        "UNIQ#TENANT_SLUG#initech#home": {"PK": "PAGE#2", "SK": "PAGE"},
    }
    assert_consistent(Page)


def test_unchanged_tuple_sends_a_single_plain_write(wire: Wire) -> None:
    page = acme_home(wire)
    wire.clear()
    page.title = "Welcome"
    page.save()
    assert wire.sent == ["PutItem"]
    assert_consistent(Page)


def test_none_in_any_field_holds_no_lock_until_both_are_set(wire: Wire) -> None:
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant=None, slug="home")
    page.save()
    Page(pk="PAGE#2", tenant=None, slug="home").save()   # NULLs are distinct
    assert lock_owners(Page) == {}
    page.tenant = "acme"
    page.save()
    assert lock_owners(Page) == {"UNIQ#TENANT_SLUG#acme#home": {"PK": "PAGE#1", "SK": "PAGE"}}
    page.slug = None
    page.save()
    assert lock_owners(Page) == {}
    assert_consistent(Page)


def test_delete_removes_the_composite_lock(wire: Wire) -> None:
    page = acme_home(wire)
    wire.clear()
    page.delete()
    assert wire.sent == ["TransactWriteItems"]
    assert raw_items(Page) == []
