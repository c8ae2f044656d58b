"""The audit's repair of a missing lock, when its record is replaced by another model's record
with the same email between the check and the repair (task ``ident``, sequence 1).

The repair's ConditionCheck of the holder compared only its lock inputs, so it passed for the
other model's record: the lock was written for a record that is no longer the holder's model
— an orphan when that model declares no such constraint, or a lock naming the wrong model
when it shares the lock. It now also keeps the record one of the model it was read as; the
refused action is re-read and found consistent.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean
from support.mixed_models import polymorphic_family
from support.tables import raw_tables

from dynaunique import audit
from dynaunique.attributes import UnicodeAttribute
from dynaunique.audit import FindingKind, RepairStatus
from dynaunique.testing import use_endpoint

Account = declare("Account", "ident_audit_plain", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, null=True))
Invite = declare("Invite", "ident_audit_plain", pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(null=True), inviter=UnicodeAttribute())
Being, Robot, Human = polymorphic_family("ident_audit_family", "AUDIT_EMAIL")



def _replace_plain() -> None:
    Account.get("K", "PROFILE", consistent_read=True).delete()
    Invite(pk="K", email="ada@x.io", inviter="bob").save()


def _replace_sibling() -> None:
    Human.get("K", "PROFILE", consistent_read=True).delete()
    Robot(pk="K", email="ada@x.io").save()


CASES: dict[str, tuple[Any, list[Any], Any, dict[str, str]]] = {
    # (the holder's model, the table's models, the replacement, the locks left: key → model)
    "plain model": (Account, [Account, Invite], _replace_plain, {}),
    "sibling sharing the lock": (Human, [Being, Robot, Human], _replace_sibling,
                                 {"UNIQ#AUDIT_EMAIL#ada@x.io": "Robot"}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_lock_is_not_written_for_another_models_record(dynaunique_db: str,
                                                                 case: str) -> None:
    holder, models, replace, left = CASES[case]
    use_endpoint(dynaunique_db, *models)
    raw = raw_tables(dynaunique_db, models[0])
    table = holder.Meta.table_name
    holder(pk="K", email="ada@x.io").save()
    lock = {"PK": {"S": next(k for k in _lock_keys(raw, table))}, "SK": {"S": "LOCK"}}
    raw.delete_item(TableName=table, Key=lock)    # the drift: K's lock is missing
    plan = audit.plan_repair(audit.check(models))
    assert [a.finding.kind for a in plan.actions] == [FindingKind.MISSING]

    replace()   # K deleted and saved again as the other model's record, the same email
    result = audit.apply_repair(plan)

    assert [o.status for o in result.outcomes] == [RepairStatus.ALREADY_FIXED]
    stored = {i["PK"]["S"]: i["model"]["S"]
              for i in raw.scan(TableName=table, ConsistentRead=True)["Items"]
              if i["PK"]["S"].startswith("UNIQ#")}
    assert stored == left
    assert_clean(models, dynaunique_db)
    assert audit.check(models).findings == ()


def _lock_keys(raw: Any, table: str) -> list[str]:
    return [i["PK"]["S"] for i in raw.scan(TableName=table, ConsistentRead=True)["Items"]
            if i["PK"]["S"].startswith("UNIQ#")]
