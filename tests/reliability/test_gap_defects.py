"""The six defects of issue 11, each as the behaviour that must hold.

Every test talks to the local server over HTTP through the loopback proxy of the reliability
suite (``tests/reliability/proxy.py``), which records what each call sent and can let another
writer act between two requests of one call (``FaultProxy.intercept``). Nothing of dynaunique is
patched: the adversary uses the library's own API.

1. A stale identical save is refused (``ConcurrentModificationError``) and sends no unguarded
   follow-up; attacked between its requests, it leaves no duplicate and no orphan.
2. A stale delete whose record was deleted and created again keeps the new record's lock; with
   no VersionAttribute and no ``condition=`` it returns after its one request, else it raises.
3. Two threads swapping A/B in ``atomic()`` while a third takes a value leave no orphan.
4. A lock is derived from what the attribute stores: ``BooleanAttribute`` given ``1``/"yes"/
   "false", ``BinaryAttribute`` given ``"abc"`` never let two records hold one stored value.
5. Wrong types raise ``InvalidValueError`` naming the field before anything is sent; ``Decimal``
   works on a unique ``NumberAttribute`` (``1 == 1.0 == Decimal("1.00")``).
6. ``Person.get_by_unique`` never returns a ``Team`` that shares the lock name.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from support.declare import declare
from support.invariants import assert_sound, check, raw_item

from dynaunique import (
    ConcurrentModificationError,
    DynauniqueError,
    InvalidValueError,
    Model,
    UniqueViolation,
    atomic,
)
from dynaunique.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from reliability import fresh_tables, point
from reliability.gaps import GapPlain, GapVersioned, unguarded_followups
from reliability.proxy import Fault, FaultProxy

# One unique boolean, one unique binary, one unique number.
Flagged = declare("Flagged", "i11_typed", pk=UnicodeAttribute(hash_key=True),
                  flag=BooleanAttribute(unique=True, null=True),
                  blob=BinaryAttribute(unique=True, null=True, legacy_encoding=False),
                  amount=NumberAttribute(unique=True, null=True),
                  name=UnicodeAttribute(unique=True, null=True))

# Shares the lock name HANDLE with Team (both declare it explicitly).
Person = declare("Person", "i11_shared", pk=UnicodeAttribute(hash_key=True),
                 handle=UnicodeAttribute(unique=True, null=True, lock_name="HANDLE"))

# Shares the lock name HANDLE with Person.
Team = declare("Team", "i11_shared", pk=UnicodeAttribute(hash_key=True),
               handle=UnicodeAttribute(unique=True, null=True, lock_name="HANDLE"))


MODELS: tuple[type[Model], ...] = (GapPlain, GapVersioned, Flagged, Person, Team)


def _shared_model_of(raw: dict[str, Any]) -> type[Model] | None:
    pk = raw["pk"]["S"]
    return Person if pk.startswith("P#") else Team if pk.startswith("T#") else None


@pytest.fixture
def wire(proxy: FaultProxy) -> FaultProxy:
    """The suite's proxy in front of the freshly reset server, every model pointed at it."""
    point(proxy.url, *MODELS)
    fresh_tables(proxy.upstream, *MODELS)
    return proxy


def _lock_only(operation: str, body: dict[str, Any]) -> bool:
    """A write whose every item is a lock item (hash key in ``UNIQ#``): no record guarded."""
    items = body.get("TransactItems") or ([body] if "ConditionExpression" in body else [])
    keys = [next(iter(entry.values())) if operation == "TransactWriteItems" else entry
            for entry in items]
    hashes = [str((k.get("Key") or k.get("Item") or {}).get("pk", {}).get("S", "")) for k in keys]
    return bool(hashes) and all(h.startswith("UNIQ#") for h in hashes)


def _move(model: type[Model], key: str, value: str | None) -> None:
    record = model.get(key, consistent_read=True)
    record.email = value  # type: ignore[attr-defined]
    record.save()


# --- 1. stale identical save ---------------------------------------------------------------------


@pytest.mark.parametrize("model", [GapPlain, GapVersioned], ids=["plain", "versioned"])
def test_1_stale_identical_save_is_refused_without_an_unguarded_follow_up(
        wire: FaultProxy, model: type[Model]) -> None:
    """A and B load R (a); A saves b; B sets b and saves: B is stale and must say so."""
    model(pk="R", email="a").save()
    first, second = model.get("R", consistent_read=True), model.get("R", consistent_read=True)
    first.email = "b"  # type: ignore[attr-defined]
    first.save()
    second.email = "b"  # type: ignore[attr-defined]
    with wire.intercept() as call, pytest.raises(ConcurrentModificationError):
        second.save()
    assert not unguarded_followups(call.requests, [{"pk": {"S": "R"}}], ("pk",)), (
        f"the refused save sent {call.operations()}: "
        f"{unguarded_followups(call.requests, [{'pk': {'S': 'R'}}], ('pk',))}")
    assert_sound([model], wire.url)


