"""dynaunique._write.plan (the planner): the exact plan and request of every write
(docs/how-it-works.md).

Planning does no I/O, so no server is needed: instances are built in memory and ``_du_loaded`` is
set to a raw item to stand for "loaded from DynamoDB".
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr

import dynaunique._write.writes
from dynaunique import (
    ConcurrentModificationError,
    InvalidValueError,
    Model,
    UniqueViolation,
    atomic,
    normalizers,
)
from dynaunique._lock.items import ModelInfo, locks_of
from dynaunique._lock.locks import LockChange, LockRef
from dynaunique._write.plan import Plan, Record, merge, plan_delete, plan_save
from dynaunique._write.record import plan_delete as plan_delete_of
from dynaunique._write.record import plan_save as plan_of
from dynaunique._write.render import render
from dynaunique._write.writes import (
    Absent,
    HeldBy,
    LockDelete,
    LockPut,
    RecordDelete,
    RecordPut,
    Unchanged,
)
from dynaunique.attributes import TTLAttribute, UnicodeAttribute, VersionAttribute
from dynaunique.errors import UnsupportedOperationError

NOW = "2024-05-01T12:00:00.000000+00:00"


Account = declare("Account", "uow_accounts", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True),
                  username=UnicodeAttribute(unique=True, lock_name="HANDLE", null=True),
                  name=UnicodeAttribute(null=True))

# Hash key only, with a VersionAttribute.
Member = declare("Member", "uow_members", id=UnicodeAttribute(hash_key=True),
                 email=UnicodeAttribute(unique=True), name=UnicodeAttribute(null=True),
                 version=VersionAttribute())

# A record with a TTL: its locks expire with it.
Session = declare("Session", "uow_sessions", pk=pk_attr(), sk=sk_attr("SESSION"),
                  token=UnicodeAttribute(unique=True), expires=TTLAttribute(null=True))

# A hashed constraint: the lock key holds an HMAC, the lock item no value.
Person = declare("Person", "uow_people", meta={"lock_secret": "s3cret"},
                 id=UnicodeAttribute(hash_key=True), ssn=UnicodeAttribute(unique=True, hashed=True))


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Lock items carry their creation time; pin it so requests compare exactly."""
    monkeypatch.setattr(dynaunique._write.writes, "now", lambda: NOW)
    yield


def info_of(model: type[Model]) -> ModelInfo:
    info = model._du_info
    assert info is not None
    return info


def kinds(items: list[dict[str, Any]]) -> list[str]:
    """The operation of each TransactItems entry: ``["Put", "Delete", ...]``."""
    return [next(iter(item)) for item in items]


def loaded(model: type[Model], **values: Any) -> Any:
    """An instance as if just read from DynamoDB."""
    obj = model(**values)
    obj._du_loaded = obj.serialize()
    return obj


# --- expected request pieces, spelled out ---------------------------------------------------------

A1 = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}
A2 = {"PK": {"S": "ACCT#2"}, "SK": {"S": "PROFILE"}}
OWNED_BY_ONE = "attribute_not_exists(#g0) OR (#g1.#g0 = :g0 AND #g1.#g2 = :g1)"
OWNED_BY_TWO = OWNED_BY_ONE + " OR (#g1.#g0 = :g2 AND #g1.#g2 = :g3)"
OWNER_NAMES = {"#g0": "PK", "#g1": "owner", "#g2": "SK"}


