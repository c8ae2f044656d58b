"""Declaring constraints, end to end: every form issue 3 promises, against the local server.

Composite and scoped locks, normalize (callable and mapping), conditional locks, the value types,
hashed locks, TTL, ``update(actions)``, the write paths that must refuse (``batch_write``,
PynamoDB's ``TransactWrite``), ``get_by_unique`` and the mistakes caught at class definition.
Every integration test ends by checking that the table holds exactly the locks its records need.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import hmac
import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import boto3
import pytest
from pynamodb.connection import Connection
from pynamodb.transactions import TransactWrite

from dynaunique import (
    ConcurrentModificationError,
    ConfigurationError,
    Model,
    UniqueConstraint,
    UniqueViolation,
    UnsupportedOperationError,
    atomic,
    normalizers,
)
from dynaunique import connection as du_connection
from dynaunique.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    VersionAttribute,
)
from dynaunique.locks import RESERVED_PREFIX, untyped
from dynaunique.testing import create_tables, use_endpoint
from dynaunique.unit_of_work import SECRET_ENV, locks_of

# --- models (tables prefixed decl_, unique to this file) -----------------------------------------


def is_active(member: Any) -> bool:
    """Only active members hold their email (a partial unique index)."""
    return bool(member.status == "active")


class Page(Model):
    """A slug unique per tenant: a composite (scoped) constraint."""

    class Meta:
        table_name = "decl_pages"
        constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PAGE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    title = UnicodeAttribute(null=True)


class Folder(Model):
    """normalize= as a mapping: folder names compare without case, tenants exactly."""

    class Meta:
        table_name = "decl_folders"
        constraints = [UniqueConstraint(("tenant", "name"), name="TENANT_FOLDER",
                                        normalize={"name": normalizers.casefold})]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    tenant = UnicodeAttribute()
    name = UnicodeAttribute()


class Member(Model):
    """A conditional constraint: the email is unique among active members only."""

    class Meta:
        table_name = "decl_members"
        constraints = [UniqueConstraint("email", name="ACTIVE_EMAIL",
                                        normalize=normalizers.casefold, condition=is_active)]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="active")


def is_verified_and_active(member: Any) -> bool:
    """Reads ``verified`` only when ``status`` is active (a short-circuiting condition)."""
    return bool(member.status == "active" and member.verified == "yes")


class Verified(Model):
    """A condition that reads different attributes in different states."""

    class Meta:
        table_name = "decl_verified"
        constraints = [UniqueConstraint("email", name="VERIFIED_EMAIL",
                                        condition=is_verified_and_active)]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute()
    status = UnicodeAttribute()
    verified = UnicodeAttribute()


class Account(Model):
    """unique=True fields of several kinds, and plain fields, for update(actions)."""

    class Meta:
        table_name = "decl_accounts"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True)
    handle = UnicodeAttribute(unique=True, lock_name="HANDLE", null=True)
    score = NumberAttribute(unique=True, null=True)
    nickname = UnicodeAttribute(null=True)
    visits = NumberAttribute(null=True)


class Numbered(Model):
    """Numbers, binary values and a tuple mixing string, number and binary."""

    class Meta:
        table_name = "decl_numbered"
        constraints = [UniqueConstraint(("kind", "number", "blob"), name="MIX")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    number = NumberAttribute(unique=True, null=True)
    blob = BinaryAttribute(unique=True, null=True, legacy_encoding=False)
    kind = UnicodeAttribute(null=True)


class Secretive(Model):
    """A hashed field, with the secret in Meta."""

    class Meta:
        table_name = "decl_secretive"
        lock_secret = "decl-meta-secret"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, hashed=True, normalize=normalizers.casefold)


class EnvSecret(Model):
    """A hashed composite constraint whose secret comes from DYNAUNIQUE_LOCK_SECRET."""

    class Meta:
        table_name = "decl_env_secret"
        constraints = [UniqueConstraint(("tenant", "slug"), name="TS", hashed=True)]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    tenant = UnicodeAttribute()
    slug = UnicodeAttribute()


class Session(Model):
    """A record with a TTL: its locks must expire with it."""

    class Meta:
        table_name = "decl_sessions"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    token = UnicodeAttribute(unique=True)
    device = UnicodeAttribute(unique=True, null=True)
    expires = TTLAttribute(null=True)


class Person(Model):
    """Shares the EMAIL namespace of its table with Robot, declared explicitly by both."""

    class Meta:
        table_name = "decl_shared"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, lock_name="EMAIL")


class Robot(Model):
    """See Person."""

    class Meta:
        table_name = "decl_shared"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, lock_name="EMAIL")
    serial = UnicodeAttribute(null=True)


MODELS: tuple[type[Model], ...] = (Page, Folder, Member, Verified, Account, Numbered, Secretive,
                                   EnvSecret, Session, Person, Robot)
#: The shared table holds records of two models, told apart by their key prefix.
SHARED_PREFIXES: dict[str, type[Model]] = {"PERSON#": Person, "ROBOT#": Robot}

SECRET = b"decl-meta-secret"


# --- helpers -------------------------------------------------------------------------------------


class Wire:
    """Every request dynaunique's client and the models' PynamoDB clients send, in order."""

    def __init__(self) -> None:
        #: Operation names, one per HTTP request (botocore 'before-send').
        self.sent: list[str] = []
        #: (operation, parameters as the caller passed them) (botocore 'before-parameter-build').
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.clients: list[Any] = []

    def clear(self) -> None:
        self.sent.clear()
        self.calls.clear()

    def on_send(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        if isinstance(target, bytes):
            target = target.decode()
        self.sent.append(target.rsplit(".", 1)[-1])

    def on_params(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, copy.deepcopy(dict(params))))

    def writes(self) -> list[str]:
        return [op for op in self.sent if op not in ("GetItem", "Query", "Scan", "DescribeTable")]

    def last(self, operation: str) -> dict[str, Any]:
        matching = [params for op, params in self.calls if op == operation]
        assert matching, f"no {operation} was sent; sent: {self.sent}"
        return matching[-1]


    def hook(self, client: Any) -> None:
        """Record what ``client`` sends until the test ends."""
        if any(c is client for c in self.clients):
            return
        client.meta.events.register("before-send.dynamodb", self.on_send,
                                    unique_id="decl-wire-send")
        client.meta.events.register("before-parameter-build.dynamodb", self.on_params,
                                    unique_id="decl-wire-params")
        self.clients.append(client)

    def unhook(self) -> None:
        for client in self.clients:
            client.meta.events.unregister("before-send.dynamodb", unique_id="decl-wire-send")
            client.meta.events.unregister("before-parameter-build.dynamodb",
                                          unique_id="decl-wire-params")
        self.clients.clear()


@pytest.fixture
def wire(dynamodb: str) -> Iterator[Wire]:
    """Point every model at the server and record what is sent (tables are created per test)."""
    # Retarget only when needed: a new PynamoDB connection means a new botocore client, which
    # costs far more than the test itself.
    stale = [m for m in MODELS if m.Meta.host != dynamodb]
    if stale:
        use_endpoint(dynamodb, *stale)
    recorder = Wire()
    for model in MODELS:
        recorder.hook(du_connection.client_for(model.Meta))
    yield recorder
    recorder.unhook()


def tables(wire: Wire, *models: type[Model]) -> None:
    """Create the tables of ``models``, record their PynamoDB clients too, forget the setup."""
    create_tables(*models)
    for model in models:
        wire.hook(model._get_connection().connection.client)
    wire.clear()


@functools.cache
def raw_client(endpoint: str) -> Any:
    """A client of our own for inspecting tables, so that its reads are not counted."""
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def raw_items(model: type[Model]) -> list[dict[str, Any]]:
    """Every item of the model's table, lock items included, read consistently."""
    client = raw_client(model.Meta.host)
    return list(client.scan(TableName=model.Meta.table_name, ConsistentRead=True)["Items"])


