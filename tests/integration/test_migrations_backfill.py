"""The backfill against the local server: races with the application's writes, crashes, split
workers, altered constraints, what is sent. Driven through the Python API (the CLI tests drive
the same code through ``dynaunique migrate``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from support.migration_progress import InjectedCrash
from support.migrations_workspace import LiveWriters, Workspace, workspace_fixture

from dynaunique._lock.locks import lock_key, secret_id
from dynaunique.errors import UniqueViolation
from dynaunique.migrations import (
    DuplicatesFound,
    MigrationExecutor,
    MigrationOptions,
)
from dynaunique.migrations.recorder import Progress

TABLE = "mig_backfill_accounts"
UNIQUE_EMAIL = ", unique=True, normalize=normalizers.casefold"


ws = workspace_fixture(TABLE)


def _seed(ws: Workspace, count: int, prefix: str = "user") -> None:
    ws.put_raw_many({f"ACCT#{i:03d}": {"email": f"{prefix}{i}@x.io", "status": "active"}
                     for i in range(count)})


def _prepare(ws: Workspace, email: str = UNIQUE_EMAIL, meta: str = "") -> Any:
    """Deploy the constrained model and write its migration; returns the models module."""
    module = ws.deploy(email=email, meta=meta)
    assert ws.project().make_migrations().changed
    return module


class Racing(MigrationExecutor):
    """An executor that lets the test act at the moment a given record's lock is put (just
    before the request that puts it is sent, and just after its answer)."""

    def __init__(self, *args: Any, target: str, before: Callable[[], None] | None = None,
                 after: Callable[[], None] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target = target
        self.before = before
        self.after = after
        self.fired = False

    def _put_locks(self, seg: Any, entries: Any) -> Any:
        hit = not self.fired and any(owner["PK"]["S"] == self.target for owner, _, _ in entries)
        if hit:
            self.fired = True
            if self.before is not None:
                self.before()
        result = super()._put_locks(seg, entries)
        if hit and self.after is not None:
            self.after()
        return result


def _racing(ws: Workspace, **kwargs: Any) -> Racing:
    project = ws.project()
    loader = project.loader()
    return Racing(loader, project.recorder(loader), project.models,
                  connection_for=project.connection_for, **kwargs)


def _app_moves(models: Any, pk: str, email: str) -> Callable[[], None]:
    """The application's write that races the backfill: record ``pk`` read, then saved with
    ``email``."""
    def move() -> None:
        account = models.Account.get(pk, "PROFILE", consistent_read=True)
        account.email = email
        account.save()
    return move


def _migration_items(ws: Workspace) -> set[str]:
    return {k for k in ws.ledger() if k.startswith("UNIQ#~MIGRATION#")}


# --- races with the application ------------------------------------------------------------------


def test_a_value_changed_between_scan_and_lock_write_leaves_no_orphan(ws: Workspace) -> None:
    _seed(ws, 12)
    models = _prepare(ws)
    executor = _racing(ws, target="ACCT#005",
                       before=_app_moves(models, "ACCT#005", "moved@x.io"))
    executor.migrate()
    assert executor.fired
    # The put of UNIQ#EMAIL#user5@x.io from the stale scan was refused (its record check
    # failed); the record was reconciled as it is now.
    assert "UNIQ#EMAIL#user5@x.io" not in ws.locks()
    assert ws.locks() == ws.expected_locks()
    assert ws.locks()["UNIQ#EMAIL#moved@x.io"] == "ACCT#005"


def _app_saves(models: Any, pk: str, email: str, refusals: list[BaseException]
               ) -> Callable[[], None]:
    """Another record of the application takes ``email`` (a new record, or ``pk`` moved to
    it); a refusal is kept in ``refusals``."""
    def save() -> None:
        try:
            account = models.Account.get(pk, "PROFILE", consistent_read=True)
        except models.Account.DoesNotExist:
            account = models.Account(pk=pk)
        account.email = email
        try:
            account.save()
        except UniqueViolation as exc:
            refusals.append(exc)
    return save


@pytest.mark.parametrize("leaves", ["moves", "is deleted"])
def test_a_value_its_record_left_before_the_lock_put_is_free_for_another_record(
        ws: Workspace, leaves: str) -> None:
    """Issue 25's trace, on the server: the backfill scanned ACCT#005 holding user5@x.io; before
    its lock put is sent, the application moves ACCT#005 off that value (or deletes it); right
    after the put, another record saves user5@x.io. A backfill that put the lock from its stale
    scan refused that save with a UniqueViolation naming ACCT#005, which did not hold the
    value during the call; the put guarded on the record as scanned is refused instead."""
    from support.invariants import assert_clean

    _seed(ws, 12)
    models = _prepare(ws)
    if leaves == "moves":
        first = _app_moves(models, "ACCT#005", "moved@x.io")
    else:
        def first() -> None:
            models.Account.get("ACCT#005", "PROFILE", consistent_read=True).delete()
    refusals: list[BaseException] = []
    executor = _racing(ws, target="ACCT#005", before=first,
                       after=_app_saves(models, "ACCT#050", "user5@x.io", refusals))
    executor.migrate()
    assert executor.fired
    assert refusals == []
    assert ws.locks()["UNIQ#EMAIL#user5@x.io"] == "ACCT#050"
    assert ws.locks() == ws.expected_locks()
    assert_clean([models.Account], ws.endpoint)


def test_a_record_deleted_between_scan_and_lock_write_leaves_no_orphan(ws: Workspace) -> None:
    _seed(ws, 12)
    models = _prepare(ws)

    def app_deletes_the_record() -> None:
        models.Account.get("ACCT#007", "PROFILE", consistent_read=True).delete()

    executor = _racing(ws, target="ACCT#007", before=app_deletes_the_record)
    executor.migrate()
    assert "ACCT#007" not in ws.records()
    assert ws.locks() == ws.expected_locks()
    assert len(ws.locks()) == 11


def test_a_value_changed_right_after_the_lock_write_is_consistent(ws: Workspace) -> None:
    _seed(ws, 12)
    models = _prepare(ws)
    _racing(ws, target="ACCT#003", after=_app_moves(models, "ACCT#003", "later@x.io")).migrate()
    assert ws.locks() == ws.expected_locks()


def test_a_crash_right_after_a_stale_lock_put_is_repaired_by_the_rerun(
        ws: Workspace) -> None:
    """The put is not checked against its record (one write unit): the record moved first, so
    the crash, before the page's verification, leaves an orphan; the write-ahead intent names
    the page's locks, and the rerun reconciles them (the orphan deleted under its owner guard)
    and finishes."""
    _seed(ws, 12)
    models = _prepare(ws)

    def crash() -> None:
        raise InjectedCrash("crash right after the stale write")

    executor = _racing(ws, target="ACCT#004", before=_app_moves(models, "ACCT#004", "moved@x.io"),
                       after=crash)
    with pytest.raises(InjectedCrash):
        executor.migrate()
    assert ws.locks()["UNIQ#EMAIL#user4@x.io"] == "ACCT#004"   # the orphan, left by the crash
    recorder = ws.project().recorder()
    job = "0001_initial#0#F#0"
    pending = [p.lock for p in recorder.progress(job, 1)[0].pending]
    assert "UNIQ#EMAIL#user4@x.io" in pending
    ws.project().executor().migrate()
    assert ws.locks() == ws.expected_locks()
    assert "UNIQ#EMAIL#user4@x.io" not in ws.locks()


def test_a_crash_right_after_a_stale_delete_is_repaired(ws: Workspace) -> None:
    """ACCT#002 needs v, but a stale lock of ACCT#001 (which holds w) is in the way. The
    backfill deletes that stale lock — and just before the delete lands, the application moves
    ACCT#001 to v; then the runner dies. The intent names the delete: the next run gives v back
    to ACCT#001 and reports the duplicate, instead of handing v to ACCT#002."""
    ws.put_raw("ACCT#001", email="w@x.io")
    ws.put_raw("ACCT#002", email="v@x.io")
    ws.client.put_item(TableName=TABLE, Item={
        "PK": {"S": "UNIQ#EMAIL#v@x.io"}, "SK": {"S": "LOCK"},
        "owner": {"M": {"PK": {"S": "ACCT#001"}, "SK": {"S": "PROFILE"}}},
        "model": {"S": "Account"}, "constraint": {"S": "EMAIL"}})
    models = _prepare(ws)

    class Stormy(MigrationExecutor):
        def _delete_lock(self, seg: Any, key: str, owner: Any) -> Any:
            if owner["PK"]["S"] != "ACCT#001" or key != "UNIQ#EMAIL#v@x.io":
                return super()._delete_lock(seg, key, owner)
            account = models.Account.get("ACCT#001", "PROFILE", consistent_read=True)
            account.email = "v@x.io"
            account.save()
            super()._delete_lock(seg, key, owner)
            raise InjectedCrash("crash right after the delete")

    project = ws.project()
    loader = project.loader()
    # One item per page: ACCT#001's page is checkpointed before ACCT#002's, so no rescan
    # revisits ACCT#001.
    with pytest.raises(InjectedCrash):
        Stormy(loader, project.recorder(loader), project.models,
               MigrationOptions(page_size=1)).migrate()
    assert "UNIQ#EMAIL#v@x.io" not in ws.locks()  # ACCT#001 holds v@x.io; its lock is gone
    with pytest.raises(DuplicatesFound) as info:
        ws.project().executor(page_size=1).migrate()
    (duplicate,) = info.value.duplicates
    assert duplicate.value == "v@x.io"
    assert duplicate.holder == {"PK": "ACCT#001", "SK": "PROFILE"}
    assert duplicate.others == ({"PK": "ACCT#002", "SK": "PROFILE"},)
    assert ws.locks()["UNIQ#EMAIL#v@x.io"] == "ACCT#001"


