"""save()/delete()/update() on a multi-Region strong consistency (MRSC) global table, against the
local server's STRONG tables (which replicate at once and refuse transactions): each write goes
by the protocol without transactions (dynaunique/_write/strong.py driving _write/mrsc.py), the
requests in their order, the errors as on any table, a stale copy refused, an orphan intent
taken over after its grace, a pending one waited for then refused, and a race of writers in
both regions leaving exactly one holder and a clean table. Sync and async."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import botocore.exceptions
import pytest
from support import invariants
from support.global_tables import EAST, WEST, check_region, make_global, regional_client
from support.recorders import body_of, listening, operation_of, requests_sent

from dynaunique import (
    ConcurrentModificationError,
    DynauniqueError,
    Model,
    OtherModelRecordError,
    OutcomeUnknownError,
    UniqueViolation,
    UnsupportedOperationError,
    atomic,
    audit,
    normalizers,
)
from dynaunique._transport.clients import connection_for
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint


def strong_model(table: str, region: str, endpoint: str, *, lease: float | None = None,
                 grace: float | None = None, backoff_ms: float | None = None) -> type[Model]:
    """A model on ``table`` in ``region`` (the same class name in both regions)."""
    meta: dict[str, Any] = {"table_name": table, "region": region}
    if lease is not None:
        meta.update(mrsc_lease_seconds=lease, mrsc_grace_seconds=grace)
    if backoff_ms is not None:
        meta.update(base_backoff_ms=backoff_ms)
    model = type("Member", (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), meta),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "email": UnicodeAttribute(unique=True, lock_name="EMAIL",   # (shared: a mixed table)
                                  normalize=normalizers.casefold),
        "name": UnicodeAttribute(null=True),
    })
    use_endpoint(endpoint, model)
    return model


def strong_pair(table: str, endpoint: str, **timing: float) -> tuple[type[Model], type[Model]]:
    """The model in the east and in the west region of one STRONG table."""
    east = strong_model(table, EAST, endpoint, **timing)
    make_global(east, endpoint, mode="STRONG")
    return east, strong_model(table, WEST, endpoint, **timing)


def items(endpoint: str, table: str, region: str = EAST) -> dict[str, dict[str, Any]]:
    found = regional_client(endpoint, region).scan(TableName=table, ConsistentRead=True)["Items"]
    return {item["PK"]["S"]: item for item in found}


def assert_clean(model: type[Model], endpoint: str) -> None:
    """Both regions clean (by the tests' checker and by `dynaunique check`), and no lock left
    marked pending."""
    assert audit.check([model]).findings == ()
    for region in (EAST, WEST):
        assert check_region(model, endpoint, region).clean
        for key, item in items(endpoint, model.Meta.table_name, region).items():
            assert "mrsc_pending" not in item, key


def test_create_change_and_delete_go_by_the_protocol(dynaunique_db: str) -> None:
    east, west = strong_pair("mrsc_basic", dynaunique_db)
    with requests_sent(connection_for(east).client) as sent:
        ada = east(pk="A", email="ada@x.io")
        ada.save()
    # The mode asked once; then the lock's intent, the record, the intent cleared.
    assert [op for op, _ in sent] == ["DescribeTable", "PutItem", "PutItem", "UpdateItem"]
    lock = items(dynaunique_db, "mrsc_basic")["UNIQ#EMAIL#ada@x.io"]
    assert set(lock) == {"PK", "owner", "model", "constraint", "value", "created",
                         "mrsc_token", "mrsc_at"}
    assert lock["owner"] == {"M": {"PK": {"S": "A"}}}
    assert_clean(east, dynaunique_db)

    with requests_sent(connection_for(east).client) as sent:
        ada.email = "ada@lovelace.io"
        ada.save()
    assert [op for op, _ in sent] == ["PutItem", "PutItem", "UpdateItem", "GetItem", "GetItem",
                                      "DeleteItem"]
    assert sorted(items(dynaunique_db, "mrsc_basic")) == ["A", "UNIQ#EMAIL#ada@lovelace.io"]
    ada.name = "Ada"   # no unique value changes: one conditional PutItem, as on any table
    with requests_sent(connection_for(east).client) as sent:
        ada.save()
    assert [op for op, _ in sent] == ["PutItem"]
    # The freed value is free in the other region at once.
    west(pk="B", email="ADA@x.io").save()
    with pytest.raises(UniqueViolation) as taken:
        east(pk="C", email="ada@lovelace.io").save()
    assert (taken.value.owner, taken.value.fields, taken.value.value) == (
        {"PK": "A"}, ("email",), "ada@lovelace.io")
    assert sorted(items(dynaunique_db, "mrsc_basic")) == [
        "A", "B", "UNIQ#EMAIL#ada@lovelace.io", "UNIQ#EMAIL#ada@x.io"]
    with requests_sent(connection_for(east).client) as sent:
        ada.delete()
    assert [op for op, _ in sent] == ["DeleteItem", "GetItem", "GetItem", "DeleteItem"]
    west(pk="B").delete()   # never loaded: read first
    assert items(dynaunique_db, "mrsc_basic") == {}
    assert_clean(east, dynaunique_db)


def test_update_actions_on_a_unique_value(dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_update", dynaunique_db)
    ada = east(pk="A", email="ada@x.io")
    ada.save()
    ada.update(actions=[east.email.set("ada@lovelace.io")])
    assert ada.email == "ada@lovelace.io"
    assert sorted(items(dynaunique_db, "mrsc_update")) == ["A", "UNIQ#EMAIL#ada@lovelace.io"]
    assert_clean(east, dynaunique_db)


def test_a_stale_copy_fails_and_writes_nothing(dynaunique_db: str) -> None:
    east, west = strong_pair("mrsc_stale", dynaunique_db)
    east(pk="A", email="a@x.io").save()
    stale = east.get("A", consistent_read=True)
    fresh = west.get("A", consistent_read=True)
    fresh.email = "b@x.io"
    fresh.save()
    stale.email = "c@x.io"
    with pytest.raises(ConcurrentModificationError, match="modified since"):
        stale.save()
    assert sorted(items(dynaunique_db, "mrsc_stale")) == ["A", "UNIQ#EMAIL#b@x.io"]
    assert_clean(east, dynaunique_db)


def test_atomic_of_two_records_is_refused_before_anything_is_sent(dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_atomic", dynaunique_db)
    east(pk="A", email="a@x.io").save()
    with (requests_sent(connection_for(east).client) as sent,
          pytest.raises(UnsupportedOperationError, match="several records"), atomic()):
        east(pk="B", email="b@x.io").save()
        east(pk="C", email="c@x.io").save()
    assert sent == []
    with atomic():   # one record: the protocol, as save()
        east(pk="B", email="b@x.io").save()
    assert sorted(items(dynaunique_db, "mrsc_atomic")) == [
        "A", "B", "UNIQ#EMAIL#a@x.io", "UNIQ#EMAIL#b@x.io"]


def _pending_intent(endpoint: str, table: str, value: str, owner: str, at: float) -> None:
    """A lock of ``value`` left pending by a writer of record ``owner`` that never wrote it."""
    regional_client(endpoint, EAST).put_item(TableName=table, Item={
        "PK": {"S": f"UNIQ#EMAIL#{value}"}, "owner": {"M": {"PK": {"S": owner}}},
        "model": {"S": "Member"}, "constraint": {"S": "EMAIL"}, "value": {"S": value},
        "created": {"S": "2026-01-01T00:00:00.000000+00:00"}, "mrsc_token": {"S": "t0"},
        "mrsc_pending": {"S": "t0"}, "mrsc_at": {"N": repr(at)}})


def test_an_orphan_intent_past_its_grace_is_taken_over(dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_orphan", dynaunique_db, lease=0.2, grace=0.5)
    _pending_intent(dynaunique_db, "mrsc_orphan", "a@x.io", "GONE", time.time() - 1)
    east(pk="A", email="a@x.io").save()
    lock = items(dynaunique_db, "mrsc_orphan")["UNIQ#EMAIL#a@x.io"]
    assert lock["owner"] == {"M": {"PK": {"S": "A"}}} and "mrsc_pending" not in lock
    assert_clean(east, dynaunique_db)


def test_a_pending_intent_within_its_grace_makes_the_write_wait_then_fail(
        dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_busy", dynaunique_db, lease=5, grace=60)
    _pending_intent(dynaunique_db, "mrsc_busy", "a@x.io", "OTHER", time.time())
    with requests_sent(connection_for(east).client) as sent, pytest.raises(
            ConcurrentModificationError, match=r"'a@x\.io' is being written by another record"):
        east(pk="A", email="a@x.io").save()
    # Each of the flush's 4 attempts: its intent refused, the owner read, nothing left.
    assert [op for op, _ in sent] == ["DescribeTable", *["PutItem", "GetItem"] * 4]
    assert sorted(items(dynaunique_db, "mrsc_busy")) == ["UNIQ#EMAIL#a@x.io"]  # left as met


def test_async_writes_go_by_the_same_protocol(dynaunique_db: str) -> None:
    east, west = strong_pair("mrsc_async", dynaunique_db)

    async def main() -> None:
        ada = east(pk="A", email="ada@x.io")
        await ada.asave()
        ada.email = "ada@lovelace.io"
        await ada.asave()
        with pytest.raises(UniqueViolation):
            await west(pk="B", email="ada@lovelace.io").asave()
        await ada.aupdate(actions=[east.email.set("ada@x.io")])
        assert sorted(items(dynaunique_db, "mrsc_async")) == ["A", "UNIQ#EMAIL#ada@x.io"]
        await ada.adelete()

    asyncio.run(main())
    assert items(dynaunique_db, "mrsc_async") == {}


def test_writers_in_both_regions_race_for_one_value(dynaunique_db: str) -> None:
    # Losers that meet the winner's intent still pending back off; PynamoDB's base_backoff_ms
    # sets how long (4x the default: on a loaded machine the winner's 3 requests can take a
    # while, and a loser whose back-offs all end first would see ConcurrentModificationError).
    east, west = strong_pair("mrsc_race", dynaunique_db, backoff_ms=100)
    writers = 6
    barrier = threading.Barrier(writers)
    outcomes: list[str] = []

    def claim(n: int) -> None:
        model = east if n % 2 else west
        barrier.wait()
        try:
            model(pk=f"R{n}", email="same@x.io").save()
            outcomes.append("won")
        except UniqueViolation:
            outcomes.append("taken")

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["taken"] * (writers - 1) + ["won"]
    assert_clean(east, dynaunique_db)


def test_a_dry_run_and_explain_list_the_protocols_requests(dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_dry", dynaunique_db)
    ada = east(pk="A", email="ada@x.io")
    ada.save()
    ada.email = "ada@lovelace.io"
    with requests_sent(connection_for(east).client) as sent:
        shown = ada.save(dry_run=True)
        with atomic(dry_run=True) as tx:
            ada.save()
    assert sent == []
    assert shown["Protocol"] == "MRSC"
    requests = shown["Requests"]
    assert [r["Operation"] for r in requests] == ["PutItem", "PutItem", "UpdateItem", "GetItem",
                                                  "GetItem", "DeleteItem"]
    intent, record, clear, seek, owner, drop = requests
    assert intent["Item"]["PK"] == {"S": "UNIQ#EMAIL#ada@lovelace.io"}
    assert intent["Item"]["mrsc_pending"] == intent["Item"]["mrsc_token"]
    assert intent["ConditionExpression"] == "attribute_not_exists(#n0)"
    assert record["Item"]["email"] == {"S": "ada@lovelace.io"}
    assert clear["UpdateExpression"] == "REMOVE #n1"
    assert seek["Key"] == {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}}
    assert owner["Key"] == {"PK": {"S": "A"}} and owner["ConsistentRead"] is True
    assert drop["ConditionExpression"] == "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2"
    assert drop["ExpressionAttributeValues"] == {
        ":v0": {"S": "<as read>"}, ":v1": {"M": {"PK": {"S": "A"}}}, ":v2": {"N": "<as read>"}}
    assert '"Protocol": "MRSC"' in tx.explain()
    assert sorted(items(dynaunique_db, "mrsc_dry")) == ["A", "UNIQ#EMAIL#ada@x.io"]


def test_a_never_loaded_save_over_a_record_becomes_an_update(dynaunique_db: str) -> None:
    east, west = strong_pair("mrsc_adopt", dynaunique_db)
    east(pk="A", email="a@x.io").save()
    west(pk="A", email="b@x.io").save()   # met the record: adopted, its old lock released
    assert sorted(items(dynaunique_db, "mrsc_adopt")) == ["A", "UNIQ#EMAIL#b@x.io"]
    assert_clean(east, dynaunique_db)


def test_a_lock_held_by_another_models_record_is_judged_as_that_models(
        dynaunique_db: str) -> None:
    """On a table two models share, a lock's owner is judged by the locks ITS model requires:
    judged as the writer's model, the owner would hold nothing and its lock be taken over."""
    east, _ = strong_pair("mrsc_mixed", dynaunique_db)
    team = type("Team", (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": "mrsc_mixed", "region": EAST}),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "address": UnicodeAttribute(unique=True, lock_name="EMAIL",
                                    normalize=normalizers.casefold),
    })
    use_endpoint(dynaunique_db, team)
    team(pk="T", address="x@x.io").save()
    with pytest.raises(UniqueViolation) as taken:
        east(pk="A", email="X@x.io").save()
    assert taken.value.owner == {"PK": "T"}
    assert sorted(items(dynaunique_db, "mrsc_mixed")) == ["T", "UNIQ#EMAIL#x@x.io"]
    assert invariants.check([east, team], dynaunique_db, region=EAST).clean


