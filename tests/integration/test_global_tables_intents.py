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
import re
import threading
import time
from typing import Any

import attrs
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
        "ConditionExpression": "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2",
        "ExpressionAttributeNames": {"#n0": "mrsc_token", "#n1": "owner", "#n2": "mrsc_at"},
        "ExpressionAttributeValues": {":v0": {"S": "T2"}, ":v1": {"M": {"PK": {"S": "M2"}}},
                                      ":v2": locks["stale"][mrsc.AT_ATTR]}}}

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


def test_locks_shows_a_pending_intent_as_pending_not_held(dynaunique_db: str) -> None:
    """``who_holds``/``owner_locks`` (``dynaunique locks --exact`` / ``--owner``): a lock still
    marked pending is shown as a pending intent — its token, the writer's time, whether its
    grace period has ended — and never as a held lock; a cleared one is held."""
    model, _, locks = table_with_intents(dynaunique_db, "STRONG")
    at = {name: float(lock[mrsc.AT_ATTR]["N"]) for name, lock in locks.items()}
    fresh = audit.who_holds(model, "email", "ada@x.io")
    assert fresh is not None and fresh.intent == audit.Intent("T1", True, at["fresh"])
    held = audit.who_holds(model, "email", "fay@x.io")
    assert held is not None and held.intent == audit.Intent("T5", False, at["held"])
    owners = {pk: audit.owner_locks([model], pk).locks for pk in ("M3", "M5")}
    assert [(e.status, e.stored.intent) for e in owners["M3"] if e.stored] == [
        ("pending", audit.Intent("T3", True, at["written"]))]
    assert [e.status for e in owners["M5"]] == ["held"]

    run = CliRunner().invoke
    base = ["locks", gm.__name__, "--endpoint", dynaunique_db]
    exact = ["--constraint", "EMAIL", "--exact", "--value"]
    for value, token, within in (("ada@x.io", "T1", True), ("bob@x.io", "T2", False)):
        shown = run(cli, [*base, *exact, value, "--json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["lock"]["intent"] == {
            "token": token, "pending": True, "at": at["fresh" if within else "stale"],
            "within_grace": within}
    plain = run(cli, [*base, *exact, "fay@x.io", "--json"])
    assert json.loads(plain.output)["lock"]["intent"] == {
        "token": "T5", "pending": False, "at": at["held"], "within_grace": False}
    text = " ".join(run(cli, [*base, *exact, "ada@x.io"]).output.split())
    assert ("EMAIL ada@x.io: a pending intent (MRSC), not a held lock: token T1, put at "
            in text and "ago, within its 30 s grace period)" in text)
    past = " ".join(run(cli, [*base, *exact, "bob@x.io"]).output.split())
    assert re.search(r"token T2, put at [-\d]+ [:\d]+Z by its writer's clock \(1\d\d s ago, past "
                     r"its 30 s grace period\)", past), past
    assert "pending intent" not in " ".join(run(cli, [*base, *exact, "fay@x.io"]).output.split())

    owned = run(cli, [*base, "--owner", "M3", "--json"])
    assert owned.exit_code == 0, owned.output
    (lock,) = json.loads(owned.output)["locks"]
    assert (lock["status"], lock["stored"]["intent"]) == ("pending", {
        "token": "T3", "pending": True, "at": at["written"], "within_grace": True})
    table = " ".join(run(cli, [*base, "--owner", "M3"]).output.split())
    assert "pending intent" in table and "held" not in table.replace("not a held lock", "")
    assert "EMAIL cy@x.io: a pending intent (MRSC), not a held lock: token T3" in table
    assert json.loads(run(cli, [*base, "--owner", "M5", "--json"]).output)["locks"][0][
        "status"] == "held"


# --- repairs that need a transaction elsewhere: the protocol's Claim on MRSC ----------------------


def drive(machine: Any, client: Any) -> Any:
    """A protocol machine (``mrsc.Write``) run to its end through a plain boto3 client: each
    request sent, a failed condition handed back as its refusal (the writer's driver, as the
    simulation's)."""
    methods = {"GetItem": "get_item", "PutItem": "put_item", "UpdateItem": "update_item",
               "DeleteItem": "delete_item"}
    while (request := machine.advance(time.time()).request(time.time())) is not None:
        operation, params = request
        try:
            answer, refused = getattr(client, methods[operation])(**params), None
        except client.exceptions.ConditionalCheckFailedException as exc:
            answer, refused = None, exc.response
        machine = machine.answered(time.time(), answer, refused)
    return machine


def unmarked(lock: dict[str, Any]) -> dict[str, Any]:
    """A lock item without the protocol's marks and its ``created`` time."""
    return {k: v for k, v in lock.items() if not k.startswith("mrsc_") and k != "created"}


def test_repair_writes_a_missing_lock_on_mrsc_by_the_protocol_s_steps(dynaunique_db: str) -> None:
    model = member_table(dynaunique_db, "STRONG")
    raw = Raw(dynaunique_db)
    raw.put(record("M1", "ada@x.io"))   # written around the library: no lock
    plan = audit.plan_repair(audit.check([model]))
    (action,) = plan.actions
    assert (action.kind, action.finding.kind) == ("put_missing", "missing")
    assert action.claim is not None and action.plan.writes == ()
    (operation, params), = action.request().items()
    assert operation == "PutItem"
    assert params["ConditionExpression"] == "attribute_not_exists(#n0)"
    assert unmarked(params["Item"]) == unmarked(lock_of(model, record("M1", "ada@x.io")))
    assert params["Item"][mrsc.PENDING_ATTR] == params["Item"][mrsc.TOKEN_ATTR]
    assert action.description.startswith("if no lock exists, put it for M1 as a pending intent")
    result = audit.apply_repair(plan)
    assert result.ok, result.to_dict()
    (outcome,) = result.outcomes
    assert (outcome.status, outcome.writes) == ("fixed", 2)
    assert outcome.message.startswith("wrote it as a pending intent (PutItem), read its holder")
    assert result.cost.count("TransactWriteItems") == 0
    assert (result.cost.count("PutItem"), result.cost.count("UpdateItem"),
            result.cost.count("GetItem")) == (1, 1, 1)
    stored = raw.get(lock_key("ada@x.io"))
    assert stored is not None and mrsc.PENDING_ATTR not in stored
    assert stored[mrsc.TOKEN_ATTR] == params["Item"][mrsc.TOKEN_ATTR]
    assert unmarked(stored) == unmarked(lock_of(model, record("M1", "ada@x.io")))
    assert audit.check([model]).findings == ()


def test_repair_hands_a_lock_over_on_mrsc_from_an_owner_gone(dynaunique_db: str) -> None:
    model = member_table(dynaunique_db, "STRONG")
    raw = Raw(dynaunique_db)
    gone = intent(model, record("M9", "dee@x.io"), "T9", time.time() - STALE, pending=False)
    raw.put(gone, record("M4", "dee@x.io"))   # M9 deleted and M4 written around the library
    plan = audit.plan_repair(audit.check([model]))
    (action,) = plan.actions
    assert (action.kind, action.finding.kind) == ("transfer", "foreign_owner")
    (operation, params), = action.request().items()
    assert (operation, params["ConditionExpression"]) == (
        "PutItem", "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2")
    assert params["ExpressionAttributeValues"] == {":v0": {"S": "T9"},
                                                  ":v1": {"M": {"PK": {"S": "M9"}}},
                                                  ":v2": gone[mrsc.AT_ATTR]}
    result = audit.apply_repair(plan)
    assert result.ok and [o.status for o in result.outcomes] == ["fixed"], result.to_dict()
    # M9 read (gone), the lock taken over, M4 read, the mark cleared.
    assert (result.cost.count("GetItem"), result.cost.count("PutItem"),
            result.cost.count("UpdateItem"), result.cost.count("TransactWriteItems")) == (
        2, 1, 1, 0)
    stored = raw.get(lock_key("dee@x.io"))
    assert stored is not None and stored["owner"] == {"M": {"PK": {"S": "M4"}}}
    assert mrsc.PENDING_ATTR not in stored and stored[mrsc.TOKEN_ATTR] != {"S": "T9"}
    assert audit.check([model]).findings == ()


@pytest.mark.parametrize("by", ["machine", "save"])
def test_a_writer_moving_the_record_during_repair_s_claim_keeps_its_lock_and_gets_no_orphan(
        dynaunique_db: str, monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    """Between repair's intent put (ada, for M1) and its read of M1, a protocol writer moves M1
    to eve (a real thread over HTTP; ``machine``: an ``mrsc.Write`` through boto3, ``save``: the
    library's own ``save()``): its own lock put, M1 written, its mark cleared, and its old lock —
    repair's pending intent, within its grace period — left. Repair reads M1 (eve), deletes its
    own intent (token and owner), reads the key again: consistent."""
    model = member_table(dynaunique_db, "STRONG")
    raw = Raw(dynaunique_db)
    raw.put(record("M1", "ada@x.io"))
    plan = audit.plan_repair(audit.check([model]))
    from dynaunique.audit import _intents
    from dynaunique.audit._tables import _tables

    table = _tables([model])[0]
    writer = mrsc.Write(TABLE, {"PK": {"S": "M1"}}, record("M1", "eve@x.io"), "W1",
                        _intents.locks_for(table), table.lock_pk, ("email",))
    call = _intents._call
    ended: list[Any] = []

    def save() -> Any:
        member = model.get("M1", consistent_read=True)
        member.email = "eve@x.io"
        member.save()
        return attrs.evolve(writer, outcome="written")

    def racing(meter: Any, connection: Any, operation: str, **params: Any) -> dict[str, Any]:
        if operation == "GetItem" and params["Key"] == {"PK": {"S": "M1"}} and not ended:
            assert raw.get(lock_key("ada@x.io")) is not None   # repair's intent is there
            thread = threading.Thread(target=lambda: ended.append(
                drive(writer, raw.client) if by == "machine" else save()))
            thread.start()
            thread.join()
        return call(meter, connection, operation, **params)

    monkeypatch.setattr(_intents, "_call", racing)
    result = audit.apply_repair(plan)
    assert [m.outcome for m in ended] == ["written"]
    (outcome,) = result.outcomes
    # the intent put and its delete; then read again: consistent (M1's eve locked by the writer)
    assert (outcome.status, outcome.writes) == ("already_fixed", 2), outcome.message
    assert (result.cost.count("PutItem"), result.cost.count("DeleteItem"),
            result.cost.count("UpdateItem")) == (1, 1, 0)
    assert raw.get(lock_key("ada@x.io")) is None
    eve = raw.get(lock_key("eve@x.io"))
    assert eve is not None and mrsc.TOKEN_ATTR in eve and mrsc.PENDING_ATTR not in eve
    if by == "machine":
        assert eve[mrsc.TOKEN_ATTR] == {"S": "W1"}
    assert eve["owner"] == {"M": {"PK": {"S": "M1"}}}
    assert {k: v for k, v in (raw.get({"PK": {"S": "M1"}}) or {}).items()
            if k in ("PK", "email")} == record("M1", "eve@x.io")
    assert audit.check([model]).findings == ()


def test_repairs_that_are_transactions_are_refused_on_mrsc_with_a_clear_message(
        dynaunique_db: str) -> None:
    model = member_table(dynaunique_db, "STRONG")
    raw = Raw(dynaunique_db)
    # A lock the protocol did not write (no token) whose owner is gone: its delete is a
    # transaction elsewhere (with the owner's ConditionCheck).
    raw.put(lock_of(model, record("M8", "old@x.io")))
    result = audit.apply_repair(audit.plan_repair(audit.check([model])))
    (outcome,) = result.outcomes
    assert (outcome.action.kind, outcome.status, outcome.writes) == (
        "delete_orphan", "failed", 0)
    assert outcome.message.startswith(
        "not repaired: delete_orphan is a transaction, and this table is a global table with "
        "multi-Region strong consistency (MRSC), which refuses transactions; nothing was sent")
    assert result.cost.count("TransactWriteItems") == 0
    assert raw.get(lock_key("old@x.io")) is not None