def hash_attr(model: type[Model]) -> str:
    info = model._du_info
    assert info is not None
    return info.hash_attr


def lock_items(model: type[Model]) -> dict[str, dict[str, Any]]:
    """The table's lock items by lock key."""
    attr = hash_attr(model)
    return {i[attr]["S"]: i for i in raw_items(model) if i[attr]["S"].startswith(RESERVED_PREFIX)}


def lock_owners(model: type[Model]) -> dict[str, dict[str, Any]]:
    """Lock key → the owner's primary key (plain values)."""
    return {k: untyped(i["owner"]) for k, i in lock_items(model).items()}


def records(model: type[Model]) -> list[dict[str, Any]]:
    attr = hash_attr(model)
    return [i for i in raw_items(model) if not i[attr]["S"].startswith(RESERVED_PREFIX)]


def assert_consistent(*models: type[Model]) -> None:
    """Each table holds exactly the locks its records require, each owned by its record."""
    for model in models:
        attr = hash_attr(model)
        info = model._du_info
        assert info is not None
        wanted: dict[str, dict[str, Any]] = {}
        for item in records(model):
            owner_model = model
            for prefix, candidate in SHARED_PREFIXES.items():
                if candidate.Meta.table_name == model.Meta.table_name and \
                        item[attr]["S"].startswith(prefix):
                    owner_model = candidate
            owner_info = owner_model._du_info
            assert owner_info is not None
            key = {k: untyped(item[k]) for k in info.key_attributes if k is not None}
            instance = owner_model.from_raw_data(copy.deepcopy(item))
            for lock in locks_of(owner_info, instance).values():
                assert lock.key not in wanted, f"two records need {lock.key}"
                wanted[lock.key] = key
        assert lock_owners(model) == wanted


