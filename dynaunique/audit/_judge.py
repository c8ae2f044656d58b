"""Whether one lock key and the records that require it agree — and if not, the finding.

A finding is only ever made from one consistent read (:func:`_recheck`): the lock item, its
owner and every record known to require the key, read together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id, owner_key
from dynaunique._lock.locks import TypedKey, split_lock_key
from dynaunique._write.mrsc import Verdict

from . import _intents
from ._kinds import FindingKind, OwnerState
from ._reads import _read_key
from ._stored import LockInfo, RecordRef, _json_value, _lock_info, _Record, _shown
from ._tables import _Meter, _Table


@attrs.frozen
class Evidence:
    """The consistent snapshot a finding was confirmed on: the lock item and the records read."""

    lock_item: dict[str, Any] | None
    records: tuple[_Record, ...]


@attrs.frozen
class Finding:
    """One disagreement between lock items and records, confirmed by a consistent read."""

    #: One of :data:`KINDS`.
    kind: FindingKind
    table: str
    #: The lock item's hash key concerned ("" for an unreadable record).
    lock_key: str
    #: The lock name.
    constraint: str
    #: The normalized value (None when hashed or unknown).
    value: Any
    hashed: bool
    #: The stored lock, when there is one.
    lock: LockInfo | None
    #: The records whose current values require ``lock_key`` (for ``unreadable``: the record).
    holders: tuple[RecordRef, ...]
    #: For ``orphan``/``foreign_owner``/``foreign_secret``: ``gone`` (the owner record does not
    #: exist), ``changed`` (it no longer holds the value), ``unknown`` (no loaded model reads
    #: it) or ``none`` (the lock names no owner).
    owner_state: OwnerState | None
    #: A few words for a table column: ``its owner does not exist``.
    detail: str
    #: One sentence saying what is wrong.
    message: str
    #: The consistent read the finding rests on; repairs are guarded on exactly this state.
    evidence: Evidence = attrs.field(eq=False, repr=False)

    @property
    def shown_value(self) -> str:
        """The value as a table shows it (``hashed`` for hashed constraints)."""
        if self.hashed:
            return "hashed"
        return "-" if self.value is None else _shown(self.value)

    @property
    def repairable(self) -> bool:
        """Whether :func:`plan_repair` can fix it without a person deciding (or a migration)."""
        if self.kind in (FindingKind.MISSING, FindingKind.CONFIRMABLE):
            return True
        if self.kind in (FindingKind.ORPHAN, FindingKind.FOREIGN_OWNER):
            return self.owner_state in (OwnerState.GONE, OwnerState.CHANGED)
        return False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; a lock the MRSC protocol wrote adds ``intent`` (its token, whether
        it is still marked pending, and ``at``, the writer's clock)."""
        data = {
            "kind": self.kind.value, "table": self.table, "lock_key": self.lock_key,
            "constraint": self.constraint, "value": _json_value(self.value),
            "hashed": self.hashed, "lock": self.lock.to_dict() if self.lock else None,
            "holders": [_json_value(h.to_dict()) for h in self.holders],
            "owner_state": None if self.owner_state is None else self.owner_state.value,
            "detail": self.detail, "message": self.message, "repairable": self.repairable,
        }
        intent = _intents.marks(self.evidence.lock_item)
        if intent is not None:
            data["intent"] = intent
        return data


def _unreadable(table: _Table, record: _Record) -> Finding:
    """The finding for a record whose locks cannot be computed."""
    return Finding(FindingKind.UNREADABLE, table.name, "", "", None, False, None, (record.ref,),
                   None, str(record.problem),
                   f"{record.ref.label} cannot be checked: {record.problem}",
                   Evidence(None, (record,)))


def _owner_state(owner_key_: TypedKey | None, owner: _Record | None) -> OwnerState:
    if owner_key_ is None:
        return OwnerState.NONE
    if owner is None or not owner.exists:
        return OwnerState.GONE
    if owner.requires is None:
        return OwnerState.UNKNOWN
    return OwnerState.CHANGED


