"""dynaunique.Model against the local server: every write keeps the lock items exactly right.

Each test that writes ends by comparing the table's lock items with the locks its records
require (no orphan, no missing lock) and with the exact set the test expects. Requests are counted
with a botocore ``before-send`` handler on the clients dynaunique and PynamoDB use.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from support.accounts import ACCOUNT_MODELS, MODELS, Account, Session, VAccount
from support.invariants import assert_clean
from support.recorders import listening, operation_of
from support.tables import scan_all
from support.violations import assert_ada_email_taken

from dynaunique import (
    ConcurrentModificationError,
    ConfigurationError,
    InvalidValueError,
    Model,
    UniqueViolation,
    UnsupportedOperationError,
)
from dynaunique._lock.locks import RESERVED_PREFIX
from dynaunique._transport import clients as _clients
from dynaunique.testing import create_tables, use_endpoint


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    """Point the models at the fresh local server and return a raw boto3 client on it."""
    if getattr(Account.Meta, "host", None) != dynaunique_db:
        # Once per server: keeping PynamoDB's connections saves making clients in every test.
        use_endpoint(dynaunique_db, *MODELS)
    create_tables(Account)  # VAccount's table only where a test uses it: tables cost time
    return boto3.client("dynamodb", endpoint_url=dynaunique_db, region_name="us-east-1")


@pytest.fixture
def sent(raw: Any, request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The DynamoDB operations sent over HTTP (every attempt), by dynaunique or PynamoDB.

    Watches the client of each model the tests write with (a model's own PynamoDB client, which
    carries dynaunique's requests and PynamoDB's alike).
    """
    operations: list[str] = []
    # Each model writes through its own PynamoDB client: the ones the tests watch.
    watched = [Account, VAccount, Session]
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "model" in callspec.params:
        watched.append(callspec.params["model"])

    def record(request: Any, **_: Any) -> None:
        operations.append(operation_of(request))

    clients = {}
    for model in watched:
        client = _clients.client_for(model)
        clients[id(client)] = client
    with listening(clients.values(), record):
        yield operations


@pytest.fixture(params=ACCOUNT_MODELS, ids=lambda m: m.__name__)
def model(raw: Any, request: pytest.FixtureRequest) -> Any:
    """Account, then VAccount (the same with a version attribute), its table created."""
    create_tables(request.param)
    return request.param


# --- reading the raw table -----------------------------------------------------------------------


def lock_items(raw: Any, model: type[Model] = Account) -> dict[str, dict[str, Any]]:
    return {item["PK"]["S"]: item for item in scan_all(raw, model.Meta.table_name)
            if item["PK"]["S"].startswith(RESERVED_PREFIX)}


def records(raw: Any, model: type[Model] = Account) -> dict[str, dict[str, Any]]:
    return {item["PK"]["S"]: item for item in scan_all(raw, model.Meta.table_name)
            if not item["PK"]["S"].startswith(RESERVED_PREFIX)}


def assert_locks(raw: Any, expected: dict[str, str], model: type[Model] = Account) -> None:
    """The table holds exactly the ``expected`` locks (key → owner's PK) and every record's
    required locks, owned by it: no orphan, no missing lock, no foreign owner."""
    assert_clean([model], model.Meta.host)
    actual = lock_items(raw, model)
    assert {k: v["owner"]["M"]["PK"]["S"] for k, v in actual.items()} == expected


def signup(model: type[Model], pk: str, email: str | None, username: str | None = None,
           name: str | None = None) -> Any:
    obj = model(pk=pk, email=email, username=username, name=name)
    obj.save()
    return obj


def stale_copy(model: type[Model]) -> Any:
    """ACCT#1 (ada@x.io, ada) loaded twice; the first copy then saves email a@x.io: the second
    copy, returned, is stale."""
    signup(model, "ACCT#1", "ada@x.io", "ada")
    copy_a = model.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_b = model.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_a.email = "a@x.io"
    copy_a.save()
    return copy_b


# --- create --------------------------------------------------------------------------------------