def test_a_crash_while_rechecking_duplicates_loses_none_of_them(ws: Workspace) -> None:
    for pk, email in (("ACCT#001", "a@x.io"), ("ACCT#002", "a@x.io"),
                      ("ACCT#003", "z@x.io"), ("ACCT#004", "z@x.io")):
        ws.put_raw(pk, email=email)
    _prepare(ws)
    with pytest.raises(DuplicatesFound) as info:
        ws.project().executor().migrate()
    assert len(info.value.duplicates) == 2

    class CrashOnRecheck(MigrationExecutor):
        def _put_locks(self, seg: Any, entries: Any) -> Any:
            super()._put_locks(seg, entries)  # its intent was checkpointed first
            raise InjectedCrash("crash while re-checking the first duplicate")

    project = ws.project()
    loader = project.loader()
    with pytest.raises(InjectedCrash):
        CrashOnRecheck(loader, project.recorder(loader), project.models).migrate()
    with pytest.raises(DuplicatesFound) as again:
        ws.project().executor().migrate()
    assert sorted(d.value for d in again.value.duplicates) == ["a@x.io", "z@x.io"]


def test_concurrent_writers_during_the_backfill_leave_exactly_the_right_locks(
        ws: Workspace) -> None:
    _backfill_under_live_writers(ws, records=60, page_size=8)


