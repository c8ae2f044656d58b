"""atomic(): many objects, several models and tables, one TransactWriteItems — or nothing at all.

Against the local server: what each block sends (requests counted on the botocore clients), what
the tables hold afterwards (exactly the locks the records need), swaps and renames as owner
transfers, the size guard, condition checks, thread and task isolation, and dry runs that match
the real request.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean
from support.recorders import Wire
from support.tables import raw_items

from dynaunique import (
    Atomic,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    InvalidValueError,
    Model,
    TransactionTooLargeError,
    UniqueViolation,
    UnsupportedOperationError,
    atomic,
    normalizers,
)
from dynaunique._lock.locks import RESERVED_PREFIX, untyped
from dynaunique._transport import clients
from dynaunique._write.atomic import current_unit
from dynaunique.attributes import UnicodeAttribute, VersionAttribute
from dynaunique.testing import create_tables, use_endpoint

# --- models (tables prefixed atom_, unique to this file) -----------------------------------------

# Two unique fields; shares its table with Membership.
User = declare("User", "atom_users", pk=pk_attr(), sk=sk_attr("USER"),
               email=UnicodeAttribute(unique=True, normalize=normalizers.casefold),
               handle=UnicodeAttribute(unique=True, null=True), bio=UnicodeAttribute(null=True))

# No constraints at all: a plain record in the same unit of work.
Membership = declare("Membership", "atom_users", pk=pk_attr(), sk=sk_attr(),
                     role=UnicodeAttribute(default="owner"))

# A second table, with a version attribute.
Workspace = declare("Workspace", "atom_workspaces", pk=pk_attr(),
                    name=UnicodeAttribute(unique=True), plan=UnicodeAttribute(default="free"),
                    version=VersionAttribute())


MODELS: tuple[type[Model], ...] = (User, Membership, Workspace)
PREFIXES: dict[str, type[Model]] = {"USER#": User, "MEMBER#": Membership, "WS#": Workspace}


# --- helpers -------------------------------------------------------------------------------------


@pytest.fixture
def wire(dynaunique_db: str) -> Iterator[Wire]:
    """Every model on the server with its tables, and a recorder of what is sent from now on."""
    # Retarget only when needed: a new PynamoDB connection means a new botocore client, which
    # costs far more than a test.
    stale = [m for m in MODELS if m.Meta.host != dynaunique_db]
    if stale:
        use_endpoint(dynaunique_db, *stale)
    create_tables(User, Workspace)
    recorder = Wire()
    for model in MODELS:
        recorder.hook(clients.client_for(model))
        recorder.hook(model._get_connection().connection.client)
    yield recorder
    recorder.unhook()


def lock_owners(model: type[Model]) -> dict[str, dict[str, Any]]:
    """Lock key → the owner's primary key (plain values)."""
    return {i["PK"]["S"]: untyped(i["owner"]) for i in raw_items(model)
            if i["PK"]["S"].startswith(RESERVED_PREFIX)}


def record_keys(model: type[Model]) -> list[str]:
    return sorted(i["PK"]["S"] for i in raw_items(model)
                  if not i["PK"]["S"].startswith(RESERVED_PREFIX))


def assert_consistent() -> None:
    """Each table holds exactly the locks its records require, each owned by its record."""
    def model_of(item: dict[str, Any]) -> type[Model]:
        return next(m for p, m in PREFIXES.items() if item["PK"]["S"].startswith(p))

    assert_clean(MODELS, User.Meta.host, model_of=model_of)