def _judge(table: _Table, key: str, lock_item: dict[str, Any] | None,
           records: Sequence[_Record], now: float | None = None) -> Finding | None:
    """Whether lock ``key`` and the ``records`` read with it agree; the finding if not.

    ``records`` holds the lock's owner and every record known to require ``key`` (absent ones
    included, as ``exists=False``). A pending intent (an MRSC table's) is judged by the
    protocol's rule at ``now`` (default: this machine's clock), ``_intents``.
    """
    lock = _lock_info(table, lock_item) if lock_item is not None else None
    evidence = Evidence(lock_item, tuple(records))
    parsed = split_lock_key(key)
    name = parsed[0] if parsed is not None else ""
    requirers = [r for r in records if r.requires is not None and key in r.requires]
    ref = requirers[0].requires[key] if requirers and requirers[0].requires else None
    value = ref.value if ref is not None else (lock.value if lock is not None else None)
    hashed = ref.hashed if ref is not None else (lock.hashed if lock is not None else False)
    shown = f"{name} (hashed)" if hashed else f"{name} {value!r}"
    owner = owner_key(table.key_attributes, lock.owner if lock is not None else None)
    owner_label = lock.owner_label if lock is not None else "-"

    def finding(kind: FindingKind, detail: str, message: str,
                owner_state: OwnerState | None = None) -> Finding:
        return Finding(kind, table.name, key, name, None if hashed else value, hashed, lock,
                       tuple(r.ref for r in requirers), owner_state, detail, message, evidence)

    if lock is not None and name not in table.declared:
        return finding(FindingKind.UNKNOWN_CONSTRAINT, f"no loaded model declares {name}",
                       f"lock {shown} (owner {owner_label}) belongs to no constraint a loaded "
                       f"model declares on table {table.name!r}")
    if len(requirers) >= 2:
        holders = ", ".join(r.ref.label for r in requirers)
        held = f"the lock names {owner_label}" if lock is not None else "no lock"
        return finding(FindingKind.DUPLICATE, f"{len(requirers)} records hold it; {held}",
                       f"{shown} is held by {len(requirers)} records: {holders}; {held}")
    owner_record = None
    if owner is not None:
        owner_record = next((r for r in records if key_id(r.ref.key) == key_id(owner)), None)
    owner_state = _owner_state(owner, owner_record)
    state = {
        OwnerState.NONE: "the lock names no owner",
        OwnerState.GONE: "its owner does not exist",
        OwnerState.UNKNOWN: "its owner is no record of the loaded models",
        OwnerState.CHANGED: f"its owner no longer holds it{_now_holds(owner_record, name)}",
    }[owner_state]
    if lock_item is not None and _intents.is_intent(lock_item):
        now = time.time() if now is None else now
        intent = _intent(table, lock_item, owner_record, owner_label, shown, now,
                         bool(requirers))
        if intent is not None:
            return finding(*intent)
        grace = _intents.TIMING.grace
        where = "past" if _intents.age(lock_item, now) >= grace else "within"
        state += f"; a pending intent {where} its {grace:g} s grace period"
    if len(requirers) == 1:
        holder = requirers[0]
        if lock is None:
            return finding(FindingKind.MISSING, "no lock",
                           f"{holder.ref.label} holds {shown} but no lock protects it")
        if owner is not None and key_id(owner) == key_id(holder.ref.key):
            return None
        return finding(FindingKind.FOREIGN_OWNER, f"lock names {owner_label}: {state}",
                       f"{holder.ref.label} holds {shown} but its lock names {owner_label}: "
                       f"{state}", owner_state)
    if lock is None:
        return None
    current = table.secret_id(name) if lock.hashed else None
    if current is not None and lock.secret_id != current:
        # No record requires it under the current secret; only a lock this secret made can be
        # known to be nobody's (the owner may hold the value its key was made from).
        made = (f"made under secret {lock.secret_id}" if lock.secret_id is not None
                else "made before locks carried their secret's fingerprint")
        return finding(FindingKind.FOREIGN_SECRET,
                       f"{made}, not the current secret {current}; {state}",
                       f"lock {shown} (owner {owner_label}) was {made}, not with the current "
                       f"secret ({current}): it is not deleted as an orphan ({state})",
                       owner_state)
    return finding(FindingKind.ORPHAN, state,
                   f"lock {shown} (owner {owner_label}) is an orphan: {state}", owner_state)


def _intent(table: _Table, lock_item: dict[str, Any], owner: _Record | None, owner_label: str,
            shown: str, now: float, held: bool) -> tuple[FindingKind, str, str] | None:
    """(kind, detail, message) of a pending intent the protocol's rule does not call free: a
    write in flight, or one whose owner holds the value; None: free, or (``held``) another
    record holds the value — both judged as any lock (a write in flight beside a record
    holding its value without a lock is no write in flight to wait for)."""
    verdict = _intents.verdict(table, lock_item, owner.item if owner is not None else None, now)
    age = _intents.age(lock_item, now)
    grace = _intents.TIMING.grace
    if verdict is Verdict.CONFIRM:
        return (FindingKind.CONFIRMABLE, "its owner holds it; still marked pending",
                f"{owner_label} holds {shown} and its lock is still a "
                f"pending intent ({age:.0f} s old): repair clears the mark")
    if verdict is Verdict.WAIT and not held:
        return (FindingKind.PENDING, f"a write in flight ({age:.0f} s of a {grace:g} s grace "
                                     "period)",
                f"lock {shown} is {owner_label}'s pending intent, "
                f"{age:.0f} s old: a write in flight, not an orphan before its {grace:g} s grace "
                "period ends")
    return None


def _now_holds(owner: _Record | None, name: str) -> str:
    if owner is None or owner.requires is None:
        return ""
    current = next((r for r in owner.requires.values() if r.constraint == name), None)
    if current is None:
        return f" (it has no {name} value now)"
    if current.hashed:
        return f" (it has another {name} value now)"
    return f" (its {name} is now {current.value!r})"


def _recheck(table: _Table, key: str, record_keys: Iterable[TypedKey],
             meter: _Meter) -> Finding | None:
    """Read lock ``key`` with ``record_keys`` consistently and judge what was read."""
    lock_item, records = _read_key(table, key, record_keys, meter)
    return _judge(table, key, lock_item, records)


def _involved(finding: Finding) -> list[TypedKey]:
    """Every record key a finding rests on: its holders, the records read, the lock's owner."""
    keys = [h.key for h in finding.holders] + [r.ref.key for r in finding.evidence.records]
    if finding.lock is not None and finding.lock.owner is not None:
        keys.append(finding.lock.owner)
    return keys