def test_tasks_in_both_regions_race_for_one_value(dynaunique_db: str) -> None:
    east, west = strong_pair("mrsc_arace", dynaunique_db, backoff_ms=100)   # (as above)

    async def claim(n: int) -> str:
        try:
            await (east if n % 2 else west)(pk=f"R{n}", email="same@x.io").asave()
        except UniqueViolation:
            return "taken"
        return "won"

    async def main() -> list[str]:
        return list(await asyncio.gather(*(claim(n) for n in range(6))))

    assert sorted(asyncio.run(main())) == ["taken"] * 5 + ["won"]
    assert_clean(east, dynaunique_db)


class Crash(BaseException):
    """The writer's process stops (no handler of the library's runs)."""


def test_a_writer_stopped_after_its_intent_leaves_a_write_in_flight_then_taken_over(
        dynaunique_db: str) -> None:
    """End to end with the audit: the intent a stopped writer left is `pending` for check (a
    write in flight: clean), and after its grace period the next writer of the value takes it
    over; the table is clean, by check too."""
    east, west = strong_pair("mrsc_crash", dynaunique_db, lease=0.2, grace=0.5)

    def crash(request: Any, **_: Any) -> None:
        if operation_of(request) == "PutItem" and body_of(request)["Item"]["PK"] == {"S": "A"}:
            raise Crash

    with listening([connection_for(east).client], crash), pytest.raises(Crash):
        east(pk="A", email="a@x.io").save()
    assert sorted(items(dynaunique_db, "mrsc_crash")) == ["UNIQ#EMAIL#a@x.io"]
    report = audit.check([east])
    assert [(f.kind, f.lock_key) for f in report.findings] == [("pending", "UNIQ#EMAIL#a@x.io")]
    assert report.clean
    time.sleep(0.6)   # its grace period ends
    west(pk="B", email="a@x.io").save()
    lock = items(dynaunique_db, "mrsc_crash")["UNIQ#EMAIL#a@x.io"]
    assert lock["owner"] == {"M": {"PK": {"S": "B"}}} and "mrsc_pending" not in lock
    assert audit.check([east]).findings == ()
    assert_clean(east, dynaunique_db)


