"""dynaunique on global tables (dynaunique/_transport/regions.py), against the local server's
replicas: the table's mode learned once, a write without a home region refused with nothing
written, strong consistency written without transactions (test_global_tables_mrsc.py), and with
a home region every write and consistent lookup served there, so races from two regions leave
every replica clean once replication settles. Sync and async."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.global_tables import (
    EAST,
    WEST,
    check_region,
    make_global,
    member_model,
    regional_client,
)
from support.recorders import requests_sent

from dynaunique import GlobalTableError, UniqueViolation
from dynaunique._transport import regions as _regions
from dynaunique._transport.clients import connection_for
from dynaunique.testing import create_tables, replication_state, set_replication_delay

REPLICATION = 0.05


def items_in(endpoint: str, table: str, region: str) -> list[str]:
    found = regional_client(endpoint, region).scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(item["PK"]["S"] for item in found)


def settle(endpoint: str) -> None:
    """Wait until every replicated version has been applied."""
    time.sleep(REPLICATION + 0.02)
    for _ in range(50):
        if replication_state(endpoint)["pending"] == 0:
            return
        time.sleep(REPLICATION)
    raise AssertionError("replication did not drain")


def test_the_mode_is_asked_once_per_table_and_process(dynaunique_db: str) -> None:
    east = member_model("gt_once", EAST, dynaunique_db, home=EAST)
    make_global(east, dynaunique_db)
    with requests_sent(connection_for(east).client) as sent:
        for n in range(3):
            east(pk=f"M{n}", email=f"m{n}@x.io").save()
    assert [op for op, _ in sent] == ["DescribeTable", *["TransactWriteItems"] * 3]
    assert _regions.table_mode("gt_once", connection_for(east), dynaunique_db) == \
        _regions.TableMode("gt_once", EAST, (WEST,), "EVENTUAL")


def test_without_a_home_region_the_first_write_is_refused_and_nothing_written(
        dynaunique_db: str) -> None:
    west = member_model("gt_nohome", WEST, dynaunique_db)
    make_global(member_model("gt_nohome", EAST, dynaunique_db), dynaunique_db)
    with requests_sent(connection_for(west).client) as sent:
        for _ in range(2):
            with pytest.raises(GlobalTableError) as refused:
                west(pk="M1", email="ada@x.io").save()
    assert [op for op, _ in sent] == ["DescribeTable"]  # the second refusal costs no request
    message = str(refused.value)
    assert "eu-west-1, us-east-1" in message and "Meta.home_region" in message
    assert "DYNAUNIQUE_HOME_REGION" in message and "[tool.dynaunique]" in message
    assert (refused.value.table, refused.value.mode) == ("gt_nohome", "EVENTUAL")
    settle(dynaunique_db)
    assert items_in(dynaunique_db, "gt_nohome", EAST) == items_in(
        dynaunique_db, "gt_nohome", WEST) == []


def test_a_strong_consistency_table_is_written_without_transactions(dynaunique_db: str) -> None:
    """A model's save goes by the protocol (test_global_tables_mrsc.py); any other write of the
    table, a transaction (the audit's repair, a migration), is refused naming its mode."""
    east = member_model("gt_strong", EAST, dynaunique_db, home=EAST)
    make_global(east, dynaunique_db, mode="STRONG")
    with requests_sent(connection_for(east).client) as sent:
        east(pk="M1", email="ada@x.io").save()
    assert "TransactWriteItems" not in [op for op, _ in sent]
    assert items_in(dynaunique_db, "gt_strong", EAST) == ["M1", "UNIQ#EMAIL#ada@x.io"]
    with pytest.raises(GlobalTableError, match="strong consistency") as refused:
        _regions.route(east.Meta, lambda _meta: connection_for(east))
    assert refused.value.mode == "STRONG"


def test_writes_and_consistent_lookups_go_home_plain_reads_stay_local(
        dynaunique_db: str) -> None:
    west = member_model("gt_route", WEST, dynaunique_db, home=EAST)
    make_global(member_model("gt_route", EAST, dynaunique_db), dynaunique_db)
    set_replication_delay(dynaunique_db, 30)   # nothing reaches the other region meanwhile
    west(pk="M1", email="ada@x.io").save()
    assert items_in(dynaunique_db, "gt_route", EAST) == ["M1", "UNIQ#EMAIL#ada@x.io"]
    assert items_in(dynaunique_db, "gt_route", WEST) == []
    assert west.get_by_unique("email", "ADA@x.io").pk == "M1"   # asked home
    with pytest.raises(west.DoesNotExist):
        west.get("M1", consistent_read=True)   # a plain read: the local replica
    west(pk="M1").delete()   # a never-loaded delete reads its record at home
    assert items_in(dynaunique_db, "gt_route", EAST) == []


def test_the_home_region_from_the_environment_and_from_pyproject(
        dynaunique_db: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    west = member_model("gt_settings", WEST, dynaunique_db)
    make_global(member_model("gt_settings", EAST, dynaunique_db), dynaunique_db)
    set_replication_delay(dynaunique_db, 30)
    monkeypatch.setenv(_regions.HOME_REGION_ENV, EAST)
    west(pk="M1", email="a@x.io").save()
    monkeypatch.delenv(_regions.HOME_REGION_ENV)
    (tmp_path / "pyproject.toml").write_text('[tool.dynaunique]\nhome_region = "us-east-1"\n')
    monkeypatch.chdir(tmp_path)
    _regions.forget()
    west(pk="M2", email="b@x.io").save()
    assert items_in(dynaunique_db, "gt_settings", EAST) == [
        "M1", "M2", "UNIQ#EMAIL#a@x.io", "UNIQ#EMAIL#b@x.io"]
    assert items_in(dynaunique_db, "gt_settings", WEST) == []


def test_a_home_region_without_a_replica_is_refused(dynaunique_db: str) -> None:
    east = member_model("gt_elsewhere", EAST, dynaunique_db, home="ap-south-1")
    make_global(east, dynaunique_db)
    with pytest.raises(GlobalTableError, match="ap-south-1 holds no replica"):
        east(pk="M1", email="a@x.io").save()


# --- races from two regions ----------------------------------------------------------------------

THREADS, ROUNDS, EMAILS = 6, 4, 3


def race_models(endpoint: str, table: str) -> tuple[type[Any], type[Any]]:
    east = member_model(table, EAST, endpoint, home=EAST)
    west = member_model(table, WEST, endpoint, home=EAST)
    make_global(east, endpoint)
    set_replication_delay(endpoint, REPLICATION)
    return east, west


def judge(endpoint: str, east: type[Any], won: dict[str, str]) -> None:
    """Every region clean, holding exactly the winners' records and locks."""
    settle(endpoint)
    for region in (EAST, WEST):
        report = check_region(east, endpoint, region)
        assert report.clean, (region, str(report))
        assert report.records == len(won)
        assert items_in(endpoint, east.Meta.table_name, region) == sorted(
            [*won, *(f"UNIQ#EMAIL#{email}" for email in won.values())])


def test_threads_in_two_regions_with_a_home_region_keep_every_replica_unique(
        dynaunique_db: str) -> None:
    east, west = race_models(dynaunique_db, "gt_race")
    won: dict[str, str] = {}
    outcomes: list[str] = []
    counter = itertools.count()

    def signup(model: type[Any], email: str, start: threading.Barrier) -> None:
        pk = f"M{next(counter)}"
        start.wait()
        try:
            model(pk=pk, email=email).save()
        except UniqueViolation:
            outcomes.append("violation")
            return
        outcomes.append("saved")
        won[pk] = email

    for round_ in range(ROUNDS):
        start = threading.Barrier(THREADS)
        threads = [threading.Thread(target=signup, args=(
            (east, west)[i % 2], f"r{round_}e{i % EMAILS}@x.io", start)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(outcomes) == THREADS * ROUNDS
    assert outcomes.count("saved") == EMAILS * ROUNDS == len(set(won.values()))
    judge(dynaunique_db, east, won)


@pytest.mark.anyio
async def test_async_tasks_in_two_regions_with_a_home_region_keep_every_replica_unique(
        dynaunique_aio_db: str) -> None:
    east, west = race_models(dynaunique_aio_db, "gt_race_aio")
    won: dict[str, str] = {}
    for round_ in range(ROUNDS):
        members = [(east, west)[i % 2](pk=f"M{round_}-{i}", email=f"r{round_}e{i % EMAILS}@x.io")
                   for i in range(THREADS)]
        outcomes = await asyncio.gather(*(m.asave() for m in members), return_exceptions=True)
        for member, outcome in zip(members, outcomes, strict=True):
            if not isinstance(outcome, BaseException):
                won[member.pk] = member.email
            else:
                assert isinstance(outcome, UniqueViolation), outcome
    assert len(won) == EMAILS * ROUNDS == len(set(won.values()))
    judge(dynaunique_aio_db, east, won)


@pytest.mark.anyio
async def test_async_without_a_home_region_is_refused_and_nothing_written(
        dynaunique_aio_db: str) -> None:
    west = member_model("gt_nohome_aio", WEST, dynaunique_aio_db)
    make_global(member_model("gt_nohome_aio", EAST, dynaunique_aio_db), dynaunique_aio_db)
    with pytest.raises(GlobalTableError, match="home region"):
        await west(pk="M1", email="ada@x.io").asave()
    assert items_in(dynaunique_aio_db, "gt_nohome_aio", EAST) == items_in(
        dynaunique_aio_db, "gt_nohome_aio", WEST) == []


def test_a_table_made_global_later_is_seen_once_the_process_forgets(dynaunique_db: str) -> None:
    west = member_model("gt_later", WEST, dynaunique_db)
    create_tables(west)   # one region: known so from CreateTable's answer
    west(pk="M1", email="a@x.io").save()
    regional_client(dynaunique_db, WEST).update_table(
        TableName="gt_later", ReplicaUpdates=[{"Create": {"RegionName": EAST}}])
    west(pk="M2", email="b@x.io").save()   # this process still takes it for one region
    _regions.forget()   # as a restart does
    with pytest.raises(GlobalTableError, match="none is set"):
        west(pk="M3", email="c@x.io").save()


def test_a_subclass_in_the_home_region_writes_there_though_its_parent_connected_elsewhere(
        dynaunique_db: str) -> None:
    """PynamoDB keeps one connection per class hierarchy and table: a subclass naming another
    region inherits its parent's connection once the parent has made one (pynamodb's
    ``_get_connection`` compares only the table name). A subclass bound to the home region would
    then write in the parent's region, bypassing the home region (found by the simulation)."""
    west, east = _parent_connected_in_west(dynaunique_db, "gt_subclass")
    east(pk="M1", email="ada@x.io").save()
    _written_at_home_only(dynaunique_db, "gt_subclass", "M1", east, west)


@pytest.mark.anyio
async def test_an_async_subclass_in_the_home_region_writes_there_too(
        dynaunique_aio_db: str) -> None:
    west, east = _parent_connected_in_west(dynaunique_aio_db, "gt_subclass_aio")
    await east(pk="M1", email="ada@x.io").asave()
    _written_at_home_only(dynaunique_aio_db, "gt_subclass_aio", "M1", east, west)


def _parent_connected_in_west(endpoint: str, table: str) -> tuple[Any, Any]:
    """A model bound to WEST (home EAST) that has made its PynamoDB connection, and a subclass
    of it bound to EAST; nothing replicates while the test looks."""
    set_replication_delay(endpoint, 30)
    west = member_model(table, WEST, endpoint, home=EAST)
    make_global(west, endpoint, regions=(EAST,))
    west._get_connection()   # the parent connects first, in WEST
    east = type("EastMember", (west,), {"__module__": __name__,
                                        "Meta": type("Meta", (west.Meta,), {"region": EAST})})
    return west, east


def _written_at_home_only(endpoint: str, table: str, pk: str, east: Any, west: Any) -> None:
    at_home = regional_client(endpoint, EAST).get_item(
        TableName=table, Key={"PK": {"S": pk}}, ConsistentRead=True)
    assert "Item" in at_home
    away = regional_client(endpoint, WEST).get_item(
        TableName=table, Key={"PK": {"S": pk}}, ConsistentRead=True)
    assert "Item" not in away   # not written in the parent's region (nothing replicated yet)
    assert connection_for(east).region == EAST
    assert connection_for(west).region == WEST   # the parent keeps its own
