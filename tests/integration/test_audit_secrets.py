"""A check or a repair run with another lock secret than the one that made the hashed locks.

Every hashed lock carries the fingerprint of its secret (``secret_id``); a repair run with the
wrong ``DYNAUNIQUE_LOCK_SECRET`` used to call every real hashed lock an orphan and delete it,
after which the application accepted duplicates. Through ``dynaunique.audit`` and the CLI, on
the local server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import support.secret_models as sm
from click.testing import CliRunner, Result
from support.invariants import assert_clean
from support.tables import raw_tables, scan_all

from dynaunique import UniqueViolation, audit
from dynaunique._lock.items import SECRET_ENV
from dynaunique._lock.locks import lock_key, secret_id
from dynaunique.cli import cli
from dynaunique.errors import AuditError

Patient = sm.Patient
RIGHT, WRONG, NEW = "the-application-secret", "a-mistyped-secret", "the-rotated-secret"
PHONES = {"P#1": "+15550001", "P#2": "+15550002", "P#3": "+15550003"}


def fingerprint(secret: str) -> str:
    return secret_id(secret.encode("utf-8"))


@pytest.fixture
def raw(dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Three patients saved with the application's secret; a plain boto3 client."""
    monkeypatch.setenv(SECRET_ENV, RIGHT)
    client = raw_tables(dynaunique_db, *sm.MODELS)
    for pk, phone in PHONES.items():
        Patient(pk=pk, email=f"{pk[2:]}@x.io", phone=phone).save()
    return client


def items(raw: Any) -> dict[str, dict[str, Any]]:
    return {i["PK"]["S"]: i for i in scan_all(raw, sm.TABLE)}


def phone_locks(raw: Any) -> dict[str, dict[str, Any]]:
    return {k: i for k, i in items(raw).items() if k.startswith("UNIQ#PHONE#")}


def phone_key(phone: str, secret: str) -> str:
    return lock_key("PHONE", (phone,), secret=secret.encode("utf-8"))


def run(endpoint: str, *args: str) -> Result:
    runner = CliRunner(env={"COLUMNS": "250"})
    return runner.invoke(cli, [*args[:1], sm.__name__, *args[1:], "--endpoint", endpoint])


def kinds(report: audit.AuditReport) -> list[tuple[str, str]]:
    return sorted((f.kind.value, f.constraint) for f in report.findings)


# --- the fingerprint -----------------------------------------------------------------------------


def test_hashed_locks_carry_the_fingerprint_of_their_secret_and_plain_locks_do_not(
        raw: Any) -> None:
    stored = items(raw)
    for pk, phone in PHONES.items():
        lock = stored[phone_key(phone, RIGHT)]
        assert lock["secret_id"] == {"S": fingerprint(RIGHT)}
        assert set(lock) == {"PK", "SK", "owner", "model", "constraint", "secret_id", "created"}
        plain = stored[f"UNIQ#EMAIL#{pk[2:].lower()}@x.io"]
        assert set(plain) == {"PK", "SK", "owner", "model", "constraint", "value", "created"}
    # Non-reversible and not the secret: 16 hex digits, distinct per secret.
    assert fingerprint(RIGHT) == "8f20c6699acf9205"
    assert len({fingerprint(RIGHT), fingerprint(WRONG), fingerprint(NEW)}) == 3


def test_a_lock_repair_writes_carries_the_fingerprint(raw: Any) -> None:
    key = phone_key(PHONES["P#2"], RIGHT)
    raw.delete_item(TableName=sm.TABLE, Key={"PK": {"S": key}, "SK": {"S": "LOCK"}})
    result = audit.apply_repair(audit.plan_repair(audit.check(sm.MODELS)))
    assert [o.status for o in result.outcomes] == ["fixed"]
    assert items(raw)[key]["secret_id"] == {"S": fingerprint(RIGHT)}


# --- the wrong secret, through the API ------------------------------------------------------------


