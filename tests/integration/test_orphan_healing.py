"""Orphan locks heal on contact (issue 36): a lock whose owner no longer holds the value — made
here by writing around the library with plain boto3 — does not block that value. The write
that meets it reads the owner once, consistently, and takes the lock over in its own
transaction; a genuine holder still refuses. Sync and async, plain, hashed, composite,
scoped, polymorphic and shared-table models, ``atomic()`` units, and threads racing for one
orphan, each table checked by the suite's own invariant checker afterwards.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from pynamodb.attributes import DiscriminatorAttribute
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean
from support.log_events import events
from support.tables import raw_tables, scan_all

from dynaunique import Model, UniqueConstraint, UniqueViolation, atomic, normalizers
from dynaunique._lock.locks import OWNER_ATTR, RESERVED_PREFIX
from dynaunique.attributes import UnicodeAttribute

Account = declare("Account", "heal_accounts", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, normalize=normalizers.casefold))
Patient = declare("Patient", "heal_patients", meta={"lock_secret": "heal-secret"},
                  pk=pk_attr(), sk=sk_attr("PROFILE"),
                  ssn=UnicodeAttribute(unique=True, hashed=True))
Seat = declare("Seat", "heal_seats", pk=pk_attr(), sk=sk_attr("SEAT"),
               row=UnicodeAttribute(), number=UnicodeAttribute(),
               tenant=UnicodeAttribute(), handle=UnicodeAttribute(),
               meta={"constraints": [UniqueConstraint(fields=["row", "number"], name="SEAT"),
                                     UniqueConstraint(fields=["tenant", "handle"],
                                                      name="HANDLE", condition=lambda s:
                                                      s.tenant != "public")]})


class Animal(Model):
    """A polymorphic family on one table with an unrelated model."""

    class Meta:
        table_name = "heal_zoo"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    kind = DiscriminatorAttribute()
    tag = UnicodeAttribute(unique=True, lock_name="TAG")


class Cat(Animal, discriminator="cat"):
    pass


class Keeper(Model):
    """Another model of the same table, sharing no lock."""

    class Meta:
        table_name = "heal_zoo"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    badge = UnicodeAttribute(unique=True)


def _locks(raw: Any, table: str) -> dict[str, str]:
    """Lock key → owner's hash key, of the whole table."""
    return {i["PK"]["S"]: next(iter(i[OWNER_ATTR]["M"]["PK"].values()))
            for i in scan_all(raw, table) if i["PK"]["S"].startswith(RESERVED_PREFIX)}


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, Account, Patient, Seat, Animal, Keeper)


def _delete_around(raw: Any, table: str, pk: str, sk: str | None) -> None:
    key = {"PK": {"S": pk}, **({"SK": {"S": sk}} if sk is not None else {})}
    raw.delete_item(TableName=table, Key=key)


def test_an_orphan_of_a_record_deleted_around_the_library_does_not_block_its_value(
        raw: Any, dynaunique_db: str, caplog: pytest.LogCaptureFixture) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    _delete_around(raw, "heal_accounts", "ACCT#1", "PROFILE")
    caplog.set_level(logging.INFO, logger="dynaunique.write")
    Account(pk="ACCT#2", email="Ada@x.io").save()
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#ada@x.io": "ACCT#2"}
    assert [(e["lock_key"], e["old_owner"]) for e in events(caplog, "orphan_lock_healed")] == [
        ("UNIQ#EMAIL#ada@x.io", {"PK": "ACCT#1", "SK": "PROFILE"})]
    assert events(caplog, "unique_violation") == []
    assert_clean([Account], dynaunique_db)