@pytest.mark.slow
def test_thousands_of_records_with_live_writers_end_with_exactly_the_right_locks(
        ws: Workspace) -> None:
    """Issue 5's "done when": thousands of pre-existing records, writers running throughout.

    Slow (``-m slow``): the scale is its point. The same behaviour (a backfill of three segments
    under live writers ends with exactly the right locks) runs by default in
    ``test_concurrent_writers_during_the_backfill_leave_exactly_the_right_locks``, on 60 records
    in pages of 8 (several pages per segment, as here)."""
    _backfill_under_live_writers(ws, records=2000, page_size=100)


def _backfill_under_live_writers(ws: Workspace, *, records: int, page_size: int) -> None:
    _seed(ws, records)
    models = _prepare(ws)
    with LiveWriters(models.Account, records) as writers:
        writers.wait_for(6)
        before = writers.ops
        ws.project().executor(segments=3, page_size=page_size).migrate()
        during = writers.ops - before
    assert during > 0  # the application really wrote while the backfill ran
    items = ws.scan()  # one consistent scan for both sides (thousands of items)
    assert ws.locks(items) == ws.expected_locks(items=items)
    assert _migration_items(ws) == {f"UNIQ#~MIGRATION#{ws.module}#0001_initial"}


def test_a_duplicate_the_application_resolves_during_the_backfill_is_not_reported(
        ws: Workspace) -> None:
    ws.put_raw("ACCT#001", email="a@x.io")
    ws.put_raw("ACCT#002", email="A@x.io")
    for i in range(3, 11):
        ws.put_raw(f"ACCT#{i:03d}", email=f"u{i}@x.io")
    models = _prepare(ws)
    fired: list[str] = []

    class Resolving(MigrationExecutor):
        def _put_locks(self, seg: Any, entries: Any) -> Any:
            if seg.progress.conflicts and not fired:
                # A duplicate was found on an earlier page; the application now changes the
                # record that lacks the lock.
                lacking = seg.progress.conflicts[0].record["PK"]["S"]
                account = models.Account.get(lacking, "PROFILE", consistent_read=True)
                account.email = "b@x.io"
                account.save()
                fired.append(lacking)
            return super()._put_locks(seg, entries)

    project = ws.project()
    loader = project.loader()
    executor = Resolving(loader, project.recorder(loader), project.models,
                         MigrationOptions(page_size=2))
    result = executor.migrate()
    assert fired  # the duplicate existed mid-scan
    assert result.applied == ["0001_initial"]
    assert ws.locks() == ws.expected_locks()
    assert result.totals["0001_initial: fill Account.EMAIL"].duplicates == 0


