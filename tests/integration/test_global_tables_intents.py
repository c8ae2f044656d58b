"""``check``, ``repair`` and the stream guard on the MRSC protocol's locks
(dynaunique/audit/_intents.py): lock items carrying a pending intent, written directly as the
protocol leaves them when its writer stops after each step (docs/global-tables.md, "What a crash
leaves"), on a multi-Region strong consistency table (no transactions) and on an ordinary one.

A pending intent within its grace period is a write in flight: reported ``pending``, never
touched. One whose owner holds the value is ``confirmable``: repair clears the mark conditioned
on its token. Past the grace period, its owner not holding the value, it is an orphan: repair
deletes it conditioned on the exact lock read — refused, and nothing deleted, when a writer took
the lock over between repair's read of the owner and its write (real threads, over HTTP).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import support.global_models as gm
from click.testing import CliRunner
from support.global_tables import EAST, make_global, member_model, regional_client

import dynaunique._write.mrsc as mrsc
from dynaunique import Model, audit
from dynaunique._lock.items import locks_of
from dynaunique._write.render import render_write
from dynaunique._write.writes import lock_put
from dynaunique.cli import cli
from dynaunique.streams import Checker
from dynaunique.testing import create_tables

TABLE = "gt_cli"   # support.global_models.Member's, so that the CLI can load it by module
STALE = 100.0      # seconds before now: past the 30 s grace period of mrsc.Timing()


def record(pk: str, email: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "email": {"S": email}}


def lock_of(model: type[Model], item: dict[str, Any]) -> dict[str, Any]:
    """The one lock item ``item`` requires, as the library's lock builder makes it."""
    info = model._du_info
    assert info is not None
    (ref,) = locks_of(info, model._du_lock_inputs(item)).values()
    _, params = render_write(lock_put(info, ref, {"PK": item["PK"]}, item))
    lock: dict[str, Any] = params["Item"]
    return lock


def intent(model: type[Model], item: dict[str, Any], token: str, at: float, *,
           pending: bool = True) -> dict[str, Any]:
    """``item``'s lock as the protocol's step 2 puts it (pending) or step 4 leaves it."""
    lock: dict[str, Any] = mrsc.intent_put(TABLE, lock_of(model, item), token, at, None)["Item"]
    if not pending:
        del lock[mrsc.PENDING_ATTR]
    return lock


def lock_key(email: str) -> dict[str, Any]:
    return {"PK": {"S": f"UNIQ#EMAIL#{email}"}}


