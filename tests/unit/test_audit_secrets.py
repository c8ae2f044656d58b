"""The secret fingerprint of hashed locks and what the audit concludes from it, and the audit's
reading of items it cannot make sense of — pure parts, exact values, no server."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from dynaunique import audit
from dynaunique._lock.items import locks_of
from dynaunique._lock.locks import lock_item, lock_key, secret_id
from dynaunique._write.writes import lock_put
from dynaunique.audit._check import SecretWarning, _secret_warnings, _Snapshot
from dynaunique.audit._judge import _judge
from dynaunique.audit._plan import _action, _Secrets, remedy
from dynaunique.audit._stored import _interpret, _label, _lock_info
from unit.test_audit_kinds import CREATED, TABLE, Member, key, lock, member, read

SECRET = b"unit-secret"  # Member's Meta.lock_secret
MINE = hmac.new(SECRET, b"\\sdynaunique-secret-id", hashlib.sha256).hexdigest()[:16]
OTHER = secret_id(b"another-secret")


def phone_key(phone: str, secret: bytes = SECRET) -> str:
    return lock_key("PHONE", (phone,), secret=secret)


def phone_lock(phone: str, owner: str, fingerprint: str | None, secret: bytes = SECRET
               ) -> dict[str, Any]:
    extra = {"secret_id": {"S": fingerprint}} if fingerprint is not None else {}
    return lock(phone_key(phone, secret), owner, constraint={"S": "PHONE"}, **extra)


# --- the fingerprint -----------------------------------------------------------------------------


def test_secret_id_is_a_truncated_hmac_of_a_message_no_value_encodes_to() -> None:
    assert secret_id(SECRET) == MINE == "3b1221b2352d5020"
    assert secret_id(b"another-secret") != MINE
    # The message is no encoded value: a value spelling it is escaped, so no lock key's digest
    # ever equals the fingerprint's HMAC.
    digest = phone_key("\\sdynaunique-secret-id").rsplit("\\k", 1)[1]
    assert not digest.startswith(MINE)


def test_lock_item_writes_the_fingerprint_only_on_hashed_locks() -> None:
    common: dict[str, Any] = {"key_attributes": ("PK", "SK"), "owner": key("M#1"),
                              "model": "Member", "created": CREATED}
    hashed = lock_item(lock_key_value="UNIQ#PHONE#\\kab", constraint="PHONE", value="+1",
                       hashed=True, secret=MINE, **common)
    assert hashed == {"PK": {"S": "UNIQ#PHONE#\\kab"}, "SK": {"S": "LOCK"},
                      "owner": {"M": key("M#1")}, "model": {"S": "Member"},
                      "constraint": {"S": "PHONE"}, "secret_id": {"S": MINE},
                      "created": {"S": CREATED}}
    plain = lock_item(lock_key_value="UNIQ#EMAIL#a", constraint="EMAIL", value="a",
                      hashed=False, secret=MINE, **common)
    assert plain == {"PK": {"S": "UNIQ#EMAIL#a"}, "SK": {"S": "LOCK"},
                     "owner": {"M": key("M#1")}, "model": {"S": "Member"},
                     "constraint": {"S": "EMAIL"}, "value": {"S": "a"},
                     "created": {"S": CREATED}}


def test_lock_put_stamps_the_models_secret_on_its_hashed_locks() -> None:
    info = Member._du_info
    assert info is not None
    locks = locks_of(info, Member(pk="M#1", email="a@x.io", phone="+1555"))
    put = lock_put(info, locks["PHONE"], key("M#1"), {}, created=CREATED)
    assert put.item["secret_id"] == {"S": MINE}
    assert "secret_id" not in lock_put(info, locks["ACTIVE_EMAIL"], key("M#1"), {},
                                       created=CREATED).item


def test_lock_info_reads_the_fingerprint() -> None:
    assert _lock_info(TABLE, phone_lock("+1", "M#1", OTHER)).secret_id == OTHER
    assert _lock_info(TABLE, phone_lock("+1", "M#1", None)).secret_id is None
    assert _lock_info(TABLE, phone_lock("+1", "M#1", OTHER)).to_dict()["secret_id"] == OTHER


# --- judging a hashed lock no record requires ----------------------------------------------------


def test_an_orphan_of_the_current_secret_is_an_orphan() -> None:
    finding = _judge(TABLE, phone_key("+1"), phone_lock("+1", "M#9", MINE), [read("M#9", None)])
    assert finding is not None and finding.kind == "orphan" and finding.repairable


@pytest.mark.parametrize(("fingerprint", "made"), [
    (OTHER, f"made under secret {OTHER}"),
    (None, "made before locks carried their secret's fingerprint")])
def test_a_hashed_lock_another_secret_made_is_not_an_orphan(fingerprint: str | None,
                                                           made: str) -> None:
    other_key = phone_key("+1", b"another-secret")
    owner = read("M#1", member("M#1", phone={"S": "+1"}))
    finding = _judge(TABLE, other_key, phone_lock("+1", "M#1", fingerprint, b"another-secret"),
                     [owner])
    assert finding is not None
    assert (finding.kind, finding.owner_state, finding.repairable, finding.shown_value) == (
        "foreign_secret", "changed", False, "hashed")
    assert finding.detail == (f"{made}, not the current secret {MINE}; its owner no longer holds "
                              "it (it has another PHONE value now)")
    assert finding.message == (f"lock PHONE (hashed) (owner M#1 / MEMBER) was {made}, not with "
                               f"the current secret ({MINE}): it is not deleted as an orphan "
                               "(its owner no longer holds it (it has another PHONE value now))")
    assert _action(TABLE, finding, ()) is None
    assert _action(TABLE, finding, (), _Secrets(accept=False)) is None
    accepted = _action(TABLE, finding, (), _Secrets(accept=True))
    assert accepted is not None and accepted.kind == "delete_orphan"
    assert remedy(finding).startswith("check the lock secret (Meta.lock_secret or "
                                      "DYNAUNIQUE_LOCK_SECRET)")


def test_a_missing_lock_of_a_warned_constraint_waits_for_acceptance() -> None:
    holder = read("M#1", member("M#1", phone={"S": "+1"}))
    finding = _judge(TABLE, phone_key("+1"), None, [holder])
    assert finding is not None and finding.kind == "missing"
    assert _action(TABLE, finding, ()) is not None
    warned = _Secrets(frozenset({("audit_unit_members", "PHONE")}))
    assert warned.holds(finding) and _action(TABLE, finding, (), warned) is None
    accepted = _Secrets(frozenset({("audit_unit_members", "PHONE")}), accept=True)
    action = _action(TABLE, finding, (), accepted)
    assert action is not None and action.kind == "put_missing"
    # Two records holding one value do so under any secret: a duplicate stays a duplicate.
    twin = read("M#2", member("M#2", phone={"S": "+1"}))
    duplicate = _judge(TABLE, phone_key("+1"), None, [holder, twin])
    assert duplicate is not None and duplicate.kind == "duplicate"
    assert not warned.holds(duplicate)
    assert remedy(duplicate).startswith("decide which record keeps the value")


# --- the table-level warning ---------------------------------------------------------------------


def snapshot(locks: list[dict[str, Any]], records: list[Any]) -> _Snapshot:
    return _Snapshot(locks={item["PK"]["S"]: item for item in locks}, records=records)


def test_no_warning_while_one_lock_carries_the_current_fingerprint() -> None:
    shot = snapshot([phone_lock("+1", "M#1", MINE), phone_lock("+2", "M#2", OTHER)], [])
    assert _secret_warnings(TABLE, shot) == []


def test_a_warning_when_no_lock_was_made_with_the_current_secret() -> None:
    other = b"another-secret"
    records = [read(f"M#{i}", member(f"M#{i}", phone={"S": f"+{i}"})) for i in (1, 2, 3)]
    shot = snapshot([phone_lock("+1", "M#1", OTHER, other), phone_lock("+2", "M#2", OTHER, other),
                     phone_lock("+3", "M#3", None, other)], records)
    (warning,) = _secret_warnings(TABLE, shot)
    assert warning == SecretWarning("audit_unit_members", "PHONE", MINE, ((OTHER, 2), (None, 1)))
    assert warning.message == (
        "the lock secret is probably wrong for PHONE on 'audit_unit_members': none of its 3 "
        f"hashed lock(s) was made with the current secret ({MINE}; they carry 2 {OTHER}, 1 no "
        "fingerprint); repair will not touch them")


def test_a_lock_without_fingerprint_that_a_record_requires_confirms_the_secret() -> None:
    records = [read("M#1", member("M#1", phone={"S": "+1"}))]
    shot = snapshot([phone_lock("+1", "M#1", None), phone_lock("+2", "M#2", None)], records)
    assert _secret_warnings(TABLE, shot) == []


def test_plan_and_apply_refuse_what_another_secret_made() -> None:
    finding = _judge(TABLE, phone_key("+1", b"x"), phone_lock("+1", "M#9", OTHER, b"x"),
                     [read("M#9", None)])
    assert finding is not None
    report = audit.AuditReport((), (finding,), audit.Cost(), (Member,))
    plan = audit.plan_repair(report)
    assert (plan.actions, plan.other_secret, plan.unfixable) == ((), (finding,), (finding,))
    assert plan.to_dict()["unfixable"][0]["remedy"].startswith("check the lock secret")
    with pytest.raises(audit.AuditError) as refused:
        audit.apply_repair(plan)
    assert str(refused.value) == (
        "refusing to repair: 1 hashed lock(s) of PHONE on 'audit_unit_members' were not made "
        "with the current secret. Check the lock secret (Meta.lock_secret or "
        "DYNAUNIQUE_LOCK_SECRET); if those locks' secret was retired on purpose, repair with "
        "--accept-other-secret (accept_other_secret=True)")
    accepted = audit.plan_repair(report, accept_other_secret=True)
    assert ([a.kind for a in accepted.actions], accepted.other_secret) == (["delete_orphan"], ())


# --- items the audit cannot read -----------------------------------------------------------------


def test_a_lone_surrogate_in_a_constrained_string_is_unreadable_and_printable() -> None:
    record = read("M#1", member("M#1", email={"S": "a\ud800@x.io"}))
    assert (record.requires, record.ref.model) == (None, "Member")
    assert record.problem is not None
    record.problem.encode("utf-8")
    assert "'a\\ud800@x.io' is not valid UTF-8" in record.problem


def test_a_lone_surrogate_in_a_key_still_prints() -> None:
    assert _label({"PK": {"S": "M#\udc00"}, "SK": {"S": "MEMBER"}}) == "M#\\udc00 / MEMBER"
    info = _lock_info(TABLE, lock("UNIQ#ACTIVE_EMAIL#a\ud800", "M#1", value={"S": "a\ud800"}))
    assert info.shown_value == "a\\ud800"


def test_a_record_hook_that_cannot_read_an_item_makes_it_unreadable() -> None:
    class Picky(Member):
        class Meta(Member.Meta):
            @staticmethod
            def is_record(raw: dict[str, Any]) -> bool:
                return raw["kind"]["S"] == "member"

    table = TABLE.__class__(TABLE.name, None, (Picky,), "PK", "SK", "ttl", TABLE.declared)
    record = _interpret(table, key("M#1"), member("M#1", email={"S": "a@x.io"}),
                        keep_item=True)
    assert (record.exists, record.requires, record.ref.model) == (True, None, None)
    assert record.problem == "no model can tell whether it is its record: KeyError: 'kind'"


def test_a_lock_whose_owner_map_is_no_key_names_no_owner() -> None:
    item = {**lock("UNIQ#ACTIVE_EMAIL#a", None),
            "owner": {"M": {"PK": {"M": {}}, "SK": {"S": "MEMBER"}}}}
    assert _lock_info(TABLE, item).owner is None
    finding = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a", item, [])
    assert finding is not None and (finding.kind, finding.owner_state) == ("orphan", "none")