# --- stale locks, skipped items ------------------------------------------------------------------


def test_an_orphan_lock_in_the_way_is_removed_not_reported(ws: Workspace) -> None:
    _seed(ws, 3)
    # A lock naming ACCT#000 for a value it no longer holds (left by some earlier bug).
    ws.client.put_item(TableName=TABLE, Item={
        "PK": {"S": "UNIQ#EMAIL#user1@x.io"}, "SK": {"S": "LOCK"},
        "owner": {"M": {"PK": {"S": "ACCT#000"}, "SK": {"S": "PROFILE"}}},
        "model": {"S": "Account"}, "constraint": {"S": "EMAIL"},
    })
    _prepare(ws)
    ws.project().executor().migrate()
    assert ws.locks() == ws.expected_locks()
    assert ws.locks()["UNIQ#EMAIL#user1@x.io"] == "ACCT#001"


def test_items_that_are_not_the_models_records_are_skipped(ws: Workspace) -> None:
    _seed(ws, 3)
    ws.put_raw("ORDER#1", email=42)  # an item of another shape: email is a number
    ws.put_raw("SKIPME#1", email="user0@x.io")  # refused by Meta.is_record
    meta = "is_record = staticmethod(lambda raw: not raw['PK']['S'].startswith('SKIPME#'))"
    _prepare(ws, meta=meta)
    result = ws.project().executor().migrate()
    totals = result.totals["0001_initial: fill Account.EMAIL"]
    assert (totals.scanned, totals.records, totals.skipped) == (5, 3, 2)
    assert ws.locks() == {f"UNIQ#EMAIL#user{i}@x.io": f"ACCT#{i:03d}" for i in range(3)}


#: Two models of one table: an Invite carries an email too, but it is not an Account.
SHARED_TABLE_MODELS = '''\
from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute


class Account(Model):
    class Meta:
        table_name = "{table}"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(null=True, unique=True, normalize=normalizers.casefold)


class Invite(Model):
    inviter = UnicodeAttribute()
    email = UnicodeAttribute(null=True)
    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")

    class Meta:
        table_name = "{table}"
        region = "us-east-1"
'''


