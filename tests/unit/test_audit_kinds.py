"""dynaunique.audit's pure parts: its kinds as str enums, reading stored items, judging a lock
key, planning a repair's guarded writes, page cursors and the names a person types.

No server: items are built by hand, exact values asserted.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from dynaunique import Model, UniqueConstraint, audit, normalizers
from dynaunique._write.render import render
from dynaunique.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
)
from dynaunique.audit._judge import _judge
from dynaunique.audit._names import _encoded_prefix
from dynaunique.audit._pages import _decode_cursor, _density, _encode_cursor, _page_request
from dynaunique.audit._plan import _action
from dynaunique.audit._stored import (
    _interpret,
    _is_lock_item,
    _json_value,
    _label,
    _lock_info,
    _Record,
)
from dynaunique.audit._tables import Cost, _Table

CREATED = "2024-05-01T12:00:00.000000+00:00"


def is_active(member: Any) -> bool:
    return bool(member.status == "active")


class Member(Model):
    """Email unique among active members only; a hashed phone; a TTL copied onto locks."""

    class Meta:
        table_name = "audit_unit_members"
        lock_secret = "unit-secret"
        constraints = [UniqueConstraint("email", name="ACTIVE_EMAIL",
                                        normalize=normalizers.casefold, condition=is_active),
                       UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG",
                                        normalize={"slug": normalizers.casefold})]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="MEMBER")
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="active")
    phone = UnicodeAttribute(null=True, unique=True, hashed=True)
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    seats = NumberAttribute(null=True)
    admin = BooleanAttribute(null=True)
    blob = BinaryAttribute(null=True, legacy_encoding=False)
    expires = TTLAttribute(null=True, attr_name="ttl")


TABLE = _Table("audit_unit_members", None, (Member,), "PK", "SK", "ttl",
               frozenset({"ACTIVE_EMAIL", "TENANT_SLUG", "PHONE"}))


def key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "MEMBER"}}


def member(pk: str, **attributes: Any) -> dict[str, Any]:
    return {**key(pk), **attributes}


def lock(lock_key: str, owner: str | None, **extra: Any) -> dict[str, Any]:
    item = {"PK": {"S": lock_key}, "SK": {"S": "LOCK"}, "model": {"S": "Member"},
            "created": {"S": CREATED}, **extra}
    if owner is not None:
        item["owner"] = {"M": key(owner)}
    return item


def read(pk: str, item: dict[str, Any] | None) -> _Record:
    return _interpret(TABLE, key(pk), item, keep_item=True)


# --- kinds ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [*audit.FindingKind, *audit.OwnerState, *audit.LockStatus,
                                  *audit.ActionKind, *audit.RepairStatus])
def test_every_kind_is_its_value_wherever_text_is_made(kind: Any) -> None:
    value = kind.value
    assert isinstance(kind, str)
    assert kind == value and hash(kind) == hash(value)
    assert (str(kind), f"{kind}", format(kind), " ".join([kind])) == (value,) * 4
    assert f"[{kind:>16}]" == f"[{value:>16}]"
    assert json.dumps({kind: [kind]}) == json.dumps({value: [value]})
    assert kind.replace("_", " ") == value.replace("_", " ")


def test_kind_values_and_order() -> None:
    assert [k.value for k in audit.KINDS] == ["duplicate", "missing", "foreign_owner", "orphan",
                                        "foreign_secret", "unknown_constraint", "unreadable",
                                        "pending", "confirmable"]
    assert [s.value for s in audit.RepairStatus] == ["fixed", "already_fixed", "not_fixed",
                                               "skipped", "failed"]
    assert [a.value for a in audit.ActionKind] == ["delete_orphan", "put_missing", "transfer",
                                             "drop_unknown", "confirm_intent"]
    assert [s.value for s in audit.OwnerState] == ["gone", "changed", "unknown", "none"]
    assert [s.value for s in audit.LockStatus] == ["held", "missing", "foreign", "pending"]
    assert audit.KIND_LABELS == {"duplicate": "duplicate", "missing": "missing lock",
                           "foreign_owner": "foreign owner", "orphan": "orphan lock",
                           "foreign_secret": "other secret",
                           "unknown_constraint": "unknown constraint",
                           "unreadable": "unreadable record", "pending": "pending intent",
                           "confirmable": "confirmable intent"}


def test_module_constants_are_the_members() -> None:
    assert (audit.ORPHAN, audit.MISSING, audit.DUPLICATE, audit.FOREIGN_OWNER,
            audit.UNKNOWN_CONSTRAINT, audit.UNREADABLE) == (
        audit.FindingKind.ORPHAN, audit.FindingKind.MISSING, audit.FindingKind.DUPLICATE,
        audit.FindingKind.FOREIGN_OWNER, audit.FindingKind.UNKNOWN_CONSTRAINT,
        audit.FindingKind.UNREADABLE)
    assert (audit.FIXED, audit.ALREADY_FIXED, audit.NOT_FIXED, audit.SKIPPED, audit.FAILED) == (
        "fixed", "already_fixed", "not_fixed", "skipped", "failed")
    assert audit.FIXED is audit.RepairStatus.FIXED
    assert audit.KINDS is audit.KINDS and audit.HIDDEN == "hashed"


# --- costs and stored items ----------------------------------------------------------------------


def test_cost_describes_its_requests() -> None:
    cost = Cost((("GetItem", 1), ("Scan", 2), ("TransactGetItems", 3), ("DescribeTable", 1)), 57)
    assert cost.describe() == ("scan of 57 items (2 Scan requests, eventually consistent), "
                               "1 GetItem (strongly consistent), 3 TransactGetItems "
                               "(serializable), 1 DescribeTable")
    assert (cost.total, cost.count("Scan"), cost.count("PutItem")) == (7, 2, 0)
    assert Cost().describe() == "no request"


def test_labels_and_json_values() -> None:
    assert _label(key("M#1")) == "M#1 / MEMBER"
    assert _label(None) == "-"
    assert _json_value(("a", Decimal("1.5"), b"\x00\x01")) == ["a", "1.5", "AAE="]


def test_lock_info_reads_a_lock_item() -> None:
    item = lock("UNIQ#ACTIVE_EMAIL#ada@x.io", "M#1", value={"S": "ada@x.io"},
                ttl={"N": "1700000000"})
    info = _lock_info(TABLE, item)
    assert info == audit.LockInfo(
        table="audit_unit_members", key="UNIQ#ACTIVE_EMAIL#ada@x.io", constraint="ACTIVE_EMAIL",
        encoded="ada@x.io", value="ada@x.io", hashed=False, model="Member", owner=key("M#1"),
        created=CREATED, expires=1700000000)
    assert (info.owner_label, info.shown_value) == ("M#1 / MEMBER", "ada@x.io")
    assert info.to_dict()["owner"] == {"PK": "M#1", "SK": "MEMBER"}


def test_lock_info_without_value_attribute_decodes_the_key() -> None:
    info = _lock_info(TABLE, lock("UNIQ#TENANT_SLUG#acme#home", None, ttl={"N": "soon"}))
    assert (info.value, info.hashed, info.shown_value) == (("acme", "home"), False, "acme / home")
    assert (info.owner, info.expires, info.to_dict()["owner"]) == (None, None, None)
    hashed = _lock_info(TABLE, lock("UNIQ#PHONE#\\kabc123", "M#1"))
    assert (hashed.hashed, hashed.shown_value, hashed.encoded) == (True, "hashed", "\\kabc123")


def test_is_lock_item_tells_locks_system_items_and_records_apart() -> None:
    assert _is_lock_item(TABLE, lock("UNIQ#ACTIVE_EMAIL#a", "M#1")) is True
    assert _is_lock_item(TABLE, {"PK": {"S": "UNIQ#~MIGRATIONS"}, "SK": {"S": "LOCK"}}) is None
    assert _is_lock_item(TABLE, {"PK": {"S": "UNIQ#EMAIL#a"}, "SK": {"S": "OTHER"}}) is None
    assert _is_lock_item(TABLE, member("M#1")) is False


def test_interpret_notes_the_locks_and_the_attributes_conditions_read() -> None:
    record = read("M#1", member("M#1", email={"S": "Ada@X.io"}, status={"S": "active"}))
    assert record.exists and record.ref == audit.RecordRef("audit_unit_members", key("M#1"),
                                                           "Member")
    assert sorted(record.requires or {}) == ["UNIQ#ACTIVE_EMAIL#ada@x.io"]
    assert record.condition_reads == frozenset({"status"})
    inactive = read("M#2", member("M#2", email={"S": "a@x.io"}, status={"S": "gone"}))
    assert (inactive.requires, inactive.condition_reads) == ({}, frozenset({"status"}))
    absent = read("M#3", None)
    assert (absent.exists, absent.requires) == (False, {})


# --- judging one lock key ------------------------------------------------------------------------


def test_judge_agreeing_lock_and_holder_is_no_finding() -> None:
    holder = read("M#1", member("M#1", email={"S": "a@x.io"}))
    assert _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a@x.io", lock("UNIQ#ACTIVE_EMAIL#a@x.io", "M#1"),
                  [holder]) is None


def test_judge_missing_lock() -> None:
    holder = read("M#1", member("M#1", email={"S": "a@x.io"}))
    finding = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a@x.io", None, [holder])
    assert finding is not None
    assert (finding.kind, finding.detail, finding.message, finding.owner_state) == (
        "missing", "no lock", "M#1 / MEMBER holds ACTIVE_EMAIL 'a@x.io' but no lock protects it",
        None)
    assert finding.repairable and finding.shown_value == "a@x.io"
    # JSON-ready means plain values: the enums' words, as before they were enums.
    shown = finding.to_dict()
    assert (type(shown["kind"]), shown["kind"], shown["owner_state"]) == (str, "missing", None)
    action = _action(TABLE, finding, ())
    assert action is not None and type(action.to_dict()["kind"]) is str


def test_judge_orphan_of_a_changed_owner_and_of_a_gone_one() -> None:
    moved = read("M#1", member("M#1", email={"S": "new@x.io"}))
    orphan = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#old@x.io",
                    lock("UNIQ#ACTIVE_EMAIL#old@x.io", "M#1", value={"S": "old@x.io"}), [moved])
    assert orphan is not None
    assert (orphan.kind, orphan.owner_state, orphan.message) == (
        audit.FindingKind.ORPHAN, audit.OwnerState.CHANGED,
        "lock ACTIVE_EMAIL 'old@x.io' (owner M#1 / MEMBER) is an orphan: its owner no longer "
        "holds it (its ACTIVE_EMAIL is now 'new@x.io')")
    gone = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#old@x.io",
                  lock("UNIQ#ACTIVE_EMAIL#old@x.io", "M#9", value={"S": "old@x.io"}),
                  [read("M#9", None)])
    assert gone is not None
    assert (gone.kind, gone.owner_state, gone.detail) == ("orphan", "gone",
                                                          "its owner does not exist")


def test_judge_foreign_owner_duplicate_and_unknown_constraint() -> None:
    holder = read("M#2", member("M#2", email={"S": "a@x.io"}))
    foreign = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a@x.io", lock("UNIQ#ACTIVE_EMAIL#a@x.io", "M#1"),
                     [holder, read("M#1", None)])
    assert foreign is not None
    assert (foreign.kind, foreign.detail) == (
        "foreign_owner", "lock names M#1 / MEMBER: its owner does not exist")
    other = read("M#3", member("M#3", email={"S": "A@x.io"}))
    duplicate = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a@x.io", None, [holder, other])
    assert duplicate is not None
    assert (duplicate.kind, duplicate.detail, duplicate.repairable) == (
        "duplicate", "2 records hold it; no lock", False)
    unknown = _judge(TABLE, "UNIQ#OLD_NAME#x", lock("UNIQ#OLD_NAME#x", "M#1"), [])
    assert unknown is not None
    assert (unknown.kind, unknown.detail) == ("unknown_constraint",
                                              "no loaded model declares OLD_NAME")
    assert audit.remedy(unknown) == ("load the model that declares it, remove it with a "
                                     "migration, or run repair --drop-unknown OLD_NAME")


# --- planning repairs (pure) ---------------------------------------------------------------------


def test_put_missing_guards_the_holder_on_what_its_condition_read() -> None:
    holder = read("M#1", member("M#1", email={"S": "a@x.io"}, status={"S": "active"},
                                ttl={"N": "1700000000"}))
    finding = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#a@x.io", None, [holder])
    assert finding is not None
    action = _action(TABLE, finding, ())
    assert action is not None and action.kind == audit.ActionKind.PUT_MISSING
    assert action.description == ("write for M#1 / MEMBER, if no lock exists and M#1 / MEMBER "
                                  "is unchanged")
    put, check = action.request()["TransactItems"]
    item = put["Put"]["Item"]
    assert {k: v for k, v in item.items() if k != "created"} == {
        "PK": {"S": "UNIQ#ACTIVE_EMAIL#a@x.io"}, "SK": {"S": "LOCK"}, "owner": {"M": key("M#1")},
        "model": {"S": "Member"}, "constraint": {"S": "ACTIVE_EMAIL"},
        "value": {"S": "a@x.io"}, "ttl": {"N": "1700000000"}}
    assert put["Put"]["ConditionExpression"] == (
        "attribute_not_exists(#g0) OR (#g1.#g0 = :g0 AND #g1.#g2 = :g1)")
    # The guard keeps every lock input as read: the constrained fields (absent ones too), the
    # TTL — and `status`, which the condition read: were it changed, the lock is not needed.
    assert check == {"ConditionCheck": {
        "TableName": "audit_unit_members", "Key": key("M#1"),
        "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0 AND attribute_not_exists(#g2)"
                               " AND attribute_not_exists(#g3) AND #g4 = :g1"
                               " AND attribute_not_exists(#g5) AND #g6 = :g2",
        "ExpressionAttributeNames": {"#g0": "PK", "#g1": "email", "#g2": "phone", "#g3": "slug",
                                     "#g4": "status", "#g5": "tenant", "#g6": "ttl"},
        "ExpressionAttributeValues": {":g0": {"S": "a@x.io"}, ":g1": {"S": "active"},
                                      ":g2": {"N": "1700000000"}}}}


def test_delete_orphan_guards_the_lock_owner_and_the_owner_absent() -> None:
    finding = _judge(TABLE, "UNIQ#ACTIVE_EMAIL#old@x.io",
                     lock("UNIQ#ACTIVE_EMAIL#old@x.io", "M#9", value={"S": "old@x.io"}),
                     [read("M#9", None)])
    assert finding is not None
    action = _action(TABLE, finding, ())
    assert action is not None and action.kind == "delete_orphan"
    assert action.description == ("delete, if still owned by M#9 / MEMBER and M#9 / MEMBER "
                                  "still does not exist")
    assert render(action.plan) == {"TransactItems": [
        {"Delete": {"TableName": "audit_unit_members",
                    "Key": {"PK": {"S": "UNIQ#ACTIVE_EMAIL#old@x.io"}, "SK": {"S": "LOCK"}},
                    "ConditionExpression": "attribute_not_exists(#g0) OR "
                                           "(#g1.#g0 = :g0 AND #g1.#g2 = :g1)",
                    "ExpressionAttributeNames": {"#g0": "PK", "#g1": "owner", "#g2": "SK"},
                    "ExpressionAttributeValues": {":g0": {"S": "M#9"}, ":g1": {"S": "MEMBER"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
        {"ConditionCheck": {"TableName": "audit_unit_members", "Key": key("M#9"),
                            "ConditionExpression": "attribute_not_exists(#g0)",
                            "ExpressionAttributeNames": {"#g0": "PK"}}},
    ], "ReturnConsumedCapacity": "TOTAL"}


def test_unknown_constraint_is_dropped_only_when_named() -> None:
    finding = _judge(TABLE, "UNIQ#OLD_NAME#x", lock("UNIQ#OLD_NAME#x", "M#1"), [])
    assert finding is not None
    assert _action(TABLE, finding, ()) is None
    action = _action(TABLE, finding, ("OLD_NAME",))
    assert action is not None and action.kind == audit.ActionKind.DROP_UNKNOWN
    assert [next(iter(i)) for i in action.request()["TransactItems"]] == ["Delete"]


# --- page cursors and typed names ----------------------------------------------------------------


def test_page_cursor_round_trips_binary_keys_and_refuses_others() -> None:
    start = {"PK": {"B": b"\x00\xff"}, "SK": {"S": "LOCK"}}
    cursor = _encode_cursor("t", start, 2.5)
    assert _decode_cursor(cursor) == ("t", start, 2.5)
    assert _decode_cursor(_encode_cursor("t", None, 1.0)) == ("t", None, 1.0)
    for bad in ("not base64!", _encode_cursor("t", None, 5000.0)):
        with pytest.raises(audit.AuditError, match="not a page cursor"):
            _decode_cursor(bad)


def test_page_request_sizes() -> None:
    assert (_page_request(0.2), _page_request(10.01), _page_request(5000)) == (1, 11, 1000)
    assert _density(100, 0, 50) == 20.0
    assert _density(100, 40, 50) == 2.5
    assert _density(10, 40, 50) == 1.0


def test_encoded_prefix_normalizes_like_a_save() -> None:
    assert _encoded_prefix(Member, "TENANT_SLUG", ("acme", "HO")) == "acme#ho"
    assert _encoded_prefix(None, "GONE", "a#b") == "a\\#b"
    with pytest.raises(audit.AuditError, match="PHONE is hashed"):
        _encoded_prefix(Member, "phone", "+1")


def test_parse_value_converts_text_as_the_attributes_expect() -> None:
    assert audit.parse_value(Member, "TENANT_SLUG", ["acme", "home"]) == ("acme", "home")
    assert audit.pick_model([Member], "phone") is Member
    with pytest.raises(audit.AuditError, match="takes 2 value"):
        audit.parse_value(Member, "TENANT_SLUG", ["acme"])
