"""The tools on a global table: ``repair`` (dynaunique/audit/_repair.py) and the stream guard's
repair write in the home region, as the library's writes do, whichever replica the models point
at and the check (or the checker) read."""

from __future__ import annotations

from typing import Any

from support.global_tables import EAST, WEST, make_global, member_model, regional_client

from dynaunique import audit
from dynaunique.streams import BatchResult, Checker, Reader
from dynaunique.testing import replication_state, set_replication_delay

LOCK = {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}}


def lock_in(endpoint: str, region: str, table: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = regional_client(endpoint, region).get_item(
        TableName=table, Key=LOCK, ConsistentRead=True).get("Item")
    return item


def test_repair_run_from_another_region_writes_the_missing_lock_in_the_home_region(
        dynaunique_db: str) -> None:
    away = member_model("gt_repair", WEST, dynaunique_db, home=EAST)
    make_global(away, dynaunique_db, regions=(EAST,))
    # A record without its lock (a raw write), replicated everywhere (delay 0).
    regional_client(dynaunique_db, EAST).put_item(
        TableName="gt_repair", Item={"PK": {"S": "M1"}, "email": {"S": "ada@x.io"}})
    set_replication_delay(dynaunique_db, 30)   # from now on nothing reaches the other replica
    report = audit.check([away])               # reads eu-west-1's replica, where away points
    assert [(f.kind, f.lock_key) for f in report.findings] == [
        ("missing", "UNIQ#EMAIL#ada@x.io")]
    result = audit.apply_repair(audit.plan_repair(report))
    assert result.ok, result.to_dict()
    home_lock = lock_in(dynaunique_db, EAST, "gt_repair")
    assert home_lock is not None and home_lock["owner"]["M"]["PK"] == {"S": "M1"}
    assert lock_in(dynaunique_db, WEST, "gt_repair") is None   # only by replication, later
    assert replication_state(dynaunique_db)["pending"] == 1


def test_the_stream_guard_s_repair_writes_in_the_home_region(dynaunique_db: str) -> None:
    away = member_model("gt_guard_repair", WEST, dynaunique_db, home=EAST, stream=True)
    make_global(away, dynaunique_db, regions=(EAST,))
    # A record without its lock, written raw where the models point (eu-west-1), replicated.
    regional_client(dynaunique_db, WEST).put_item(
        TableName="gt_guard_repair", Item={"PK": {"S": "M1"}, "email": {"S": "ada@x.io"}})
    set_replication_delay(dynaunique_db, 30)   # from now on nothing reaches the other replica
    checker = Checker([away], repair=True)
    batches: list[BatchResult] = []
    Reader(checker, checker.tables["gt_guard_repair"]).read_all(batches.append)
    assert [(o.action.kind, o.status) for b in batches for o in b.repairs] == [
        ("put_missing", "fixed")]
    home_lock = lock_in(dynaunique_db, EAST, "gt_guard_repair")
    assert home_lock is not None and home_lock["owner"]["M"]["PK"] == {"S": "M1"}
    assert lock_in(dynaunique_db, WEST, "gt_guard_repair") is None