def test_the_backfill_locks_exactly_the_records_the_audit_expects_locks_of(
        ws: Workspace) -> None:
    """An invite readable as an Account (every Account attribute it needs is there) is the
    audit's Invite (it knows more of the item): the backfill leaves it alone. Before both asked
    one rule, the backfill locked the invite's email as an Account's — a duplicate of the
    account's own, and a lock the audit then reported — so ``check`` after ``migrate`` was not
    clean."""
    from dynaunique import audit

    ws.put_raw("ACCT#001", email="ada@x.io")
    ws.put_raw("ACCT#002", email="bob@x.io")
    ws.put_raw("INV#001", email="ADA@x.io", inviter="ACCT#002")  # the same email as ACCT#001
    ws.put_raw("INV#002", email="cy@x.io", inviter="ACCT#001")
    models = ws.deploy_source(SHARED_TABLE_MODELS.format(table=TABLE))
    assert ws.project().make_migrations().changed

    result = ws.project().executor().migrate()

    totals = result.totals["0001_initial: fill Account.EMAIL"]
    assert (totals.scanned, totals.records, totals.skipped, totals.duplicates) == (4, 2, 2, 0)
    assert ws.locks() == {"UNIQ#EMAIL#ada@x.io": "ACCT#001", "UNIQ#EMAIL#bob@x.io": "ACCT#002"}
    report = audit.check([models.Account, models.Invite])
    assert report.findings == ()
    assert report.tables[0].records == 4


#: A polymorphic model: a Dog is stored as the Animal family's record with cls="dog".
POLYMORPHIC_MODELS = '''\
from dynaunique import Model, normalizers
from dynaunique.attributes import DiscriminatorAttribute, UnicodeAttribute


class Animal(Model, discriminator="animal"):
    class Meta:
        table_name = "{table}"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    cls = DiscriminatorAttribute()
    email = UnicodeAttribute(null=True, unique=True, normalize=normalizers.casefold,
                             lock_name="PET_EMAIL")


class Dog(Animal, discriminator="dog"):
    pass
'''


def test_the_backfill_locks_the_records_of_a_polymorphic_models_subclasses(
        ws: Workspace) -> None:
    """A Dog is an Animal, and the audit's rule names the most derived class: each class's fill
    phase locks the records the audit gives that class, so between them every record of the
    family is locked once, and ``check`` after ``migrate`` is clean."""
    from dynaunique import audit

    ws.put_raw("ANI#001", email="rex@x.io", cls="dog")
    ws.put_raw("ANI#002", email="tom@x.io", cls="animal")
    models = ws.deploy_source(POLYMORPHIC_MODELS.format(table=TABLE))
    assert ws.project().make_migrations().changed

    result = ws.project().executor().migrate()
    assert {k: (v.scanned, v.records, v.skipped) for k, v in result.totals.items()} == {
        "0001_initial: fill Animal.PET_EMAIL": (2, 1, 1),
        "0001_initial: fill Dog.PET_EMAIL": (2, 1, 1)}

    assert ws.locks() == {"UNIQ#PET_EMAIL#rex@x.io": "ANI#001",
                          "UNIQ#PET_EMAIL#tom@x.io": "ANI#002"}
    assert audit.check([models.Animal, models.Dog]).findings == ()


# --- what is sent --------------------------------------------------------------------------------


def _count_requests(client: Any) -> tuple[list[tuple[str, str]], Callable[[], None]]:
    """Record (operation, hash key or "") of every request ``client`` sends; a transaction's
    items as ("TransactWriteItems.<kind>", hash key), a batch read's keys as
    ("BatchGetItem", hash key)."""
    sent: list[tuple[str, str]] = []

    def record(model: Any, params: Any, **_: Any) -> None:
        for entry in params.get("TransactItems", []):
            ((kind, body),) = entry.items()
            key = body.get("Item") or body.get("Key") or {}
            sent.append((f"{model.name}.{kind}", key.get("PK", {}).get("S", "")))
        for table in params.get("RequestItems", {}).values():
            for key in table.get("Keys", []) if isinstance(table, dict) else []:
                sent.append((model.name, key.get("PK", {}).get("S", "")))
        key = params.get("Item") or params.get("Key") or {}
        sent.append((model.name, key.get("PK", {}).get("S", "")))

    client.meta.events.register("before-parameter-build.dynamodb", record)
    return sent, lambda: client.meta.events.unregister("before-parameter-build.dynamodb", record)


