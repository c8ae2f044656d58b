"""The simulated models, their database and the invariants checked after every request.

Three models share one table, as the single-table design has them:

- ``SimAccount``: one unique ``email`` (lock name ``EMAIL``), stored lower-cased by its
  attribute — the python value ``"V1"`` is stored as ``"v1"`` — so a lock computed from the
  python value instead of the stored one is a different lock (the raw-value mutant);
- ``SimTeam``: a unique ``contact`` sharing the lock name ``EMAIL`` (a value is free for one
  model exactly when it is free for the other);
- ``SimNote``: no constraint at all, on the table that holds the locks (its writes are still
  guarded off the other models' locks).

The database state is judged as the audit judges it: each record item is a record of the model
``dynaunique._lock.items.claim`` names, and requires the locks ``locks_of`` computes from what is
stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dynaunique import Model
from dynaunique._lock.items import claim, locks_of, owner_key
from dynaunique._lock.locks import OWNER_ATTR, RESERVED_PREFIX
from dynaunique._transport import regions as _regions
from dynaunique._write.render import render_write
from dynaunique._write.writes import lock_put
from dynaunique.attributes import UnicodeAttribute

from .memory import MemoryDynamoDB

TABLE = "sim_accounts"


class LowerCased(UnicodeAttribute):
    """A string attribute that stores its value lower-cased (``"V1"`` is stored ``"v1"``)."""

    def serialize(self, value: Any) -> Any:
        return super().serialize(value.lower() if isinstance(value, str) else value)


class _Meta:
    table_name = TABLE
    host = "http://simulation.invalid"
    region = "us-east-1"


# A one-region table: the first write asks no DescribeTable of a host that does not exist.
_regions.remember(TABLE, _Meta.region, _Meta.host, {})


class SimAccount(Model):
    """An account: a record key and one unique field, stored lower-cased."""

    class Meta(_Meta):
        pass

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = LowerCased(unique=True, lock_name="EMAIL", null=True)


class SimTeam(Model):
    """A team: its ``contact`` shares the lock name ``EMAIL`` with ``SimAccount.email``."""

    class Meta(_Meta):
        pass

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    contact = UnicodeAttribute(unique=True, lock_name="EMAIL", null=True)


class SimNote(Model):
    """A model without constraints on the table that holds the locks."""

    class Meta(_Meta):
        pass

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    text = UnicodeAttribute(null=True)


MODELS: tuple[Any, ...] = (SimAccount, SimTeam, SimNote)


def new_memory() -> MemoryDynamoDB:
    """An empty database holding the simulated table."""
    return MemoryDynamoDB({TABLE: ("PK", "SK")})


# --- invariants ----------------------------------------------------------------------------------

#: A value as the holder history knows it: (lock name, the value as a lock shows it).
Held = tuple[str, str]


def _pk(key: Mapping[str, Any] | None) -> str | None:
    value = (key or {}).get("PK")
    return value.get("S") if isinstance(value, Mapping) else None


#: A problem of the database: (what it is about — ``("missing", record, lock key)``,
#: ``("duplicate", lock key)``, ``("orphan", lock key)`` —, how it reads).
Problem = tuple[tuple[str, ...], str]


def analyse(memory: MemoryDynamoDB) -> tuple[list[Problem], dict[Held, set[str]]]:
    """(what is wrong with the database now — empty: every invariant holds —, which record
    holds each value now, by record key).

    The invariants: no value held by two live records, no lock without a live holder requiring
    it (its owner), no live record without its lock, owned by it.
    """
    items = list(memory.items[TABLE].values())
    records = [i for i in items if not i["PK"]["S"].startswith(RESERVED_PREFIX)]
    locks = {i["PK"]["S"]: i for i in items if i["PK"]["S"].startswith(RESERVED_PREFIX)}
    found: list[Problem] = []
    holders: dict[Held, set[str]] = {}
    by_lock: dict[str, list[str]] = {}
    for record in records:
        model, problem = claim(MODELS, record)
        if problem is not None:
            pk = record["PK"]["S"]
            found.append((("claim", pk), f"record {pk}: {problem}"))
            continue
        if model is None:
            continue
        pk = record["PK"]["S"]
        for ref in locks_of(model._du_info, model._du_lock_inputs(record)).values():
            holders.setdefault((ref.constraint, str(ref.value)), set()).add(pk)
            by_lock.setdefault(ref.key, []).append(pk)
            held = locks.get(ref.key)
            owner = _pk(owner_key(("PK", "SK"), (held or {}).get(OWNER_ATTR, {}).get("M")))
            if held is None:
                found.append((("missing", pk, ref.key), f"record {pk} has no lock {ref.key}"))
            elif owner != pk:
                found.append((("missing", pk, ref.key),
                              f"record {pk} requires {ref.key}, held by {owner}"))
    for key, pks in sorted(by_lock.items()):
        if len(pks) > 1:
            found.append((("duplicate", key), f"value {key.split('#', 2)[-1]!r} held by "
                                              f"{len(pks)} live records: {sorted(pks)}"))
    for key in sorted(locks):
        if key not in by_lock:
            found.append((("orphan", key), f"lock {key} has no live holder requiring it"))
    return found, holders


def violations(memory: MemoryDynamoDB) -> list[str]:
    """What is wrong with the database now (empty: every invariant holds)."""
    return [text for _, text in analyse(memory)[0]]


# --- drift ---------------------------------------------------------------------------------------


def _record(pk: str, email: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "PROFILE"}, "email": {"S": email}}


def seed_drift(memory: MemoryDynamoDB) -> None:
    """A write that bypassed the library left ``R0`` and ``R1`` both holding ``v0``; the lock
    (the very item the library writes) names ``R1``."""
    info = SimAccount._du_info
    assert info is not None
    for pk in ("R0", "R1"):
        memory.handle("PutItem", {"TableName": TABLE, "Item": _record(pk, "v0")})
    holder = _record("R1", "v0")
    ref = locks_of(info, SimAccount._du_lock_inputs(holder))["EMAIL"]
    _, params = render_write(lock_put(info, ref, {"PK": holder["PK"], "SK": holder["SK"]},
                                      holder))
    memory.handle("PutItem", params)


def _lock_of(pk: str, email: str, owner: str) -> dict[str, Any]:
    """The PutItem of the lock of ``email`` naming ``owner``, as the library writes it."""
    info = SimAccount._du_info
    assert info is not None
    ref = locks_of(info, SimAccount._du_lock_inputs(_record(pk, email)))["EMAIL"]
    _, params = render_write(lock_put(info, ref, {"PK": {"S": owner}, "SK": {"S": "PROFILE"}},
                                      _record(owner, email)))
    return params


def seed_unlocked(memory: MemoryDynamoDB) -> None:
    """``R0`` holds ``v0`` and ``R1`` holds ``v1``, written before the constraint existed: no
    lock (what a migration's backfill starts from)."""
    for pk, email in (("R0", "v0"), ("R1", "v1")):
        memory.handle("PutItem", {"TableName": TABLE, "Item": _record(pk, email)})


def seed_orphans(memory: MemoryDynamoDB) -> None:
    """Orphans left by writes around the library, beside a record to backfill: ``R0`` holds
    ``v0`` without a lock; the lock of ``v1`` names ``R1``, which holds ``v9`` (moved, its own
    lock never written); the lock of ``v2`` names ``R2``, which does not exist (gone)."""
    memory.handle("PutItem", {"TableName": TABLE, "Item": _record("R0", "v0")})
    memory.handle("PutItem", {"TableName": TABLE, "Item": _record("R1", "v9")})
    memory.handle("PutItem", _lock_of("R1", "v1", "R1"))
    memory.handle("PutItem", _lock_of("R2", "v2", "R2"))


def seed_broken(memory: MemoryDynamoDB) -> None:
    """What ``dynaunique repair`` fixes: ``R0`` holds ``v0`` without its lock (missing), the
    lock of ``v1`` names ``R1``, which does not exist (orphan), and ``R2`` holds ``v2`` whose
    lock names ``R0`` (a foreign owner)."""
    memory.handle("PutItem", {"TableName": TABLE, "Item": _record("R0", "v0")})
    memory.handle("PutItem", {"TableName": TABLE, "Item": _record("R2", "v2")})
    memory.handle("PutItem", _lock_of("R1", "v1", "R1"))
    memory.handle("PutItem", _lock_of("R2", "v2", "R0"))
