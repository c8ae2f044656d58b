"""The simulated model, its database and the invariants checked after every request."""

from __future__ import annotations

from dynaunique import Model
from dynaunique._items import locks_of, owner_key
from dynaunique._locks import OWNER_ATTR
from dynaunique.attributes import UnicodeAttribute

from .memory import MemoryDynamoDB

TABLE = "sim_accounts"
LOCK_PREFIX = "UNIQ#"


class SimAccount(Model):
    """The simulated model: a record key and one unique field."""

    class Meta:
        table_name = TABLE
        host = "http://simulation.invalid"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, null=True)


def new_memory() -> MemoryDynamoDB:
    """An empty database holding the simulated table."""
    return MemoryDynamoDB({TABLE: ("PK", "SK")})


# --- invariants ----------------------------------------------------------------------------------


def violations(memory: MemoryDynamoDB) -> list[str]:
    """What is wrong with the database now (empty: every invariant holds)."""
    info = SimAccount._du_info
    assert info is not None
    items = list(memory.items[TABLE].values())
    records = [i for i in items if not i["PK"]["S"].startswith(LOCK_PREFIX)]
    locks = {i["PK"]["S"]: i for i in items if i["PK"]["S"].startswith(LOCK_PREFIX)}
    found = []
    by_value: dict[str, list[str]] = {}
    for record in records:
        if "email" in record and "S" in record["email"]:
            by_value.setdefault(record["email"]["S"], []).append(record["PK"]["S"])
    for value, holders in sorted(by_value.items()):
        if len(holders) > 1:
            found.append(f"value {value!r} held by {len(holders)} live records: {holders}")
    required: dict[str, str] = {}
    for record in records:
        for lock in locks_of(info, SimAccount._du_lock_inputs(record)).values():
            required[lock.key] = record["PK"]["S"]
            held = locks.get(lock.key)
            owner = owner_key(info.key_attributes, (held or {}).get(OWNER_ATTR, {}).get("M"))
            if held is None:
                found.append(f"record {record['PK']['S']} has no lock {lock.key}")
            elif owner is None or owner["PK"]["S"] != record["PK"]["S"]:
                found.append(f"record {record['PK']['S']} requires {lock.key}, held by {owner}")
    for key in sorted(locks):
        if key not in required:
            found.append(f"lock {key} has no live holder requiring it")
    return found