def transact_keys(request: Mapping[str, Any], attr: str = "PK") -> list[tuple[str, str]]:
    """(operation, hash key) of every item of a TransactWriteItems request."""
    out = []
    for entry in request["TransactItems"]:
        ((kind, params),) = entry.items()
        key = params.get("Item") or params["Key"]
        out.append((kind, key[attr]["S"]))
    return out


def strings_in(value: Any) -> Iterator[str]:
    """Every string and byte string inside a raw DynamoDB value, recursively (keys too)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield str(key)
            yield from strings_in(inner)
    elif isinstance(value, (list, tuple, set)):
        for inner in value:
            yield from strings_in(inner)
    elif isinstance(value, (bytes, bytearray)):
        yield bytes(value).decode("latin-1")
    else:
        yield str(value)


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
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
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
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
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
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
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
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
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
    tables(wire, Page)
    page = Page(pk="PAGE#1", tenant="acme", slug="home")
    page.save()
    wire.clear()
    page.delete()
    assert wire.sent == ["TransactWriteItems"]
    assert raw_items(Page) == []


# --- normalize -----------------------------------------------------------------------------------


def test_normalize_callable_compares_normalized_values(wire: Wire) -> None:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="Ada@Lovelace.IO")
    account.save()
    with pytest.raises(UniqueViolation) as caught:
        Account(pk="ACCT#2", email="ada@LOVELACE.io").save()
    assert caught.value.value == "ada@lovelace.io"
    wire.clear()
    account.email = "ADA@lovelace.io"   # the same value after normalization: no lock change
    account.save()
    assert wire.sent == ["PutItem"]
    assert lock_owners(Account) == {"UNIQ#EMAIL#ada@lovelace.io": {"PK": "ACCT#1"}}
    assert lock_items(Account)["UNIQ#EMAIL#ada@lovelace.io"]["value"] == {"S": "ada@lovelace.io"}
    assert_consistent(Account)


def test_normalize_mapping_applies_per_field(wire: Wire) -> None:
    tables(wire, Folder)
    Folder(pk="F#1", tenant="Acme", name="Docs").save()
    with pytest.raises(UniqueViolation):
        Folder(pk="F#2", tenant="Acme", name="DOCS").save()
    Folder(pk="F#3", tenant="acme", name="Docs").save()   # tenants compare exactly
    assert lock_owners(Folder) == {
        "UNIQ#TENANT_FOLDER#Acme#docs": {"PK": "F#1"},
        "UNIQ#TENANT_FOLDER#acme#docs": {"PK": "F#3"},
    }
    assert_consistent(Folder)


# --- conditional constraints ---------------------------------------------------------------------


def test_lock_is_held_only_while_the_condition_is_true(wire: Wire) -> None:
    tables(wire, Member)
    Member(pk="M#1", email="ada@x.io", status="deleted").save()
    Member(pk="M#2", email="ADA@x.io", status="deleted").save()   # inactive: no lock, no clash
    assert lock_owners(Member) == {}
    Member(pk="M#3", email="ada@X.io", status="active").save()
    with pytest.raises(UniqueViolation) as caught:
        Member(pk="M#4", email="Ada@x.io", status="active").save()
    assert caught.value.constraint == "ACTIVE_EMAIL"
    assert caught.value.owner == {"PK": "M#3"}
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#3"}}
    assert_consistent(Member)


def test_flipping_the_condition_off_deletes_the_lock_in_the_same_transaction(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io")
    member.save()
    wire.clear()
    member.status = "deleted"
    member.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#ACTIVE_EMAIL#ada@x.io"), ("Put", "M#1")]
    assert lock_owners(Member) == {}
    assert_consistent(Member)


def test_flipping_the_condition_on_puts_the_lock_in_the_same_transaction(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io", status="invited")
    member.save()
    assert wire.sent == ["PutItem"]
    wire.clear()
    member.status = "active"
    member.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Put", "M#1"), ("Put", "UNIQ#ACTIVE_EMAIL#ada@x.io")]
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#1"}}
    assert_consistent(Member)


def test_restoring_a_soft_deleted_record_whose_value_was_taken_fails(wire: Wire) -> None:
    tables(wire, Member)
    old = Member(pk="M#1", email="ada@x.io")
    old.save()
    old.status = "deleted"
    old.save()
    Member(pk="M#2", email="Ada@X.io").save()   # the value is taken meanwhile
    old.status = "active"
    with pytest.raises(UniqueViolation) as caught:
        old.save()
    assert caught.value.owner == {"PK": "M#2"}
    assert caught.value.fields == ("email",)
    assert Member.get("M#1").status == "deleted"
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#2"}}
    assert_consistent(Member)


def test_condition_flip_by_update_actions_keeps_the_lock_right(wire: Wire) -> None:
    tables(wire, Member)
    member = Member(pk="M#1", email="ada@x.io")
    member.save()
    wire.clear()
    member.update([Member.status.set("deleted")])
    assert wire.sent == ["TransactWriteItems"]
    assert lock_owners(Member) == {}
    member.update([Member.status.set("active")])
    assert lock_owners(Member) == {"UNIQ#ACTIVE_EMAIL#ada@x.io": {"PK": "M#1"}}
    assert_consistent(Member)


def test_save_evaluates_the_condition_on_the_state_it_writes(wire: Wire) -> None:
    tables(wire, Verified)
    Verified(pk="V#1", email="ada@x.io", status="deleted", verified="yes").save()
    mine = Verified.get("V#1")
    theirs = Verified.get("V#1")
    theirs.verified = "no"
    theirs.save()
    mine.status = "active"
    # A full put writes mine's state, verified="yes" included: the lock is right for it.
    with contextlib.suppress(ConcurrentModificationError):
        mine.save()
    assert_consistent(Verified)


@pytest.mark.parametrize(("believed", "stored"), [("yes", "no"), ("no", "yes")])
def test_update_guards_what_the_condition_reads_on_the_new_state(
        wire: Wire, believed: str, stored: str) -> None:
    tables(wire, Verified)
    Verified(pk="V#1", email="ada@x.io", status="deleted", verified=believed).save()
    mine = Verified.get("V#1")          # its condition read only status (deleted)
    theirs = Verified.get("V#1")
    theirs.verified = stored
    theirs.save()
    # On the new state the condition reads verified too, which mine holds stale.
    with contextlib.suppress(ConcurrentModificationError):
        mine.update([Verified.status.set("active")])
    assert_consistent(Verified)


# --- value types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("second", [1, 1.0])
def test_equal_numbers_collide(wire: Wire, second: Any) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", number=1).save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#2", number=second).save()
    assert caught.value.constraint == "NUMBER"
    assert lock_owners(Numbered) == {"UNIQ#NUMBER#\\n1": {"PK": "N#1"}}
    assert lock_items(Numbered)["UNIQ#NUMBER#\\n1"]["value"] == {"N": "1"}
    assert Numbered.get_by_unique("number", Decimal("1.00")).pk == "N#1"
    assert_consistent(Numbered)


def test_different_numbers_do_not_collide(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", number=1).save()
    Numbered(pk="N#2", number=1.5).save()
    Numbered(pk="N#3", number=10).save()
    assert set(lock_owners(Numbered)) == {"UNIQ#NUMBER#\\n1", "UNIQ#NUMBER#\\n1.5",
                                          "UNIQ#NUMBER#\\n10"}
    assert_consistent(Numbered)


def test_binary_values_are_locked(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", blob=b"\x00\xff").save()
    Numbered(pk="N#2", blob=b"\x00\xfe").save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#3", blob=b"\x00\xff").save()
    assert caught.value.fields == ("blob",)
    assert lock_items(Numbered)["UNIQ#BLOB#\\bAP8="]["value"] == {"B": b"\x00\xff"}
    assert Numbered.get_by_unique("blob", b"\x00\xfe").pk == "N#2"
    assert_consistent(Numbered)


def test_tuples_of_string_number_and_binary(wire: Wire) -> None:
    tables(wire, Numbered)
    Numbered(pk="N#1", kind="k", number=1, blob=b"x").save()
    Numbered(pk="N#2", kind="k", number=2, blob=b"y").save()
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#3", kind="k", number=1.0, blob=b"z").save()
    assert caught.value.constraint == "NUMBER"
    # Both the number and the tuple are taken by N#1: both are reported together.
    with pytest.raises(UniqueViolation) as caught:
        Numbered(pk="N#4", kind="k", number=1.0, blob=b"x").save()
    violation = caught.value
    assert sorted(v.constraint for v in violation.violations) == ["BLOB", "MIX", "NUMBER"]
    mix = next(v for v in violation.violations if v.constraint == "MIX")
    assert mix.fields == ("kind", "number", "blob")
    assert mix.value == ("k", 1, b"x")
    assert lock_items(Numbered)["UNIQ#MIX#k#\\n1#\\beA=="]["value"] == {
        "L": [{"S": "k"}, {"N": "1"}, {"B": b"x"}]}
    assert Numbered.get_by_unique("MIX", ("k", 1.0, b"x")).pk == "N#1"
    assert_consistent(Numbered)


def test_explain_shows_binary_values_as_base64(wire: Wire) -> None:
    tables(wire, Numbered)
    with atomic(dry_run=True) as tx:
        Numbered(pk="N#1", blob=b"\x00\xff").save()
    (lock,) = [e["Put"]["Item"] for e in json.loads(tx.explain())["TransactItems"]
               if e["Put"]["Item"]["PK"]["S"].startswith(RESERVED_PREFIX)]
    assert lock["PK"] == {"S": "UNIQ#BLOB#\\bAP8="}
    assert lock["value"] == {"B": "AP8="}
    assert wire.sent == []


# --- hashed locks --------------------------------------------------------------------------------


def test_hashed_field_keeps_no_plaintext_in_the_lock(wire: Wire) -> None:
    tables(wire, Secretive)
    Secretive(pk="S#1", email="Zanzibar@Lovelace.IO").save()
    digest = hmac.new(SECRET, b"zanzibar@lovelace.io", hashlib.sha256).hexdigest()
    (key, item), = lock_items(Secretive).items()
    assert key == "UNIQ#EMAIL#\\k" + digest
    assert "value" not in item
    for text in strings_in(item):
        assert "zanzibar" not in text.casefold()
        assert "lovelace" not in text.casefold()
    assert Secretive.get_by_unique("email", "ZANZIBAR@lovelace.io").pk == "S#1"
    with pytest.raises(UniqueViolation) as caught:
        Secretive(pk="S#2", email="zanzibar@lovelace.io").save()
    assert caught.value.constraint == "EMAIL"
    assert "zanzibar" not in str(caught.value).casefold()   # messages do not show it either
    assert_consistent(Secretive)


def test_hashed_constraint_with_the_secret_from_the_environment(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "decl-env-secret")
    tables(wire, EnvSecret)
    EnvSecret(pk="E#1", tenant="zanzibar", slug="quixotic").save()
    digest = hmac.new(b"decl-env-secret", b"zanzibar#quixotic", hashlib.sha256).hexdigest()
    (key, item), = lock_items(EnvSecret).items()
    assert key == "UNIQ#TS#\\k" + digest
    for text in strings_in(item):
        assert "zanzibar" not in text
        assert "quixotic" not in text
    assert EnvSecret.get_by_unique("TS", ("zanzibar", "quixotic")).pk == "E#1"
    assert EnvSecret.get_by_unique(tenant="zanzibar", slug="quixotic").pk == "E#1"
    with pytest.raises(UniqueViolation):
        EnvSecret(pk="E#2", tenant="zanzibar", slug="quixotic").save()
    assert_consistent(EnvSecret)


def test_missing_secret_is_a_configuration_error_and_sends_nothing(
        wire: Wire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    tables(wire, EnvSecret)
    with pytest.raises(ConfigurationError) as caught:
        EnvSecret(pk="E#1", tenant="acme", slug="home").save()
    assert "Meta.lock_secret" in str(caught.value)
    assert "DYNAUNIQUE_LOCK_SECRET" in str(caught.value)
    assert wire.sent == []
    assert raw_items(EnvSecret) == []
    with pytest.raises(ConfigurationError, match="DYNAUNIQUE_LOCK_SECRET"):
        EnvSecret.get_by_unique(tenant="acme", slug="home")


# --- TTL -----------------------------------------------------------------------------------------

EXPIRY = datetime(2031, 1, 1, tzinfo=timezone.utc)
LATER = datetime(2032, 6, 1, tzinfo=timezone.utc)


def epoch(moment: datetime) -> dict[str, str]:
    return {"N": str(int(moment.timestamp()))}


def test_locks_carry_the_record_expiry(wire: Wire) -> None:
    tables(wire, Session)
    Session(pk="SESS#1", token="t1", device="d1", expires=EXPIRY).save()
    (record,) = records(Session)
    assert record["expires"] == epoch(EXPIRY)
    locks = lock_items(Session)
    assert set(locks) == {"UNIQ#TOKEN#t1", "UNIQ#DEVICE#d1"}
    assert all(lock["expires"] == epoch(EXPIRY) for lock in locks.values())
    assert_consistent(Session)


def test_a_ttl_change_alone_re_puts_the_locks_with_the_new_expiry(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", device="d1", expires=EXPIRY)
    session.save()
    wire.clear()
    session.expires = LATER
    session.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Put", "SESS#1"), ("Put", "UNIQ#DEVICE#d1"), ("Put", "UNIQ#TOKEN#t1")]
    assert all(lock["expires"] == epoch(LATER) for lock in lock_items(Session).values())
    assert_consistent(Session)


def test_removing_the_ttl_removes_it_from_the_locks(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    session.expires = None
    session.save()
    assert "expires" not in lock_items(Session)["UNIQ#TOKEN#t1"]
    assert_consistent(Session)


def test_a_ttl_change_by_update_actions_re_puts_the_locks(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    wire.clear()
    session.update([Session.expires.set(LATER)])
    assert wire.sent == ["TransactWriteItems"]
    assert lock_items(Session)["UNIQ#TOKEN#t1"]["expires"] == epoch(LATER)
    assert records(Session)[0]["expires"] == epoch(LATER)
    assert_consistent(Session)


def test_a_new_token_with_a_new_expiry_moves_the_lock_with_the_expiry(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    session.token, session.expires = "t2", LATER
    session.save()
    locks = lock_items(Session)
    assert set(locks) == {"UNIQ#TOKEN#t2"}
    assert locks["UNIQ#TOKEN#t2"]["expires"] == epoch(LATER)
    assert_consistent(Session)


# --- update(actions) -----------------------------------------------------------------------------


def saved_account(wire: Wire) -> Account:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="ada@x.io", handle="ada", score=7, visits=0)
    account.save()
    wire.clear()
    return account


def test_update_of_a_plain_field_is_one_update_item(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.nickname.set("Countess"), Account.visits.add(1)])
    assert wire.sent == ["UpdateItem"]
    assert account.nickname == "Countess"
    assert account.visits == 1
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_setting_a_constrained_field_moves_its_lock_in_one_transaction(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.email.set("ADA@Analytical.Engine")])
    assert wire.sent == ["TransactWriteItems"]
    request = wire.last("TransactWriteItems")
    assert sorted(transact_keys(request)) == [
        ("Delete", "UNIQ#EMAIL#ada@x.io"),
        ("Put", "UNIQ#EMAIL#ada@analytical.engine"),
        ("Update", "ACCT#1"),
    ]
    assert account.email == "ADA@Analytical.Engine"
    assert lock_owners(Account)["UNIQ#EMAIL#ada@analytical.engine"] == {"PK": "ACCT#1"}
    assert "UNIQ#EMAIL#ada@x.io" not in lock_owners(Account)
    assert_consistent(Account)


def test_update_removing_a_constrained_field_deletes_its_lock(wire: Wire) -> None:
    account = saved_account(wire)
    account.update([Account.handle.remove()])
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Delete", "UNIQ#HANDLE#ada"), ("Update", "ACCT#1")]
    assert account.attribute_values.get("handle") is None
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_onto_a_taken_value_raises_and_changes_nothing(wire: Wire) -> None:
    account = saved_account(wire)
    Account(pk="ACCT#2", email="bob@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        account.update([Account.email.set("BOB@x.io"), Account.nickname.set("x")])
    assert caught.value.owner == {"PK": "ACCT#2"}
    stored = Account.get("ACCT#1")
    assert stored.email == "ada@x.io"
    assert stored.attribute_values.get("nickname") is None
    assert_consistent(Account)


def test_update_keeps_the_callers_condition_next_to_the_lock_moves(wire: Wire) -> None:
    account = saved_account(wire)
    with pytest.raises(ConcurrentModificationError):
        account.update([Account.email.set("new@x.io")], condition=Account.nickname.exists())
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    wire.clear()
    account.update([Account.email.set("new@x.io")], condition=Account.nickname.does_not_exist())
    assert wire.sent == ["TransactWriteItems"]
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#new@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_from_a_stale_copy_moves_no_lock(wire: Wire) -> None:
    account = saved_account(wire)
    other = Account.get("ACCT#1")
    other.email = "other@x.io"
    other.save()
    with pytest.raises(ConcurrentModificationError):
        account.update([Account.email.set("mine@x.io")])
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#other@x.io", "UNIQ#HANDLE#ada",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


def test_update_of_a_never_loaded_object_reads_it_first(wire: Wire) -> None:
    saved_account(wire)
    stranger = Account(pk="ACCT#1")
    stranger.update([Account.handle.set("lovelace")])
    assert wire.sent == ["GetItem", "TransactWriteItems"]
    assert set(lock_owners(Account)) == {"UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#lovelace",
                                         "UNIQ#SCORE#\\n7"}
    assert_consistent(Account)


@pytest.mark.parametrize("make_action", [
    lambda: Account.score.add(1),
    lambda: Account.score.set(Account.score + 1),
    lambda: Account.email.set(Account.nickname),
    lambda: Account.handle.set(Account.handle | "anon"),
])
def test_update_with_an_unknowable_result_on_a_constrained_field_is_refused(
        wire: Wire, make_action: Any) -> None:
    account = saved_account(wire)
    with pytest.raises(UnsupportedOperationError) as caught:
        account.update([make_action()])
    assert "save()" in str(caught.value)
    assert wire.writes() == []
    stored = Account.get("ACCT#1")
    assert (stored.email, stored.handle, stored.score) == ("ada@x.io", "ada", 7)
    assert_consistent(Account)


# --- write paths that must refuse ----------------------------------------------------------------


def test_batch_write_is_refused_and_points_to_atomic(wire: Wire) -> None:
    tables(wire, Account)
    with pytest.raises(UnsupportedOperationError) as caught, Account.batch_write() as batch:
        batch.save(Account(pk="ACCT#1", email="ada@x.io"))
    assert "atomic()" in str(caught.value)
    assert wire.writes() == []
    assert raw_items(Account) == []


@pytest.mark.parametrize("operation", ["save", "delete", "update"])
def test_pynamodb_transact_write_is_refused(wire: Wire, dynamodb: str, operation: str) -> None:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="ada@x.io")
    account.save()
    wire.clear()
    with pytest.raises(UnsupportedOperationError) as caught:  # noqa: SIM117
        with TransactWrite(connection=Connection(host=dynamodb, region="us-east-1")) as tx:
            if operation == "save":
                account.email = "bob@x.io"
                tx.save(account)
            elif operation == "delete":
                tx.delete(account)
            else:
                tx.update(account, [Account.email.set("bob@x.io")])
    assert "atomic()" in str(caught.value)
    assert wire.writes() == []
    assert lock_owners(Account) == {"UNIQ#EMAIL#ada@x.io": {"PK": "ACCT#1"}}
    assert_consistent(Account)


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


# --- mistakes caught at class definition ---------------------------------------------------------


def test_unknown_field_in_a_constraint() -> None:
    with pytest.raises(ConfigurationError) as caught:
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unknown"
                constraints = [UniqueConstraint(("tenant", "slgu"), name="TS")]

            pk = UnicodeAttribute(hash_key=True)
            tenant = UnicodeAttribute()
            slug = UnicodeAttribute()
    assert "'slgu'" in str(caught.value)
    assert "TS" in str(caught.value)


def test_duplicate_constraint_names_across_field_and_meta() -> None:
    with pytest.raises(ConfigurationError, match="'EMAIL' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate"
                constraints = [UniqueConstraint("other", name="EMAIL")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)
            other = UnicodeAttribute()


def test_duplicate_constraint_names_in_meta() -> None:
    with pytest.raises(ConfigurationError, match="'AB' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate_meta"
                constraints = [UniqueConstraint(("a", "b"), name="AB"),
                               UniqueConstraint(("b", "a"), name="AB")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_hash_sign_in_a_constraint_name() -> None:
    with pytest.raises(ConfigurationError, match="'#'"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_hash_sign"
                constraints = [UniqueConstraint(("a", "b"), name="A#B")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_non_string_hash_key() -> None:
    with pytest.raises(ConfigurationError, match="string hash key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_key"

            pk = NumberAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_range_key() -> None:
    with pytest.raises(ConfigurationError, match="range key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_range"

            pk = UnicodeAttribute(hash_key=True)
            sk = NumberAttribute(range_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_hash_key_is_fine_without_constraints() -> None:
    class Plain(Model):
        class Meta:
            table_name = "decl_plain_number_key"

        pk = NumberAttribute(hash_key=True)

    assert Plain._du_info is not None
    assert Plain._du_info.constraints == ()


@pytest.mark.parametrize(("first_name", "second_name"), [
    (None, None), ("EMAIL", None), (None, "EMAIL")])
def test_two_models_on_one_table_may_not_share_an_implicit_lock_name(
        first_name: str | None, second_name: str | None) -> None:
    table = f"decl_clash_{first_name}_{second_name}"

    class First(Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True, lock_name=first_name)

    with pytest.raises(ConfigurationError) as caught:
        class Second(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, lock_name=second_name)
    assert "First" in str(caught.value)
    assert "'EMAIL'" in str(caught.value)


def test_implicit_names_on_different_tables_do_not_clash() -> None:
    for table in ("decl_apart_1", "decl_apart_2"):
        class Holder(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)

        assert Holder._du_info is not None


def test_two_models_may_share_a_lock_name_both_declare_explicitly() -> None:
    class First(Model):
        class Meta:
            table_name = "decl_shared_explicit"
            constraints = [UniqueConstraint("email", name="EMAIL")]

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute()

    class Second(Model):
        class Meta:
            table_name = "decl_shared_explicit"

        pk = UnicodeAttribute(hash_key=True)
        address = UnicodeAttribute(unique=True, lock_name="EMAIL")

    assert [b.name for b in Second._du_info.constraints] == ["EMAIL"]  # type: ignore[union-attr]


def test_a_refused_class_leaves_no_lock_name_registered() -> None:
    class Holder(Model):
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        handle = UnicodeAttribute(unique=True)

    with pytest.raises(ConfigurationError):
        class Refused(Model):
            class Meta:
                table_name = "decl_registry_leak"
                constraints = [UniqueConstraint("handle")]   # clashes with Holder's HANDLE

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)   # registered before the clash was found
            handle = UnicodeAttribute()

    class Later(Model):   # Refused never existed: EMAIL is free on this table
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True)


@pytest.mark.parametrize("attribute", [
    lambda: UnicodeSetAttribute(null=True),
    lambda: MapAttribute(null=True),  # type: ignore[no-untyped-call]
    lambda: VersionAttribute(),
])
def test_constraint_on_a_set_map_or_version_attribute(attribute: Any) -> None:
    with pytest.raises(ConfigurationError, match="unique constraints take"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_kind"
                constraints = [UniqueConstraint("tags")]

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute()


@pytest.mark.parametrize("attribute_class", [
    UnicodeSetAttribute,
    NumberSetAttribute,
    BinarySetAttribute,
    ListAttribute,
    JSONAttribute,
    MapAttribute,
])
def test_unique_true_on_a_set_list_or_map_attribute(attribute_class: Any) -> None:
    with pytest.raises(ConfigurationError, match="cannot be unique"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unique_set"

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute_class(unique=True)


def test_constraints_without_a_table() -> None:
    with pytest.raises(ConfigurationError, match="table_name"):
        class Bad(Model):
            class Meta:
                constraints = [UniqueConstraint("email")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()


def test_something_else_in_meta_constraints() -> None:
    with pytest.raises(ConfigurationError, match="only UniqueConstraint"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_entry"
                constraints = [("email",)]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()
