"""Models without constraints keep PynamoDB's keys and version guard, inside atomic() too.

Against the local server: number and binary hash and range keys are sent as PynamoDB serializes
them (a ``{"S": "7"}`` key would leave a number-keyed item in place); the first save of a
versioned object is guarded ``attribute_not_exists(version)`` as PynamoDB guards it, so a new
object never overwrites a stored record at version 3.
"""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.exceptions import PutError
from support.declare import declare
from support.tables import raw_tables

from dynaunique import ConcurrentModificationError, atomic
from dynaunique.attributes import (
    BinaryAttribute,
    NumberAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from dynaunique.testing import create_tables, use_endpoint

Reading = declare("Reading", "keys_readings", sensor=NumberAttribute(hash_key=True),
                  at=NumberAttribute(range_key=True), value=UnicodeAttribute(null=True))

Blob = declare("Blob", "keys_blobs", digest=BinaryAttribute(hash_key=True, legacy_encoding=False),
               part=BinaryAttribute(range_key=True, legacy_encoding=False),
               note=UnicodeAttribute(null=True))

Doc = declare("Doc", "keys_docs", pk=UnicodeAttribute(hash_key=True),
              body=UnicodeAttribute(null=True), version=VersionAttribute())


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, Reading, Blob, Doc)


def items(raw: Any, table: str) -> list[dict[str, Any]]:
    return list(raw.scan(TableName=table, ConsistentRead=True)["Items"])


@pytest.mark.parametrize("in_atomic", [False, True], ids=["plain", "atomic"])
def test_number_keys_through_save_update_and_delete(raw: Any, in_atomic: bool) -> None:
    reading = Reading(sensor=7, at=1700000000, value="a")
    if in_atomic:
        with atomic():
            reading.save()
    else:
        reading.save()
    assert items(raw, "keys_readings") == [
        {"sensor": {"N": "7"}, "at": {"N": "1700000000"}, "value": {"S": "a"}}]
    loaded = Reading.get(7, 1700000000, consistent_read=True)
    loaded.update([Reading.value.set("b")])
    assert Reading.get(7, 1700000000, consistent_read=True).value == "b"
    if in_atomic:
        with atomic():
            loaded.delete()
    else:
        loaded.delete()
    assert items(raw, "keys_readings") == []


def test_a_never_loaded_number_keyed_delete_in_atomic_deletes(raw: Any) -> None:
    Reading(sensor=8, at=2, value="x").save()
    with atomic():
        Reading(sensor=8, at=2).delete()
    assert items(raw, "keys_readings") == []


def test_condition_check_on_a_number_keyed_record(raw: Any) -> None:
    Reading(sensor=9, at=3, value="x").save()
    doc = Doc(pk="D#1", body="b")
    with atomic() as tx:
        tx.condition_check(Reading, 9, 3, condition=Reading.value == "x")
        doc.save()
    assert Doc.get("D#1", consistent_read=True).body == "b"


@pytest.mark.parametrize("in_atomic", [False, True], ids=["plain", "atomic"])
def test_binary_keys_through_save_and_delete(raw: Any, in_atomic: bool) -> None:
    blob = Blob(digest=b"\x00\x01", part=b"p1", note="n")
    if in_atomic:
        with atomic():
            blob.save()
    else:
        blob.save()
    assert items(raw, "keys_blobs") == [
        {"digest": {"B": b"\x00\x01"}, "part": {"B": b"p1"}, "note": {"S": "n"}}]
    if in_atomic:
        with atomic():
            blob.delete()
    else:
        blob.delete()
    assert items(raw, "keys_blobs") == []


def _stored_at_version_3(raw: Any) -> None:
    raw.put_item(TableName="keys_docs", Item={"pk": {"S": "D#1"}, "body": {"S": "kept"},
                                              "version": {"N": "3"}})


def test_first_save_of_a_versioned_object_never_overwrites_a_stored_record(raw: Any) -> None:
    _stored_at_version_3(raw)
    with pytest.raises(PutError):
        Doc(pk="D#1", body="new").save()
    assert items(raw, "keys_docs") == [
        {"pk": {"S": "D#1"}, "body": {"S": "kept"}, "version": {"N": "3"}}]


def test_first_save_of_a_versioned_object_in_atomic_is_guarded_as_pynamodb_guards_it(
        raw: Any) -> None:
    _stored_at_version_3(raw)
    with atomic(dry_run=True) as dry:
        Doc(pk="D#1", body="new").save()
    put = dry.request
    assert put is not None
    # One write alone is sent as the plain request it is (no transaction needed).
    assert put["Operation"] == "PutItem"
    assert put["ConditionExpression"] == "attribute_not_exists (#0)"
    assert put["ExpressionAttributeNames"] == {"#0": "version"}
    with pytest.raises(ConcurrentModificationError), atomic():
        Doc(pk="D#1", body="new").save()
    assert items(raw, "keys_docs") == [
        {"pk": {"S": "D#1"}, "body": {"S": "kept"}, "version": {"N": "3"}}]


def test_a_loaded_versioned_object_saves_with_the_next_version_in_atomic(raw: Any) -> None:
    _stored_at_version_3(raw)
    doc = Doc.get("D#1", consistent_read=True)
    doc.body = "changed"
    with atomic():
        doc.save()
    assert doc.version == 4
    assert items(raw, "keys_docs") == [
        {"pk": {"S": "D#1"}, "body": {"S": "changed"}, "version": {"N": "4"}}]


# Versioned, with a constraint: the first-save guard holds here too.
Member = declare("Member", "keys_members", pk=UnicodeAttribute(hash_key=True),
                 email=UnicodeAttribute(unique=True, null=True), version=VersionAttribute())


@pytest.fixture
def members(raw: Any, dynaunique_db: str) -> Any:
    use_endpoint(dynaunique_db, Member)
    create_tables(Member)
    Member(pk="M#1", email="a@x.io").save()
    stored = Member.get("M#1", consistent_read=True)
    stored.save()
    stored.save()   # version 3
    return raw


def test_a_never_loaded_versioned_save_over_a_stored_record_is_refused(members: Any) -> None:
    """PynamoDB guards a versioned object's first save ``attribute_not_exists(version)``: a new
    object must not overwrite (nor adopt) a stored record at version 3."""
    before = items(members, "keys_members")
    with pytest.raises(ConcurrentModificationError) as caught:
        Member(pk="M#1", email="b@x.io").save()
    assert isinstance(caught.value, PutError)
    assert items(members, "keys_members") == before


def test_a_never_loaded_object_holding_the_stored_version_saves_over_it(members: Any) -> None:
    """With the version PynamoDB would guard on (the stored one), the save goes through, its
    locks moved: the stored item is adopted and the save redone as a guarded update."""
    member = Member(pk="M#1", email="b@x.io", version=3)
    member.save()
    assert member.version == 4
    stored = {item["pk"]["S"]: item for item in items(members, "keys_members")}
    assert stored["M#1"]["version"] == {"N": "4"}
    assert stored["M#1"]["email"] == {"S": "b@x.io"}
    assert set(stored) == {"M#1", "UNIQ#EMAIL#b@x.io"}