def test_an_orphan_of_a_record_changed_around_the_library_does_not_block_its_value(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    raw.update_item(TableName="heal_accounts", Key={"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}},
                    UpdateExpression="SET email = :e", ExpressionAttributeValues={
                        ":e": {"S": "grace@x.io"}})
    Account(pk="ACCT#2", email="ada@x.io").save()
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#ada@x.io": "ACCT#2"}
    # The moved record lacks its own lock (written around the library): a save that moves it
    # again through the library makes the table whole.
    moved = Account.get("ACCT#1", "PROFILE")
    moved.email = "grace.h@x.io"
    moved.save()
    assert_clean([Account], dynaunique_db)


def test_a_genuine_holder_still_refuses_and_is_named(raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#1", email="ada@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        Account(pk="ACCT#2", email="ada@x.io").save()
    assert caught.value.owner == {"PK": "ACCT#1", "SK": "PROFILE"}
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#ada@x.io": "ACCT#1"}
    assert_clean([Account], dynaunique_db)


def test_a_hashed_orphan_heals_the_same_way(raw: Any, dynaunique_db: str) -> None:
    Patient(pk="P#1", ssn="123-45-6789").save()
    _delete_around(raw, "heal_patients", "P#1", "PROFILE")
    Patient(pk="P#2", ssn="123-45-6789").save()
    assert list(_locks(raw, "heal_patients").values()) == ["P#2"]
    with pytest.raises(UniqueViolation) as caught:
        Patient(pk="P#3", ssn="123-45-6789").save()
    assert caught.value.owner == {"PK": "P#2", "SK": "PROFILE"}
    assert_clean([Patient], dynaunique_db)


def test_composite_and_scoped_orphans_heal_and_a_held_one_still_refuses(
        raw: Any, dynaunique_db: str) -> None:
    Seat(pk="S#1", row="A", number="1", tenant="t1", handle="front").save()
    raw.update_item(TableName="heal_seats", Key={"PK": {"S": "S#1"}, "SK": {"S": "SEAT"}},
                    UpdateExpression="SET #r = :r", ExpressionAttributeNames={"#r": "row"},
                    ExpressionAttributeValues={":r": {"S": "B"}})
    # SEAT A#1 is an orphan now; HANDLE t1#front is still held by S#1.
    with pytest.raises(UniqueViolation) as caught:
        Seat(pk="S#2", row="A", number="1", tenant="t1", handle="front").save()
    assert [v.constraint for v in caught.value.violations] == ["HANDLE"]
    Seat(pk="S#2", row="A", number="1", tenant="t2", handle="front").save()
    assert _locks(raw, "heal_seats")["UNIQ#SEAT#A#1"] == "S#2"
    moved = Seat.get("S#1", "SEAT")   # S#1 lacks its own B#1 lock since the raw write
    moved.number = "2"
    moved.save()
    assert_clean([Seat], dynaunique_db)


def test_a_polymorphic_orphan_on_a_shared_table_heals_inside_atomic(
        raw: Any, dynaunique_db: str) -> None:
    Cat(pk="C#1", tag="tom").save()
    Keeper(pk="K#1", badge="k1").save()
    # The cat's item becomes an unrelated model's record around the library: no longer a
    # record (by the audit's rule) of a model that requires the TAG lock.
    raw.put_item(TableName="heal_zoo", Item={"PK": {"S": "C#1"}, "badge": {"S": "k9"}})
    with atomic():
        Cat(pk="C#2", tag="tom").save()
        Keeper(pk="K#2", badge="k2").save()
    assert _locks(raw, "heal_zoo")["UNIQ#TAG#tom"] == "C#2"
    Keeper.get("C#1").delete()   # lacking its own BADGE lock since the raw write
    assert_clean([Animal, Cat, Keeper], dynaunique_db)


def test_four_threads_racing_for_one_orphan_have_exactly_one_winner(
        raw: Any, dynaunique_db: str) -> None:
    Account(pk="ACCT#0", email="race@x.io").save()
    _delete_around(raw, "heal_accounts", "ACCT#0", "PROFILE")
    barrier = threading.Barrier(4)
    outcomes: list[BaseException | None] = [None] * 4

    def signup(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            Account(pk=f"ACCT#{i + 1}", email="race@x.io").save()
        except BaseException as exc:   # inspected below
            outcomes[i] = exc

    threads = [threading.Thread(target=signup, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [i for i, o in enumerate(outcomes) if o is None]
    assert len(winners) == 1, outcomes
    winner = f"ACCT#{winners[0] + 1}"
    for o in outcomes:
        assert o is None or isinstance(o, UniqueViolation), o
        assert o is None or o.owner == {"PK": winner, "SK": "PROFILE"}
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#race@x.io": winner}
    assert_clean([Account], dynaunique_db)