def test_create_writes_the_record_and_exact_lock_items(raw: Any, sent: list[str]) -> None:
    before = datetime.now(timezone.utc)
    acct = signup(Account, "ACCT#a1f9c3", "Ada@Lovelace.io", "ada", "Ada")
    assert sent == ["TransactWriteItems"]
    record = {"PK": {"S": "ACCT#a1f9c3"}, "SK": {"S": "PROFILE"},
              "email": {"S": "Ada@Lovelace.io"}, "username": {"S": "ada"}, "name": {"S": "Ada"}}
    assert records(raw) == {"ACCT#a1f9c3": record}
    locks = lock_items(raw)
    assert sorted(locks) == ["UNIQ#EMAIL#ada@lovelace.io", "UNIQ#HANDLE#ada"]
    owner = {"M": {"PK": {"S": "ACCT#a1f9c3"}, "SK": {"S": "PROFILE"}}}
    for key, constraint, value in [("UNIQ#EMAIL#ada@lovelace.io", "EMAIL", "ada@lovelace.io"),
                                   ("UNIQ#HANDLE#ada", "HANDLE", "ada")]:
        created = locks[key].pop("created")["S"]
        assert locks[key] == {"PK": {"S": key}, "SK": {"S": "LOCK"}, "owner": owner,
                              "model": {"S": "Account"}, "constraint": {"S": constraint},
                              "value": {"S": value}}
        when = datetime.fromisoformat(created)
        assert when.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=1) <= when <= datetime.now(timezone.utc)
    # The snapshot is the stored item: the next save diffs against it.
    assert acct._du_loaded == record
    assert_locks(raw, {"UNIQ#EMAIL#ada@lovelace.io": "ACCT#a1f9c3",
                       "UNIQ#HANDLE#ada": "ACCT#a1f9c3"})


def test_second_signup_with_the_same_email_in_other_case_is_refused(raw: Any,
                                                                     sent: list[str]) -> None:
    signup(Account, "ACCT#a1f9c3", "ada@lovelace.io", "ada")
    sent.clear()
    with pytest.raises(UniqueViolation) as caught:
        signup(Account, "ACCT#b2", "ADA@Lovelace.IO", "countess")
    assert_ada_email_taken(caught.value)
    # The refused transaction, then one consistent read of the lock's owner (issue 36: it
    # holds the value, so the refusal stands).
    assert sent == ["TransactWriteItems", "GetItem"]
    assert set(records(raw)) == {"ACCT#a1f9c3"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@lovelace.io": "ACCT#a1f9c3",
                       "UNIQ#HANDLE#ada": "ACCT#a1f9c3"})


