"""The models (tables prefixed decl_) and helpers of the declaring tests: the recorder of what
is sent, raw reads of the tables and the lock-consistency check."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from support.invariants import assert_clean
from support.recorders import Wire
from support.tables import raw_items

from dynaunique import (
    Model,
    UniqueConstraint,
    normalizers,
)
from dynaunique._lock.locks import RESERVED_PREFIX, untyped
from dynaunique.attributes import (
    BinaryAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
)
from dynaunique.testing import create_tables

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


def tables(wire: Wire, *models: type[Model]) -> None:
    """Create the tables of ``models``, record their PynamoDB clients too, forget the setup."""
    create_tables(*models)
    for model in models:
        wire.hook(model._get_connection().connection.client)
    wire.clear()


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
        assert_clean([model], model.Meta.host, model_of=functools.partial(owner_model, model))


def owner_model(model: type[Model], item: dict[str, Any]) -> type[Model]:
    """The model of a record item of ``model``'s table: the one its key prefix names where the
    table is shared, else ``model``."""
    attr = hash_attr(model)
    for prefix, candidate in SHARED_PREFIXES.items():
        if candidate.Meta.table_name == model.Meta.table_name and \
                item[attr]["S"].startswith(prefix):
            return candidate
    return model


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
