"""dynaunique.audit against the local server: lookups, check, repair, and repair under races."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import support.audit_models as fm
from support import recorders
from support.tables import raw_tables

from dynaunique import ConcurrentModificationError, UniqueViolation, audit
from dynaunique._transport import clients

Account = fm.AuditAccount
Team = fm.AuditTeam


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    """A plain boto3 client on the test server, with the audit tables created and empty."""
    return raw_tables(dynaunique_db, *fm.MODELS)


@contextmanager
def requests_sent(event: str = "before-send.dynamodb") -> Iterator[list[tuple[str, Any]]]:
    """(operation, body) of every request the library's client sends inside the block."""
    with recorders.requests_sent(clients.client_for(Account), event) as sent:
        yield sent


@contextmanager
def before_repair_write(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` (a raw write by "someone else") just before the first repair transaction."""
    fired = threading.Event()

    def hook(**_: Any) -> None:
        if not fired.is_set():
            fired.set()
            action()

    events = clients.client_for(Account).meta.events
    events.register("before-send.dynamodb.TransactWriteItems", hook, unique_id="audit-race")
    try:
        yield
    finally:
        events.unregister("before-send.dynamodb.TransactWriteItems", unique_id="audit-race")
    assert fired.is_set(), "the race was never staged"


def summary(report: audit.AuditReport) -> set[tuple[Any, ...]]:
    return {(f.kind, f.constraint, f.value, tuple(sorted(h.label for h in f.holders)),
             f.lock.owner_label if f.lock else "-") for f in report.findings}


def lock_owner(raw: Any, key: str) -> str | None:
    item = raw.get_item(TableName=fm.TABLE, Key=fm.lock_pk(key), ConsistentRead=True).get("Item")
    if item is None:
        return None
    return str(item["owner"]["M"]["PK"]["S"])


# --- who holds / owner / list --------------------------------------------------------------------


def test_who_holds_is_exactly_one_consistent_get_item_of_the_normalized_key(raw: Any) -> None:
    Account(pk="ACCT#1", email="Ada@Lovelace.io").save()
    with requests_sent() as sent:
        lock = audit.who_holds(Account, "email", "ADA@lovelace.IO")
    assert [op for op, _ in sent] == ["GetItem"]
    assert sent[0][1]["ConsistentRead"] is True
    assert sent[0][1]["Key"] == fm.lock_pk("UNIQ#EMAIL#ada@lovelace.io")
    assert lock is not None
    assert (lock.key, lock.constraint, lock.value, lock.hashed, lock.model, lock.owner_label) == (
        "UNIQ#EMAIL#ada@lovelace.io", "EMAIL", "ada@lovelace.io", False, "AuditAccount",
        "ACCT#1 / PROFILE")


def test_who_holds_a_free_value_is_none_after_one_get_item(raw: Any) -> None:
    with requests_sent() as sent:
        assert audit.who_holds(Account, "EMAIL", "nobody@x.io") is None
    assert [op for op, _ in sent] == ["GetItem"]


def test_who_holds_composite_and_hashed_values(raw: Any) -> None:
    Account(pk="ACCT#1", email="a@x.io", phone="+1555", tenant="acme", slug="home").save()
    composite = audit.who_holds(Account, tenant="acme", slug="home")
    assert composite is not None
    assert (composite.key, composite.value, composite.shown_value) == (
        "UNIQ#TENANT_SLUG#acme#home", ("acme", "home"), "acme / home")
    hashed = audit.who_holds(Account, "phone", "+1555")
    assert hashed is not None
    assert (hashed.hashed, hashed.value, hashed.shown_value, hashed.owner_label) == (
        True, None, "hashed", "ACCT#1 / PROFILE")
    assert hashed.encoded.startswith("\\k")


def test_owner_locks_reads_the_record_and_its_locks_without_a_scan(raw: Any) -> None:
    Account(pk="ACCT#1", email="a@x.io", username="ada", phone="+1555").save()
    Account(pk="ACCT#2", email="b@x.io").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#HANDLE#ada"))
    # ACCT#1's email lock now names ACCT#2 (written around the library).
    raw.update_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#EMAIL#a@x.io"),
                    UpdateExpression="SET #o = :o", ExpressionAttributeNames={"#o": "owner"},
                    ExpressionAttributeValues={":o": {"M": fm.account_key("ACCT#2")}})
    with requests_sent() as sent:
        result = audit.owner_locks(fm.MODELS, "ACCT#1", model="AuditAccount")
    assert [op for op, _ in sent] == ["GetItem", "BatchGetItem"]
    assert sent[1][1]["RequestItems"][fm.TABLE]["ConsistentRead"] is True
    assert result.record is not None and result.record.label == "ACCT#1 / PROFILE"
    assert [(e.lock.constraint, e.status) for e in result.locks] == [
        ("EMAIL", "foreign"), ("HANDLE", "missing"), ("PHONE", "held")]
    assert result.cost.describe() == ("1 GetItem (strongly consistent), "
                                      "1 BatchGetItem (strongly consistent)")


def test_owner_locks_of_an_absent_record(raw: Any) -> None:
    result = audit.owner_locks(fm.MODELS, "ACCT#404", model="AuditAccount")
    assert (result.record, result.locks) == (None, ())


def test_list_locks_filters_by_constraint_prefix_model_and_value(raw: Any) -> None:
    Account(pk="ACCT#1", email="ada@x.io", username="ada").save()
    Account(pk="ACCT#2", email="bob@x.io").save()
    Team(pk="TEAM#1", team_name="Adamant").save()
    everything = audit.list_locks(fm.MODELS)
    assert [lock.key for lock in everything.locks] == [
        "UNIQ#EMAIL#ada@x.io", "UNIQ#EMAIL#bob@x.io", "UNIQ#HANDLE#ada",
        "UNIQ#TEAM_NAME#adamant"]
    assert everything.cost.items_scanned == 7
    assert everything.cost.describe() == ("scan of 7 items (1 Scan request, eventually "
                                          "consistent)")
    # The prefix is normalized like the constraint (casefold) before it is compared.
    emails = audit.list_locks(fm.MODELS, constraint="email", value_prefix="ADA")
    assert [lock.key for lock in emails.locks] == ["UNIQ#EMAIL#ada@x.io"]
    teams = audit.list_locks(fm.MODELS, model="AuditTeam")
    assert [lock.key for lock in teams.locks] == ["UNIQ#TEAM_NAME#adamant"]
    by_value = audit.list_locks(fm.MODELS, value_prefix="ada")
    assert [lock.key for lock in by_value.locks] == [
        "UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada", "UNIQ#TEAM_NAME#adamant"]


def test_list_locks_of_a_hashed_constraint_refuses_a_prefix(raw: Any) -> None:
    with pytest.raises(audit.AuditError, match="hashed"):
        audit.list_locks(fm.MODELS, constraint="PHONE", value_prefix="+1")


def test_scan_pages_follow_last_evaluated_key(raw: Any) -> None:
    for i in range(5):
        Account(pk=f"ACCT#{i}", email=f"{i}@x.io").save()
    table = audit._tables([Account])[0]
    meter = audit._Meter()
    items = list(audit._scan_pages(table, meter, Limit=3))
    assert len(items) == 10
    assert meter.cost().count("Scan") == 4  # 3 + 3 + 3 + 1, the last page ends the scan


# --- check ---------------------------------------------------------------------------------------


def test_check_of_a_consistent_table_is_clean_and_costs_one_scan(raw: Any) -> None:
    Account(pk="ACCT#1", email="a@x.io", username="ada", phone="+1", tenant="t", slug="s").save()
    Team(pk="TEAM#1", team_name="Red").save()
    report = audit.check(fm.MODELS)
    assert report.clean
    assert report.tables == (audit.TableSummary(fm.TABLE, 7, 2, 5, 0, 0),)
    assert report.cost.requests == (("Scan", 1),)


def test_check_finds_exactly_the_injected_drift(raw: Any) -> None:
    fm.seed_drift(raw)
    report = audit.check(fm.MODELS)
    assert summary(report) == fm.EXPECTED
    by_key = {f.lock_key: f for f in report.findings}
    assert by_key["UNIQ#EMAIL#gone@x.io"].owner_state == "gone"
    assert by_key["UNIQ#EMAIL#old@x.io"].owner_state == "changed"
    assert "its EMAIL is now 'new@x.io'" in by_key["UNIQ#EMAIL#old@x.io"].message
    assert by_key["UNIQ#EMAIL#shared@x.io"].owner_state == "gone"
    # Every suspicious key is confirmed by one serializable read; nothing else is sent.
    assert report.cost.requests == (("Scan", 1), ("TransactGetItems", 8))


def test_check_with_parallel_segments_finds_the_same(raw: Any) -> None:
    fm.seed_drift(raw)
    report = audit.check(fm.MODELS, segments=4)
    assert summary(report) == fm.EXPECTED
    assert report.cost.count("Scan") == 4


def test_check_reports_progress(raw: Any) -> None:
    fm.seed_drift(raw)
    seen: list[tuple[int, int | None]] = []
    audit.check(fm.MODELS, segments=2, progress=lambda done, total: seen.append((done, total)))
    total = audit.check(fm.MODELS).tables[0].items_scanned
    assert seen[0] == (0, total)
    assert seen[-1] == (total, total)


def test_a_record_whose_locks_cannot_be_computed_is_unreadable(raw: Any) -> None:
    raw.put_item(TableName=fm.TABLE, Item={**fm.account_key("ACCT#BAD"), "email": {"N": "5"}})
    report = audit.check(fm.MODELS)
    assert [(f.kind, [h.label for h in f.holders]) for f in report.findings] == [
        ("unreadable", ["ACCT#BAD / PROFILE"])]
    plan = audit.plan_repair(report)
    assert (plan.actions, [f.kind for f in plan.unfixable]) == ((), ["unreadable"])


def test_check_does_not_report_a_save_that_races_with_the_scan(raw: Any) -> None:
    """The scan reads the record before a save moves its email and the locks after it: a torn
    view with two suspects, which the serializable confirmation read finds consistent."""
    account = Account(pk="ACCT#1", email="before@x.io")
    account.save()
    Account(pk="ACCT#2", email="other@x.io").save()
    pages = [0]

    def move_email_after_the_first_page(**_: Any) -> None:
        pages[0] += 1
        if pages[0] == 2:
            account.email = "after@x.io"
            # The hook runs on the scanning thread; the save goes through its own thread.
            thread = threading.Thread(target=account.save)
            thread.start()
            thread.join()

    events = clients.client_for(Account).meta.events
    events.register("before-send.dynamodb.Scan", move_email_after_the_first_page,
                    unique_id="torn-scan")
    try:
        report = audit.check(fm.MODELS, page_size=1)
    finally:
        events.unregister("before-send.dynamodb.Scan", unique_id="torn-scan")
    assert account.email == "after@x.io" and pages[0] > 2
    assert report.cost.count("TransactGetItems") == 2  # before@ (no lock), after@ (no holder)
    assert report.clean


# --- repair --------------------------------------------------------------------------------------


def test_plan_repair_is_pure_and_guards_every_write(raw: Any) -> None:
    fm.seed_drift(raw)
    report = audit.check(fm.MODELS)
    with requests_sent() as sent:
        plan = audit.plan_repair(report)
    assert sent == []
    assert sorted((a.kind, a.finding.lock_key) for a in plan.actions) == [
        ("delete_orphan", "UNIQ#EMAIL#gone@x.io"), ("delete_orphan", "UNIQ#EMAIL#old@x.io"),
        ("put_missing", "UNIQ#EMAIL#new@x.io"), ("put_missing", "UNIQ#HANDLE#nolock"),
        ("put_missing", "UNIQ#TEAM_NAME#blue"), ("transfer", "UNIQ#EMAIL#shared@x.io")]
    assert sorted(f.kind for f in plan.unfixable) == ["duplicate", "unknown_constraint"]
    actions = {a.finding.lock_key: a for a in plan.actions}

    orphan = actions["UNIQ#EMAIL#old@x.io"].request()["TransactItems"]
    delete, check = orphan[0]["Delete"], orphan[1]["ConditionCheck"]
    assert delete["Key"] == fm.lock_pk("UNIQ#EMAIL#old@x.io")
    assert delete["ConditionExpression"] == (
        "attribute_not_exists(#g0) OR (#g1.#g0 = :g0 AND #g1.#g2 = :g1)")
    assert delete["ExpressionAttributeValues"] == {":g0": {"S": "ACCT#MOVED"},
                                                   ":g1": {"S": "PROFILE"}}
    # The owner must still be exactly as read: email new@x.io, so it still does not need old@.
    assert check["Key"] == fm.account_key("ACCT#MOVED")
    # ... and still an AuditAccount's, not an AuditTeam's (task ident): the attributes only
    # a team has still absent (what the first part pins is not pinned twice).
    assert check["ConditionExpression"] == (
        "(attribute_exists(#g0) AND #g1 = :g0 AND #g2 = :g1 AND attribute_not_exists(#g3) AND "
        "attribute_not_exists(#g4) AND attribute_not_exists(#g5) AND attribute_not_exists(#g6))"
        " AND (attribute_exists(#g0) AND attribute_not_exists(#g7) AND "
        "attribute_not_exists(#g8))")
    assert check["ExpressionAttributeNames"] == {
        "#g0": "PK", "#g1": "email", "#g2": "phone", "#g3": "slug", "#g4": "tenant",
        "#g5": "ttl", "#g6": "username", "#g7": "seats", "#g8": "team_name"}
    assert check["ExpressionAttributeValues"][":g0"] == {"S": "new@x.io"}

    gone = actions["UNIQ#EMAIL#gone@x.io"].request()["TransactItems"][1]["ConditionCheck"]
    assert (gone["Key"], gone["ConditionExpression"]) == (
        fm.account_key("ACCT#GONE"), "attribute_not_exists(#g0)")

    put = actions["UNIQ#TEAM_NAME#blue"].request()["TransactItems"]
    assert put[0]["Put"]["Item"]["owner"] == {"M": {"PK": {"S": "TEAM#BLUE"},
                                                    "SK": {"S": "TEAM"}}}
    assert put[0]["Put"]["Item"]["model"] == {"S": "AuditTeam"}
    assert put[1]["ConditionCheck"]["Key"] == {"PK": {"S": "TEAM#BLUE"}, "SK": {"S": "TEAM"}}

    transfer = actions["UNIQ#EMAIL#shared@x.io"].request()["TransactItems"]
    assert [next(iter(item)) for item in transfer] == ["Put", "ConditionCheck", "ConditionCheck"]
    assert transfer[0]["Put"]["ExpressionAttributeValues"][":g0"] == {"S": "ACCT#OLDOWNER"}
    assert transfer[1]["ConditionCheck"]["ConditionExpression"] == "attribute_not_exists(#g0)"
    assert transfer[2]["ConditionCheck"]["Key"] == fm.account_key("ACCT#NEWOWNER")


def test_repair_fixes_exactly_the_drift_and_leaves_the_duplicate(raw: Any) -> None:
    fm.seed_drift(raw)
    records_before = {json.dumps(item, sort_keys=True) for item in
                      raw.scan(TableName=fm.TABLE)["Items"]
                      if not item["PK"]["S"].startswith("UNIQ#")}
    plan = audit.plan_repair(audit.check(fm.MODELS), drop_unknown={"OLDNAME"})
    result = audit.apply_repair(plan)
    assert [o.status for o in result.outcomes] == ["fixed"] * 7
    assert not result.ok  # the duplicate is left for a person
    assert [f.kind for f in result.unfixable] == ["duplicate"]
    assert result.cost.requests == (("TransactWriteItems", 7),)
    after = audit.check(fm.MODELS)
    assert summary(after) == {e for e in fm.EXPECTED if e[0] == "duplicate"}
    # Records are never modified.
    records_after = {json.dumps(item, sort_keys=True) for item in
                     raw.scan(TableName=fm.TABLE)["Items"]
                     if not item["PK"]["S"].startswith("UNIQ#")}
    assert records_after == records_before
    assert lock_owner(raw, "UNIQ#EMAIL#shared@x.io") == "ACCT#NEWOWNER"
    assert Account.get_by_unique("email", "new@x.io").pk == "ACCT#MOVED"


def test_repair_without_drop_unknown_leaves_unknown_constraint_locks(raw: Any) -> None:
    fm.seed_drift(raw)
    result = audit.apply_repair(audit.plan_repair(audit.check(fm.MODELS)))
    assert sorted(f.kind for f in result.unfixable) == ["duplicate", "unknown_constraint"]
    assert lock_owner(raw, "UNIQ#OLDNAME#legacy") == "ACCT#OK"


def test_once_the_duplicate_is_resolved_repair_completes_and_check_is_clean(raw: Any) -> None:
    fm.seed_drift(raw)
    audit.apply_repair(audit.plan_repair(audit.check(fm.MODELS), drop_unknown={"OLDNAME"}))
    holder = Account.get("ACCT#DUP1", "PROFILE", consistent_read=True)
    holder.email = "dup1@x.io"
    holder.save()  # frees dup@, which ACCT#DUP2 still holds without a lock
    result = audit.apply_repair(audit.plan_repair(audit.check(fm.MODELS)))
    assert [(o.action.kind, o.action.finding.lock_key, o.status) for o in result.outcomes] == [
        ("put_missing", "UNIQ#EMAIL#dup@x.io", "fixed")]
    assert result.ok
    assert audit.check(fm.MODELS).clean
    assert lock_owner(raw, "UNIQ#EMAIL#dup@x.io") == "ACCT#DUP2"


def test_a_duplicate_without_the_lock_can_be_changed_through_the_library(raw: Any) -> None:
    """Resolving a duplicate the natural way: load the record that lacks the lock, change it.

    Its save must leave the other record's lock alone (it was never this record's), not fail
    forever asking to "reload and retry"; repair has nothing left to do afterwards.
    """
    Account(pk="ACCT#DUP1", email="dup@x.io").save()
    raw.put_item(TableName=fm.TABLE, Item={**fm.account_key("ACCT#DUP2"),
                                           "email": {"S": "DUP@x.io"}})
    duplicate = Account.get("ACCT#DUP2", "PROFILE", consistent_read=True)
    duplicate.email = "dup2@x.io"
    duplicate.save()
    assert lock_owner(raw, "UNIQ#EMAIL#dup@x.io") == "ACCT#DUP1"
    assert lock_owner(raw, "UNIQ#EMAIL#dup2@x.io") == "ACCT#DUP2"
    assert audit.check(fm.MODELS).clean


# --- repair racing with the application -----------------------------------------------------------


def test_orphan_delete_is_cancelled_when_the_owner_takes_the_value_back(raw: Any) -> None:
    """Without the ConditionCheck on the owner, repair would delete a lock its owner needs."""
    Account(pk="ACCT#1", email="old@x.io").save()
    raw.update_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#1"),
                    UpdateExpression="SET email = :e",
                    ExpressionAttributeValues={":e": {"S": "new@x.io"}})
    report = audit.check(fm.MODELS)
    plan = audit.plan_repair(report)
    orphan = [a for a in plan.actions if a.kind == "delete_orphan"]
    assert [a.finding.lock_key for a in orphan] == ["UNIQ#EMAIL#old@x.io"]

    def owner_takes_old_value_back() -> None:
        raw.update_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#1"),
                        UpdateExpression="SET email = :e",
                        ExpressionAttributeValues={":e": {"S": "old@x.io"}})

    with before_repair_write(owner_takes_old_value_back):
        result = audit.apply_repair(audit.RepairPlan(tuple(orphan), (), plan.models))
    assert [(o.status, o.writes) for o in result.outcomes] == [("already_fixed", 1)]
    assert lock_owner(raw, "UNIQ#EMAIL#old@x.io") == "ACCT#1"
    assert audit.check(fm.MODELS).clean


def test_orphan_delete_leaves_a_lock_another_record_took_meanwhile(raw: Any) -> None:
    Account(pk="ACCT#GONE", email="x@x.io").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#GONE"))
    plan = audit.plan_repair(audit.check(fm.MODELS))
    assert [a.kind for a in plan.actions] == ["delete_orphan"]

    def someone_takes_the_value() -> None:
        # What a save of a new record does once the orphan is gone: record and lock together.
        raw.transact_write_items(TransactItems=[
            {"Delete": {"TableName": fm.TABLE, "Key": fm.lock_pk("UNIQ#EMAIL#x@x.io")}},
            {"Put": {"TableName": fm.TABLE, "Item": {**fm.account_key("ACCT#NEW"),
                                                     "email": {"S": "x@x.io"}}}},
        ])
        raw.put_item(TableName=fm.TABLE, Item={
            **fm.lock_pk("UNIQ#EMAIL#x@x.io"), "owner": {"M": fm.account_key("ACCT#NEW")},
            "model": {"S": "AuditAccount"}, "constraint": {"S": "EMAIL"},
            "value": {"S": "x@x.io"}, "created": {"S": "2025-01-01T00:00:00+00:00"}})

    with before_repair_write(someone_takes_the_value):
        result = audit.apply_repair(plan)
    assert [o.status for o in result.outcomes] == ["already_fixed"]
    assert lock_owner(raw, "UNIQ#EMAIL#x@x.io") == "ACCT#NEW"
    assert audit.check(fm.MODELS).clean


def test_missing_lock_is_not_written_when_the_record_moves_on_meanwhile(raw: Any) -> None:
    """Without the ConditionCheck on the record, repair would write an orphan."""
    Account(pk="ACCT#1", email="a@x.io", username="ada").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#HANDLE#ada"))
    plan = audit.plan_repair(audit.check(fm.MODELS))
    assert [a.kind for a in plan.actions] == ["put_missing"]

    def record_drops_the_handle() -> None:
        raw.update_item(TableName=fm.TABLE, Key=fm.account_key("ACCT#1"),
                        UpdateExpression="REMOVE username")

    with before_repair_write(record_drops_the_handle):
        result = audit.apply_repair(plan)
    assert [o.status for o in result.outcomes] == ["already_fixed"]
    assert lock_owner(raw, "UNIQ#HANDLE#ada") is None
    assert audit.check(fm.MODELS).clean


def test_missing_lock_collision_is_reported_as_a_duplicate_never_overwritten(raw: Any) -> None:
    Account(pk="ACCT#1", email="a@x.io", username="ada").save()
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#HANDLE#ada"))
    plan = audit.plan_repair(audit.check(fm.MODELS))

    def another_record_takes_the_handle() -> None:
        Account(pk="ACCT#2", email="b@x.io", username="ADA".lower()).save()

    # The library's own save runs on another thread: its client is the one being hooked.
    def on_thread() -> None:
        thread = threading.Thread(target=another_record_takes_the_handle)
        thread.start()
        thread.join()

    with before_repair_write(on_thread):
        result = audit.apply_repair(plan)
    assert [o.status for o in result.outcomes] == ["not_fixed"]
    assert result.outcomes[0].message.startswith("now duplicate")
    assert lock_owner(raw, "UNIQ#HANDLE#ada") == "ACCT#2"
    assert [(f.kind, f.lock_key) for f in audit.check(fm.MODELS).findings] == [
        ("duplicate", "UNIQ#HANDLE#ada")]


def test_repair_racing_with_live_saves_breaks_nothing(raw: Any) -> None:
    fm.seed_drift(raw)
    live = [Account(pk=f"ACCT#LIVE{i}", email=f"live{i}-a@x.io") for i in range(3)]
    for account in live:
        account.save()
    # One thread also keeps flipping a drifted record between its orphaned and its new value.
    moved = Account.get("ACCT#MOVED", "PROFILE", consistent_read=True)
    stop = threading.Event()
    errors: list[BaseException] = []
    saves = [0]

    def flip(account: Any, values: tuple[str, str]) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            account.email = values[n % 2]
            try:
                account.save()
                saves[0] += 1
            except (ConcurrentModificationError, UniqueViolation):
                account.refresh(consistent_read=True)
            except BaseException as exc:  # anything else fails the test
                errors.append(exc)
                return

    threads = [threading.Thread(target=flip, args=(a, (f"live{i}-a@x.io", f"live{i}-b@x.io")))
               for i, a in enumerate(live)]
    threads.append(threading.Thread(target=flip, args=(moved, ("old@x.io", "new@x.io"))))
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 1.5
        rounds = 0
        while time.monotonic() < deadline or rounds < 2:
            rounds += 1
            audit.apply_repair(audit.plan_repair(audit.check(fm.MODELS),
                                                 drop_unknown={"OLDNAME"}))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert saves[0] > 10
    audit.apply_repair(audit.plan_repair(audit.check(fm.MODELS)))
    final = audit.check(fm.MODELS)
    assert summary(final) == {e for e in fm.EXPECTED if e[0] == "duplicate"}
    for account in [*live, moved]:
        held = audit.owner_locks(fm.MODELS, account.pk, model="AuditAccount")
        assert [e.lock.constraint for e in held.locks if e.status == "held"] == [
            e.lock.constraint for e in held.locks] != []


def test_items_an_is_record_hook_turns_away_are_not_checked(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Meta.is_record`` (shared with the migrations' backfill) decides what a record is."""
    Account(pk="ACCT#1", email="a@x.io").save()
    # An item of some other writer on the same table, with no lock: a "missing lock" unless the
    # hook says it is not an AuditAccount record.
    raw.put_item(TableName=fm.TABLE, Item={**fm.lock_pk("OTHER#1"), "PK": {"S": "OTHER#1"},
                                           "email": {"S": "o@x.io"}})
    assert not audit.check(fm.MODELS).clean

    def is_record(item: dict[str, Any]) -> bool:
        return not item["PK"]["S"].startswith("OTHER#")

    for model in fm.MODELS:
        monkeypatch.setattr(model.Meta, "is_record", is_record, raising=False)
    assert audit.check(fm.MODELS).clean


# --- paging, counting, reading one item ----------------------------------------------------------


def test_lock_page_walks_every_lock_once_in_pages_of_at_most_limit(raw: Any) -> None:
    for i in range(23):
        Account(pk=f"ACCT#{i:02}", email=f"{i:02}@x.io", username=f"u{i:02}").save()
    Team(pk="TEAM#1", team_name="Red").save()
    seen: list[str] = []
    sizes: list[int] = []
    cursor = None
    while True:
        page = audit.lock_page(fm.MODELS, cursor=cursor, limit=10)
        sizes.append(len(page.locks))
        seen.extend(lock.key for lock in page.locks)
        cursor = page.next_cursor
        if cursor is None:
            break
    everything = [lock.key for lock in audit.list_locks(fm.MODELS).locks]
    assert sorted(seen) == everything  # no lock skipped, none shown twice
    assert len(everything) == 47
    assert sizes == [10, 10, 10, 10, 7]


def test_lock_page_filters_and_normalizes_like_list_locks(raw: Any) -> None:
    for i in range(30):
        Account(pk=f"ACCT#{i:02}", email=f"user{i:02}@x.io").save()
    Account(pk="ACCT#ADA", email="Ada@X.io").save()
    page = audit.lock_page(fm.MODELS, constraint="email", value_prefix="ADA", limit=5)
    assert [lock.key for lock in page.locks] == ["UNIQ#EMAIL#ada@x.io"]
    assert page.next_cursor is None
    # Sparse matches: each Scan request evaluates twice as many items as the one before.
    assert page.cost.count("Scan") == 4  # 5 + 10 + 20 + 40 evaluated >= 62 items
    with pytest.raises(audit.AuditError, match="hashed"):
        audit.lock_page(fm.MODELS, constraint="PHONE", value_prefix="+1")


def test_lock_page_sizes_its_request_from_the_density_the_cursor_carries(raw: Any) -> None:
    for i in range(30):
        Account(pk=f"ACCT#{i:02}", email=f"{i:02}@x.io", username=f"u{i:02}").save()
    scans: list[int] = []
    cursor = None
    while True:
        page = audit.lock_page(fm.MODELS, cursor=cursor, limit=10)
        scans.append(page.cost.count("Scan"))
        cursor = page.next_cursor
        if cursor is None:
            break
    # The first page learns how many items hold one lock (records come first in key order);
    # every later page fills with one Scan request.
    assert len(scans) == 6 and scans[0] > 1
    assert scans[1:] == [1, 1, 1, 1, 1]


def test_lock_page_stops_after_max_requests_with_a_cursor(raw: Any) -> None:
    for i in range(12):
        Account(pk=f"ACCT#{i:02}", email=f"{i:02}@x.io").save()
    page = audit.lock_page(fm.MODELS, constraint="TEAM_NAME", limit=2, max_requests=2)
    assert (page.locks, page.cost.count("Scan")) == ((), 2)
    assert page.next_cursor is not None
    rest = audit.lock_page(fm.MODELS, constraint="TEAM_NAME", limit=2, cursor=page.next_cursor)
    assert (rest.locks, rest.next_cursor) == ((), None)
    # A time budget: no second request once it is spent.
    timed = audit.lock_page(fm.MODELS, constraint="TEAM_NAME", limit=2, max_seconds=0.0)
    assert (timed.locks, timed.cost.count("Scan")) == ((), 1)
    assert timed.next_cursor is not None


def test_lock_page_refuses_a_cursor_it_did_not_make(raw: Any) -> None:
    with pytest.raises(audit.AuditError, match="not a page cursor"):
        audit.lock_page(fm.MODELS, cursor="bm90IGpzb24=")


def test_count_locks_counts_each_lock_name_with_one_projected_scan(raw: Any) -> None:
    fm.seed_drift(raw)
    with requests_sent() as sent:
        counts = audit.count_locks(fm.MODELS)
    assert counts.counts == ((fm.TABLE, "EMAIL", 6), (fm.TABLE, "HANDLE", 1),
                             (fm.TABLE, "OLDNAME", 1), (fm.TABLE, "PHONE", 2),
                             (fm.TABLE, "TEAM_NAME", 1), (fm.TABLE, "TENANT_SLUG", 1))
    assert (counts.of(fm.TABLE, "EMAIL"), counts.of(fm.TABLE, "NOPE")) == (6, 0)
    assert [op for op, _ in sent] == ["Scan"]
    assert sent[0][1]["ProjectionExpression"] == "#h, #r"


def test_read_lock_and_read_record_hide_hashed_values(raw: Any) -> None:
    Account(pk="ACCT#1", email="ada@x.io", phone="+15551234").save()
    lock = audit.read_lock(fm.MODELS, "UNIQ#EMAIL#ada@x.io")
    assert lock is not None and lock.owner_label == "ACCT#1 / PROFILE"
    assert audit.read_lock(fm.MODELS, "UNIQ#EMAIL#bob@x.io") is None
    assert audit.read_lock(fm.MODELS, "ACCT#1") is None  # not a lock key
    record = audit.read_record(fm.MODELS, fm.account_key("ACCT#1"))
    assert record is not None
    assert record.ref == audit.RecordRef(fm.TABLE, fm.account_key("ACCT#1"), "AuditAccount")
    assert dict(record.attributes)["phone"] == audit.HIDDEN
    assert dict(record.attributes)["email"] == "ada@x.io"
    assert record.hidden == ("phone",)
    assert "+15551234" not in json.dumps(record.to_dict())
    assert audit.read_record(fm.MODELS, fm.account_key("ACCT#2")) is None