@pytest.mark.parametrize("model", [GapPlain, GapVersioned], ids=["plain", "versioned"])
def test_1_stale_identical_save_attacked_between_its_requests_breaks_nothing(
        wire: FaultProxy, model: type[Model]) -> None:
    """As above, and R moves back to a right before B's second request (if it sends one):
    no lock of a may be deleted while R holds a, no lock of b may stay behind."""
    model(pk="R", email="a").save()
    first, second = model.get("R", consistent_read=True), model.get("R", consistent_read=True)
    first.email = "b"  # type: ignore[attr-defined]
    first.save()
    second.email = "b"  # type: ignore[attr-defined]
    with wire.intercept(lambda: _move(model, "R", "a"), before=2) as call:
        outcome: BaseException | None = None
        try:
            second.save()
        except DynauniqueError as exc:
            outcome = exc
    assert call.adversary_error is None, repr(call.adversary_error)
    if not call.fired:  # one request only: the move happens after the call instead
        _move(model, "R", "a")
    assert isinstance(outcome, ConcurrentModificationError), (
        f"the stale save reported {'success' if outcome is None else repr(outcome)}; "
        f"sent {call.operations()}")
    assert model.get("R", consistent_read=True).email == "a"  # type: ignore[attr-defined]
    assert_sound([model], wire.url)


# --- 2. stale delete -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", [GapPlain, GapVersioned], ids=["plain", "versioned"])
def test_2_stale_delete_keeps_the_recreated_records_lock(wire: FaultProxy,
                                                          model: type[Model]) -> None:
    """R (a) is deleted elsewhere, then re-created with a between the stale delete's requests:
    the new R must keep its lock (no duplicate of a)."""
    model(pk="R", email="a").save()
    stale = model.get("R", consistent_read=True)
    model.get("R", consistent_read=True).delete()
    recreate = lambda: model(pk="R", email="a").save()  # noqa: E731
    with wire.intercept(recreate, before=2) as call, \
            contextlib.suppress(ConcurrentModificationError):
        stale.delete()
    assert call.adversary_error is None, repr(call.adversary_error)
    if not call.fired:
        model(pk="R", email="a").save()
    assert_sound([model], wire.url)
    assert model.get_by_unique("email", "a").pk == "R"  # type: ignore[attr-defined]


def test_2_stale_delete_of_a_gone_record_returns_after_one_request(wire: FaultProxy) -> None:
    """No VersionAttribute, no condition=: deleting a record that is already gone returns, as
    PynamoDB deletes a missing item, and sends nothing after its first request."""
    GapPlain(pk="R", email="a").save()
    stale = GapPlain.get("R", consistent_read=True)
    GapPlain.get("R", consistent_read=True).delete()
    with wire.intercept() as call:
        stale.delete()
    assert call.operations() == ["TransactWriteItems"], call.operations()
    assert_sound([GapPlain], wire.url)


def test_2_stale_delete_of_a_gone_versioned_record_raises(wire: FaultProxy) -> None:
    """With a VersionAttribute the stale delete is a failed optimistic lock: it raises, and
    sends no unguarded follow-up."""
    GapVersioned(pk="R", email="a").save()
    stale = GapVersioned.get("R", consistent_read=True)
    GapVersioned.get("R", consistent_read=True).delete()
    with wire.intercept() as call, pytest.raises(ConcurrentModificationError):
        stale.delete()
    assert not unguarded_followups(call.requests, [{"pk": {"S": "R"}}], ("pk",)), (
        call.operations())
    assert_sound([GapVersioned], wire.url)


def test_2_stale_delete_with_a_condition_of_a_gone_record_raises(wire: FaultProxy) -> None:
    """A condition= that cannot be checked on a record that is gone is not met: it raises."""
    GapPlain(pk="R", email="a", note="n").save()
    stale = GapPlain.get("R", consistent_read=True)
    GapPlain.get("R", consistent_read=True).delete()
    with wire.intercept() as call, pytest.raises(ConcurrentModificationError):
        stale.delete(condition=GapPlain.note == "n")
    assert not unguarded_followups(call.requests, [{"pk": {"S": "R"}}], ("pk",)), (
        call.operations())
    assert_sound([GapPlain], wire.url)


