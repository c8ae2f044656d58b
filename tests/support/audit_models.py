"""Models and a drift scenario for the audit and ``locks``/``check``/``repair`` CLI tests.

Two models share the table ``audit_accounts``, as in a single-table design, so the tests also
exercise telling records of different models apart. The CLI imports this module by its dotted
name.
"""

from __future__ import annotations

from typing import Any

from dynaunique import Model, UniqueConstraint, normalizers
from dynaunique.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute

TABLE = "audit_accounts"


class AuditAccount(Model):
    """An account: email (case-insensitive), handle, hashed phone, slug unique per tenant."""

    class Meta:
        table_name = TABLE
        lock_secret = "audit-test-secret"
        constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    username = UnicodeAttribute(null=True, unique=True, lock_name="HANDLE")
    phone = UnicodeAttribute(null=True, unique=True, hashed=True)
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    expires = TTLAttribute(null=True, attr_name="ttl")


class AuditTeam(Model):
    """A team in the same table: its name is unique among teams."""

    class Meta:
        table_name = TABLE

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="TEAM")
    team_name = UnicodeAttribute(unique=True, lock_name="TEAM_NAME", normalize=normalizers.casefold)
    seats = NumberAttribute(default=5)


MODELS = [AuditAccount, AuditTeam]


# --- the drift scenario both test files inject ---------------------------------------------------


def account_key(pk: str) -> dict[str, Any]:
    """The typed primary key of an account record."""
    return {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}


def lock_pk(key: str) -> dict[str, Any]:
    """The typed primary key of a lock item."""
    return {"PK": {"S": key}, "SK": {"S": "LOCK"}}


def seed_drift(client: Any) -> None:
    """Save consistent records through the library, then break them with raw boto3 writes.

    Afterwards the table holds exactly the findings :data:`EXPECTED` lists (kind, lock name,
    value, holders, lock owner) plus healthy records ``ACCT#OK`` (every kind of lock, a hashed
    one included) and ``TEAM#RED``.
    """
    AuditAccount(pk="ACCT#OK", email="ok@x.io", username="okay", phone="+15550001",
                 tenant="t1", slug="home").save()
    AuditTeam(pk="TEAM#RED", team_name="Red").save()
    # Orphan, owner gone: the record was deleted around the library.
    AuditAccount(pk="ACCT#GONE", email="gone@x.io").save()
    client.delete_item(TableName=TABLE, Key=account_key("ACCT#GONE"))
    # Orphan by a changed value + the new value's missing lock: an update around the library.
    AuditAccount(pk="ACCT#MOVED", email="old@x.io", phone="+15550002").save()
    client.update_item(TableName=TABLE, Key=account_key("ACCT#MOVED"),
                       UpdateExpression="SET email = :e",
                       ExpressionAttributeValues={":e": {"S": "new@x.io"}})
    # Missing lock: the lock item was deleted.
    AuditAccount(pk="ACCT#NOLOCK", email="nolock@x.io", username="nolock").save()
    client.delete_item(TableName=TABLE, Key=lock_pk("UNIQ#HANDLE#nolock"))
    # Missing lock of the other model: a team written raw.
    client.put_item(TableName=TABLE, Item={"PK": {"S": "TEAM#BLUE"}, "SK": {"S": "TEAM"},
                                           "team_name": {"S": "Blue"}, "seats": {"N": "3"}})
    # Foreign owner: the owner was deleted raw, and another record took its email raw.
    AuditAccount(pk="ACCT#OLDOWNER", email="shared@x.io").save()
    client.delete_item(TableName=TABLE, Key=account_key("ACCT#OLDOWNER"))
    client.put_item(TableName=TABLE, Item={**account_key("ACCT#NEWOWNER"),
                                           "email": {"S": "Shared@X.io"}})
    # Duplicate: a second record with the same normalized email, written raw.
    AuditAccount(pk="ACCT#DUP1", email="dup@x.io").save()
    client.put_item(TableName=TABLE, Item={**account_key("ACCT#DUP2"),
                                           "email": {"S": "DUP@x.io"}})
    # A lock of a constraint no model declares any more (renamed since).
    client.put_item(TableName=TABLE, Item={
        **lock_pk("UNIQ#OLDNAME#legacy"), "owner": {"M": account_key("ACCT#OK")},
        "model": {"S": "AuditAccount"}, "constraint": {"S": "OLDNAME"},
        "value": {"S": "legacy"}, "created": {"S": "2024-01-01T00:00:00+00:00"}})


#: (kind, lock name, value, records holding the value, lock owner) of every injected finding.
EXPECTED = {
    ("duplicate", "EMAIL", "dup@x.io", ("ACCT#DUP1 / PROFILE", "ACCT#DUP2 / PROFILE"),
     "ACCT#DUP1 / PROFILE"),
    ("missing", "EMAIL", "new@x.io", ("ACCT#MOVED / PROFILE",), "-"),
    ("missing", "HANDLE", "nolock", ("ACCT#NOLOCK / PROFILE",), "-"),
    ("missing", "TEAM_NAME", "blue", ("TEAM#BLUE / TEAM",), "-"),
    ("foreign_owner", "EMAIL", "shared@x.io", ("ACCT#NEWOWNER / PROFILE",),
     "ACCT#OLDOWNER / PROFILE"),
    ("orphan", "EMAIL", "gone@x.io", (), "ACCT#GONE / PROFILE"),
    ("orphan", "EMAIL", "old@x.io", (), "ACCT#MOVED / PROFILE"),
    ("unknown_constraint", "OLDNAME", "legacy", (), "ACCT#OK / PROFILE"),
}