def test_a_backfill_puts_each_lock_with_one_write_and_verifies_each_page_with_one_read(
        ws: Workspace) -> None:
    _seed(ws, 40)
    _prepare(ws)
    project = ws.project()
    executor = project.executor(page_size=20)
    sent, stop = _count_requests(project.connection_for(TABLE).client)
    try:
        result = executor.migrate()
    finally:
        stop()
    # One plain PutItem per record (one write unit), no transaction.
    pages = sent.count(("Scan", ""))
    assert [op for op, _ in sent if op.startswith("TransactWriteItems")] == []
    lock_puts = [key for op, key in sent if op == "PutItem" and key.startswith("UNIQ#EMAIL#")]
    assert sorted(lock_puts) == sorted(ws.expected_locks())  # exactly one put per record
    assert [key for op, key in sent if op in ("DeleteItem", "GetItem")
            and key.startswith("UNIQ#EMAIL#")] == []
    # The verification: each page holding records scanned again, consistently (a few read
    # units a page, not one a record); no record read by key.
    assert [key for op, key in sent if key.startswith("ACCT#")] == []
    # Each page scanned again (one or two pages: the locks written since lie in the same key
    # range and count towards its Limit, as they do for the next pages of the scan).
    assert pages >= 3 + 2
    ledger_writes = [key for op, key in sent if op in ("PutItem", "UpdateItem", "DeleteItem")
                     and key.startswith("UNIQ#~")]
    # lease + job + migration record + lease release, at most one checkpoint and one intent per
    # page scanned.
    assert len(ledger_writes) <= 4 + 2 * pages
    assert result.totals["0001_initial: fill Account.EMAIL"].written == 40


# --- pacing ---------------------------------------------------------------------------------------


def test_max_wcu_paces_the_writes(ws: Workspace) -> None:
    _seed(ws, 8)
    _prepare(ws)
    started = time.monotonic()
    result = ws.project().executor(max_wcu=4).migrate()
    elapsed = time.monotonic() - started
    units = result.totals["0001_initial: fill Account.EMAIL"].write_units
    assert units >= 8  # a plain lock put each: one write unit
    # 8 lock write units + ledger writes at 4 units/s after a burst of 4: at least 1 s.
    assert elapsed >= 1.0


# --- altering, conditions, hashing ---------------------------------------------------------------


def test_alter_sweeps_old_shape_locks_and_backfills_new_ones_and_back(ws: Workspace) -> None:
    ws.put_raw("ACCT#001", email="Ada@X.io")
    ws.put_raw("ACCT#002", email="bob@x.io")
    ws.deploy(email=", unique=True")
    ws.project().make_migrations()
    ws.project().executor().migrate()
    assert ws.locks() == {"UNIQ#EMAIL#Ada@X.io": "ACCT#001", "UNIQ#EMAIL#bob@x.io": "ACCT#002"}
    ws.deploy(email=UNIQUE_EMAIL)
    made = ws.project().make_migrations()
    assert made.name == "0002_alter_account_email"
    result = ws.project().executor().migrate()
    assert result.applied == ["0002_alter_account_email"]
    sweep = result.totals["0002_alter_account_email: sweep Account.EMAIL"]
    assert (sweep.records, sweep.present, sweep.deleted) == (2, 1, 1)
    assert ws.locks() == {"UNIQ#EMAIL#ada@x.io": "ACCT#001", "UNIQ#EMAIL#bob@x.io": "ACCT#002"}
    ws.project().executor().migrate("0001")
    assert ws.locks() == {"UNIQ#EMAIL#Ada@X.io": "ACCT#001", "UNIQ#EMAIL#bob@x.io": "ACCT#002"}


def test_an_alter_that_makes_records_collide_reports_them(ws: Workspace) -> None:
    ws.put_raw("ACCT#001", email="Ada@X.io")
    ws.put_raw("ACCT#002", email="ada@x.io")
    ws.deploy(email=", unique=True")
    ws.project().make_migrations()
    ws.project().executor().migrate()
    ws.deploy(email=UNIQUE_EMAIL)
    ws.project().make_migrations()
    with pytest.raises(DuplicatesFound) as info:
        ws.project().executor().migrate()
    (duplicate,) = info.value.duplicates
    assert duplicate.value == "ada@x.io"
    assert {str(duplicate.holder), *map(str, duplicate.others)} == {
        str({"PK": "ACCT#001", "SK": "PROFILE"}), str({"PK": "ACCT#002", "SK": "PROFILE"})}