class Raw:
    """The table read and written around the library (boto3, us-east-1)."""

    def __init__(self, endpoint: str) -> None:
        self.client = regional_client(endpoint, EAST)

    def put(self, *items: dict[str, Any]) -> None:
        for item in items:
            self.client.put_item(TableName=TABLE, Item=item)

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(
            TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
        return item


def member_table(endpoint: str, mode: str | None) -> type[Model]:
    """The model of the table, created: ``mode`` STRONG, an MRSC global table; None, an ordinary
    table."""
    model = member_model(TABLE, EAST, endpoint, home=EAST)
    if mode is None:
        create_tables(model)
    else:
        make_global(model, endpoint, mode=mode)
    return model


def table_with_intents(endpoint: str, mode: str | None) -> tuple[type[Model], Raw, dict[str, Any]]:
    """The table (:func:`member_table`), with the state each crash of a protocol writer leaves
    (and one clean record). Returns the locks written."""
    model = member_table(endpoint, mode)
    raw, now = Raw(endpoint), time.time()
    locks = {
        # after step 2, just now: a write in flight
        "fresh": intent(model, record("M1", "ada@x.io"), "T1", now),
        # after step 2, long ago: its writer stopped (a create: M2 never written)
        "stale": intent(model, record("M2", "bob@x.io"), "T2", now - STALE),
        # after step 3 (a create): M3 written, its intent still marked
        "written": intent(model, record("M3", "cy@x.io"), "T3", now),
        # after step 3 of a change dee -> eve: eve still marked, dee held by M4, which moved on
        "new": intent(model, record("M4", "eve@x.io"), "T4", now - STALE),
        "old": intent(model, record("M4", "dee@x.io"), "T0", now - STALE, pending=False),
        # a clean record, its lock held (the protocol's, cleared)
        "held": intent(model, record("M5", "fay@x.io"), "T5", now - STALE, pending=False),
    }
    raw.put(*locks.values(), record("M3", "cy@x.io"), record("M4", "eve@x.io"),
            record("M5", "fay@x.io"))
    return model, raw, locks


KINDS = [("confirmable", "UNIQ#EMAIL#cy@x.io", None), ("confirmable", "UNIQ#EMAIL#eve@x.io", None),
         ("orphan", "UNIQ#EMAIL#bob@x.io", "gone"), ("orphan", "UNIQ#EMAIL#dee@x.io", "changed"),
         ("pending", "UNIQ#EMAIL#ada@x.io", None)]


@pytest.mark.parametrize("mode", ["STRONG", None], ids=["mrsc", "one-region"])
def test_check_names_each_intent_and_repair_settles_them_by_the_protocol_s_rule(
        dynaunique_db: str, mode: str | None) -> None:
    model, raw, locks = table_with_intents(dynaunique_db, mode)
    report = audit.check([model])
    assert sorted((f.kind, f.lock_key, f.owner_state) for f in report.findings) == KINDS
    assert not report.clean
    pending = report.of_kind("pending")[0]
    assert pending.detail.startswith("a write in flight (") and not pending.repairable
    assert report.counts() == {"duplicate": 0, "missing": 0, "foreign_owner": 0, "orphan": 2,
                               "foreign_secret": 0, "unknown_constraint": 0, "unreadable": 0,
                               "confirmable": 2, "pending": 1}
    plan = audit.plan_repair(report)
    assert sorted((a.kind, a.finding.lock_key) for a in plan.actions) == [
        ("confirm_intent", "UNIQ#EMAIL#cy@x.io"), ("confirm_intent", "UNIQ#EMAIL#eve@x.io"),
        ("delete_orphan", "UNIQ#EMAIL#bob@x.io"), ("delete_orphan", "UNIQ#EMAIL#dee@x.io")]
    assert [f.lock_key for f in plan.waiting] == ["UNIQ#EMAIL#ada@x.io"] and not plan.unfixable
    delete = next(a for a in plan.actions if a.finding.lock_key.endswith("bob@x.io"))
    assert delete.request() == {"DeleteItem": {
        "TableName": TABLE, "Key": lock_key("bob@x.io"),
        "ConditionExpression": "#n0 = :v0 AND #n1 = :v1",
        "ExpressionAttributeNames": {"#n0": "mrsc_token", "#n1": "owner"},
        "ExpressionAttributeValues": {":v0": {"S": "T2"}, ":v1": {"M": {"PK": {"S": "M2"}}}}}}

    result = audit.apply_repair(plan)
    assert result.ok, result.to_dict()
    assert sorted((o.action.finding.lock_key, o.status, o.writes) for o in result.outcomes) == [
        ("UNIQ#EMAIL#bob@x.io", "fixed", 1), ("UNIQ#EMAIL#cy@x.io", "fixed", 1),
        ("UNIQ#EMAIL#dee@x.io", "fixed", 1), ("UNIQ#EMAIL#eve@x.io", "fixed", 1)]
    # Per settled lock: its owner read again (GetItem), then one conditional write; no
    # transaction (MRSC refuses them).
    assert result.cost.count("TransactWriteItems") == 0
    assert (result.cost.count("UpdateItem"), result.cost.count("DeleteItem")) == (2, 2)
    unmarked = {k: v for k, v in locks["written"].items() if k != mrsc.PENDING_ATTR}
    assert raw.get(lock_key("cy@x.io")) == unmarked
    assert raw.get(lock_key("eve@x.io")) == {
        k: v for k, v in locks["new"].items() if k != mrsc.PENDING_ATTR}
    assert raw.get(lock_key("bob@x.io")) is None and raw.get(lock_key("dee@x.io")) is None
    assert raw.get(lock_key("ada@x.io")) == locks["fresh"]   # a write in flight: untouched
    assert raw.get(lock_key("fay@x.io")) == locks["held"]

    again = audit.check([model])
    assert [(f.kind, f.lock_key) for f in again.findings] == [
        ("pending", "UNIQ#EMAIL#ada@x.io")]
    assert again.clean   # a write in flight is no disagreement


def test_the_cli_names_the_new_kinds_and_a_write_in_flight_exits_zero(dynaunique_db: str) -> None:
    _, raw, locks = table_with_intents(dynaunique_db, "STRONG")
    run = CliRunner().invoke
    checked = run(cli, ["check", gm.__name__, "--json", "--endpoint", dynaunique_db])
    assert checked.exit_code == 1, checked.output
    data = json.loads(checked.output)
    assert (data["counts"]["pending"], data["counts"]["confirmable"]) == (1, 2)
    assert sorted(f["kind"] for f in data["findings"]) == [
        "confirmable", "confirmable", "orphan", "orphan", "pending"]
    repaired = run(cli, ["repair", gm.__name__, "--yes", "--json", "--endpoint", dynaunique_db])
    assert repaired.exit_code == 0, repaired.output
    out = json.loads(repaired.output)
    assert [f["lock_key"] for f in out["plan"]["waiting"]] == ["UNIQ#EMAIL#ada@x.io"]
    assert sorted(a["kind"] for a in out["plan"]["actions"]) == [
        "confirm_intent", "confirm_intent", "delete_orphan", "delete_orphan"]
    assert out["result"]["counts"]["fixed"] == 4
    text = run(cli, ["check", gm.__name__, "--endpoint", dynaunique_db])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.output.split())
    assert "pending intent" in flat and "1 write(s) in flight (1 pending intent)" in flat
    assert raw.get(lock_key("ada@x.io")) == locks["fresh"]


