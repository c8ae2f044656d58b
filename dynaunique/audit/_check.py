"""The full audit: scan every table once, then confirm each suspicious lock key consistently."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from dynaunique._items import TypedKey, key_id, key_of, owner_key
from dynaunique.errors import AuditError
from dynaunique.model import Model

from ._judge import Finding, _recheck, _unreadable
from ._kinds import KINDS
from ._reads import _scan_pages
from ._stored import _interpret, _is_lock_item, _lock_info, _Record
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
        """True when nothing was found."""
        return not self.findings

    def counts(self) -> dict[str, int]:
        """Findings per kind (every kind present, zeros included), keyed by the kinds' words."""
        counts = {kind.value: 0 for kind in KINDS}
        for finding in self.findings:
            counts[finding.kind] += 1
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


def _scan_segment(table: _Table, segment: int, total: int, meter: _Meter,
                  on_page: Callable[[int], None], page_size: int | None = None) -> _Snapshot:
    snapshot = _Snapshot()
    parallel = total > 1
    params = {"Limit": page_size} if page_size is not None else {}
    for item in _scan_pages(table, meter, segment=segment if parallel else None,
                            total_segments=total if parallel else None, on_page=on_page,
                            **params):
        snapshot.scanned += 1
        kind = _is_lock_item(table, item)
        if kind is None:
            snapshot.system += 1
        elif kind:
            snapshot.locks[item[table.hash_attr]["S"]] = item
        else:
            key = key_of(table.key_attributes, item)
            if key is None:
                snapshot.other += 1
                continue
            record = _interpret(table, key, item, keep_item=False)
            if record.requires is None and record.problem is None:
                snapshot.other += 1
            else:
                snapshot.records.append(record)
    return snapshot


def _suspects(table: _Table, snapshot: _Snapshot) -> dict[str, list[TypedKey]]:
    """Lock keys where the scan saw disagreement → the record keys to read with each."""
    requirers: dict[str, list[TypedKey]] = {}
    for record in snapshot.records:
        for key in record.requires or {}:
            requirers.setdefault(key, []).append(record.ref.key)
    suspects: dict[str, list[TypedKey]] = {}
    for key in sorted(set(snapshot.locks) | set(requirers)):
        holders = requirers.get(key, [])
        item = snapshot.locks.get(key)
        lock = _lock_info(table, item) if item is not None else None
        owner = owner_key(table.key_attributes, lock.owner if lock is not None else None)
        if (lock is not None and lock.constraint in table.declared and owner is not None
                and len(holders) == 1 and key_id(holders[0]) == key_id(owner)):
            continue
        suspects[key] = holders + ([owner] if owner is not None else [])
    return suspects


def _secret_warnings(table: _Table, snapshot: _Snapshot) -> list[SecretWarning]:
    """The hashed constraints of ``table`` whose locks the scan saw, none made with the current
    secret: carrying its fingerprint, or (a lock without one) required by a record's values."""
    hashed = table.hashed
    required = {key for record in snapshot.records for key in record.requires or {}}
    seen: dict[str, Counter[str | None]] = {}
    current: dict[str, str | None] = {}
    confirmed: set[str] = set()
    for key, item in snapshot.locks.items():
        lock = _lock_info(table, item)
        if not lock.hashed or lock.constraint not in hashed:
            continue
        seen.setdefault(lock.constraint, Counter())[lock.secret_id] += 1
        if lock.constraint not in current:
            current[lock.constraint] = table.secret_id(lock.constraint)
        if (lock.secret_id == current[lock.constraint]
                or (lock.secret_id is None and key in required)):
            confirmed.add(lock.constraint)
    return [SecretWarning(table.name, name, str(current[name]),
                          tuple(sorted(counts.items(), key=lambda c: (-c[1], c[0] or ""))))
            for name, counts in sorted(seen.items()) if name not in confirmed]


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
        estimate = sum(int(_call(meter, t.client, "DescribeTable", TableName=t.name)
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
    order = {kind: i for i, kind in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.kind], f.table, f.lock_key,
                                 [h.label for h in f.holders]))
    return AuditReport(tuple(summaries), tuple(findings), meter.cost(), tuple(models),
                       tuple(warnings))
