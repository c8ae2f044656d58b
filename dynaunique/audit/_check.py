"""The full audit: scan every table once, then confirm each suspicious lock key consistently."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from dynaunique._lock.items import key_id, key_of, owner_key
from dynaunique._lock.locks import TypedKey
from dynaunique.errors import AuditError
from dynaunique.model import Model

from . import _intents
from ._judge import Finding, _recheck, _unreadable
from ._kinds import INTENT_KINDS, KINDS, FindingKind
from ._reads import _scan_pages
from ._stored import LockInfo, _interpret, _is_lock_item, _lock_info, _Record
from ._tables import Cost, _call, _Meter, _Table, _tables

Progress = Callable[[int, "int | None"], None]


@attrs.frozen
class SecretWarning:
    """No hashed lock of a constraint on a table was made with the current secret: the secret
    the check runs with is almost certainly not the one the application writes with."""

    table: str
    #: The lock name.
    constraint: str
    #: The fingerprint of the secret the check ran with.
    current: str
    #: ``(fingerprint, locks)`` of the locks seen, most common first; None: no fingerprint.
    seen: tuple[tuple[str | None, int], ...]

    @property
    def message(self) -> str:
        """One line saying it, for the top of a report."""
        total = sum(n for _, n in self.seen)
        carried = ", ".join(f"{n} {fp if fp is not None else 'no fingerprint'}"
                            for fp, n in self.seen)
        return (f"the lock secret is probably wrong for {self.constraint} on {self.table!r}: "
                f"none of its {total} hashed lock(s) was made with the current secret "
                f"({self.current}; they carry {carried}); repair will not touch them")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"table": self.table, "constraint": self.constraint, "current": self.current,
                "seen": [{"secret_id": fp, "locks": n} for fp, n in self.seen],
                "message": self.message}


@attrs.frozen
class TableSummary:
    """What the scan of one table saw."""

    table: str
    items_scanned: int
    records: int
    locks: int
    #: ``UNIQ#~`` items (and ``UNIQ#`` items that are not locks).
    system_items: int
    #: Items without the table's key attributes (none, on a healthy table).
    other_items: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


@attrs.frozen
class AuditReport:
    """The result of :func:`check`: what was scanned, every confirmed finding, and the cost."""

    tables: tuple[TableSummary, ...]
    findings: tuple[Finding, ...]
    cost: Cost
    #: The models the check ran with (repair needs them).
    models: tuple[type[Model], ...] = attrs.field(eq=False, repr=False, default=())
    #: Constraints none of whose hashed locks the current secret made (see SecretWarning).
    secret_warnings: tuple[SecretWarning, ...] = ()

    @property
    def clean(self) -> bool:
        """True when nothing was found but writes in flight (``pending`` intents of an MRSC
        table, within their grace period: nothing to repair)."""
        return all(f.kind == FindingKind.PENDING for f in self.findings)

    def counts(self) -> dict[str, int]:
        """Findings per kind, keyed by the kinds' words: every kind, zeros included, but the
        MRSC intents' kinds (``pending``, ``confirmable``), named only when found."""
        counts = {kind.value: 0 for kind in KINDS if kind not in INTENT_KINDS}
        for finding in self.findings:
            counts[finding.kind] = counts.get(finding.kind, 0) + 1
        return counts

    def of_kind(self, kind: str) -> tuple[Finding, ...]:
        """The findings of one kind."""
        return tuple(f for f in self.findings if f.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"clean": self.clean, "counts": self.counts(),
                "secret_warnings": [w.to_dict() for w in self.secret_warnings],
                "tables": [t.to_dict() for t in self.tables],
                "findings": [f.to_dict() for f in self.findings], "cost": self.cost.to_dict()}


@attrs.define
class _Snapshot:
    """What one scan (segment) saw: locks by key, records, counts."""

    locks: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    records: list[_Record] = attrs.field(factory=list)
    scanned: int = 0
    system: int = 0
    other: int = 0

    def merge(self, other: _Snapshot) -> None:
        self.locks.update(other.locks)
        self.records.extend(other.records)
        self.scanned += other.scanned
        self.system += other.system
        self.other += other.other


def _classify(table: _Table, item: dict[str, Any]) -> _Record | bool | None:
    """What one stored item is to the audit: True for a lock, a :class:`_Record` for a record
    of a loaded model (readable or not), None for a system item, False for anything else."""
    kind = _is_lock_item(table, item)
    if kind is None or kind:
        return kind
    key = key_of(table.key_attributes, item)
    if key is None:
        return False
    record = _interpret(table, key, item, keep_item=False)
    if record.requires is None and record.problem is None:
        return False
    return record


def _scan_segment(table: _Table, segment: int, total: int, meter: _Meter,
                  on_page: Callable[[int], None], page_size: int | None = None) -> _Snapshot:
    snapshot = _Snapshot()
    parallel = total > 1
    params = {"Limit": page_size} if page_size is not None else {}
    for item in _scan_pages(table, meter, segment=segment if parallel else None,
                            total_segments=total if parallel else None, on_page=on_page,
                            **params):
        snapshot.scanned += 1
        what = _classify(table, item)
        if what is None:
            snapshot.system += 1
        elif what is True:
            snapshot.locks[item[table.hash_attr]["S"]] = item
        elif what is False:
            snapshot.other += 1
        else:
            snapshot.records.append(what)
    return snapshot