def test_conditional_and_hashed_constraints(ws: Workspace) -> None:
    ws.put_raw("ACCT#001", handle="ada", status="active")
    ws.put_raw("ACCT#002", handle="bob", status="inactive")
    ws.put_raw("ACCT#003", handle="bob", status="active")
    meta = ("lock_secret = 's3cret'\n"
            "constraints = [UniqueConstraint(('handle',), name='HANDLE', condition=active_only,"
            " hashed=True)]")
    module = _prepare(ws, email="", meta=meta)
    source = (ws.migrations / "0001_initial.py").read_text(encoding="utf-8")
    assert f'"condition": "{ws.module}.active_only"' in source
    assert '"hashed": True' in source
    ws.project().executor().migrate()
    secret = b"s3cret"
    assert ws.locks() == {
        lock_key("HANDLE", ("ada",), secret=secret): "ACCT#001",
        lock_key("HANDLE", ("bob",), secret=secret): "ACCT#003",
    }
    # The backfill's locks carry the secret's fingerprint, as a save's do.
    assert {i["secret_id"]["S"] for i in ws.scan() if i["PK"]["S"].startswith("UNIQ#HANDLE#")
            } == {secret_id(secret)}
    # The app now enforces it: an active "bob" is refused.
    with pytest.raises(UniqueViolation):
        module.Account(pk="ACCT#004", handle="bob", status="active").save()