# --- 3. threads: swaps racing a taker -------------------------------------------------------------


@pytest.mark.parametrize("model", [GapPlain, GapVersioned], ids=["plain", "versioned"])
def test_3_two_swappers_and_a_taker_leave_no_orphan(wire: FaultProxy, model: type[Model]) -> None:
    """Each round: A holds a and B holds b; two threads each load A and B and swap their emails
    in atomic(), while a third takes a (it waits until a swap has handed a to B, moves B to c
    and, a moment later, saves T with a). Real threads over HTTP, through the proxy; after every
    round (nothing in flight) the invariant must hold. Each round has its own keys and values.

    The proxy holds back a write that carries no record item (only lock items): that
    is the follow-up a refused stale write sends today, and holding it (250 ms: a few requests
    of this server) lets the taker act first.
    Without the hold the interleaving happens on its own only about once in a few hundred swaps
    on a 2-CPU machine (measured: 1 broken checkpoint in 160 rounds with random jitter), too
    rarely for a focused test. A write path that sends no such request is not slowed at all.
    """
    wire.inject(Fault.DELAY_BEFORE, times=10**9, delay=0.25, when=_lock_only)
    rounds = 8
    errors: list[str] = []
    broken: list[str] = []
    seen: set[str] = set()

    def guarded(act: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                act()
            except DynauniqueError:
                pass
            except Exception as exc:  # anything else is a defect of its own
                errors.append(repr(exc))
        return run

    for number in range(rounds):
        a, b, c = f"a{number}", f"b{number}", f"c{number}"
        model(pk=f"A{number}", email=a).save()
        model(pk=f"B{number}", email=b).save()

        def swap(n: int = number) -> None:
            x = model.get(f"A{n}", consistent_read=True)
            y = model.get(f"B{n}", consistent_read=True)
            x.email, y.email = y.email, x.email  # type: ignore[attr-defined]
            with atomic():
                x.save()
                y.save()

        def take(n: int = number, a: str = a, c: str = c) -> None:
            # Wait until a swap has handed a to B, then move B to c and take a with T.
            for _ in range(100):
                try:
                    holder = model.get_by_unique("email", a)
                except model.DoesNotExist:
                    continue  # the lock and its owner were read around a swap
                if holder.pk == f"B{n}":  # type: ignore[attr-defined]
                    holder.email = c  # type: ignore[attr-defined]
                    holder.save()
                    break
                time.sleep(0.005)
            time.sleep(0.3)  # a moment later (longer than the proxy holds a request)
            model(pk=f"T{n}", email=a).save()

        threads = [threading.Thread(target=guarded(swap)), threading.Thread(target=guarded(swap)),
                   threading.Thread(target=guarded(take))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Rounds share the table: report what each round broke, once.
        new = [p for p in check([model], wire.url).problems() if p not in seen]
        seen.update(new)
        if new:
            broken.append(f"round {number + 1}: " + "; ".join(new))
    assert not errors, errors
    assert not broken, f"{len(broken)} of {rounds} rounds broke the invariant:\n" + "\n".join(
        broken)
    wire.clear()
    assert_sound([model], wire.url)


# --- 4. locks come from the stored value ---------------------------------------------------------


def _take(field: str, first: Any, second: Any) -> None:
    """Save two records holding ``first`` and ``second`` in ``field``: when both store the same
    value, the second must be refused (``UniqueViolation``), or either value refused outright
    (``InvalidValueError``)."""
    try:
        Flagged(pk="F1", **{field: first}).save()
    except InvalidValueError:
        return
    with contextlib.suppress(UniqueViolation, InvalidValueError):
        Flagged(pk="F2", **{field: second}).save()
    stored = [raw_item(Flagged.Meta.host or "", "i11_typed", {"pk": {"S": pk}})
              for pk in ("F1", "F2")]
    attr = Flagged.get_attributes()[field].attr_name
    held = [item.get(attr) for item in stored if item is not None]
    assert len(held) < 2 or held[0] != held[1], (
        f"two records store {held[0]} in {field} ({first!r} and {second!r})")


@pytest.mark.parametrize(("first", "second"), [
    (True, 1), (1, True), (True, "yes"), ("yes", True), (True, "false"), ("false", True),
    (False, 0), (0, False),
])
def test_4_boolean_lock_is_the_stored_boolean(wire: FaultProxy, first: Any, second: Any) -> None:
    """``BooleanAttribute`` stores ``BOOL true`` for any truthy value: two such records must
    not both be accepted."""
    _take("flag", first, second)
    assert_sound([Flagged], wire.url)


@pytest.mark.parametrize(("first", "second"), [(b"abc", "abc"), ("abc", b"abc")],
                         ids=["bytes-then-str", "str-then-bytes"])
def test_4_binary_lock_is_the_stored_bytes(wire: FaultProxy, first: Any, second: Any) -> None:
    """``BinaryAttribute`` given ``"abc"`` stores the bytes ``abc``: one value with b"abc"."""
    _take("blob", first, second)
    assert_sound([Flagged], wire.url)


# --- 5. wrong types are refused before sending; Decimal works ------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("amount", True), ("amount", "12abc"), ("amount", Decimal("NaN")), ("name", 12),
], ids=["bool-in-number", "text-in-number", "decimal-nan", "int-in-unicode"])
def test_5_a_wrong_type_raises_invalid_value_naming_the_field_before_sending(
        wire: FaultProxy, field: str, value: Any) -> None:
    """Nothing reaches the wire; the error says which field."""
    with wire.intercept() as call, pytest.raises(InvalidValueError) as raised:
        Flagged(pk="F1", **{field: value}).save()
    assert field in str(raised.value), str(raised.value)
    assert call.requests == [], f"sent {call.operations()} before refusing"


