"""A model that declares no constraint behaves as PynamoDB's: class definition and reads.

Against the local server. Requests are recorded with a botocore ``before-send`` handler on the
PynamoDB connection the reads go through, so each test asserts exactly what was sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from support.compat_models import Inherited, Locked, Neighbour, Plain
from support.recorders import requests_sent

from dynaunique import InvalidValueError, Model
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint

# --- class definition: a base class may leave the keys to its subclasses --------------------------


def test_a_subclass_of_a_keyless_base_writes_and_reads(server: Any) -> None:
    use_endpoint(server, Inherited)
    create_tables(Inherited)
    Inherited(id="a", name="Ada").save()
    assert Inherited.get("a").name == "Ada"


# --- reads of tables without lock items -----------------------------------------------------------


@pytest.fixture
def server(dynaunique_db: str) -> str:
    return dynaunique_db


@pytest.fixture
def plain(server: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Plain's table with three items, and the requests Plain's connection sends afterwards."""
    use_endpoint(server, Plain, Locked, Neighbour)
    create_tables(Plain, Locked)
    for i in range(3):
        Plain(id=f"p{i}", n=i).save()
    # An item whose key looks like a lock: on a table without locks it is an ordinary record.
    Plain(id="UNIQ#EMAIL#x", n=9).save()
    yield from _recorded(Plain)


def _recorded(model: type[Model]) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    with requests_sent(model._get_connection().connection.client) as sent:
        yield sent


def test_scan_of_a_table_without_locks_sends_pynamodb_scan(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    assert sorted(p.id for p in Plain.scan()) == ["UNIQ#EMAIL#x", "p0", "p1", "p2"]
    assert plain == [("Scan", {"TableName": "compat_plain", "ReturnConsumedCapacity": "TOTAL"})]


def test_scan_with_a_filter_of_a_table_without_locks_sends_only_that_filter(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    assert sorted(p.id for p in Plain.scan(Plain.n >= 1)) == ["UNIQ#EMAIL#x", "p1", "p2"]
    assert [(op, body.get("FilterExpression")) for op, body in plain] == [("Scan", "#0 >= :0")]


def test_count_without_hash_key_of_a_table_without_locks_is_describe_table(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    assert Plain.count() == 4  # moto's ItemCount is exact; DynamoDB's is approximate
    assert plain == [("DescribeTable", {"TableName": "compat_plain"})]


def test_count_with_a_filter_and_no_hash_key_is_refused_as_pynamodb_refuses_it(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    with pytest.raises(ValueError, match=r"^A hash_key must be given to use filters$"):
        Plain.count(filter_condition=Plain.n >= 1)
    assert plain == []


def test_query_of_a_reserved_looking_key_on_a_table_without_locks_is_a_query(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    assert [p.n for p in Plain.query("UNIQ#EMAIL#x")] == [9]
    assert Plain.count("UNIQ#EMAIL#x") == 1
    assert [op for op, _ in plain] == ["Query", "Query"]


# --- reads of a shared table that holds locks -----------------------------------------------------


def test_a_model_without_constraints_on_a_table_with_locks_never_reads_them(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    Locked(pk="L1", email="ada@x.io").save()
    Neighbour(pk="N1", note="hi").save()
    raw = boto3.client("dynamodb", endpoint_url=Plain.Meta.host, region_name="us-east-1")
    stored = sorted(i["PK"]["S"] for i in raw.scan(TableName="compat_shared")["Items"])
    assert stored == ["L1", "N1", "UNIQ#EMAIL#ada@x.io"]
    assert sorted(n.pk for n in Neighbour.scan(Neighbour.note.exists())) == ["N1"]
    assert sorted(n.pk for n in Neighbour.scan()) == ["L1", "N1"]
    assert Neighbour.count() == 2
    with pytest.raises(InvalidValueError, match="reserved"):
        list(Neighbour.query("UNIQ#EMAIL#ada@x.io"))


def test_count_of_a_table_with_locks_is_a_scan_that_keeps_the_read_options(
        plain: list[tuple[str, dict[str, Any]]]) -> None:
    Locked(pk="L1", email="ada@x.io").save()
    sent = _recorded(Neighbour)
    requests = next(sent)
    assert Neighbour.count(consistent_read=True, rate_limit=1000) == 1
    assert requests == [("Scan", {
        "TableName": "compat_shared", "ReturnConsumedCapacity": "TOTAL", "ConsistentRead": True,
        "FilterExpression": "(NOT begins_with (#0, :0))", "ProjectionExpression": "#0",
        "ExpressionAttributeNames": {"#0": "PK"},
        "ExpressionAttributeValues": {":0": {"S": "UNIQ#"}}})]
    next(sent, None)


class Dropped(Model):
    """Its last constraint was dropped: the table keeps the ledger and, until the migration ran,
    the old locks. ``holds_locks`` keeps them out of its reads."""

    class Meta:
        table_name = "compat_dropped"
        holds_locks = True

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(null=True)


def test_holds_locks_keeps_lock_and_ledger_items_out_of_a_constraint_free_model(
        server: str) -> None:
    use_endpoint(server, Dropped)
    create_tables(Dropped)
    raw = boto3.client("dynamodb", endpoint_url=server, region_name="us-east-1")
    raw.put_item(TableName="compat_dropped", Item={
        "PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "owner": {"M": {"PK": {"S": "D1"}}}})
    raw.put_item(TableName="compat_dropped", Item={
        "PK": {"S": "UNIQ#~MIGRATION#app#0002_drop_email"}, "ledger": {"M": {}}})
    Dropped(pk="D1", email="ada@x.io").save()
    assert Dropped._du_info is not None and Dropped._du_info.constraints == ()
    assert Dropped._du_table_holds_locks() is True
    assert [d.pk for d in Dropped.scan()] == ["D1"]
    assert Dropped.count() == 1
    with pytest.raises(InvalidValueError, match="reserved"):
        list(Dropped.query("UNIQ#EMAIL#ada@x.io"))