def test_run_python_runs_once_forwards_and_its_inverse_backwards(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    project = ws.project()
    project.make_migrations()
    made = project.make_migrations(empty=True, name="seed")
    assert made.path is not None
    made.path.write_text(
        "from dynaunique.migrations import operations as ops\n"
        "dependencies = ['0001_initial']\n"
        "def forwards(ctx):\n"
        "    ctx.models['Account'](pk='ACCT#seed', email='seed@x.io').save()\n"
        "def backwards(ctx):\n"
        "    ctx.models['Account'].get('ACCT#seed', 'PROFILE').delete()\n"
        "operations = [ops.RunPython(forwards, backwards)]\n", encoding="utf-8")
    result = ws.project().executor().migrate()
    assert result.applied == ["0001_initial", "0002_seed"]
    assert ws.locks() == {"UNIQ#EMAIL#seed@x.io": "ACCT#seed"}
    ws.project().executor().migrate("0001")
    assert ws.records() == {}
    assert ws.locks() == {}


def test_the_ledger_stores_its_kinds_as_the_strings_it_always_did(ws: Workspace) -> None:
    """The kinds are enums now; the ledger items carry exactly the strings they carried before
    (so a ledger written by an older version keeps being read, and the other way round)."""
    _prepare(ws)
    project = ws.project()
    recorder = project.recorder()
    app = project.app
    recorder.start_job("0001_initial#0#F#0", 1, "fill Account.EMAIL")
    recorder.save_progress(Progress("0001_initial#0#F#0", 1, 0))
    recorder.record_applied("0001_initial")
    lease = recorder.acquire(seconds=30)
    workers = None
    try:
        stored = {i["PK"]["S"]: i["ledger"]["M"] for i in ws.scan() if i["PK"]["S"] in ws.ledger()}
        assert {pk: (d["kind"], d.get("mode")) for pk, d in stored.items()} == {
            f"UNIQ#~JOB#{app}#0001_initial#0#F#0": ({"S": "job"}, None),
            f"UNIQ#~PROGRESS#{app}#0001_initial#0#F#0#1#0": ({"S": "progress"}, None),
            f"UNIQ#~MIGRATION#{app}#0001_initial": ({"S": "migration"}, None),
            f"UNIQ#~LEASE#{app}": ({"S": "lease"}, {"S": "exclusive"}),
        }
        lease.release()
        workers = recorder.acquire(seconds=30, worker=(0, 2))
        shared = next(i["ledger"]["M"] for i in ws.scan() if i["PK"]["S"] == f"UNIQ#~LEASE#{app}")
        assert (shared["kind"], shared["mode"], shared["holder"]) == (
            {"S": "lease"}, {"S": "workers"}, {"S": "workers"})
    finally:
        lease.release()
        if workers is not None:
            workers.release()


# --- the core, seen from a migration -------------------------------------------------------------


def test_duplicates_fixed_through_the_model_then_a_rerun_finishes(ws: Workspace) -> None:
    """Either holder of a duplicate value can be changed with the model before the rerun."""
    ws.put_raw("ACCT#001", email="x@x.io")
    ws.put_raw("ACCT#002", email="x@x.io")
    ws.put_raw("ACCT#003", email="z@x.io")
    ws.put_raw("ACCT#004", email="Z@x.io")
    models = _prepare(ws)
    with pytest.raises(DuplicatesFound) as info:
        ws.project().executor().migrate()
    holders = {d.value: (d.holder, d.others) for d in info.value.duplicates}
    assert set(holders) == {"x@x.io", "z@x.io"}
    # Change the record that lacks the lock for one value, the one that holds it for the other.
    lacking = holders["x@x.io"][1][0]["PK"]
    holding = holders["z@x.io"][0]
    assert holding is not None
    for pk, email in ((lacking, "y@x.io"), (holding["PK"], "w@x.io")):
        account = models.Account.get(pk, "PROFILE", consistent_read=True)
        account.email = email
        account.save()
    ws.project().executor().migrate()
    assert ws.locks() == ws.expected_locks()
    assert len(ws.locks()) == 4




# --- a record replaced by another model's between the scan and the lock put (task ident) -------


@pytest.mark.parametrize("family", ["plain models", "polymorphic"])
def test_a_record_another_model_recreated_before_the_lock_put_gets_no_lock_of_the_first(
        ws: Workspace, family: str) -> None:
    """The backfill scans K as the constrained model's record; before its lock put, K is
    deleted and written again, with the same email, as another model's record — an Invite
    (which declares no constraint) or an Animal in place of a Dog (which shares the lock). The
    put's check of K compared only the lock inputs, so it passed: an orphan lock naming an
    Account for an Invite, or the Animal's own lock re-put naming a Dog. The check now also
    keeps K a record of the model it was scanned as; the refused put is reconciled from K as it
    is."""
    from support.invariants import assert_clean

    from dynaunique import audit

    if family == "plain models":
        ws.put_raw("ACCT#001", email="ada@x.io")
        ws.put_raw("ACCT#005", email="user5@x.io")
        models = ws.deploy_source(SHARED_TABLE_MODELS.format(table=TABLE))
        checked = [models.Account, models.Invite]

        def replace() -> None:
            models.Account.get("ACCT#005", "PROFILE", consistent_read=True).delete()
            models.Invite(pk="ACCT#005", email="user5@x.io", inviter="ACCT#001").save()
        expected = {"UNIQ#EMAIL#ada@x.io": "ACCT#001"}
        models_of = {"UNIQ#EMAIL#ada@x.io": "Account"}
    else:
        ws.put_raw("ACCT#001", email="ada@x.io", cls="animal")
        ws.put_raw("ACCT#005", email="user5@x.io", cls="dog")
        models = ws.deploy_source(POLYMORPHIC_MODELS.format(table=TABLE))
        checked = [models.Animal, models.Dog]

        def replace() -> None:
            models.Animal.get("ACCT#005", "PROFILE", consistent_read=True).delete()
            models.Animal(pk="ACCT#005", email="user5@x.io").save()
        expected = {"UNIQ#PET_EMAIL#ada@x.io": "ACCT#001", "UNIQ#PET_EMAIL#user5@x.io": "ACCT#005"}
        models_of = {"UNIQ#PET_EMAIL#ada@x.io": "Animal", "UNIQ#PET_EMAIL#user5@x.io": "Animal"}
    assert ws.project().make_migrations().changed
    executor = _racing(ws, target="ACCT#005", before=replace)
    executor.migrate()
    assert executor.fired
    assert ws.locks() == expected
    stored = {i["PK"]["S"]: i["model"]["S"] for i in ws.scan() if i["PK"]["S"] in expected}
    assert stored == models_of
    assert_clean(checked, ws.endpoint)
    assert audit.check(checked).findings == ()