def owner_values(*owners: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for owner in owners:
        for attr in ("PK", "SK"):
            values[f":g{len(values)}"] = owner[attr]
    return values


def lock_entry(key: str, value: str, constraint: str, owner: dict[str, Any],
               *, model: str = "Account", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "PK": {"S": key},
        "SK": {"S": "LOCK"},
        "owner": {"M": owner},
        "model": {"S": model},
        "constraint": {"S": constraint},
        "value": {"S": value},
        "created": {"S": NOW},
        **(extra or {}),
    }


def lock_put(key: str, value: str, constraint: str, owner: dict[str, Any],
             *also_owned_by: dict[str, Any], model: str = "Account",
             extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"Put": {
        "TableName": {"Account": "uow_accounts", "Session": "uow_sessions"}[model],
        "Item": lock_entry(key, value, constraint, owner, model=model, extra=extra),
        "ConditionExpression": OWNED_BY_TWO if also_owned_by else OWNED_BY_ONE,
        "ExpressionAttributeNames": OWNER_NAMES,
        "ExpressionAttributeValues": owner_values(owner, *also_owned_by),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }}


def lock_delete(key: str, owner: dict[str, Any], table: str = "uow_accounts") -> dict[str, Any]:
    return {"Delete": {
        "TableName": table,
        "Key": {"PK": {"S": key}, "SK": {"S": "LOCK"}},
        "ConditionExpression": OWNED_BY_ONE,
        "ExpressionAttributeNames": OWNER_NAMES,
        "ExpressionAttributeValues": owner_values(owner),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }}


UNCHANGED_ACCOUNT = "attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1"
UNCHANGED_NAMES = {"#g0": "PK", "#g1": "email", "#g2": "username"}


# --- create --------------------------------------------------------------------------------------


def test_create_plan_is_record_put_plus_one_lock_put_per_unique_field() -> None:
    acct = Account(pk="ACCT#1", email="Ada@Lovelace.io", username="ada", name="Ada")
    plan = plan_of(acct)
    record = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "email": {"S": "Ada@Lovelace.io"},
              "username": {"S": "ada"}, "name": {"S": "Ada"}}
    email = LockRef("EMAIL", ("email",), "UNIQ#EMAIL#ada@lovelace.io", "ada@lovelace.io")
    handle = LockRef("HANDLE", ("username",), "UNIQ#HANDLE#ada", "ada")
    assert plan.writes == (
        RecordPut("uow_accounts", "Account", A1, record, Absent(), None, create=True),
        LockPut("uow_accounts", "Account", email, A1,
                lock_entry("UNIQ#EMAIL#ada@lovelace.io", "ada@lovelace.io", "EMAIL", A1),
                HeldBy((A1,)), {"PK": {"S": "UNIQ#EMAIL#ada@lovelace.io"}, "SK": {"S": "LOCK"}}),
        LockPut("uow_accounts", "Account", handle, A1,
                lock_entry("UNIQ#HANDLE#ada", "ada", "HANDLE", A1),
                HeldBy((A1,)), {"PK": {"S": "UNIQ#HANDLE#ada"}, "SK": {"S": "LOCK"}}),
    )
    assert plan.changes == (LockChange("EMAIL", None, email), LockChange("HANDLE", None, handle))
    assert plan.is_transaction


def test_the_pure_planner_plans_a_create_from_a_never_loaded_record() -> None:
    # The create goes through the one planner (_plan.plan_save): a Record loaded as None.
    record = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "username": {"S": "ada"}}
    handle = LockRef("HANDLE", ("username",), "UNIQ#HANDLE#ada", "ada")
    plan = plan_save(Record(info_of(Account), None, {}, record, {"HANDLE": handle}, now=NOW))
    assert plan.writes == (
        RecordPut("uow_accounts", "Account", A1, record, Absent(), None, create=True),
        LockPut("uow_accounts", "Account", handle, A1,
                lock_entry("UNIQ#HANDLE#ada", "ada", "HANDLE", A1),
                HeldBy((A1,)), {"PK": {"S": "UNIQ#HANDLE#ada"}, "SK": {"S": "LOCK"}}),
    )
    assert plan.changes == (LockChange("HANDLE", None, handle),)
    assert plan.is_transaction
    # No lock to take: one put guarded on absence, not a transaction.
    alone = plan_save(Record(info_of(Account), None, item=dict(A1), now=NOW))
    assert alone.writes == (RecordPut("uow_accounts", "Account", A1, A1, Absent(), None,
                                      create=True),)
    assert not alone.is_transaction and not alone.pynamodb


