"""The stream guard on a global table: one lock key read in every region, and a double grant
made in two regions named with both.

On a global table with a home region every lock is granted in the home region. A write that
bypasses it — another application, a misconfigured service — can grant a value in another
region's replica while the home region grants it to someone else; replication (last writer
wins) then keeps one lock and both records. Each replica, read alone while replication is in
flight, looks right: it holds the value for one record and a lock naming it.

So for every lock key a change touches, :func:`read_across` reads the lock and the records
involved in each region (the audit's serializable read, ``_read_key``, once per replica). When
the records holding the value are split — one record holds it in one replica, another in
another, and no replica shows both — that is either a double grant or a lock handed over whose
replication is still in flight (the replica that has not seen the handover still holds the old
owner). One snapshot cannot tell them apart; replication can: the guard reads the regions again
until they agree on the lock's owner and on which of those records hold the value
(``settle_seconds`` at most), and reports a
:class:`DoubleGrant` only when two of the records still hold the value then. A handover settles
into one holder and is never reported. Regions that have not agreed by then are an
:class:`~dynaunique.errors.AuditError`: the stream records are handled again later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id, owner_key
from dynaunique._lock.locks import TypedKey, split_lock_key
from dynaunique.audit._reads import _read_key
from dynaunique.audit._stored import RecordRef, _json_value, _lock_info, _Record
from dynaunique.audit._tables import _Meter, _Table
from dynaunique.errors import AuditError

__all__ = ["DoubleGrant", "RegionGrant", "read_across"]

#: Seconds between two reads of the regions while replication settles.
POLL_SECONDS = 0.1


def _pause(seconds: float) -> None:
    """The wait between two reads of the regions (a test replaces it to release replication)."""
    time.sleep(seconds)


@attrs.frozen
class RegionGrant:
    """One record holding the value in one region's replica, with that replica's lock owner."""

    region: str
    holder: RecordRef
    #: The owner the lock names in that replica (``-``: it holds no such lock).
    lock_owner: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"region": self.region, "holder": _json_value(self.holder.to_dict()),
                "lock_owner": self.lock_owner}


@attrs.frozen
class DoubleGrant:
    """A value granted to different records in different regions, still held by both once the
    replicas agree: a duplicate made by a write that bypassed the home region."""

    table: str
    lock_key: str
    constraint: str
    #: The normalized value (None when hashed).
    value: Any
    hashed: bool
    #: Who held it where, as first read (before replication settled).
    grants: tuple[RegionGrant, ...]

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions that granted it, in the guard's order."""
        return tuple(dict.fromkeys(g.region for g in self.grants))

    @property
    def message(self) -> str:
        """One sentence naming each region and the record it granted the value to."""
        shown = f"{self.constraint} (hashed)" if self.hashed else \
            f"{self.constraint} {self.value!r}"
        parts = ", ".join(
            f"{g.region} to {g.holder.label} (the lock there names {g.lock_owner})"
            if g.lock_owner != "-" else f"{g.region} to {g.holder.label} (no lock there)"
            for g in self.grants)
        return (f"{shown} was granted in {len(self.regions)} regions before replication "
                f"settled: {parts}; once the replicas agreed, "
                f"{len({key_id(g.holder.key) for g in self.grants})} records hold it (a write "
                "bypassed the home region)")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``kind``: ``double_grant``)."""
        return {"kind": "double_grant", "table": self.table, "lock_key": self.lock_key,
                "constraint": self.constraint,
                "value": None if self.hashed else _json_value(self.value),
                "hashed": self.hashed, "regions": list(self.regions),
                "grants": [g.to_dict() for g in self.grants], "message": self.message}


#: One replica's snapshot of a lock key: the lock item and the records read with it.
_Snapshot = tuple[dict[str, Any] | None, list[_Record]]


def _holders(key: str, records: Sequence[_Record]) -> list[_Record]:
    return [r for r in records if r.requires is not None and key in r.requires]


def _read_all(tables: Mapping[str, _Table], key: str, records: Sequence[TypedKey],
              meter: _Meter) -> dict[str, _Snapshot]:
    """Each region's snapshot, every region read with the same records: those asked for and
    every owner a replica's lock names (a region read again only when another replica named an
    owner its read did not include)."""
    wanted = {key_id(k): k for k in records}
    seen: dict[str, _Snapshot] = {}
    for _ in range(3):
        for region, table in tables.items():
            if region not in seen or not wanted.keys() <= {key_id(r.ref.key)
                                                            for r in seen[region][1]}:
                seen[region] = _read_key(table, key, list(wanted.values()), meter)
        more = dict(wanted)
        for region, (lock_item, read) in seen.items():
            for record in read:
                more.setdefault(key_id(record.ref.key), record.ref.key)
            if lock_item is not None:
                owner = owner_key(tables[region].key_attributes,
                                  _lock_info(tables[region], lock_item).owner)
                if owner is not None:
                    more.setdefault(key_id(owner), owner)
        if more.keys() == wanted.keys():
            return seen
        wanted = more
    raise AuditError(f"lock {key!r} kept changing owner in the replicas while it was read")


def _facts(table: _Table, key: str, snapshot: _Snapshot) -> tuple[str, tuple[str, ...]]:
    """What a replica says of the value: the lock's owner and the records holding it (their
    other attributes may differ while unrelated writes replicate)."""
    lock_item, read = snapshot
    owner = (owner_key(table.key_attributes, _lock_info(table, lock_item).owner)
             if lock_item is not None else None)
    return (repr(key_id(owner)) if owner is not None else "-" if lock_item is None else "?",
            tuple(sorted(repr(key_id(r.ref.key)) for r in _holders(key, read))))


def _agree(tables: Mapping[str, _Table], key: str, seen: Mapping[str, _Snapshot]) -> bool:
    """Whether every replica names the same lock owner and the same records holding the value."""
    facts = [_facts(tables[region], key, snapshot) for region, snapshot in seen.items()]
    return all(fact == facts[0] for fact in facts[1:])


def read_across(tables: Mapping[str, _Table], key: str, records: Sequence[TypedKey],
                meter: _Meter, *, settle_seconds: float,
                clock: Callable[[], float] = time.monotonic) -> DoubleGrant | None:
    """Read lock ``key`` (with ``records``) in each region of ``tables`` (region → the table
    read there) and report a double grant made in two of them (see the module).

    :raises AuditError: a read failed, or the records holding the value were split between the
        replicas and the replicas did not agree within ``settle_seconds``.
    """
    first = _read_all(tables, key, records, meter)
    holding = {region: _holders(key, read) for region, (_, read) in first.items()}
    held_by = {key_id(r.ref.key) for found in holding.values() for r in found}
    if len(held_by) < 2 or any(len(found) >= 2 for found in holding.values()):
        # One holder everywhere (or none), or a replica that shows the duplicate itself: the
        # guard's judge of that replica reports it.
        return None
    deadline = clock() + settle_seconds
    involved = [r.ref.key for _, read in first.values() for r in read]
    seen = first
    while not _agree(tables, key, seen):
        if clock() >= deadline:
            raise AuditError(
                f"lock {key!r} is held by different records in different replicas, and the "
                f"replicas did not agree within {settle_seconds:g} s: read again later")
        _pause(POLL_SECONDS)
        seen = _read_all(tables, key, involved, meter)
    still = {key_id(r.ref.key) for r in _holders(key, next(iter(seen.values()))[1])}
    if len(still & held_by) < 2:
        return None   # a lock handed over while replication was in flight: it settled
    grants = []
    for region, found in holding.items():
        lock_item = first[region][0]
        lock = _lock_info(tables[region], lock_item) if lock_item is not None else None
        for record in found:
            grants.append(RegionGrant(region, record.ref,
                                      lock.owner_label if lock is not None else "-"))
    holder = next(found[0] for found in holding.values() if found)
    assert holder.requires is not None   # it holds the value: its locks were computed
    lock_ref = holder.requires[key]
    parsed = split_lock_key(key)
    return DoubleGrant(holder.ref.table, key,
                       parsed[0] if parsed is not None else lock_ref.constraint,
                       None if lock_ref.hashed else lock_ref.value, lock_ref.hashed,
                       tuple(grants))