def _refuse_record_put(error: BaseException) -> Any:
    def handler(request: Any, **_: Any) -> None:
        if operation_of(request) == "PutItem" and body_of(request)["Item"]["PK"] == {"S": "A"}:
            raise error
    return handler


def test_a_record_write_refused_outright_releases_its_intents(dynaunique_db: str) -> None:
    """A refusal that is no failed condition (a validation error): nothing of the write is
    applied, its intents are released before the error is raised — the value is not left
    busy for a grace period."""
    east, _ = strong_pair("mrsc_refused", dynaunique_db)
    refusal = botocore.exceptions.ClientError(
        {"Error": {"Code": "ValidationException", "Message": "no"}}, "PutItem")
    with (requests_sent(connection_for(east).client) as sent,   # (it hears the refused ones)
          listening([connection_for(east).client], _refuse_record_put(refusal)),
          pytest.raises(DynauniqueError, match="ValidationException")):
        east(pk="A", email="a@x.io").save()
    assert [op for op, _ in sent] == ["DescribeTable", "PutItem", "PutItem", "DeleteItem"]
    assert items(dynaunique_db, "mrsc_refused") == {}
    east(pk="B", email="a@x.io").save()   # at once: not busy


def test_an_intent_put_never_answered_is_released_before_the_outcome_is_unknown(
        dynaunique_db: str) -> None:
    east, _ = strong_pair("mrsc_unanswered", dynaunique_db)

    def lose_intent(request: Any, **_: Any) -> None:
        if operation_of(request) == "PutItem" and "mrsc_pending" in body_of(request)["Item"]:
            raise botocore.exceptions.ReadTimeoutError(endpoint_url=dynaunique_db)

    with (requests_sent(connection_for(east).client) as sent,
          listening([connection_for(east).client], lose_intent),
          pytest.raises(OutcomeUnknownError)):
        east(pk="A", email="a@x.io").save()
    # The intent put and its 3 resends, then its release (conditioned on the token).
    assert [op for op, _ in sent] == ["DescribeTable", *["PutItem"] * 4, "DeleteItem"]
    assert items(dynaunique_db, "mrsc_unanswered") == {}
    east(pk="A", email="a@x.io").save()   # repeating the call works at once
    assert sorted(items(dynaunique_db, "mrsc_unanswered")) == ["A", "UNIQ#EMAIL#a@x.io"]