def test_check_with_the_wrong_secret_reports_other_secret_locks_and_warns(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, WRONG)
    report = audit.check(sm.MODELS)
    assert kinds(report) == [("foreign_secret", "PHONE")] * 3 + [("missing", "PHONE")] * 3
    assert report.counts()["orphan"] == 0
    (warning,) = report.secret_warnings
    assert (warning.table, warning.constraint, warning.current, warning.seen) == (
        sm.TABLE, "PHONE", fingerprint(WRONG), ((fingerprint(RIGHT), 3),))
    assert warning.message == (
        "the lock secret is probably wrong for PHONE on 'audit_patients': none of its 3 hashed "
        f"lock(s) was made with the current secret ({fingerprint(WRONG)}; they carry 3 "
        f"{fingerprint(RIGHT)}); repair will not touch them")
    assert report.to_dict()["secret_warnings"] == [warning.to_dict()]
    other = report.of_kind("foreign_secret")[0]
    assert other.detail == (f"made under secret {fingerprint(RIGHT)}, not the current secret "
                            f"{fingerprint(WRONG)}; its owner no longer holds it (it has "
                            "another PHONE value now)")
    assert other.lock is not None and other.lock.secret_id == fingerprint(RIGHT)


def test_repair_with_the_wrong_secret_refuses_and_deletes_no_real_lock(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    before = items(raw)
    monkeypatch.setenv(SECRET_ENV, WRONG)
    plan = audit.plan_repair(audit.check(sm.MODELS))
    assert plan.actions == ()
    assert len(plan.other_secret) == 6 and list(plan.unfixable) == list(plan.other_secret)
    with pytest.raises(AuditError, match=r"^refusing to repair: the lock secret is probably "
                                         r"wrong for PHONE on 'audit_patients'"):
        audit.apply_repair(plan)
    assert items(raw) == before
    # With the application's secret again: every lock is there and still enforced.
    monkeypatch.setenv(SECRET_ENV, RIGHT)
    assert audit.check(sm.MODELS).clean
    with pytest.raises(UniqueViolation):
        Patient(pk="P#9", email="nine@x.io", phone=PHONES["P#1"]).save()


def test_accepting_the_other_secret_rotates_the_locks_to_the_current_one(
        raw: Any, monkeypatch: pytest.MonkeyPatch, dynaunique_db: str) -> None:
    """Retiring a secret on purpose: the old secret's locks are deleted, the new one's written."""
    monkeypatch.setenv(SECRET_ENV, NEW)
    plan = audit.plan_repair(audit.check(sm.MODELS), accept_other_secret=True)
    assert sorted(a.kind.value for a in plan.actions) == ["delete_orphan"] * 3 + ["put_missing"] * 3
    assert (plan.other_secret, plan.unfixable) == ((), ())
    result = audit.apply_repair(plan)
    assert result.ok
    assert set(phone_locks(raw)) == {phone_key(p, NEW) for p in PHONES.values()}
    assert {i["secret_id"]["S"] for i in phone_locks(raw).values()} == {fingerprint(NEW)}
    assert audit.check(sm.MODELS).clean
    assert_clean(sm.MODELS, dynaunique_db)
    with pytest.raises(UniqueViolation):
        Patient(pk="P#9", email="nine@x.io", phone=PHONES["P#3"]).save()


def test_a_stray_lock_of_another_secret_is_never_deleted_as_an_orphan(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Most locks agree with the current secret (no warning), one does not: it is not an
    orphan, and repair refuses until told."""
    stray = phone_key("+15550009", WRONG)
    raw.put_item(TableName=sm.TABLE, Item={
        "PK": {"S": stray}, "SK": {"S": "LOCK"}, "owner": {"M": sm.patient_key("P#GONE")},
        "model": {"S": "Patient"}, "constraint": {"S": "PHONE"},
        "secret_id": {"S": fingerprint(WRONG)}, "created": {"S": "2026-01-01T00:00:00+00:00"}})
    report = audit.check(sm.MODELS)
    assert kinds(report) == [("foreign_secret", "PHONE")]
    assert report.secret_warnings == ()
    assert report.findings[0].owner_state == "gone"
    plan = audit.plan_repair(report)
    assert [f.lock_key for f in plan.other_secret] == [stray]
    with pytest.raises(AuditError, match=r"^refusing to repair: 1 hashed lock"):
        audit.apply_repair(plan)
    assert stray in items(raw)
    accepted = audit.plan_repair(report, accept_other_secret=True)
    assert audit.apply_repair(accepted).ok
    assert stray not in items(raw)


# --- locks written before the fingerprint ---------------------------------------------------------


def _forget_fingerprints(raw: Any) -> None:
    for key in phone_locks(raw):
        raw.update_item(TableName=sm.TABLE, Key={"PK": {"S": key}, "SK": {"S": "LOCK"}},
                        UpdateExpression="REMOVE secret_id")


def test_locks_without_a_fingerprint_are_sound_under_the_right_secret(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _forget_fingerprints(raw)
    assert audit.check(sm.MODELS).clean
    # One owner deleted around the library: its old lock cannot be known to be this secret's.
    raw.delete_item(TableName=sm.TABLE, Key=sm.patient_key("P#1"))
    report = audit.check(sm.MODELS)
    assert kinds(report) == [("foreign_secret", "PHONE"), ("orphan", "EMAIL")]
    assert report.secret_warnings == ()
    assert report.of_kind("foreign_secret")[0].detail == (
        "made before locks carried their secret's fingerprint, not the current secret "
        f"{fingerprint(RIGHT)}; its owner does not exist")
    with pytest.raises(AuditError, match="refusing to repair"):
        audit.apply_repair(audit.plan_repair(report))
    assert phone_key(PHONES["P#1"], RIGHT) in items(raw)


def test_locks_without_a_fingerprint_under_the_wrong_secret_warn_and_are_kept(
        raw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _forget_fingerprints(raw)
    before = items(raw)
    monkeypatch.setenv(SECRET_ENV, WRONG)
    report = audit.check(sm.MODELS)
    assert kinds(report) == [("foreign_secret", "PHONE")] * 3 + [("missing", "PHONE")] * 3
    (warning,) = report.secret_warnings
    assert warning.seen == ((None, 3),)
    with pytest.raises(AuditError, match="refusing to repair"):
        audit.apply_repair(audit.plan_repair(report))
    assert items(raw) == before


# --- the CLI --------------------------------------------------------------------------------------


def test_cli_check_with_the_wrong_secret_warns_in_one_line_and_in_json(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, WRONG)
    result = run(dynaunique_db, "check")
    assert result.exit_code == 1, result.output
    # Piped (CliRunner is no terminal): notes and warnings on stderr, one plain row a finding.
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING: the lock secret is probably wrong for PHONE on 'audit_patients': none of its "
        f"3 hashed lock(s) was made with the current secret ({fingerprint(WRONG)}; they carry 3 "
        f"{fingerprint(RIGHT)}); repair will not touch them"]
    rows = result.stdout.splitlines()
    assert sum(row.startswith("other secret\t") for row in rows) == 3
    assert "orphan" not in result.stdout
    assert "6 finding(s): 3 missing lock, 3 other secret" in result.stderr
    as_json = run(dynaunique_db, "check", "--json")
    report = json.loads(as_json.stdout)
    assert [w["current"] for w in report["secret_warnings"]] == [fingerprint(WRONG)]
    assert report["counts"]["foreign_secret"] == 3 and report["counts"]["orphan"] == 0


def test_cli_repair_yes_with_the_wrong_secret_exits_two_and_changes_nothing(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = items(raw)
    monkeypatch.setenv(SECRET_ENV, WRONG)
    dry = run(dynaunique_db, "repair")
    assert dry.exit_code == 1, dry.output
    assert "delete orphan" not in dry.stdout and "put missing" not in dry.stdout
    assert "Left for a person (6)" in dry.stderr and "--accept-other-secret" in dry.stdout
    applied = run(dynaunique_db, "repair", "--yes")
    assert applied.exit_code == 2, applied.output
    assert applied.stdout == ""
    (line,) = applied.stderr.splitlines()
    assert line.startswith("Error: refusing to repair: the lock secret is probably wrong for "
                           "PHONE") and "--accept-other-secret" in line
    assert "Traceback" not in applied.output
    assert items(raw) == before
    monkeypatch.setenv(SECRET_ENV, RIGHT)
    assert run(dynaunique_db, "check").exit_code == 0


def test_cli_repair_accept_other_secret_rotates(
        raw: Any, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, NEW)
    result = run(dynaunique_db, "repair", "--yes", "--accept-other-secret")
    assert result.exit_code == 0, result.output
    assert set(phone_locks(raw)) == {phone_key(p, NEW) for p in PHONES.values()}
    assert run(dynaunique_db, "check").exit_code == 0


@pytest.mark.parametrize("phone", ["+15550001", "+19999999"])
def test_cli_exact_lookup_of_a_hashed_value_never_echoes_it(
        raw: Any, dynaunique_db: str, phone: str) -> None:
    for args in ((), ("--json",)):
        result = run(dynaunique_db, "locks", "--constraint", "PHONE", "--value", phone,
                     "--exact", *args)
        assert result.exit_code == 0, result.output
        assert phone not in result.output and phone[1:] not in result.output
    free = run(dynaunique_db, "locks", "--constraint", "phone", "--value", "+19999999",
               "--exact")
    if phone == "+19999999":
        assert "No lock: that phone value (hashed, not shown) is free." in free.stderr


def test_cli_exact_lookup_of_a_hashed_value_it_cannot_lock_does_not_quote_it(
        raw: Any, dynaunique_db: str) -> None:
    # A byte that is not UTF-8 on the command line reaches Python as a lone surrogate.
    result = run(dynaunique_db, "locks", "--constraint", "PHONE", "--value", "+1555\udcff",
                 "--exact")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "Error: that value cannot be looked up as PHONE (InvalidValueError); PHONE is hashed, "
        "so the value is not shown"]
    assert "1555" not in result.output


# --- items the audit cannot read ------------------------------------------------------------------


def test_an_item_the_model_cannot_read_is_unreadable_and_the_rest_is_checked(
        raw: Any) -> None:
    raw.put_item(TableName=sm.TABLE, Item={**sm.patient_key("P#BAD"), "email": {"S": "b@x.io"},
                                           "visits": {"S": "many"}})
    raw.put_item(TableName=sm.TABLE, Item={**sm.patient_key("P#MAP"), "email": {"M": {}}})
    raw.delete_item(TableName=sm.TABLE, Key=sm.patient_key("P#3"))
    report = audit.check(sm.MODELS)
    assert sorted((f.kind.value, tuple(h.label for h in f.holders)) for f in report.findings) == [
        ("orphan", ()), ("orphan", ()),
        ("unreadable", ("P#BAD / PATIENT",)), ("unreadable", ("P#MAP / PATIENT",))]


def test_a_lock_whose_owner_map_is_no_key_is_reported_not_a_crash(raw: Any) -> None:
    raw.put_item(TableName=sm.TABLE, Item={
        "PK": {"S": "UNIQ#EMAIL#odd@x.io"}, "SK": {"S": "LOCK"},
        "owner": {"M": {"PK": {"M": {}}, "SK": {"S": "PATIENT"}}}, "model": {"S": "Patient"},
        "constraint": {"S": "EMAIL"}, "value": {"S": "odd@x.io"}})
    report = audit.check(sm.MODELS)
    assert [(f.kind.value, f.lock_key, f.owner_state) for f in report.findings] == [
        ("orphan", "UNIQ#EMAIL#odd@x.io", "none")]
    assert audit.plan_repair(report).actions == ()