def test_create_request() -> None:
    acct = Account(pk="ACCT#1", email="Ada@Lovelace.io", username="ada", name="Ada")
    assert acct.save(dry_run=True) == {"TransactItems": [
        {"Put": {
            "TableName": "uow_accounts",
            "Item": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"},
                     "email": {"S": "Ada@Lovelace.io"}, "username": {"S": "ada"},
                     "name": {"S": "Ada"}},
            "ConditionExpression": "attribute_not_exists(#g0)",
            "ExpressionAttributeNames": {"#g0": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_put("UNIQ#EMAIL#ada@lovelace.io", "ada@lovelace.io", "EMAIL", A1),
        lock_put("UNIQ#HANDLE#ada", "ada", "HANDLE", A1),
    ], "ReturnConsumedCapacity": "TOTAL"}
    # A dry run is only a dry run: nothing about the object changed.
    assert acct._du_loaded is None


def test_create_with_none_takes_no_lock_for_it() -> None:
    acct = Account(pk="ACCT#1", username="ada")
    request = acct.save(dry_run=True)
    assert kinds(request["TransactItems"]) == ["Put", "Put"]
    assert request["TransactItems"][1] == lock_put("UNIQ#HANDLE#ada", "ada", "HANDLE", A1)


def test_create_without_any_unique_value_is_still_guarded_on_absence() -> None:
    acct = Account(pk="ACCT#1", name="Ada")
    assert acct.save(dry_run=True) == {
        "Operation": "PutItem",
        "TableName": "uow_accounts",
        "Item": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "name": {"S": "Ada"}},
        "ConditionExpression": "attribute_not_exists(#g0)",
        "ExpressionAttributeNames": {"#g0": "PK"},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


def test_create_with_hash_key_only_and_version() -> None:
    member = Member(id="M#1", email="m@x.io")
    assert member.save(dry_run=True) == {"TransactItems": [
        {"Put": {
            "TableName": "uow_members",
            "Item": {"id": {"S": "M#1"}, "email": {"S": "m@x.io"}, "version": {"N": "1"}},
            "ConditionExpression": "attribute_not_exists(#g0)",
            "ExpressionAttributeNames": {"#g0": "id"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        {"Put": {
            "TableName": "uow_members",
            "Item": {"id": {"S": "UNIQ#EMAIL#m@x.io"}, "owner": {"M": {"id": {"S": "M#1"}}},
                     "model": {"S": "Member"}, "constraint": {"S": "EMAIL"},
                     "value": {"S": "m@x.io"}, "created": {"S": NOW}},
            "ConditionExpression": "attribute_not_exists(#g0) OR (#g1.#g0 = :g0)",
            "ExpressionAttributeNames": {"#g0": "id", "#g1": "owner"},
            "ExpressionAttributeValues": {":g0": {"S": "M#1"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_create_of_a_hashed_constraint_keeps_no_plaintext() -> None:
    request = Person(id="P#1", ssn="078-05-1120").save(dry_run=True)
    lock = request["TransactItems"][1]["Put"]["Item"]
    assert lock["id"]["S"].startswith("UNIQ#SSN#\\k")
    assert len(lock["id"]["S"]) == len("UNIQ#SSN#\\k") + 64
    assert "value" not in lock
    assert "078-05-1120" not in repr(lock)


def test_a_hash_key_in_the_reserved_namespace_is_refused() -> None:
    with pytest.raises(InvalidValueError, match="reserved"):
        Account(pk="UNIQ#EMAIL#x", email="x@x.io").save(dry_run=True)


# --- update, no unique change --------------------------------------------------------------------


def test_update_without_unique_change_is_one_plain_guarded_put() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io", username="ada", name="Ada")
    acct.name = "Augusta"
    plan = plan_of(acct)
    assert not plan.is_transaction
    assert plan.changes == (
        LockChange("EMAIL", LockRef("EMAIL", ("email",), "UNIQ#EMAIL#ada@x.io", "ada@x.io"),
                   LockRef("EMAIL", ("email",), "UNIQ#EMAIL#ada@x.io", "ada@x.io")),
        LockChange("HANDLE", LockRef("HANDLE", ("username",), "UNIQ#HANDLE#ada", "ada"),
                   LockRef("HANDLE", ("username",), "UNIQ#HANDLE#ada", "ada")),
    )
    assert [c.kind for c in plan.changes] == ["unchanged", "unchanged"]
    assert acct.save(dry_run=True) == {
        "Operation": "PutItem",
        "TableName": "uow_accounts",
        "Item": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "email": {"S": "ada@x.io"},
                 "username": {"S": "ada"}, "name": {"S": "Augusta"}},
        "ConditionExpression": UNCHANGED_ACCOUNT,
        "ExpressionAttributeNames": UNCHANGED_NAMES,
        "ExpressionAttributeValues": {":g0": {"S": "ada@x.io"}, ":g1": {"S": "ada"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


def test_unchanged_guard_expects_absence_of_a_loaded_none() -> None:
    acct = loaded(Account, pk="ACCT#1", username="ada")
    acct.name = "Ada"
    request = acct.save(dry_run=True)
    assert request["ConditionExpression"] == (
        "attribute_exists(#g0) AND attribute_not_exists(#g1) AND #g2 = :g0")
    assert request["ExpressionAttributeNames"] == UNCHANGED_NAMES
    assert request["ExpressionAttributeValues"] == {":g0": {"S": "ada"}}


def test_update_with_version_is_guarded_on_the_version_and_the_lock_inputs() -> None:
    # The version alone is not enough: a record deleted and created again restarts at 1.
    member = Member(id="M#1", email="m@x.io", name="n", version=3)
    member._du_loaded = {"id": {"S": "M#1"}, "email": {"S": "m@x.io"}, "name": {"S": "n"},
                         "version": {"N": "3"}}
    member.name = "o"
    assert member.save(dry_run=True) == {
        "Operation": "PutItem",
        "TableName": "uow_members",
        "Item": {"id": {"S": "M#1"}, "email": {"S": "m@x.io"}, "name": {"S": "o"},
                 "version": {"N": "4"}},
        "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1",
        "ExpressionAttributeNames": {"#g0": "id", "#g1": "version", "#g2": "email"},
        "ExpressionAttributeValues": {":g0": {"N": "3"}, ":g1": {"S": "m@x.io"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


def test_normalization_only_change_touches_no_lock() -> None:
    acct = loaded(Account, pk="ACCT#1", email="Ada@X.io", username="ada")
    acct.email = "ada@x.io"
    plan = plan_of(acct)
    assert [c.kind for c in plan.changes] == ["unchanged", "unchanged"]
    assert acct.save(dry_run=True) == {
        "Operation": "PutItem",
        "TableName": "uow_accounts",
        "Item": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}, "email": {"S": "ada@x.io"},
                 "username": {"S": "ada"}},
        "ConditionExpression": UNCHANGED_ACCOUNT,
        "ExpressionAttributeNames": UNCHANGED_NAMES,
        # The guard holds the stored spelling, not the normalized one.
        "ExpressionAttributeValues": {":g0": {"S": "Ada@X.io"}, ":g1": {"S": "ada"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


# --- update changing values ----------------------------------------------------------------------


def test_update_changing_one_value_moves_its_lock() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io", username="ada")
    acct.email = "Ada@Analytical.Engine"
    plan = plan_of(acct)
    old = LockRef("EMAIL", ("email",), "UNIQ#EMAIL#ada@x.io", "ada@x.io")
    new = LockRef("EMAIL", ("email",), "UNIQ#EMAIL#ada@analytical.engine",
                  "ada@analytical.engine")
    assert [type(w) for w in plan.writes] == [RecordPut, LockPut, LockDelete]
    assert plan.writes[0].guard == Unchanged((("email", {"S": "ada@x.io"}),
                                              ("username", {"S": "ada"})))
    assert plan.writes[2] == LockDelete("uow_accounts", "Account", old,
                                        {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}},
                                        HeldBy((A1,)))
    assert [c.kind for c in plan.changes] == ["moved", "unchanged"]
    assert plan.changes[0] == LockChange("EMAIL", old, new)
    assert acct.save(dry_run=True) == {"TransactItems": [
        {"Put": {
            "TableName": "uow_accounts",
            "Item": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"},
                     "email": {"S": "Ada@Analytical.Engine"}, "username": {"S": "ada"}},
            "ConditionExpression": UNCHANGED_ACCOUNT,
            "ExpressionAttributeNames": UNCHANGED_NAMES,
            "ExpressionAttributeValues": {":g0": {"S": "ada@x.io"}, ":g1": {"S": "ada"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_put("UNIQ#EMAIL#ada@analytical.engine", "ada@analytical.engine", "EMAIL", A1),
        lock_delete("UNIQ#EMAIL#ada@x.io", A1),
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_update_changing_two_values_moves_both() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io", username="ada")
    acct.email, acct.username = "b@x.io", "bee"
    items = acct.save(dry_run=True)["TransactItems"]
    assert items[1:] == [
        lock_put("UNIQ#EMAIL#b@x.io", "b@x.io", "EMAIL", A1),
        lock_delete("UNIQ#EMAIL#ada@x.io", A1),
        lock_put("UNIQ#HANDLE#bee", "bee", "HANDLE", A1),
        lock_delete("UNIQ#HANDLE#ada", A1),
    ]


def test_update_with_version_changing_a_value() -> None:
    member = Member(id="M#1", email="m@x.io", version=7)
    member._du_loaded = {"id": {"S": "M#1"}, "email": {"S": "m@x.io"}, "version": {"N": "7"}}
    member.email = "n@x.io"
    items = member.save(dry_run=True)["TransactItems"]
    assert items[0]["Put"]["ConditionExpression"] == (
        "attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1")
    assert items[0]["Put"]["ExpressionAttributeValues"] == {":g0": {"N": "7"},
                                                            ":g1": {"S": "m@x.io"}}
    assert items[0]["Put"]["Item"]["version"] == {"N": "8"}
    assert kinds(items) == ["Put", "Put", "Delete"]
    assert items[2]["Delete"]["Key"] == {"id": {"S": "UNIQ#EMAIL#m@x.io"}}


def test_setting_a_none_value_takes_a_lock_and_deletes_none() -> None:
    acct = loaded(Account, pk="ACCT#1", username="ada")
    acct.email = "ada@x.io"
    plan = plan_of(acct)
    assert [c.kind for c in plan.changes] == ["added", "unchanged"]
    items = acct.save(dry_run=True)["TransactItems"]
    assert items[1:] == [lock_put("UNIQ#EMAIL#ada@x.io", "ada@x.io", "EMAIL", A1)]


def test_clearing_a_value_to_none_deletes_its_lock_only() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io", username="ada")
    acct.email = None
    plan = plan_of(acct)
    assert [c.kind for c in plan.changes] == ["removed", "unchanged"]
    items = acct.save(dry_run=True)["TransactItems"]
    assert items[1:] == [lock_delete("UNIQ#EMAIL#ada@x.io", A1)]
    assert "email" not in items[0]["Put"]["Item"]


def test_changed_key_is_a_create_of_a_new_record() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io")
    acct.pk = "ACCT#9"
    items = acct.save(dry_run=True)["TransactItems"]
    assert items[0]["Put"]["ConditionExpression"] == "attribute_not_exists(#g0)"
    assert kinds(items) == ["Put", "Put"]


# --- TTL -----------------------------------------------------------------------------------------

EXP_2030 = 1893456000
EXP_2031 = 1924992000
S1 = {"PK": {"S": "SESS#1"}, "SK": {"S": "SESSION"}}


def test_locks_carry_the_record_ttl() -> None:
    session = Session(pk="SESS#1", token="t1", expires=datetime(2030, 1, 1, tzinfo=timezone.utc))
    items = session.save(dry_run=True)["TransactItems"]
    assert items[1] == lock_put("UNIQ#TOKEN#t1", "t1", "TOKEN", S1, model="Session",
                                extra={"expires": {"N": str(EXP_2030)}})


def test_ttl_change_alone_reputs_the_locks_with_the_new_expiry() -> None:
    session = loaded(Session, pk="SESS#1", token="t1",
                     expires=datetime(2030, 1, 1, tzinfo=timezone.utc))
    session.expires = datetime(2031, 1, 1, tzinfo=timezone.utc)
    assert session.save(dry_run=True) == {"TransactItems": [
        {"Put": {
            "TableName": "uow_sessions",
            "Item": {"PK": {"S": "SESS#1"}, "SK": {"S": "SESSION"}, "token": {"S": "t1"},
                     "expires": {"N": str(EXP_2031)}},
            "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1",
            "ExpressionAttributeNames": {"#g0": "PK", "#g1": "expires", "#g2": "token"},
            "ExpressionAttributeValues": {":g0": {"N": str(EXP_2030)}, ":g1": {"S": "t1"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_put("UNIQ#TOKEN#t1", "t1", "TOKEN", S1, model="Session",
                 extra={"expires": {"N": str(EXP_2031)}}),
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_unchanged_ttl_reputs_nothing() -> None:
    session = loaded(Session, pk="SESS#1", token="t1",
                     expires=datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert session.save(dry_run=True)["Operation"] == "PutItem"


# --- delete --------------------------------------------------------------------------------------


def test_delete_plan_is_record_delete_plus_every_lock_delete() -> None:
    acct = loaded(Account, pk="ACCT#1", email="Ada@x.io", username="ada")
    assert acct._du_loaded is not None
    plan = plan_delete_of(acct, acct._du_loaded)
    assert [type(w) for w in plan.writes] == [RecordDelete, LockDelete, LockDelete]
    assert [c.kind for c in plan.changes] == ["removed", "removed"]
    assert acct.delete(dry_run=True) == {"TransactItems": [
        {"Delete": {
            "TableName": "uow_accounts",
            "Key": A1,
            "ConditionExpression": UNCHANGED_ACCOUNT,
            "ExpressionAttributeNames": UNCHANGED_NAMES,
            "ExpressionAttributeValues": {":g0": {"S": "Ada@x.io"}, ":g1": {"S": "ada"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_delete("UNIQ#EMAIL#ada@x.io", A1),
        lock_delete("UNIQ#HANDLE#ada", A1),
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_delete_deletes_the_loaded_locks_not_the_edited_ones() -> None:
    acct = loaded(Account, pk="ACCT#1", email="ada@x.io", username="ada")
    acct.email = "edited@x.io"
    items = acct.delete(dry_run=True)["TransactItems"]
    assert items[1] == lock_delete("UNIQ#EMAIL#ada@x.io", A1)


def test_delete_with_version_is_guarded_on_the_version_and_the_lock_inputs() -> None:
    member = Member(id="M#1", email="m@x.io", version=2)
    member._du_loaded = {"id": {"S": "M#1"}, "email": {"S": "m@x.io"}, "version": {"N": "2"}}
    items = member.delete(dry_run=True)["TransactItems"]
    assert items[0] == {"Delete": {
        "TableName": "uow_members",
        "Key": {"id": {"S": "M#1"}},
        "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1",
        "ExpressionAttributeNames": {"#g0": "id", "#g1": "version", "#g2": "email"},
        "ExpressionAttributeValues": {":g0": {"N": "2"}, ":g1": {"S": "m@x.io"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }}


def test_delete_of_a_record_without_locks_is_a_plain_guarded_delete() -> None:
    acct = loaded(Account, pk="ACCT#1", name="x")
    request = acct.delete(dry_run=True)
    assert request == {
        "Operation": "DeleteItem",
        "TableName": "uow_accounts",
        "Key": A1,
        "ConditionExpression": "attribute_exists(#g0) AND attribute_not_exists(#g1) AND "
                               "attribute_not_exists(#g2)",
        "ExpressionAttributeNames": UNCHANGED_NAMES,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnConsumedCapacity": "TOTAL",
    }


# --- the pure planner, called directly -----------------------------------------------------------


def test_plan_save_and_plan_delete_from_raw_items() -> None:
    info = info_of(Account)
    old_item = {**A1, "email": {"S": "a@x.io"}}
    new_item = {**A1, "email": {"S": "b@x.io"}}
    old_locks = locks_of(info, Account.from_raw_data(dict(old_item)))
    new_locks = locks_of(info, Account.from_raw_data(dict(new_item)))
    assert old_locks == {"EMAIL": LockRef("EMAIL", ("email",), "UNIQ#EMAIL#a@x.io", "a@x.io")}
    plan = plan_save(Record(info, old_item, old_locks, new_item, new_locks, now=NOW))
    assert render(plan) == {"TransactItems": [
        {"Put": {
            "TableName": "uow_accounts",
            "Item": new_item,
            "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0 AND "
                                   "attribute_not_exists(#g2)",
            "ExpressionAttributeNames": UNCHANGED_NAMES,
            "ExpressionAttributeValues": {":g0": {"S": "a@x.io"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_put("UNIQ#EMAIL#b@x.io", "b@x.io", "EMAIL", A1),
        lock_delete("UNIQ#EMAIL#a@x.io", A1),
    ], "ReturnConsumedCapacity": "TOTAL"}
    deleted = plan_delete(Record(info, new_item, new_locks))
    assert kinds(render(deleted)["TransactItems"]) == ["Delete", "Delete"]


# --- merge (atomic units) ------------------------------------------------------------------------


def test_swap_in_one_unit_becomes_owner_transfer_puts() -> None:
    first = loaded(Account, pk="ACCT#1", email="a@x.io")
    second = loaded(Account, pk="ACCT#2", email="b@x.io")
    first.email, second.email = "b@x.io", "a@x.io"
    plan = merge([plan_of(first), plan_of(second)])
    assert [type(w) for w in plan.writes] == [RecordPut, RecordPut, LockPut, LockPut]
    transfers = [w for w in plan.writes if isinstance(w, LockPut)]
    assert [w.guard for w in transfers] == [HeldBy((A1, A2)), HeldBy((A2, A1))]
    with atomic(dry_run=True) as unit:
        first.save()
        second.save()
    assert unit.request is not None
    items = unit.request["TransactItems"]
    assert len(items) == 4
    assert items[2:] == [
        lock_put("UNIQ#EMAIL#b@x.io", "b@x.io", "EMAIL", A1, A2),
        lock_put("UNIQ#EMAIL#a@x.io", "a@x.io", "EMAIL", A2, A1),
    ]
    # One operation per lock item: DynamoDB refuses two on one item.
    keys = [i["Put"]["Item"]["PK"]["S"] for i in items if "Put" in i] + [
        i["Delete"]["Key"]["PK"]["S"] for i in items if "Delete" in i]
    assert len(keys) == len(set(keys))


def test_value_freed_by_a_delete_and_taken_by_a_create_is_one_put() -> None:
    leaving = loaded(Account, pk="ACCT#1", email="a@x.io")
    arriving = Account(pk="ACCT#2", email="A@X.io")
    with atomic(dry_run=True) as unit:
        leaving.delete()
        arriving.save()
    assert unit.request is not None
    items = unit.request["TransactItems"]
    assert kinds(items) == ["Delete", "Put", "Put"]
    assert items[2] == lock_put("UNIQ#EMAIL#a@x.io", "a@x.io", "EMAIL", A2, A1)


def test_two_records_taking_one_value_in_one_unit_is_a_violation() -> None:
    first = Account(pk="ACCT#1", email="Ada@x.io")
    second = Account(pk="ACCT#2", email="ada@X.io")
    with pytest.raises(UniqueViolation) as caught:
        merge([plan_of(first), plan_of(second)])
    error = caught.value
    assert (error.model, error.fields, error.constraint, error.value, error.owner) == (
        "Account", ("email",), "EMAIL", "ada@x.io", {"PK": "ACCT#1", "SK": "PROFILE"})
    assert str(error) == "email 'ada@x.io' is already taken (held by ACCT#1)"
    with pytest.raises(UniqueViolation), atomic(dry_run=True):
        first.save()
        second.save()


def test_two_stale_copies_deleting_one_lock_is_a_concurrent_modification() -> None:
    first = loaded(Account, pk="ACCT#1", email="a@x.io")
    second = loaded(Account, pk="ACCT#2", email="a@x.io")  # cannot both hold it
    first.email = second.email = None
    with pytest.raises(ConcurrentModificationError, match="both believe they hold"):
        merge([plan_of(first), plan_of(second)])


def test_one_record_written_twice_in_one_unit_is_refused() -> None:
    first = loaded(Account, pk="ACCT#1", email="a@x.io")
    twin = loaded(Account, pk="ACCT#1", email="a@x.io")
    with pytest.raises(InvalidValueError, match="same Account record"):
        merge([plan_of(first), plan_of(twin)])


def test_key_identity_is_the_typed_key_in_any_order() -> None:
    # The one identity of an item's key (_items.key_id): the merge keys items by (table, it).
    from dynaunique._lock.items import key_id

    key = {"pk": {"S": "A"}, "sk": {"S": "LOCK"}}
    assert key_id(key) == (("pk", (("S", "A"),)), ("sk", (("S", "LOCK"),)))
    assert key_id({"sk": {"S": "LOCK"}, "pk": {"S": "A"}}) == key_id(key)
    assert key_id({"pk": {"N": "1"}}) != key_id({"pk": {"S": "1"}})
    # An unhashable value keeps its repr, apart from the same bytes.
    assert key_id({"pk": {"B": bytearray(b"x")}}) == "[('pk', [('B', bytearray(b'x'))])]"
    assert key_id({"pk": {"B": bytearray(b"x")}}) != key_id({"pk": {"B": b"x"}})


def test_merge_of_one_plan_is_that_plan() -> None:
    plan = plan_of(Account(pk="ACCT#1", email="a@x.io"))
    assert merge([plan]) == plan
    assert merge([]) == Plan(())
    assert not Plan(()).has_work


# --- update(actions) -----------------------------------------------------------------------------


def test_update_action_on_a_plain_field_is_one_update_item() -> None:
    acct = loaded(Account, pk="ACCT#1", email="a@x.io", username="a")
    assert acct.update([Account.name.set("z")], dry_run=True) == {
        "Operation": "UpdateItem",
        "TableName": "uow_accounts",
        "Key": A1,
        "UpdateExpression": "SET #0 = :0",
        "ExpressionAttributeNames": {"#0": "name"},
        "ExpressionAttributeValues": {":0": {"S": "z"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        "ReturnValues": "ALL_NEW",
        "ReturnConsumedCapacity": "TOTAL",
    }


def test_update_action_setting_a_unique_field_moves_the_lock() -> None:
    acct = loaded(Account, pk="ACCT#1", email="a@x.io", username="a")
    assert acct.update([Account.email.set("B@x.io")], dry_run=True) == {"TransactItems": [
        {"Update": {
            "TableName": "uow_accounts",
            "Key": A1,
            "UpdateExpression": "SET #0 = :0",
            "ConditionExpression": UNCHANGED_ACCOUNT,
            "ExpressionAttributeNames": {**UNCHANGED_NAMES, "#0": "email"},
            "ExpressionAttributeValues": {":g0": {"S": "a@x.io"}, ":g1": {"S": "a"},
                                          ":0": {"S": "B@x.io"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        lock_put("UNIQ#EMAIL#b@x.io", "b@x.io", "EMAIL", A1),
        lock_delete("UNIQ#EMAIL#a@x.io", A1),
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_update_action_removing_a_unique_field_deletes_the_lock() -> None:
    acct = loaded(Account, pk="ACCT#1", email="a@x.io", username="a")
    items = acct.update([Account.email.remove()], dry_run=True)["TransactItems"]
    assert items[0]["Update"]["UpdateExpression"] == "REMOVE #0"
    assert items[1:] == [lock_delete("UNIQ#EMAIL#a@x.io", A1)]


def test_update_action_with_unknowable_result_on_a_unique_field_is_refused() -> None:
    acct = loaded(Account, pk="ACCT#1", email="a@x.io", username="a")
    with pytest.raises(UnsupportedOperationError, match="cannot be known before sending"):
        acct.update([Account.email.set(Account.username)], dry_run=True)


def test_update_action_moving_a_lock_beside_an_unknowable_plain_action_is_planned() -> None:
    acct = loaded(Account, pk="ACCT#1", email="a@x.io", username="a")
    request = acct.update([Account.email.set("b@x.io"), Account.name.set(Account.username)],
                          dry_run=True)
    items = request["TransactItems"]
    assert items[0]["Update"]["UpdateExpression"] == "SET #0 = :0, #1 = #2"
    assert items[1:] == [lock_put("UNIQ#EMAIL#b@x.io", "b@x.io", "EMAIL", A1),
                         lock_delete("UNIQ#EMAIL#a@x.io", A1)]


def test_taking_over_guards_each_orphan_put_exactly_and_checks_each_old_owner_once() -> None:
    """Issue 36: the takeover is a planned step — each put of an orphan met guarded on the lock
    as met, one ConditionCheck per old owner after every other write."""
    from dynaunique._write.plan import Plan
    from dynaunique._write.writes import ConditionCheck, Shaped, Takeover

    def put(key: str) -> LockPut:
        return LockPut("t", "M", LockRef("EMAIL", ("email",), key, "v"), {"PK": {"S": "A"}},
                       {"PK": {"S": key}}, HeldBy(({"PK": {"S": "A"}},)), {"PK": {"S": key}})

    ghost = {"PK": {"S": "GHOST"}}
    check = ConditionCheck("t", "M", ghost, None, "gone", guard=Absent(), heals="UNIQ#E#a")
    exact = Shaped(equal=(("owner", {"M": ghost}), ("created", {"S": "t0"})))
    plan = Plan((put("UNIQ#E#a"), put("UNIQ#E#b"), put("UNIQ#E#c")))
    taken = plan.taking_over({"UNIQ#E#a": Takeover("UNIQ#E#a", exact, check),
                              "UNIQ#E#b": Takeover("UNIQ#E#b", exact, check),
                              "UNIQ#E#z": Takeover("UNIQ#E#z", exact, check)})
    assert [w.guard for w in taken.writes] == [exact, exact, plan.writes[2].guard, Absent()]
    assert taken.writes[3] is check
    assert plan.taking_over({}) == plan
