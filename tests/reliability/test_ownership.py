"""Ownership: a record can never delete, overwrite or take over a lock it does not own.

States are crafted with raw boto3 writes — a lock owned by another record, a lock with no
``owner`` attribute, a lock whose owner names a record that does not exist, an owner that names
this record only in part — and every write path (create, save, ``update(actions)``, loaded and
never-loaded delete, ``atomic()``) is tried against them. Each attempt must fail with the right
error and leave the lock byte for byte as it was. The invariant checker is tested here too: on
crafted broken states it must report exactly what was broken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import invariants
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_client, raw_item, scan_table

from dynaunique import UniqueViolation, atomic
from dynaunique._lock.locks import lock_item, lock_key, lock_primary_key
from dynaunique.attributes import UnicodeAttribute, VersionAttribute

from . import fresh_tables, point

TABLE = "rel_ownership"
X = "x@x.io"


Owned = declare("Owned", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"),
                email=UnicodeAttribute(unique=True, null=True), note=UnicodeAttribute(null=True),
                version=VersionAttribute())


INFO = Owned._du_info
assert INFO is not None
KEYS = INFO.key_attributes


def key_of(pk: str, sk: str = "PROFILE") -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def lock_of(email: str) -> dict[str, Any]:
    return lock_primary_key(KEYS, lock_key("EMAIL", (email,)))


def raw_lock(email: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    """A lock item for ``email`` as the library writes it, with ``owner`` (None: no owner)."""
    item = lock_item(key_attributes=KEYS, lock_key_value=lock_key("EMAIL", (email,)),
                     owner=owner or {}, model="Owned", constraint="EMAIL", value=email,
                     hashed=False, created="2020-01-01T00:00:00.000000+00:00")
    if owner is None:
        del item["owner"]
    return item


def put_raw(endpoint: str, item: dict[str, Any]) -> None:
    raw_client(endpoint).put_item(TableName=TABLE, Item=item)


@pytest.fixture
def table(dynaunique_db: str) -> str:
    point(dynaunique_db, Owned)
    fresh_tables(dynaunique_db, Owned)
    return dynaunique_db


# --- the crafted states of the contested lock (on X) ---------------------------------------------


def craft(endpoint: str, state: str) -> None:
    """Make the lock on X be in ``state`` (the record "A" is not involved yet)."""
    if state == "foreign":
        Owned(pk="B", email=X).save()  # a real holder, through the library
    elif state == "owner_missing":
        put_raw(endpoint, raw_lock(X, key_of("GHOST")))
    elif state == "no_owner":
        put_raw(endpoint, raw_lock(X, None))
    elif state == "owner_partial":
        put_raw(endpoint, raw_lock(X, {"PK": {"S": "A"}}))  # A's hash key, no range key
    elif state == "owner_other_sk":
        put_raw(endpoint, raw_lock(X, key_of("A", "OTHER")))
    elif state == "owner_not_a_map":
        lock = raw_lock(X, None)
        lock["owner"] = {"S": "A"}
        put_raw(endpoint, lock)
    else:
        raise ValueError(state)


STATES = ["foreign", "owner_missing", "no_owner", "owner_partial", "owner_other_sk"]
#: The states whose lock is an orphan — its owner does not exist — which a write that meets it
#: takes over (issue 36: orphans heal on contact); the others are never taken.
ORPHANS = {"owner_missing", "owner_other_sk"}


def state_params() -> list[Any]:
    # An owner that is not a map (a string) must still give a clean UniqueViolation.
    return [*STATES, "owner_not_a_map"]


def snapshot(endpoint: str) -> list[str]:
    """The whole table, byte for byte (every attribute of every item), in a stable order."""
    return sorted(repr(sorted(item.items())) for item in scan_table(endpoint, TABLE))


# --- taking a value held by a lock this record does not own ---------------------------------------


TAKES = ["create", "save", "update", "atomic"]


@pytest.mark.parametrize("state", state_params())
@pytest.mark.parametrize("how", TAKES)
def test_a_lock_this_record_does_not_own_cannot_be_taken(table: str, state: str,
                                                         how: str) -> None:
    """UniqueViolation, and the lock (indeed the whole table) is exactly as before — unless
    the lock is an orphan, which the write takes over."""
    craft(table, state)
    setup, attempt = _split_take(how)
    setup()
    before = snapshot(table)
    if state in ORPHANS:
        attempt()
        taken = raw_item(table, TABLE, lock_of(X))
        assert taken is not None and taken["owner"] == {"M": key_of("A")}
        return
    with pytest.raises(UniqueViolation) as caught:
        attempt()
    assert caught.value.constraint == "EMAIL"
    if state == "foreign":
        assert caught.value.owner == {"PK": "B", "SK": "PROFILE"}
    assert snapshot(table) == before


def _split_take(how: str) -> tuple[Callable[[], None], Callable[[], None]]:
    """The write that tries to take X, apart from its setup (which must succeed)."""
    def setup() -> None:
        if how != "create":
            Owned(pk="A", email="a@x.io").save()

    def attempt() -> None:
        if how == "create":
            Owned(pk="A", email=X).save()
            return
        a = Owned.get("A", "PROFILE", consistent_read=True)
        if how == "save":
            a.email = X
            a.save()
        elif how == "update":
            a.update(actions=[Owned.email.set(X)])
        else:
            with atomic():
                a.email = X
                a.save()
                Owned(pk="E", email="e@x.io").save()

    return setup, attempt


# --- releasing a value this record claims but whose lock it does not own --------------------------


def claim_raw(endpoint: str) -> None:
    """Record A says it holds X — written raw, bypassing the library, as a buggy script might."""
    put_raw(endpoint, {**key_of("A"), "email": {"S": X}, "note": {"S": "n"},
                       "version": {"N": "1"}})


def release_by_delete() -> None:
    Owned.get("A", "PROFILE", consistent_read=True).delete()


def release_by_unloaded_delete() -> None:
    Owned(pk="A").delete()


def release_by_move() -> None:
    a = Owned.get("A", "PROFILE", consistent_read=True)
    a.email = "y@x.io"
    a.save()


def release_by_update() -> None:
    a = Owned.get("A", "PROFILE", consistent_read=True)
    a.update(actions=[Owned.email.set("y@x.io")])


def release_by_clearing() -> None:
    a = Owned.get("A", "PROFILE", consistent_read=True)
    a.email = None
    a.save()


def hand_over_in_atomic() -> None:
    """A frees X and D takes it in one unit: the fused put must still require ownership."""
    a = Owned.get("A", "PROFILE", consistent_read=True)
    with atomic():
        a.email = "y@x.io"
        a.save()
        Owned(pk="D", email=X).save()


RELEASES: dict[str, Callable[[], None]] = {
    "delete": release_by_delete, "unloaded_delete": release_by_unloaded_delete,
    "move": release_by_move, "update": release_by_update, "clear": release_by_clearing,
    "atomic_handover": hand_over_in_atomic,
}


#: What record A looks like after each release that is allowed to go ahead (None: deleted).
RELEASED: dict[str, str | None] = {"delete": None, "unloaded_delete": None, "move": "y@x.io",
                                   "update": "y@x.io", "clear": "-"}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("how", list(RELEASES))
def test_a_lock_this_record_does_not_own_is_never_deleted_or_handed_over(
        table: str, state: str, how: str) -> None:
    """The record claims X, the lock says otherwise. Handing X to another record fails with
    UniqueViolation and changes nothing. The record's own delete or move goes ahead without
    the lock (docs/decisions.md: a lock another record holds is never deleted) — and the lock
    on X stays byte for byte as it was."""
    craft(table, state)
    claim_raw(table)
    before = snapshot(table)
    lock = raw_item(table, TABLE, lock_of(X))
    assert lock is not None

    if how == "atomic_handover" and state in ORPHANS:
        RELEASES[how]()   # the orphan is taken over by D, in the unit's own transaction
        taken = raw_item(table, TABLE, lock_of(X))
        assert taken is not None and taken["owner"] == {"M": key_of("D")}
        return
    if how == "atomic_handover":
        with pytest.raises(UniqueViolation):
            RELEASES[how]()
        assert snapshot(table) == before
        return
    RELEASES[how]()

    assert raw_item(table, TABLE, lock_of(X)) == lock
    record = raw_item(table, TABLE, key_of("A"))
    email = RELEASED[how]
    if email is None:
        assert record is None
    elif email == "-":
        assert record is not None and "email" not in record
    else:
        assert record is not None and record["email"] == {"S": email}
        taken = raw_item(table, TABLE, lock_of(email))
        assert taken is not None and taken["owner"] == {"M": key_of("A")}


@pytest.mark.parametrize("state", STATES)
def test_a_non_unique_write_leaves_a_foreign_lock_alone(table: str, state: str) -> None:
    """Changing only a non-unique field touches no lock, so it succeeds — and claims nothing."""
    craft(table, state)
    claim_raw(table)
    lock = raw_item(table, TABLE, lock_of(X))
    a = Owned.get("A", "PROFILE", consistent_read=True)
    a.note = "changed"
    a.save()
    assert raw_item(table, TABLE, lock_of(X)) == lock
    assert Owned.get("A", "PROFILE", consistent_read=True).note == "changed"


def test_a_lock_owned_by_this_record_is_released_normally(table: str) -> None:
    """The control: with the lock truly owned, every release path works and ends clean."""
    Owned(pk="A", email=X).save()
    release_by_move()
    assert raw_item(table, TABLE, lock_of(X)) is None
    assert_clean([Owned], table)
    hand = Owned.get("A", "PROFILE", consistent_read=True)
    with atomic():
        hand.email = X
        hand.save()
    release_by_delete()
    assert scan_table(table, TABLE) == []


@pytest.mark.parametrize("state", ["foreign", "owner_missing", "no_owner"])
def test_lookups_never_return_a_record_that_does_not_hold_the_value(table: str,
                                                                    state: str) -> None:
    """get_by_unique follows the lock but checks the record: A claims X without owning it."""
    craft(table, state)
    claim_raw(table)
    if state == "foreign":
        assert Owned.get_by_unique("email", X).pk == "B"
    else:
        with pytest.raises(Owned.DoesNotExist):
            Owned.get_by_unique("email", X)


# --- the checker itself: it must see every kind of breakage -----------------------------------


def test_the_invariant_checker_reports_exactly_what_was_broken(table: str) -> None:
    """Break the invariant in every way at once; the report lists each break and nothing else."""
    Owned(pk="OK", email="ok@x.io").save()                      # healthy: no finding
    put_raw(table, raw_lock("orphan@x.io", key_of("GHOST")))     # owner record missing
    put_raw(table, raw_lock("ownerless@x.io", None))             # no owner attribute
    Owned(pk="MOVED", email="old@x.io").save()
    put_raw(table, raw_lock("stale@x.io", key_of("MOVED")))      # owner does not require it
    put_raw(table, {**key_of("BARE"), "email": {"S": "bare@x.io"}, "version": {"N": "1"}})
    Owned(pk="HOLDER", email="dup@x.io").save()
    put_raw(table, {**key_of("TWIN"), "email": {"S": "dup@x.io"}, "version": {"N": "1"}})
    put_raw(table, {**key_of("THIEF"), "email": {"S": "theft@x.io"}, "version": {"N": "1"}})
    put_raw(table, raw_lock("theft@x.io", key_of("OK")))         # required by THIEF, owned by OK
    bad = raw_lock("bad@x.io", key_of("SHAPE"))
    bad["constraint"] = {"S": "HANDLE"}
    put_raw(table, bad)
    put_raw(table, {**key_of("SHAPE"), "email": {"S": "bad@x.io"}, "version": {"N": "1"}})

    report = invariants.check([Owned], table)

    def key(email: str) -> str:
        return lock_key("EMAIL", (email,))

    assert [(o.key, o.reason) for o in report.orphans] == sorted([
        (key("orphan@x.io"), "its owner record does not exist"),
        (key("ownerless@x.io"), "it has no owner attribute"),
        (key("stale@x.io"), "its owner record does not require this value"),
    ])
    assert [(m.key, m.record) for m in report.missing] == [(key("bare@x.io"), key_of("BARE"))]
    assert [d.key for d in report.duplicates] == [key("dup@x.io")]
    assert sorted(d.records for d in report.duplicates) == [("HOLDER/PROFILE", "TWIN/PROFILE")]
    assert [(w.key, w.required_by) for w in report.wrong_owners] == [
        (key("theft@x.io"), key_of("THIEF"))]
    assert [(b.key, b.problem) for b in report.bad_locks] == [
        (key("bad@x.io"), "constraint {'S': 'HANDLE'}, expected 'EMAIL'")]
    assert not report.clean
    _audit_agrees_it_is_broken()


def _audit_agrees_it_is_broken() -> None:
    try:
        from dynaunique import audit
    except ImportError:
        return
    check = getattr(audit, "check", None)
    if check is not None:
        assert not check([Owned]).clean


def test_the_invariant_checker_passes_a_healthy_table(table: str) -> None:
    for i in range(5):
        Owned(pk=f"R{i}", email=f"r{i}@x.io").save()
    Owned(pk="NONE").save()
    report = assert_clean([Owned], table)
    assert (report.records, report.locks) == (6, 5)