def test_a_writer_taking_the_lock_over_between_repair_s_read_and_write_refuses_the_delete(
        dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, raw, locks = table_with_intents(dynaunique_db, "STRONG")
    plan = audit.plan_repair(audit.check([model]))
    # A writer of M9 meets M2's stale intent, judges it free and takes it over — conditioned on
    # exactly that intent, as the protocol's step 2' does — in another thread, right after
    # repair has read the owner M2 and judged the lock free, before repair's delete.
    stale = mrsc.Met.of(locks["stale"], "PK")
    takeover = mrsc.intent_put(TABLE, lock_of(model, record("M9", "bob@x.io")), "T9",
                               time.time(), stale)
    from dynaunique.audit import _intents

    read = _intents._call
    raced: list[str] = []

    def call(meter: Any, connection: Any, operation: str, **params: Any) -> dict[str, Any]:
        answer = read(meter, connection, operation, **params)
        if operation == "GetItem" and params["Key"] == {"PK": {"S": "M2"}} and not raced:
            writer = threading.Thread(target=lambda: raced.append(
                str(raw.client.put_item(**takeover)["ResponseMetadata"]["HTTPStatusCode"])))
            writer.start()
            writer.join()
        return answer

    monkeypatch.setattr(_intents, "_call", call)
    result = audit.apply_repair(plan)
    assert raced == ["200"]
    outcome = next(o for o in result.outcomes if o.action.finding.lock_key.endswith("bob@x.io"))
    # refused, read again: now M9's write in flight (the orphan settled by its taking it over),
    # which repair leaves alone
    assert (outcome.status, outcome.writes) == ("already_fixed", 1)
    assert outcome.message.startswith(
        "now a write in flight, left alone: lock EMAIL 'bob@x.io' is M9's pending intent")
    assert result.ok
    assert raw.get(lock_key("bob@x.io")) == takeover["Item"]


@pytest.mark.parametrize("mode", ["STRONG", None], ids=["mrsc", "one-region"])
def test_the_stream_guard_reports_no_write_in_flight_but_a_duplicate(
        dynaunique_db: str, mode: str | None) -> None:
    model = member_table(dynaunique_db, mode)
    raw, now = Raw(dynaunique_db), time.time()
    # ada: an intent in flight (M1 not written yet); cy: written, its mark not cleared yet;
    # dup: M6's intent marked, held by M6 — and M7 holds the same value (a write around it).
    raw.put(intent(model, record("M1", "ada@x.io"), "T1", now),
            intent(model, record("M3", "cy@x.io"), "T3", now), record("M3", "cy@x.io"),
            intent(model, record("M6", "dup@x.io"), "T6", now), record("M6", "dup@x.io"),
            record("M7", "DUP@x.io"))
    checker = Checker([model])
    batch = checker.judge([
        {"eventName": "INSERT", "eventSourceARN": f"arn:aws:dynamodb:{EAST}:1:table/{TABLE}/"
         "stream/x", "dynamodb": {"SequenceNumber": str(n), "Keys": {"PK": {"S": pk}},
                                  "NewImage": image}}
        for n, (pk, image) in enumerate([
            ("UNIQ#EMAIL#ada@x.io", intent(model, record("M1", "ada@x.io"), "T1", now)),
            ("M3", record("M3", "cy@x.io")), ("M7", record("M7", "DUP@x.io"))])])
    assert batch.failed == ()
    assert [(f.kind, f.lock_key) for f in batch.findings] == [
        ("duplicate", "UNIQ#EMAIL#dup@x.io")]


def test_watch_reads_an_mrsc_table_s_stream_and_reports_only_the_duplicate(
        dynaunique_db: str) -> None:
    import support.global_stream_models as gsm

    model = member_model("gt_watch", EAST, dynaunique_db, home=EAST, stream=True)
    make_global(model, dynaunique_db, mode="STRONG")
    client, now = regional_client(dynaunique_db, EAST), time.time()
    # As the protocol's writers leave them mid-write: M1's intent (M1 not written yet), M3
    # written with its mark not cleared yet; and M7 written around the library holding M6's
    # value while M6's intent is marked.
    for item in [intent(model, record("M1", "ada@x.io"), "T1", now),
                 intent(model, record("M3", "cy@x.io"), "T3", now), record("M3", "cy@x.io"),
                 intent(model, record("M6", "dup@x.io"), "T6", now), record("M6", "dup@x.io"),
                 record("M7", "DUP@x.io")]:
        client.put_item(TableName="gt_watch", Item=item)
    result = CliRunner().invoke(cli, ["watch", gsm.__name__, "--once", "--json",
                                      "--endpoint", dynaunique_db])
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["kind"], line["lock_key"]) for line in lines] == [
        ("duplicate", "UNIQ#EMAIL#dup@x.io")]