def test_signup_taking_two_held_values_reports_both(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    with pytest.raises(UniqueViolation) as caught:
        signup(Account, "ACCT#2", "Ada@X.io", "ada")
    assert [(v.constraint, v.value, v.owner) for v in caught.value.violations] == [
        ("EMAIL", "ada@x.io", {"PK": "ACCT#1", "SK": "PROFILE"}),
        ("HANDLE", "ada", {"PK": "ACCT#1", "SK": "PROFILE"}),
    ]
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


# --- update --------------------------------------------------------------------------------------


def test_email_change_frees_the_old_value_in_one_request(raw: Any, sent: list[str],
                                                         model: Any) -> None:
    acct = signup(model, "ACCT#1", "ada@lovelace.io", "ada")
    sent.clear()
    acct.email = "ada@analytical.engine"
    acct.save()
    assert sent == ["TransactWriteItems"]
    assert_locks(raw, {"UNIQ#EMAIL#ada@analytical.engine": "ACCT#1",
                       "UNIQ#HANDLE#ada": "ACCT#1"}, model)
    # The old value is free: another account takes it.
    signup(model, "ACCT#2", "Ada@Lovelace.io")
    assert_locks(raw, {"UNIQ#EMAIL#ada@analytical.engine": "ACCT#1",
                       "UNIQ#HANDLE#ada": "ACCT#1",
                       "UNIQ#EMAIL#ada@lovelace.io": "ACCT#2"}, model)
    # The snapshot moved on: a second change of the same object is again one request.
    sent.clear()
    acct.email = "ada@babbage.org"
    acct.save()
    assert sent == ["TransactWriteItems"]
    assert_locks(raw, {"UNIQ#EMAIL#ada@babbage.org": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1",
                       "UNIQ#EMAIL#ada@lovelace.io": "ACCT#2"}, model)


def test_non_unique_update_is_one_put_item(raw: Any, sent: list[str],
                                           model: Any) -> None:
    acct = signup(model, "ACCT#1", "ada@x.io", "ada")
    sent.clear()
    acct.name = "Augusta"
    acct.save()
    assert sent == ["PutItem"]
    acct.email = "ADA@x.io"  # normalizes to the same value: still no lock change
    acct.save()
    assert sent == ["PutItem", "PutItem"]
    assert records(raw, model)["ACCT#1"]["email"] == {"S": "ADA@x.io"}
    assert records(raw, model)["ACCT#1"]["name"] == {"S": "Augusta"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"}, model)


def test_update_of_a_loaded_copy_read_with_get(raw: Any, sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    acct = Account.get("ACCT#1", "PROFILE", consistent_read=True)
    sent.clear()
    acct.username = "countess"
    acct.save()
    assert sent == ["TransactWriteItems"]
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#countess": "ACCT#1"})


def test_update_into_a_held_value_is_refused_and_changes_nothing(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io")
    other = signup(Account, "ACCT#2", "bob@x.io")
    other.email = "ADA@x.io"
    with pytest.raises(UniqueViolation) as caught:
        other.save()
    assert caught.value.owner == {"PK": "ACCT#1", "SK": "PROFILE"}
    assert records(raw)["ACCT#2"]["email"] == {"S": "bob@x.io"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#EMAIL#bob@x.io": "ACCT#2"})
    # The failed save left the snapshot alone: putting the value back is a plain write.
    other.email = "bob@x.io"
    other.name = "Bob"
    other.save()
    assert records(raw)["ACCT#2"]["name"] == {"S": "Bob"}


# --- delete --------------------------------------------------------------------------------------


def test_loaded_delete_is_one_request_and_leaves_no_lock(raw: Any, sent: list[str],
                                                         model: Any) -> None:
    acct = signup(model, "ACCT#1", "ada@x.io", "ada")
    signup(model, "ACCT#2", "bob@x.io", "bob")
    sent.clear()
    acct.delete()
    assert sent == ["TransactWriteItems"]
    assert set(records(raw, model)) == {"ACCT#2"}
    assert_locks(raw, {"UNIQ#EMAIL#bob@x.io": "ACCT#2", "UNIQ#HANDLE#bob": "ACCT#2"}, model)
    # Freed: the values can be taken again.
    signup(model, "ACCT#3", "ada@x.io", "ada")
    assert_locks(raw, {"UNIQ#EMAIL#bob@x.io": "ACCT#2", "UNIQ#HANDLE#bob": "ACCT#2",
                       "UNIQ#EMAIL#ada@x.io": "ACCT#3", "UNIQ#HANDLE#ada": "ACCT#3"}, model)


def test_delete_of_a_missing_record_does_nothing(raw: Any, sent: list[str]) -> None:
    Account(pk="ACCT#nobody").delete()
    assert sent == ["GetItem"]
    assert_locks(raw, {})


# --- never-loaded objects ------------------------------------------------------------------------


def test_never_loaded_save_of_an_existing_record_becomes_an_update(raw: Any,
                                                                   sent: list[str]) -> None:
    signup(Account, "ACCT#1", "old@x.io", "ada", "Ada")
    sent.clear()
    fresh = Account(pk="ACCT#1", email="new@x.io", username="ada")
    fresh.save()
    # Tried as a create; the failed condition returned the stored item; redone as an update.
    assert sent == ["TransactWriteItems", "TransactWriteItems"]
    assert records(raw)["ACCT#1"] == {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"},
                                      "email": {"S": "new@x.io"}, "username": {"S": "ada"}}
    assert_locks(raw, {"UNIQ#EMAIL#new@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})
    signup(Account, "ACCT#2", "old@x.io")  # the old value really is free


def test_never_loaded_save_of_an_existing_versioned_record(raw: Any, sent: list[str]) -> None:
    """As PynamoDB: a new versioned object (no version) must not overwrite a stored record; one
    holding the stored version may (adopted, then one guarded update moving its locks)."""
    create_tables(VAccount)
    signup(VAccount, "ACCT#1", "old@x.io", "ada")
    sent.clear()
    with pytest.raises(ConcurrentModificationError, match="already exists"):
        VAccount(pk="ACCT#1", email="new@x.io", username="ada").save()
    assert sent == ["TransactWriteItems"]
    assert records(raw, VAccount)["ACCT#1"]["version"] == {"N": "1"}
    sent.clear()
    fresh = VAccount(pk="ACCT#1", email="new@x.io", username="ada", version=1)
    fresh.save()
    assert sent == ["TransactWriteItems", "TransactWriteItems"]
    assert records(raw, VAccount)["ACCT#1"]["version"] == {"N": "2"}
    assert fresh.version == 2
    assert_locks(raw, {"UNIQ#EMAIL#new@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"}, VAccount)


def test_never_loaded_save_that_changes_no_lock_becomes_a_plain_put(raw: Any,
                                                                    sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    sent.clear()
    Account(pk="ACCT#1", email="ada@x.io", username="ada", name="Ada").save()
    assert sent == ["TransactWriteItems", "PutItem"]
    assert records(raw)["ACCT#1"]["name"] == {"S": "Ada"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_never_loaded_save_into_a_held_value_is_refused(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io")
    signup(Account, "ACCT#2", "bob@x.io")
    with pytest.raises(UniqueViolation):
        Account(pk="ACCT#2", email="ada@x.io").save()
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#EMAIL#bob@x.io": "ACCT#2"})


def test_never_loaded_delete_reads_first_then_deletes_record_and_locks(
        raw: Any, sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    signup(Account, "ACCT#2", "bob@x.io")
    sent.clear()
    Account(pk="ACCT#1").delete()
    assert sent == ["GetItem", "TransactWriteItems"]
    assert set(records(raw)) == {"ACCT#2"}
    assert_locks(raw, {"UNIQ#EMAIL#bob@x.io": "ACCT#2"})


def test_never_loaded_delete_ignores_in_memory_values(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    signup(Account, "ACCT#2", "bob@x.io", "bob")
    # The object claims bob's values; only the stored ones may be deleted.
    Account(pk="ACCT#1", email="bob@x.io", username="bob").delete()
    assert_locks(raw, {"UNIQ#EMAIL#bob@x.io": "ACCT#2", "UNIQ#HANDLE#bob": "ACCT#2"})


# --- two loaded copies racing --------------------------------------------------------------------


def test_stale_copy_changing_email_fails_and_leaves_no_orphan(raw: Any,
                                                              model: Any) -> None:
    copy_b = stale_copy(model)
    copy_b.email = "b@x.io"
    with pytest.raises(ConcurrentModificationError):
        copy_b.save()
    assert records(raw, model)["ACCT#1"]["email"] == {"S": "a@x.io"}
    assert_locks(raw, {"UNIQ#EMAIL#a@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"}, model)
    # Nobody else lost anything: b@x.io is free, ada@x.io is free.
    signup(model, "ACCT#2", "b@x.io")
    signup(model, "ACCT#3", "ada@x.io")
    assert_locks(raw, {"UNIQ#EMAIL#a@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1",
                       "UNIQ#EMAIL#b@x.io": "ACCT#2", "UNIQ#EMAIL#ada@x.io": "ACCT#3"}, model)
    # The remedy the error names: reload, reapply, save.
    copy_b.refresh(consistent_read=True)
    assert copy_b.email == "a@x.io"
    copy_b.email = "c@x.io"
    copy_b.save()
    assert_locks(raw, {"UNIQ#EMAIL#c@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1",
                       "UNIQ#EMAIL#b@x.io": "ACCT#2", "UNIQ#EMAIL#ada@x.io": "ACCT#3"}, model)


def test_stale_copy_cannot_free_a_value_its_record_gave_away(raw: Any,
                                                             model: Any) -> None:
    copy_b = stale_copy(model)
    signup(model, "ACCT#2", "ada@x.io")  # the freed value now belongs to someone else
    copy_b.email = None
    with pytest.raises(ConcurrentModificationError):
        copy_b.save()
    with pytest.raises(ConcurrentModificationError):
        copy_b.delete()
    assert_locks(raw, {"UNIQ#EMAIL#a@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1",
                       "UNIQ#EMAIL#ada@x.io": "ACCT#2"}, model)


def test_stale_copy_plain_update_fails(raw: Any, model: Any) -> None:
    copy_b = stale_copy(model)
    copy_b.name = "Ada"
    with pytest.raises(ConcurrentModificationError):
        copy_b.save()
    assert "name" not in records(raw, model)["ACCT#1"]
    assert_locks(raw, {"UNIQ#EMAIL#a@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"}, model)


def test_stale_copy_update_action_on_a_unique_field_fails(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    copy_a = Account.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_b = Account.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_a.update([Account.email.set("a@x.io")])
    with pytest.raises(ConcurrentModificationError):
        copy_b.update([Account.email.set("b@x.io")])
    assert_locks(raw, {"UNIQ#EMAIL#a@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_version_guard_catches_a_change_of_a_plain_field(raw: Any) -> None:
    create_tables(VAccount)
    signup(VAccount, "ACCT#1", "ada@x.io")
    copy_a = VAccount.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_b = VAccount.get("ACCT#1", "PROFILE", consistent_read=True)
    copy_a.name = "A"
    copy_a.save()
    copy_b.email = "b@x.io"
    with pytest.raises(ConcurrentModificationError):
        copy_b.save()
    assert records(raw, VAccount)["ACCT#1"]["version"] == {"N": "2"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1"}, VAccount)


def test_stale_copy_of_a_deleted_record(raw: Any) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io")
    stale = Account.get("ACCT#1", "PROFILE", consistent_read=True)
    acct.delete()
    stale.email = "new@x.io"
    with pytest.raises(ConcurrentModificationError, match="no longer exists"):
        stale.save()
    assert records(raw) == {}
    assert_locks(raw, {})


def hand_over_lock(raw: Any, key: str, owner_pk: str) -> None:
    """Drift, crafted by hand: the lock a record's value implies now names another record."""
    raw.update_item(TableName="model_accounts", Key={"PK": {"S": key}, "SK": {"S": "LOCK"}},
                    UpdateExpression="SET #o = :o", ExpressionAttributeNames={"#o": "owner"},
                    ExpressionAttributeValues={":o": {"M": {"PK": {"S": owner_pk},
                                                            "SK": {"S": "PROFILE"}}}})


def lock_owners(raw: Any) -> dict[str, str]:
    return {k: v["owner"]["M"]["PK"]["S"] for k, v in lock_items(raw).items()}


def test_save_leaves_a_foreign_old_lock_alone(raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "a@x.io", "ada")
    hand_over_lock(raw, "UNIQ#EMAIL#a@x.io", "ACCT#9")
    sent.clear()
    acct.email = "b@x.io"
    acct.save()
    # The first attempt found the old lock foreign; the resend leaves it out.
    assert sent == ["TransactWriteItems", "TransactWriteItems"]
    assert records(raw)["ACCT#1"]["email"] == {"S": "b@x.io"}
    assert lock_owners(raw) == {"UNIQ#EMAIL#a@x.io": "ACCT#9", "UNIQ#EMAIL#b@x.io": "ACCT#1",
                                "UNIQ#HANDLE#ada": "ACCT#1"}


def test_delete_leaves_a_foreign_lock_alone(raw: Any) -> None:
    acct = signup(Account, "ACCT#1", "a@x.io", "ada")
    hand_over_lock(raw, "UNIQ#EMAIL#a@x.io", "ACCT#9")
    acct.delete()
    assert records(raw) == {}
    assert lock_owners(raw) == {"UNIQ#EMAIL#a@x.io": "ACCT#9"}


def test_update_action_leaves_a_foreign_old_lock_alone(raw: Any) -> None:
    acct = signup(Account, "ACCT#1", "a@x.io", "ada")
    hand_over_lock(raw, "UNIQ#EMAIL#a@x.io", "ACCT#9")
    acct.update([Account.email.set("b@x.io")])
    assert records(raw)["ACCT#1"]["email"] == {"S": "b@x.io"}
    assert lock_owners(raw) == {"UNIQ#EMAIL#a@x.io": "ACCT#9", "UNIQ#EMAIL#b@x.io": "ACCT#1",
                                "UNIQ#HANDLE#ada": "ACCT#1"}


# --- values --------------------------------------------------------------------------------------


def test_long_values_are_hashed_and_still_unique(raw: Any) -> None:
    long_email = "x" * 3000 + "@Example.com"
    signup(Account, "ACCT#1", long_email)
    (key,) = lock_items(raw)
    assert key.startswith("UNIQ#EMAIL#\\h")
    assert len(key) == len("UNIQ#EMAIL#\\h") + 64
    assert lock_items(raw)[key]["value"] == {"S": long_email.casefold()}
    with pytest.raises(UniqueViolation) as caught:
        signup(Account, "ACCT#2", long_email.upper())
    assert caught.value.owner == {"PK": "ACCT#1", "SK": "PROFILE"}
    assert Account.get_by_unique("email", long_email.upper()).pk == "ACCT#1"
    # One character more at the end is another value.
    signup(Account, "ACCT#3", long_email + "x")
    assert_locks(raw, {key: "ACCT#1",
                       next(k for k in lock_items(raw) if k != key): "ACCT#3"})


def test_unicode_and_hash_values(raw: Any) -> None:
    signup(Account, "ACCT#1", "Ада@Пример.рф", "o#k\\x")
    signup(Account, "ACCT#2", "ada#1@x.io", "ada#")
    assert_locks(raw, {"UNIQ#EMAIL#ада@пример.рф": "ACCT#1", "UNIQ#HANDLE#o\\#k\\\\x": "ACCT#1",
                       "UNIQ#EMAIL#ada\\#1@x.io": "ACCT#2", "UNIQ#HANDLE#ada\\#": "ACCT#2"})
    assert Account.get_by_unique("email", "АДА@ПРИМЕР.РФ").pk == "ACCT#1"
    assert Account.get_by_unique("HANDLE", "o#k\\x").pk == "ACCT#1"
    assert Account.get_by_unique(username="ada#").pk == "ACCT#2"
    with pytest.raises(UniqueViolation):
        signup(Account, "ACCT#3", "x@x.io", "o#k\\x")
    signup(Account, "ACCT#4", "y@x.io", "o#k")  # a prefix is a different value
    assert lock_items(raw)["UNIQ#HANDLE#o\\#k"]["owner"]["M"]["PK"] == {"S": "ACCT#4"}


def test_none_takes_no_lock_and_setting_it_later_takes_one(raw: Any, sent: list[str]) -> None:
    first = signup(Account, "ACCT#1", None, "ada")
    signup(Account, "ACCT#2", None, "bob")  # NULLs are distinct
    assert_locks(raw, {"UNIQ#HANDLE#ada": "ACCT#1", "UNIQ#HANDLE#bob": "ACCT#2"})
    sent.clear()
    first.email = "ada@x.io"
    first.save()
    assert sent == ["TransactWriteItems"]
    assert_locks(raw, {"UNIQ#HANDLE#ada": "ACCT#1", "UNIQ#HANDLE#bob": "ACCT#2",
                       "UNIQ#EMAIL#ada@x.io": "ACCT#1"})
    first.email = None
    first.save()
    assert "email" not in records(raw)["ACCT#1"]
    assert_locks(raw, {"UNIQ#HANDLE#ada": "ACCT#1", "UNIQ#HANDLE#bob": "ACCT#2"})


def test_record_without_any_unique_value_is_a_plain_guarded_create(raw: Any,
                                                                  sent: list[str]) -> None:
    signup(Account, "ACCT#1", None, None, "Ada")
    assert sent == ["PutItem"]
    assert_locks(raw, {})
    # Saved again from a never-loaded object: tried as a create, redone as an update.
    sent.clear()
    Account(pk="ACCT#1", name="Other").save()
    assert sent == ["PutItem", "PutItem"]
    assert records(raw)["ACCT#1"]["name"] == {"S": "Other"}
    assert_locks(raw, {})


# --- get_by_unique -------------------------------------------------------------------------------


def test_get_by_unique_normalizes_and_reads_through_the_lock(raw: Any, sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@lovelace.io", "ada", "Ada")
    sent.clear()
    found = Account.get_by_unique("email", "ADA@Lovelace.IO")
    assert sent == ["GetItem", "GetItem"]
    assert (found.pk, found.email, found.name) == ("ACCT#1", "ada@lovelace.io", "Ada")
    assert Account.get_by_unique("EMAIL", "ada@lovelace.io").pk == "ACCT#1"
    assert Account.get_by_unique(email="Ada@lovelace.io").pk == "ACCT#1"
    # The result is a loaded object: changing it is one transaction.
    sent.clear()
    found.email = "new@x.io"
    found.save()
    assert sent == ["TransactWriteItems"]
    assert_locks(raw, {"UNIQ#EMAIL#new@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_get_by_unique_of_an_unknown_value(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io")
    with pytest.raises(Account.DoesNotExist, match=r"no Account holds email 'bob@x\.io'"):
        Account.get_by_unique("email", "bob@x.io")
    with pytest.raises(Account.DoesNotExist):
        Account.get_by_unique("email", None)
    with pytest.raises(ConfigurationError, match="no unique field or constraint named 'name'"):
        Account.get_by_unique("name", "Ada")


def test_get_by_unique_of_an_orphan_lock(raw: Any) -> None:
    raw.put_item(TableName="model_accounts", Item={
        "PK": {"S": "UNIQ#EMAIL#ghost@x.io"}, "SK": {"S": "LOCK"},
        "owner": {"M": {"PK": {"S": "ACCT#ghost"}, "SK": {"S": "PROFILE"}}},
        "model": {"S": "Account"}, "constraint": {"S": "EMAIL"},
        "value": {"S": "ghost@x.io"}, "created": {"S": "2024-01-01T00:00:00+00:00"},
    })
    with pytest.raises(Account.DoesNotExist, match="orphan"):
        Account.get_by_unique("email", "Ghost@x.io")
    # An owner that exists but no longer holds the value is an orphan too.
    raw.put_item(TableName="model_accounts", Item={
        "PK": {"S": "ACCT#ghost"}, "SK": {"S": "PROFILE"}, "email": {"S": "other@x.io"}})
    with pytest.raises(Account.DoesNotExist, match="orphan"):
        Account.get_by_unique("email", "ghost@x.io")


# --- reads never return locks --------------------------------------------------------------------


def test_scan_query_and_count_never_return_lock_items(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    signup(Account, "ACCT#2", "bob@x.io", "bob")
    assert len(scan_all(raw, "model_accounts")) == 6
    assert sorted(a.pk for a in Account.scan()) == ["ACCT#1", "ACCT#2"]
    assert [a.pk for a in Account.scan(Account.name.does_not_exist())] in (
        ["ACCT#1", "ACCT#2"], ["ACCT#2", "ACCT#1"])
    assert sorted(a.pk for a in Account.scan(attributes_to_get=["PK", "SK"])) == [
        "ACCT#1", "ACCT#2"]
    assert Account.count() == 2
    assert [a.pk for a in Account.query("ACCT#1")] == ["ACCT#1"]
    assert Account.count("ACCT#2") == 1


def test_projected_reads_are_not_taken_as_loaded(raw: Any, sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@x.io", "ada")
    (partial,) = list(Account.scan(attributes_to_get=["PK", "SK", "name"]))
    assert partial._du_loaded is None
    partial.delete()  # must read the full record first, and delete its locks
    assert_locks(raw, {})


def test_a_hash_key_in_the_reserved_namespace_is_refused(raw: Any, sent: list[str]) -> None:
    with pytest.raises(InvalidValueError, match="reserved"):
        Account(pk="UNIQ#EMAIL#x", email="x@x.io").save()
    with pytest.raises(InvalidValueError, match="reserved"):
        Account.get("UNIQ#EMAIL#x", "LOCK")
    with pytest.raises(InvalidValueError, match="reserved"):
        list(Account.query("UNIQ#EMAIL#x"))
    with pytest.raises(InvalidValueError, match="reserved"):
        Account.count("UNIQ#EMAIL#x")
    assert sent == []
    assert scan_all(raw, "model_accounts") == []


# --- configuration -------------------------------------------------------------------------------


# --- update(actions) -----------------------------------------------------------------------------


def test_update_action_setting_a_unique_field_moves_the_lock_in_one_transaction(
        raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io", "ada")
    sent.clear()
    acct.update([Account.email.set("New@X.io")])
    assert sent == ["TransactWriteItems"]
    assert acct.email == "New@X.io"
    assert records(raw)["ACCT#1"]["email"] == {"S": "New@X.io"}
    assert_locks(raw, {"UNIQ#EMAIL#new@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})
    # The snapshot followed: a later plain change is one PutItem that succeeds.
    sent.clear()
    acct.name = "Ada"
    acct.save()
    assert sent == ["PutItem"]


def test_update_action_on_a_plain_field_is_one_update_item(raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io", "ada")
    sent.clear()
    acct.update([Account.name.set("Ada")])
    assert sent == ["UpdateItem"]
    assert acct.name == "Ada"
    assert records(raw)["ACCT#1"]["name"] == {"S": "Ada"}
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_update_action_into_a_held_value_is_refused(raw: Any) -> None:
    signup(Account, "ACCT#1", "ada@x.io")
    acct = signup(Account, "ACCT#2", "bob@x.io")
    with pytest.raises(UniqueViolation):
        acct.update([Account.email.set("ada@x.io")])
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#EMAIL#bob@x.io": "ACCT#2"})


def test_update_action_on_a_never_loaded_object_reads_first(raw: Any, sent: list[str]) -> None:
    signup(Account, "ACCT#1", "ada@x.io")
    sent.clear()
    Account(pk="ACCT#1").update([Account.email.remove()])
    assert sent == ["GetItem", "TransactWriteItems"]
    assert_locks(raw, {})


def test_update_action_with_unknowable_result_on_a_unique_field_is_refused(
        raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io", "ada")
    sent.clear()
    with pytest.raises(UnsupportedOperationError, match="cannot be known before sending"):
        acct.update([Account.email.set(Account.username)])
    assert sent == []
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_update_action_moving_a_lock_beside_an_unknowable_plain_action(
        raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io", "ada")
    acct.logins = 1
    acct.save()
    sent.clear()
    acct.update([Account.email.set("new@x.io"), Account.logins.add(1)])
    assert sent[0] == "TransactWriteItems"
    assert records(raw)["ACCT#1"]["logins"] == {"N": "2"}
    assert_locks(raw, {"UNIQ#EMAIL#new@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_update_action_with_unknowable_plain_action_alone_is_one_update_item(
        raw: Any, sent: list[str]) -> None:
    acct = signup(Account, "ACCT#1", "ada@x.io", "ada")
    acct.update([Account.logins.set(5)])
    sent.clear()
    acct.update([Account.logins.add(1)])
    assert sent == ["UpdateItem"]
    assert acct.logins == 6
    assert_locks(raw, {"UNIQ#EMAIL#ada@x.io": "ACCT#1", "UNIQ#HANDLE#ada": "ACCT#1"})


def test_a_stale_copy_applying_the_same_update_is_refused_and_kept_whole(raw: Any) -> None:
    """Two loaded copies apply the same update; the second is stale (its guard fails although
    the record already holds its result): it is refused, never reported as done, and its object
    keeps what it had loaded (it is not emptied)."""
    create_tables(VAccount)
    signup(VAccount, "V#1", "ada@x.io", "ada", name="a")
    first = VAccount.get("V#1", "PROFILE", consistent_read=True)
    second = VAccount.get("V#1", "PROFILE", consistent_read=True)
    first.update([VAccount.name.set("b")])
    with pytest.raises(ConcurrentModificationError):
        second.update([VAccount.name.set("b")])
    assert (second.pk, second.email, second.username, second.name, second.version) == (
        "V#1", "ada@x.io", "ada", "a", 1)
    assert records(raw, VAccount)["V#1"]["name"] == {"S": "b"}
    assert records(raw, VAccount)["V#1"]["version"] == {"N": "2"}


def test_locks_carry_the_ttl_and_follow_its_change(raw: Any, sent: list[str]) -> None:
    create_tables(Session)
    session = Session(pk="SESS#1", token="t1", expires=datetime(2030, 1, 1, tzinfo=timezone.utc))
    session.save()
    lock = lock_items(raw, Session)["UNIQ#TOKEN#t1"]
    assert lock["expires"] == {"N": "1893456000"}
    sent.clear()
    session.expires = datetime(2031, 1, 1, tzinfo=timezone.utc)
    session.save()
    assert sent == ["TransactWriteItems"]
    assert lock_items(raw, Session)["UNIQ#TOKEN#t1"]["expires"] == {"N": "1924992000"}
    assert records(raw, Session)["SESS#1"]["expires"] == {"N": "1924992000"}
    assert_locks(raw, {"UNIQ#TOKEN#t1": "SESS#1"}, Session)


def test_batch_write_is_refused(raw: Any) -> None:
    with pytest.raises(UnsupportedOperationError, match="batch_write"):
        Account.batch_write()


def test_pynamodb_transact_write_is_refused(raw: Any) -> None:
    from pynamodb.connection import Connection
    from pynamodb.transactions import TransactWrite

    acct = Account(pk="ACCT#1", email="ada@x.io")
    connection = Connection(host=getattr(Account.Meta, "host", None), region="us-east-1")
    with pytest.raises(UnsupportedOperationError, match="TransactWrite"), \
            TransactWrite(connection=connection) as transaction_:
        transaction_.save(acct)
    assert scan_all(raw, "model_accounts") == []