def _plain(table: str, region: str, endpoint: str) -> type[Model]:
    """A model without constraints on ``table`` (the record's sort of key, another shape)."""
    model = type("Note", (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": table, "region": region}),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "text": UnicodeAttribute(null=True),
    })
    use_endpoint(endpoint, model)
    return model


def _mixed_steps(member: type[Model], note: type[Model]) -> None:
    """A plain model's own record written and deleted beside a constrained one; then written
    over the constrained record's key: refused, as on any table (it would drop A's value and
    leave its lock), nothing written."""
    member(pk="A", email="ada@x.io").save()
    note(pk="N", text="hello").save()
    note.get("N").delete()
    with pytest.raises(OtherModelRecordError):
        note(pk="A", text="over").save()


@pytest.mark.parametrize("mode", ["STRONG", None], ids=["mrsc", "one-region"])
def test_a_model_without_constraints_on_the_table_stays_inside_the_guarantee(
        dynaunique_db: str, mode: str | None) -> None:
    """The same writes on an MRSC table and on a one-region one leave the same items, clean."""
    table = f"mrsc_plain_{(mode or 'one').lower()}"
    member = strong_model(table, EAST, dynaunique_db)
    if mode is not None:
        make_global(member, dynaunique_db, mode=mode)
    else:
        create_tables(member)
    note = _plain(table, EAST, dynaunique_db)
    _mixed_steps(member, note)
    assert sorted(items(dynaunique_db, table)) == ["A", "UNIQ#EMAIL#ada@x.io"]
    assert invariants.check([member, note], dynaunique_db, region=EAST).clean
    assert audit.check([member, note]).findings == ()


def test_a_model_without_constraints_async_on_an_mrsc_table(dynaunique_db: str) -> None:
    member, _ = strong_pair("mrsc_plain_aio", dynaunique_db)
    note = _plain("mrsc_plain_aio", EAST, dynaunique_db)

    async def main() -> None:
        await member(pk="A", email="ada@x.io").asave()
        await note(pk="N", text="hello").asave()
        await note(pk="N").adelete()
        with pytest.raises(OtherModelRecordError):
            await note(pk="A", text="over").asave()

    asyncio.run(main())
    assert sorted(items(dynaunique_db, "mrsc_plain_aio")) == ["A", "UNIQ#EMAIL#ada@x.io"]
    assert_clean(member, dynaunique_db)
    assert invariants.check([member, note], dynaunique_db, region=EAST).clean
