"""A repair of a conditional constraint is guarded on what the condition read (local server).

The lock a record of "unique per tenant among active members" needs depends on its ``status``:
a repair that writes the missing lock must not succeed once ``status`` changed, or it would
leave an orphan behind.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.tables import raw_tables

from dynaunique import Model, UniqueConstraint, audit
from dynaunique.attributes import UnicodeAttribute

TABLE = "audit_conditional_members"
LOCK = {"PK": {"S": "UNIQ#ACTIVE_EMAIL#acme#ada@x.io"}}


class ActiveMember(Model):
    class Meta:
        table_name = TABLE
        constraints = [UniqueConstraint(fields=("tenant", "email"), name="ACTIVE_EMAIL",
                                        condition=lambda m: m.status == "active")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    tenant = UnicodeAttribute()
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="active")


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    """A boto3 client on the test server, and an active member written without its lock."""
    client = raw_tables(dynaunique_db, ActiveMember)
    client.put_item(TableName=TABLE, Item={"PK": {"S": "M#1"}, "tenant": {"S": "acme"},
                                           "email": {"S": "ada@x.io"}, "status": {"S": "active"}})
    return client


def test_missing_lock_is_not_written_once_the_condition_no_longer_holds(raw: Any) -> None:
    report = audit.check([ActiveMember])
    assert [(f.kind, f.lock_key) for f in report.findings] == [("missing", LOCK["PK"]["S"])]
    plan = audit.plan_repair(report)

    # Between check and repair the member stops being active: it needs no lock any more.
    raw.update_item(TableName=TABLE, Key={"PK": {"S": "M#1"}}, UpdateExpression="SET #s = :s",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={":s": {"S": "left"}})
    result = audit.apply_repair(plan)

    assert [(o.status, o.writes) for o in result.outcomes] == [("already_fixed", 1)]
    assert "Item" not in raw.get_item(TableName=TABLE, Key=LOCK, ConsistentRead=True)
    assert audit.check([ActiveMember]).clean


def test_missing_lock_is_written_while_the_condition_holds(raw: Any) -> None:
    result = audit.apply_repair(audit.plan_repair(audit.check([ActiveMember])))

    assert [(o.status, o.writes) for o in result.outcomes] == [("fixed", 1)]
    stored = raw.get_item(TableName=TABLE, Key=LOCK, ConsistentRead=True)["Item"]
    assert stored["owner"] == {"M": {"PK": {"S": "M#1"}}}
    assert audit.check([ActiveMember]).clean