@pytest.mark.parametrize(("first", "second"), [
    (1, Decimal("1.00")), (Decimal("1.00"), 1.0), (1.0, 1), (Decimal("1"), Decimal("1.000")),
], ids=["int-then-decimal", "decimal-then-float", "float-then-int", "decimal-then-decimal"])
def test_5_decimal_numbers_are_one_value(wire: FaultProxy, first: Any, second: Any) -> None:
    """``1``, ``1.0`` and ``Decimal("1.00")`` are one number: the second record is refused."""
    Flagged(pk="F1", amount=first).save()
    with pytest.raises(UniqueViolation):
        Flagged(pk="F2", amount=second).save()
    assert Flagged.get_by_unique("amount", Decimal("1.0")).pk == "F1"  # type: ignore[attr-defined]
    assert_sound([Flagged], wire.url)


# --- 6. a shared lock name never returns another model's record ---------------------------------


def test_6_get_by_unique_does_not_return_another_models_record(wire: FaultProxy) -> None:
    """Team T#1 holds "acme" under the shared lock name HANDLE: Person has no such record."""
    Team(pk="T#1", handle="acme").save()
    Person(pk="P#1", handle="ada").save()
    with pytest.raises(Person.DoesNotExist):
        found = Person.get_by_unique("handle", "acme")
        pytest.fail(f"returned {type(found).__name__} {found.pk!r} built from a Team's item")
    assert Team.get_by_unique("handle", "acme").pk == "T#1"  # type: ignore[attr-defined]
    assert Person.get_by_unique("handle", "ada").pk == "P#1"  # type: ignore[attr-defined]
    with pytest.raises(UniqueViolation):
        Person(pk="P#2", handle="acme").save()
    report = check([Person, Team], wire.url, model_of=_shared_model_of)
    assert report.clean, str(report)


# --- the semantics of the one write path ---------------------------------------------------------


@pytest.mark.parametrize("model", [GapPlain, GapVersioned], ids=["plain", "versioned"])
def test_a_never_loaded_save_over_an_existing_key_is_a_guarded_update(
        wire: FaultProxy, model: type[Model]) -> None:
    """The stored item is adopted and the save redone as an update guarded on it: the record
    ends with the new value, the old value's lock is gone, and every request after the first
    guards the record. A versioned object must hold the stored version to do so (PynamoDB's
    first-save guard refuses a new object over a stored record)."""
    model(pk="R", email="a", note="stored").save()
    extra = {"version": 1} if model is GapVersioned else {}
    with wire.intercept() as call:
        model(pk="R", email="b", **extra).save()
    assert not unguarded_followups(call.requests, [{"pk": {"S": "R"}}], ("pk",)), (
        call.operations())
    assert model.get("R", consistent_read=True).email == "b"  # type: ignore[attr-defined]
    model(pk="S", email="a").save()  # the old value is free again
    assert_sound([model], wire.url)


def test_a_new_versioned_object_over_an_existing_key_is_refused(wire: FaultProxy) -> None:
    GapVersioned(pk="R", email="a", note="stored").save()
    with wire.intercept() as call, pytest.raises(ConcurrentModificationError):
        GapVersioned(pk="R", email="b").save()
    assert call.operations() == ["TransactWriteItems"]
    assert GapVersioned.get("R", consistent_read=True).email == "a"
    assert_sound([GapVersioned], wire.url)