def item_keys(request: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(operation, hash key) of every item of a TransactWriteItems request."""
    out = []
    for entry in request["TransactItems"]:
        ((kind, params),) = entry.items()
        out.append((kind, (params.get("Item") or params["Key"])["PK"]["S"]))
    return out


def comparable(request: Mapping[str, Any]) -> dict[str, Any]:
    """A request without what differs on every call: the token and the locks' created times."""
    out = copy.deepcopy(dict(request))
    out.pop("ClientRequestToken", None)
    out.pop("Operation", None)
    for entry in out.get("TransactItems", []):
        for params in entry.values():
            params.get("Item", {}).pop("created", None)
    return out


def user(n: int, email: str | None = None, handle: str | None = None) -> User:
    return User(pk=f"USER#{n}", email=email or f"u{n}@x.io", handle=handle)


def saved(*objects: Model) -> None:
    for obj in objects:
        obj.save()


def swapping(wire: Wire) -> tuple[User, User]:
    """USER#1 (ada@x.io) and USER#2 (bob@x.io) saved, the wire cleared, then their emails
    swapped in memory: the next saves exchange the two values."""
    ada, bob = user(1, email="ada@x.io"), user(2, email="bob@x.io")
    saved(ada, bob)
    wire.clear()
    ada.email, bob.email = "bob@x.io", "ada@x.io"
    return ada, bob


def signup(n: int) -> tuple[User, Workspace, Membership]:
    return (user(n, handle=f"h{n}"),
            Workspace(pk=f"WS#{n}", name=f"Space {n}"),
            Membership(pk=f"MEMBER#{n}", sk=f"WS#{n}"))


# --- one unit, one transaction -------------------------------------------------------------------


def test_signup_of_three_models_on_two_tables_is_one_transaction(wire: Wire) -> None:
    account, workspace, membership = signup(1)
    with atomic() as tx:
        account.save()
        workspace.save()
        membership.save()
        assert wire.sent == []   # collected, not sent
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(item_keys(wire.last("TransactWriteItems"))) == [
        ("Put", "MEMBER#1"), ("Put", "UNIQ#EMAIL#u1@x.io"), ("Put", "UNIQ#HANDLE#h1"),
        ("Put", "UNIQ#NAME#Space 1"), ("Put", "USER#1"), ("Put", "WS#1"),
    ]
    assert comparable(wire.last("TransactWriteItems")) == comparable(tx.request or {})
    assert record_keys(User) == ["MEMBER#1", "USER#1"]
    assert record_keys(Workspace) == ["WS#1"]
    assert_consistent()


def test_saves_and_deletes_of_several_models_go_out_together(wire: Wire) -> None:
    old_account, old_workspace, old_membership = signup(1)
    saved(old_account, old_workspace, old_membership)
    account, workspace, membership = signup(2)
    wire.clear()
    with atomic():
        old_membership.delete()
        old_workspace.delete()
        old_account.email = "moved@x.io"
        old_account.save()
        account.save()
        workspace.save()
        membership.save()
    assert wire.sent == ["TransactWriteItems"]
    assert record_keys(User) == ["MEMBER#2", "USER#1", "USER#2"]
    assert record_keys(Workspace) == ["WS#2"]
    assert set(lock_owners(User)) == {"UNIQ#EMAIL#moved@x.io", "UNIQ#HANDLE#h1",
                                      "UNIQ#EMAIL#u2@x.io", "UNIQ#HANDLE#h2"}
    assert_consistent()


def test_exception_inside_the_block_sends_nothing(wire: Wire) -> None:
    existing = user(9)
    existing.save()
    wire.clear()
    account, workspace, membership = signup(1)
    with pytest.raises(RuntimeError, match="boom"), atomic():
        account.save()
        workspace.save()
        membership.save()
        existing.delete()
        raise RuntimeError("boom")
    assert wire.sent == []
    assert record_keys(User) == ["USER#9"]
    assert record_keys(Workspace) == []
    assert account._du_loaded is None   # nothing was committed: nothing to remember
    assert current_unit() is None
    assert_consistent()


def test_unique_violation_names_the_model_and_fields_and_nothing_lands(wire: Wire) -> None:
    Workspace(pk="WS#9", name="Acme").save()
    wire.clear()
    account = user(1)
    with pytest.raises(UniqueViolation) as caught, atomic():
        account.save()
        Workspace(pk="WS#1", name="Acme").save()
    error = caught.value
    assert (error.model, error.fields, error.constraint) == ("Workspace", ("name",), "NAME")
    assert error.owner == {"PK": "WS#9"}
    assert wire.sent == ["TransactWriteItems", "GetItem"]   # the refusal, the owner's read
    assert record_keys(User) == []
    assert record_keys(Workspace) == ["WS#9"]
    assert_consistent()


def test_two_new_records_taking_one_value_fail_before_sending(wire: Wire) -> None:
    with pytest.raises(UniqueViolation) as caught, atomic():
        user(1, email="same@x.io").save()
        user(2, email="SAME@x.io").save()
    assert caught.value.fields == ("email",)
    assert wire.sent == []
    assert raw_items(User) == []


def test_stale_copy_raises_concurrent_modification_and_nothing_lands(wire: Wire) -> None:
    user(1).save()
    mine = User.get("USER#1", "USER")
    theirs = User.get("USER#1", "USER")
    theirs.email = "theirs@x.io"
    theirs.save()
    wire.clear()
    mine.email = "mine@x.io"
    with pytest.raises(ConcurrentModificationError), atomic():
        mine.save()
        Workspace(pk="WS#1", name="Acme").save()
    assert wire.sent == ["TransactWriteItems"]
    assert record_keys(Workspace) == []
    assert lock_owners(User) == {"UNIQ#EMAIL#theirs@x.io": {"PK": "USER#1", "SK": "USER"}}
    assert_consistent()


def test_snapshots_are_refreshed_only_after_the_commit_succeeded(wire: Wire) -> None:
    first, second, holder = user(1, email="a@x.io"), user(2, email="b@x.io"), user(3, "c@x.io")
    saved(first, second, holder)
    first.email = "free@x.io"        # would succeed alone
    second.email = "c@x.io"          # taken by holder
    with pytest.raises(UniqueViolation), atomic():
        first.save()
        second.save()
    assert untyped(first._du_loaded["email"]) == "a@x.io"    # type: ignore[index]
    assert untyped(second._du_loaded["email"]) == "b@x.io"   # type: ignore[index]
    # Fix the conflict and retry with the same objects: they still diff against what is stored.
    second.email = "d@x.io"
    with atomic():
        first.save()
        second.save()
    assert lock_owners(User) == {
        "UNIQ#EMAIL#free@x.io": {"PK": "USER#1", "SK": "USER"},
        "UNIQ#EMAIL#d@x.io": {"PK": "USER#2", "SK": "USER"},
        "UNIQ#EMAIL#c@x.io": {"PK": "USER#3", "SK": "USER"},
    }
    assert untyped(first._du_loaded["email"]) == "free@x.io"  # type: ignore[index]
    assert_consistent()


def test_version_is_bumped_in_memory_only_after_the_commit(wire: Wire) -> None:
    workspace = Workspace(pk="WS#1", name="Acme")
    workspace.save()
    assert workspace.version == 1
    Workspace(pk="WS#2", name="Globex").save()
    workspace.name = "Globex"
    with pytest.raises(UniqueViolation), atomic():
        workspace.save()
    assert workspace.version == 1
    workspace.name = "Initech"
    with atomic():
        workspace.save()
    assert workspace.version == 2
    assert Workspace.get("WS#1").version == 2
    assert_consistent()


def test_nested_atomic_joins_the_outer_one(wire: Wire) -> None:
    account, workspace, membership = signup(1)
    with atomic() as outer:
        account.save()
        with atomic() as inner:
            assert inner is outer
            workspace.save()
            with atomic():
                membership.save()
        assert wire.sent == []   # leaving an inner block sends nothing
    assert wire.sent == ["TransactWriteItems"]
    assert len(wire.last("TransactWriteItems")["TransactItems"]) == 6
    assert_consistent()


def test_exception_leaving_a_nested_block_sends_nothing(wire: Wire) -> None:
    with pytest.raises(RuntimeError), atomic():
        user(1).save()
        with atomic():
            Workspace(pk="WS#1", name="Acme").save()
            raise RuntimeError("boom")
    assert wire.sent == []
    assert raw_items(User) == raw_items(Workspace) == []


def test_a_failed_nested_block_is_dropped_and_the_outer_unit_goes_on(wire: Wire) -> None:
    with atomic() as tx:
        user(1).save()
        with contextlib.suppress(RuntimeError), atomic():
            Workspace(pk="WS#1", name="Acme").save()
            user(2).save()
            raise RuntimeError("the inner block failed")
        user(3).save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(k for _, k in item_keys(tx.request or {}) if not k.startswith("UNIQ#")) == [
        "USER#1", "USER#3"]
    assert record_keys(User) == ["USER#1", "USER#3"]
    assert record_keys(Workspace) == []
    assert_consistent()


def test_a_failed_nested_block_drops_its_condition_checks(wire: Wire) -> None:
    with atomic() as tx:
        user(1).save()
        with contextlib.suppress(RuntimeError), atomic() as inner:
            inner.condition_check(Workspace, "WS#404", condition=Workspace.pk.exists())
            raise RuntimeError("the inner block failed")
    assert [kind for kind, _ in item_keys(tx.request or {})] == ["Put", "Put"]
    assert record_keys(User) == ["USER#1"]
    assert_consistent()


def test_a_nested_dry_run_is_a_unit_of_its_own_and_sends_nothing(wire: Wire) -> None:
    with atomic() as outer:
        user(1).save()
        with atomic(dry_run=True) as dry:
            assert dry is not outer
            user(2).save()
        assert wire.sent == []
    assert sorted(item_keys(dry.request or {})) == [("Put", "UNIQ#EMAIL#u2@x.io"),
                                                    ("Put", "USER#2")]
    assert sorted(item_keys(outer.request or {})) == [("Put", "UNIQ#EMAIL#u1@x.io"),
                                                      ("Put", "USER#1")]
    assert wire.sent == ["TransactWriteItems"]
    assert record_keys(User) == ["USER#1"]
    assert_consistent()


def test_update_actions_inside_atomic_are_refused(wire: Wire) -> None:
    account = user(1)
    account.save()
    wire.clear()
    with pytest.raises(UnsupportedOperationError, match=r"save\(\)"), atomic():
        account.update([User.bio.set("x")])
    assert wire.sent == []
    assert_consistent()


def test_two_objects_for_one_record_are_refused_before_sending(wire: Wire) -> None:
    with pytest.raises(InvalidValueError), atomic():
        user(1, email="a@x.io").save()
        user(1, email="b@x.io").save()
    assert wire.sent == []
    assert raw_items(User) == []


def test_a_condition_given_to_save_inside_the_block_guards_the_unit(wire: Wire) -> None:
    account = user(1)
    account.save()
    wire.clear()
    account.email = "new@x.io"
    with pytest.raises(ConcurrentModificationError), atomic():
        account.save(condition=User.bio.exists())
        Workspace(pk="WS#1", name="Acme").save()
    assert wire.sent == ["TransactWriteItems"]
    assert record_keys(Workspace) == []
    assert lock_owners(User) == {"UNIQ#EMAIL#u1@x.io": {"PK": "USER#1", "SK": "USER"}}
    assert_consistent()


def test_delete_of_a_never_loaded_object_reads_it_at_commit(wire: Wire) -> None:
    user(1, handle="ada").save()
    wire.clear()
    with atomic():
        User(pk="USER#1").delete()
        assert wire.sent == []
    assert wire.sent == ["GetItem", "TransactWriteItems"]
    assert raw_items(User) == []


def test_never_loaded_object_whose_record_exists_is_redone_as_an_update(wire: Wire) -> None:
    user(1, email="old@x.io").save()
    wire.clear()
    with atomic():
        user(1, email="new@x.io").save()
        Workspace(pk="WS#1", name="Acme").save()
    assert wire.sent == ["TransactWriteItems", "TransactWriteItems"]
    assert lock_owners(User) == {"UNIQ#EMAIL#new@x.io": {"PK": "USER#1", "SK": "USER"}}
    assert record_keys(Workspace) == ["WS#1"]
    assert_consistent()


# --- isolation -----------------------------------------------------------------------------------


def test_each_thread_has_its_own_unit(wire: Wire) -> None:
    barrier = threading.Barrier(2, timeout=10)
    requests: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            with atomic() as tx:
                user(n).save()
                barrier.wait()   # both threads are inside their blocks now
                Workspace(pk=f"WS#{n}", name=f"Space {n}").save()
                barrier.wait()
            requests[n] = tx.request
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert wire.sent == ["TransactWriteItems", "TransactWriteItems"]
    for n in (1, 2):
        assert sorted(item_keys(requests[n])) == [
            ("Put", f"UNIQ#EMAIL#u{n}@x.io"), ("Put", f"UNIQ#NAME#Space {n}"),
            ("Put", f"USER#{n}"), ("Put", f"WS#{n}")]
    assert current_unit() is None
    assert_consistent()


def test_a_thread_outside_any_block_is_not_caught_by_another_threads_unit(wire: Wire) -> None:
    inside = threading.Event()
    done = threading.Event()

    def outsider() -> None:
        inside.wait(10)
        user(2).save()      # no atomic() in this thread: sent at once
        done.set()

    thread = threading.Thread(target=outsider)
    thread.start()
    with atomic() as tx:
        user(1).save()
        inside.set()
        assert done.wait(10)
        assert record_keys(User) == ["USER#2"]
    thread.join()
    assert [k for _, k in item_keys(tx.request or {}) if k.startswith("USER#")] == ["USER#1"]
    assert_consistent()


def test_each_asyncio_task_has_its_own_unit(wire: Wire) -> None:
    async def work(n: int) -> dict[str, Any] | None:
        with atomic() as tx:
            user(n).save()
            await asyncio.sleep(0.01)   # let the other task run inside its own block
            Workspace(pk=f"WS#{n}", name=f"Space {n}").save()
            await asyncio.sleep(0.01)
        return tx.request

    async def main() -> list[dict[str, Any] | None]:
        return list(await asyncio.gather(work(1), work(2)))

    first, second = asyncio.run(main())
    assert wire.sent == ["TransactWriteItems", "TransactWriteItems"]
    for n, request in ((1, first), (2, second)):
        assert sorted(item_keys(request or {})) == [
            ("Put", f"UNIQ#EMAIL#u{n}@x.io"), ("Put", f"UNIQ#NAME#Space {n}"),
            ("Put", f"USER#{n}"), ("Put", f"WS#{n}")]
    assert_consistent()


def test_a_task_started_in_a_block_saves_directly_once_the_block_ended(wire: Wire) -> None:
    outcome: list[object] = []

    async def main() -> None:
        go = asyncio.Event()

        async def late() -> None:
            await go.wait()
            outcome.append(user(2).save())

        with atomic():
            user(1).save()
            task = asyncio.create_task(late())   # copies the context: the unit is in it
        go.set()
        await task

    asyncio.run(main())
    assert wire.sent == ["TransactWriteItems", "TransactWriteItems"]
    assert outcome != [{}]   # a real response, not "collected" by a finished unit
    assert record_keys(User) == ["USER#1", "USER#2"]
    assert_consistent()


# --- values moving between records ---------------------------------------------------------------


def test_swap_of_two_emails_is_one_transaction_of_owner_transfers(wire: Wire) -> None:
    ada, bob = swapping(wire)
    with atomic():
        ada.save()
        bob.save()
    assert wire.sent == ["TransactWriteItems"]
    request = wire.last("TransactWriteItems")
    keys = item_keys(request)
    assert sorted(keys) == [("Put", "UNIQ#EMAIL#ada@x.io"), ("Put", "UNIQ#EMAIL#bob@x.io"),
                            ("Put", "USER#1"), ("Put", "USER#2")]
    assert len({k for _, k in keys}) == len(keys)   # exactly one operation per item
    assert lock_owners(User) == {
        "UNIQ#EMAIL#bob@x.io": {"PK": "USER#1", "SK": "USER"},
        "UNIQ#EMAIL#ada@x.io": {"PK": "USER#2", "SK": "USER"},
    }
    # The transferred locks are really owned now: moving on frees them.
    ada.email = "ada2@x.io"
    ada.save()
    assert "UNIQ#EMAIL#bob@x.io" not in lock_owners(User)
    assert_consistent()


def test_transfer_is_guarded_by_the_old_owner(wire: Wire) -> None:
    ada, bob = swapping(wire)
    with atomic(dry_run=True) as tx:
        ada.save()
        bob.save()
    assert tx.request is not None
    (ada_lock,) = [e["Put"] for e in tx.request["TransactItems"]
                   if e.get("Put", {}).get("Item", {}).get("PK") == {"S": "UNIQ#EMAIL#ada@x.io"}]
    # New owner Bob; allowed while missing or held by Bob or by Ada (the old owner).
    assert ada_lock["Item"]["owner"] == {"M": {"PK": {"S": "USER#2"}, "SK": {"S": "USER"}}}
    allowed = {v["S"] for k, v in ada_lock["ExpressionAttributeValues"].items()
               if v.get("S", "").startswith("USER#")}
    assert allowed == {"USER#1", "USER#2"}
    assert "attribute_not_exists" in ada_lock["ConditionExpression"]
    assert wire.sent == []
    assert_consistent()


def test_rename_and_take_the_old_name_in_one_unit(wire: Wire) -> None:
    ada, bob = user(1, handle="ada"), user(2, handle="bob")
    saved(ada, bob)
    wire.clear()
    ada.handle = "countess"
    bob.handle = "ada"
    with atomic():
        bob.save()     # order inside the block does not matter
        ada.save()
    assert wire.sent == ["TransactWriteItems"]
    keys = item_keys(wire.last("TransactWriteItems"))
    assert sorted(keys) == [("Delete", "UNIQ#HANDLE#bob"), ("Put", "UNIQ#HANDLE#ada"),
                            ("Put", "UNIQ#HANDLE#countess"), ("Put", "USER#1"),
                            ("Put", "USER#2")]
    assert len({k for _, k in keys}) == len(keys)
    owners = lock_owners(User)
    assert owners["UNIQ#HANDLE#ada"] == {"PK": "USER#2", "SK": "USER"}
    assert owners["UNIQ#HANDLE#countess"] == {"PK": "USER#1", "SK": "USER"}
    assert "UNIQ#HANDLE#bob" not in owners
    assert_consistent()


def test_rotation_of_three_handles_is_three_transfers(wire: Wire) -> None:
    people = [user(1, handle="a"), user(2, handle="b"), user(3, handle="c")]
    saved(*people)
    wire.clear()
    people[0].handle, people[1].handle, people[2].handle = "b", "c", "a"
    with atomic():
        saved(*people)
    assert wire.sent == ["TransactWriteItems"]
    keys = item_keys(wire.last("TransactWriteItems"))
    assert sorted(k for kind, k in keys if k.startswith("UNIQ#")) == [
        "UNIQ#HANDLE#a", "UNIQ#HANDLE#b", "UNIQ#HANDLE#c"]
    assert all(kind == "Put" for kind, _ in keys)
    owners = lock_owners(User)
    assert [owners[f"UNIQ#HANDLE#{h}"]["PK"] for h in "bca"] == ["USER#1", "USER#2", "USER#3"]
    assert_consistent()


def test_delete_and_take_the_value_in_one_unit(wire: Wire) -> None:
    ada = user(1, email="ada@x.io")
    ada.save()
    wire.clear()
    with atomic():
        ada.delete()
        user(2, email="ADA@x.io").save()
    assert wire.sent == ["TransactWriteItems"]
    keys = item_keys(wire.last("TransactWriteItems"))
    assert len({k for _, k in keys}) == len(keys)
    assert lock_owners(User) == {"UNIQ#EMAIL#ada@x.io": {"PK": "USER#2", "SK": "USER"}}
    assert_consistent()


def test_same_object_saved_twice_is_planned_once(wire: Wire) -> None:
    account = user(1, email="first@x.io")
    with atomic() as tx:
        account.save()
        account.email = "second@x.io"
        account.save()
    assert sorted(item_keys(tx.request or {})) == [("Put", "UNIQ#EMAIL#second@x.io"),
                                                   ("Put", "USER#1")]
    assert wire.sent == ["TransactWriteItems"]
    assert lock_owners(User) == {"UNIQ#EMAIL#second@x.io": {"PK": "USER#1", "SK": "USER"}}
    assert_consistent()


def test_save_then_delete_of_one_object_is_a_delete(wire: Wire) -> None:
    account = user(1, email="ada@x.io", handle="ada")
    account.save()
    wire.clear()
    with atomic() as tx:
        account.email = "changed@x.io"
        account.save()
        account.delete()
    assert sorted(item_keys(tx.request or {})) == [
        ("Delete", "UNIQ#EMAIL#ada@x.io"), ("Delete", "UNIQ#HANDLE#ada"), ("Delete", "USER#1")]
    assert wire.sent == ["TransactWriteItems"]
    assert raw_items(User) == []
    assert account._du_loaded is None


def test_save_then_delete_of_a_new_object_sends_nothing(wire: Wire) -> None:
    account = user(1)
    with atomic() as tx:
        account.save()
        account.delete()
    assert tx.request is None
    assert wire.sent == ["GetItem"]   # the delete looked for the record; nothing was written
    assert raw_items(User) == []


# --- condition checks ----------------------------------------------------------------------------


def test_condition_check_that_holds_lets_the_unit_commit(wire: Wire) -> None:
    Workspace(pk="WS#1", name="Acme").save()
    wire.clear()
    with atomic() as tx:
        tx.condition_check(Workspace, "WS#1", condition=Workspace.pk.exists())
        Membership(pk="MEMBER#1", sk="WS#1").save()
        user(1).save()
    assert wire.sent == ["TransactWriteItems"]
    assert ("ConditionCheck", "WS#1") in item_keys(wire.last("TransactWriteItems"))
    assert record_keys(User) == ["MEMBER#1", "USER#1"]
    assert_consistent()


def test_condition_check_that_fails_names_itself_and_nothing_lands(wire: Wire) -> None:
    with pytest.raises(ConditionCheckFailedError) as caught, atomic() as tx:
        tx.condition_check(Workspace, "WS#404", condition=Workspace.pk.exists())
        Membership(pk="MEMBER#1", sk="WS#404").save()
        user(1).save()
    error = caught.value
    assert error.model == "Workspace"
    assert error.key == {"PK": "WS#404"}
    assert "Workspace" in str(error)
    assert "WS#404" in str(error)
    assert wire.sent == ["TransactWriteItems"]
    assert raw_items(User) == []


def test_a_unit_of_only_condition_checks_is_sent_and_checked(wire: Wire) -> None:
    Workspace(pk="WS#1", name="Acme").save()
    wire.clear()
    with atomic() as tx:
        tx.condition_check(Workspace, "WS#1", condition=Workspace.pk.exists())
    assert wire.sent == ["TransactWriteItems"]
    with pytest.raises(ConditionCheckFailedError), atomic() as tx:
        tx.condition_check(Workspace, "WS#404", condition=Workspace.pk.exists())


def test_condition_check_label_is_in_the_error(wire: Wire) -> None:
    Workspace(pk="WS#1", name="Acme", plan="free").save()
    wire.clear()
    with pytest.raises(ConditionCheckFailedError, match="workspace is on a paid plan"), \
            atomic() as tx:
        tx.condition_check(Workspace, "WS#1", condition=Workspace.plan == "paid",
                           label="workspace is on a paid plan")
        user(1).save()
    assert record_keys(User) == []
    assert_consistent()


def test_condition_check_on_a_record_the_unit_writes_is_refused(wire: Wire) -> None:
    workspace = Workspace(pk="WS#1", name="Acme")
    with pytest.raises(InvalidValueError), atomic() as tx:
        workspace.save()
        tx.condition_check(Workspace, "WS#1", condition=Workspace.pk.does_not_exist())
    assert wire.sent == []
    assert raw_items(Workspace) == []


# --- the size guard ------------------------------------------------------------------------------


def test_more_than_100_items_is_refused_and_nothing_is_sent(wire: Wire) -> None:
    with pytest.raises(TransactionTooLargeError) as caught, atomic():
        for n in range(51):   # a record and an email lock each: 102 items
            user(n).save()
    error = caught.value
    assert (error.items, error.max_items) == (102, 100)
    assert "102 items" in str(error)
    assert wire.sent == []
    assert raw_items(User) == []


def test_exactly_100_items_is_sent(wire: Wire) -> None:
    with atomic():
        for n in range(50):
            user(n).save()
    assert wire.sent == ["TransactWriteItems"]
    assert len(record_keys(User)) == 50
    assert_consistent()


def test_more_than_4_mb_is_refused_and_nothing_is_sent(wire: Wire) -> None:
    bio = "x" * 390_000
    with pytest.raises(TransactionTooLargeError) as caught, atomic():
        for n in range(11):
            account = user(n)
            account.bio = bio
            account.save()
    error = caught.value
    assert error.items == 22
    assert error.size_bytes > 4 * 1024 * 1024 == error.max_bytes
    assert str(error.size_bytes) in str(error)
    assert wire.sent == []
    assert raw_items(User) == []


def test_a_dry_run_of_a_too_large_unit_raises_as_the_real_run_would(wire: Wire) -> None:
    with pytest.raises(TransactionTooLargeError) as caught, atomic(dry_run=True):
        for n in range(51):
            user(n).save()
    assert caught.value.items == 102
    assert wire.sent == []


# --- dry runs ------------------------------------------------------------------------------------


def test_dry_run_sends_nothing_and_matches_the_real_request(wire: Wire) -> None:
    existing = Workspace(pk="WS#0", name="Old")
    existing.save()
    wire.clear()

    def block(dry: bool) -> Atomic:
        with atomic(dry_run=dry) as tx:
            account, workspace, membership = signup(1)
            account.save()
            workspace.save()
            membership.save()
            existing.delete()
        return tx

    dry_tx = block(dry=True)
    assert wire.sent == []
    assert record_keys(User) == []
    assert record_keys(Workspace) == ["WS#0"]
    assert dry_tx.request is not None
    assert existing._du_loaded is not None   # a dry run commits nothing, snapshots included
    real_tx = block(dry=False)
    assert wire.sent == ["TransactWriteItems"]
    sent = wire.last("TransactWriteItems")
    assert sent["ClientRequestToken"]
    assert comparable(dry_tx.request) == comparable(sent)
    assert dry_tx.request != real_tx.request   # the lock items' created times differ
    assert real_tx.request == {k: v for k, v in sent.items() if k != "ClientRequestToken"}
    for entry in dry_tx.request["TransactItems"]:
        if "Put" in entry and entry["Put"]["Item"]["PK"]["S"].startswith(RESERVED_PREFIX):
            assert "created" in entry["Put"]["Item"]
    assert json.loads(dry_tx.explain()) == dry_tx.request
    assert dry_tx.explain().startswith("{\n")
    assert_consistent()


def test_dry_run_of_a_swap_matches_the_real_swap(wire: Wire) -> None:
    ada, bob = swapping(wire)
    with atomic(dry_run=True) as dry_tx:
        ada.save()
        bob.save()
    assert wire.sent == []
    with atomic():
        ada.save()
        bob.save()
    assert comparable(dry_tx.request or {}) == comparable(wire.last("TransactWriteItems"))
    assert_consistent()


def test_explain_renders_condition_checks_too(wire: Wire) -> None:
    with atomic(dry_run=True) as tx:
        tx.condition_check(Workspace, "WS#1", condition=Workspace.name == "Acme")
        user(1).save()
    text = tx.explain()
    assert json.loads(text) == tx.request
    (check,) = [e["ConditionCheck"] for e in json.loads(text)["TransactItems"]
                if "ConditionCheck" in e]
    assert check["Key"] == {"PK": {"S": "WS#1"}}
    assert check["TableName"] == "atom_workspaces"
    assert wire.sent == []
    assert raw_items(User) == raw_items(Workspace) == []


def test_save_dry_run_of_a_create_is_the_transaction_then_sent(wire: Wire) -> None:
    account = user(1, handle="ada")
    dry = account.save(dry_run=True)
    assert wire.sent == []
    assert raw_items(User) == []
    assert account._du_loaded is None
    assert sorted(item_keys(dry)) == [("Put", "UNIQ#EMAIL#u1@x.io"), ("Put", "UNIQ#HANDLE#ada"),
                                      ("Put", "USER#1")]
    account.save()
    assert comparable(dry) == comparable(wire.last("TransactWriteItems"))
    assert_consistent()


def test_save_dry_run_of_a_plain_update_is_the_put_item_then_sent(wire: Wire) -> None:
    account = user(1)
    account.save()
    wire.clear()
    account.bio = "Countess"
    dry = account.save(dry_run=True)
    assert dry["Operation"] == "PutItem"
    assert wire.sent == []
    account.save()
    assert wire.sent == ["PutItem"]
    assert comparable(dry) == comparable(wire.last("PutItem"))
    assert_consistent()


def test_delete_dry_run_is_the_transaction_then_sent(wire: Wire) -> None:
    account = user(1, handle="ada")
    account.save()
    wire.clear()
    dry = account.delete(dry_run=True)
    assert wire.sent == []
    assert sorted(item_keys(dry)) == [("Delete", "UNIQ#EMAIL#u1@x.io"),
                                      ("Delete", "UNIQ#HANDLE#ada"), ("Delete", "USER#1")]
    assert record_keys(User) == ["USER#1"]
    account.delete()
    assert comparable(dry) == comparable(wire.last("TransactWriteItems"))
    assert raw_items(User) == []


def test_save_dry_run_of_an_unconstrained_model_is_the_put_item_then_sent(wire: Wire) -> None:
    membership = Membership(pk="MEMBER#1", sk="WS#1")
    dry = membership.save(dry_run=True)
    assert dry["Operation"] == "PutItem"
    assert wire.sent == []
    membership.save()
    assert wire.sent == ["PutItem"]
    assert comparable(dry) == comparable(wire.last("PutItem"))
    assert_consistent()


def test_delete_dry_run_of_an_unconstrained_model_is_what_delete_sends(wire: Wire) -> None:
    membership = Membership(pk="MEMBER#1", sk="WS#1")
    membership.save()
    wire.clear()
    dry = membership.delete(dry_run=True)
    assert wire.sent == []
    membership.delete()
    assert wire.sent == ["DeleteItem"]
    assert comparable(dry) == comparable(wire.last("DeleteItem"))
    assert raw_items(User) == []