def _suspect(table: _Table, lock: LockInfo | None, holders: Sequence[TypedKey], *,
             intent: bool = False) -> list[TypedKey] | None:
    """The record keys to read with a lock key whose lock (None: none) and requiring records
    ``holders`` a scan saw, when they disagree; None when they agree. A pending intent
    (``intent``: an MRSC lock still marked) is always read: pending or confirmable."""
    owner = owner_key(table.key_attributes, lock.owner if lock is not None else None)
    if (not intent and lock is not None and lock.constraint in table.declared
            and owner is not None
            and len(holders) == 1 and key_id(holders[0]) == key_id(owner)):
        return None
    return [*holders, *([owner] if owner is not None else [])]


def _suspects(table: _Table, snapshot: _Snapshot) -> dict[str, list[TypedKey]]:
    """Lock keys where the scan saw disagreement → the record keys to read with each."""
    requirers: dict[str, list[TypedKey]] = {}
    for record in snapshot.records:
        for key in record.requires or {}:
            requirers.setdefault(key, []).append(record.ref.key)
    suspects: dict[str, list[TypedKey]] = {}
    for key in sorted(set(snapshot.locks) | set(requirers)):
        item = snapshot.locks.get(key)
        keys = _suspect(table, _lock_info(table, item) if item is not None else None,
                        requirers.get(key, []), intent=_intents.is_intent(item))
        if keys is not None:
            suspects[key] = keys
    return suspects


class _SecretTally:
    """Counts the hashed locks of each constraint by the fingerprint they carry, and whether
    one of them shows the current secret is right: carrying its fingerprint, or (a lock
    without one) required by a record's values."""

    def __init__(self, table: _Table) -> None:
        self._table = table
        self._hashed = table.hashed
        self._seen: dict[str, Counter[str | None]] = {}
        self._current: dict[str, str | None] = {}
        self._confirmed: set[str] = set()

    def add(self, lock: LockInfo, required: bool) -> None:
        """Count ``lock``; ``required``: a record's values require its key."""
        if not lock.hashed or lock.constraint not in self._hashed:
            return
        self._seen.setdefault(lock.constraint, Counter())[lock.secret_id] += 1
        if lock.constraint not in self._current:
            self._current[lock.constraint] = self._table.secret_id(lock.constraint)
        if (lock.secret_id == self._current[lock.constraint]
                or (lock.secret_id is None and required)):
            self._confirmed.add(lock.constraint)

    def warnings(self) -> list[SecretWarning]:
        """The hashed constraints none of whose locks the current secret made."""
        return [SecretWarning(self._table.name, name, str(self._current[name]),
                              tuple(sorted(counts.items(), key=lambda c: (-c[1], c[0] or ""))))
                for name, counts in sorted(self._seen.items()) if name not in self._confirmed]


def _secret_warnings(table: _Table, snapshot: _Snapshot) -> list[SecretWarning]:
    """The hashed constraints of ``table`` whose locks the scan saw, none made with the current
    secret (:class:`_SecretTally`)."""
    required = {key for record in snapshot.records for key in record.requires or {}}
    tally = _SecretTally(table)
    for key, item in snapshot.locks.items():
        tally.add(_lock_info(table, item), key in required)
    return tally.warnings()


def _ordered(findings: list[Finding]) -> tuple[Finding, ...]:
    """Findings in the order reports list them: by kind, table, lock key, holders."""
    order = {kind: i for i, kind in enumerate(KINDS)}
    return tuple(sorted(findings, key=lambda f: (order[f.kind], f.table, f.lock_key,
                                                 [h.label for h in f.holders])))


def check(models: Sequence[type[Model]], *, segments: int = 1,
          progress: Progress | None = None, page_size: int | None = None) -> AuditReport:
    """Audit every lock and record of the models' tables.

    Each table is scanned once (``segments`` > 1: a parallel scan, one thread per segment); every
    lock key where the scan saw disagreement is then confirmed with one TransactGetItems of the
    lock, its owner and the records requiring it — a serializable snapshot, so a save that raced
    with the scan is not reported. ``progress(scanned, estimated_total)`` is called after every
    page (the estimate is DescribeTable's ItemCount, read only when ``progress`` is given).
    ``page_size`` caps the items per Scan request (``Limit``), to spread the read load.
    """
    if segments < 1 or (page_size is not None and page_size < 1):
        raise AuditError("segments and page_size must be at least 1")
    tables = _tables(models)
    meter = _Meter()
    estimate: int | None = None
    if progress is not None:
        estimate = sum(int(_call(meter, t.connection, "DescribeTable", TableName=t.name)
                           .get("Table", {}).get("ItemCount", 0)) for t in tables)
        progress(0, estimate)
    done = [0]
    guard = threading.Lock()

    def on_page(scanned: int) -> None:
        if progress is None:
            return
        with guard:
            done[0] += scanned
            progress(done[0], estimate)

    summaries: list[TableSummary] = []
    findings: list[Finding] = []
    warnings: list[SecretWarning] = []
    with ThreadPoolExecutor(max_workers=segments) as pool:
        for table in tables:
            snapshot = _Snapshot()
            scan = functools.partial(_scan_segment, table, total=segments, meter=meter,
                                     on_page=on_page, page_size=page_size)
            for part in pool.map(scan, range(segments)):
                snapshot.merge(part)
            summaries.append(TableSummary(table.name, snapshot.scanned, len(snapshot.records),
                                          len(snapshot.locks), snapshot.system, snapshot.other))
            findings.extend(_unreadable(table, record) for record in snapshot.records
                            if record.requires is None)
            warnings.extend(_secret_warnings(table, snapshot))
            suspects = _suspects(table, snapshot)
            confirm = functools.partial(_recheck, table, meter=meter)
            confirmed = pool.map(confirm, suspects, suspects.values())
            findings.extend(f for f in confirmed if f is not None)
    return AuditReport(tuple(summaries), _ordered(findings), meter.cost(), tuple(models),
                       tuple(warnings))