def test_check_on_mrsc_reads_a_suspect_again_when_its_lock_changed_during_the_read(
        dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = member_table(dynaunique_db, "STRONG")
    raw, now = Raw(dynaunique_db), time.time()
    marked = intent(model, record("M3", "cy@x.io"), "T3", now)
    raw.put(marked, record("M3", "cy@x.io"))
    from dynaunique.audit import _reads

    get = _reads._get
    gets: list[dict[str, Any]] = []

    def traced(table: Any, key: dict[str, Any], meter: Any) -> dict[str, Any] | None:
        item = get(table, key, meter)
        gets.append(key)
        if key == {"PK": {"S": "M3"}} and len(gets) == 2:
            # M3's writer clears its own mark (step 4) between check's reads of the lock.
            writer = threading.Thread(target=lambda: raw.client.update_item(
                **mrsc.intent_clear(TABLE, lock_key("cy@x.io"), "T3")))
            writer.start()
            writer.join()
        return item

    monkeypatch.setattr(_reads, "_get", traced)
    report = audit.check([model])
    assert report.findings == () and report.clean   # judged on the lock as it ended
    # lock, owner, lock (changed: read again) — owner, lock (the same: judged)
    assert gets == [lock_key("cy@x.io"), {"PK": {"S": "M3"}}, lock_key("cy@x.io"),
                    {"PK": {"S": "M3"}}, lock_key("cy@x.io")]
    assert report.cost.count("GetItem") == 5 and report.cost.count("TransactGetItems") == 0
