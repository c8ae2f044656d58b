"""The audit of an export: the same findings as :func:`~dynaunique.audit.check`, read from a
DynamoDB export to S3 instead of a scan, each confirmed on the live table before it is reported.

The export is streamed (:mod:`dynaunique.audit._export`): every item is told apart exactly as a
scan's (``_classify``), and becomes rows of an external sort (:class:`~._spill._Spill`): a lock
gives ``(its key, LOCK, the item)``, a record one ``(lock key, HOLDER, its key)`` per lock its
values require, an unreadable record ``("", UNREADABLE, its key)``. Read back in key order, each
lock key's rows are what the scan's snapshot holds for it; the scan's rule (``_suspect``) says
whether it is suspect, and a suspect is judged by the audit's one judge on one consistent read
of the live table (``_recheck``). Memory holds one run of rows and one lock key's rows, not the
table.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from dynaunique._lock.locks import TypedKey
from dynaunique.errors import AuditError
from dynaunique.model import Model

from . import _intents
from ._check import (
    AuditReport,
    TableSummary,
    _classify,
    _ordered,
    _SecretTally,
    _suspect,
)
from ._export import Export, open_export
from ._judge import Finding, _recheck, _unreadable
from ._reads import _MAX_RECORDS_PER_READ
from ._spill import RUN_ROWS, _Spill
from ._stored import _interpret, _lock_info, _Record
from ._tables import _call, _Meter, _Table, _tables

#: Row kinds, in the order a lock key's rows are read back.
_LOCK, _HOLDER, _UNREADABLE = 0, 1, 2

Progress = Callable[[int, "int | None"], None]
#: Items read between two calls of the progress callback.
_PROGRESS_EVERY = 1000


@attrs.frozen
class ExportSummary:
    """What an export audit read, and how many suspects the live table cleared."""

    #: Where the export was read (its folder or ``s3://`` URL).
    where: str
    export_arn: str
    #: When DynamoDB took the export (the manifest's ``exportTime``).
    exported_at: str | None
    #: Lock keys (and unreadable records) where the export's items disagreed.
    suspects: int
    #: Suspects a consistent read of the live table found in agreement (a transaction the
    #: export caught half-way, or drift fixed since): not reported.
    cleared: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class ExportReport(AuditReport):
    """The result of :func:`check_export`: an :class:`AuditReport` (repair takes it as it takes
    a check's) and what was read from the export."""

    export: ExportSummary

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: a check's, and ``export``."""
        return {**super().to_dict(), "export": self.export.to_dict()}


@attrs.define
class _Counts:
    scanned: int = 0
    records: int = 0
    locks: int = 0
    system: int = 0
    other: int = 0


def _spill_items(table: _Table, items: Iterator[dict[str, Any]], spill: _Spill,
                 counts: _Counts, on_item: Callable[[int], None]) -> None:
    for item in items:
        counts.scanned += 1
        what = _classify(table, item)
        if what is None:
            counts.system += 1
        elif what is True:
            counts.locks += 1
            spill.add((item[table.hash_attr]["S"], _LOCK, item))
        elif not isinstance(what, _Record):
            counts.other += 1
        else:
            counts.records += 1
            if what.requires is None:
                spill.add(("", _UNREADABLE, what.ref.key))
            for key in what.requires or {}:
                spill.add((key, _HOLDER, what.ref.key))
        if counts.scanned % _PROGRESS_EVERY == 0:
            on_item(counts.scanned)
    on_item(counts.scanned)


def _confirm_unreadable(table: _Table, key: TypedKey, meter: _Meter) -> list[Finding]:
    """An unreadable record of the export, read again consistently: still unreadable, its
    finding; readable now, the findings of the lock keys it requires."""
    item = _call(meter, table.connection, "GetItem", TableName=table.name, Key=key,
                 ConsistentRead=True).get("Item")
    record: _Record = _interpret(table, key, item, keep_item=True)
    if record.exists and record.requires is None:
        return [_unreadable(table, record)]
    found = (_recheck(table, lock_key, [key], meter) for lock_key in record.requires or {})
    return [f for f in found if f is not None]


def _audit_table(table: _Table, export: Export, meter: _Meter, on_item: Callable[[int], None],
                 run_rows: int) -> tuple[TableSummary, list[Finding], _SecretTally, int, int]:
    counts = _Counts()
    tally = _SecretTally(table)
    findings: list[Finding] = []
    suspects = cleared = 0
    with _Spill(run_rows=run_rows) as spill:
        _spill_items(table, export.items(), spill, counts, on_item)
        # Every data file matched its checksum: only now is the live table read.
        for key, group in itertools.groupby(spill.sorted(), key=lambda row: row[0]):
            lock_item: dict[str, Any] | None = None
            holders: list[TypedKey] = []
            for _, kind, payload in group:
                if kind == _UNREADABLE:
                    suspects += 1
                    confirmed = _confirm_unreadable(table, payload, meter)
                    cleared += not confirmed
                    findings.extend(confirmed)
                elif kind == _LOCK:
                    lock_item = payload
                elif len(holders) <= _MAX_RECORDS_PER_READ:  # a read takes no more
                    holders.append(payload)
            lock = _lock_info(table, lock_item) if lock_item is not None else None
            if lock is not None:
                tally.add(lock, bool(holders))
            if key == "":
                continue
            record_keys = _suspect(table, lock, holders, intent=_intents.is_intent(lock_item))
            if record_keys is not None:
                suspects += 1
                finding = _recheck(table, key, record_keys, meter)
                if finding is None:
                    cleared += 1
                else:
                    findings.append(finding)
    summary = TableSummary(table.name, counts.scanned, counts.records, counts.locks,
                           counts.system, counts.other)
    return summary, findings, tally, suspects, cleared


def check_export(models: Sequence[type[Model]], path: str, *, s3_endpoint: str | None = None,
                 progress: Progress | None = None,
                 run_rows: int = RUN_ROWS) -> ExportReport:
    """Audit the table a DynamoDB export to S3 holds, as :func:`check` audits it by a scan.

    ``path`` is the export's folder (``.../AWSDynamoDB/<ExportId>``), the prefix holding one, or
    an ``s3://bucket/prefix`` URL (read through ``s3_endpoint``, else AWS's S3). The export must
    be of one of the models' tables; only that table is audited. The export is read without
    reading the table; each lock key where its items disagree is then confirmed with one
    TransactGetItems of the live table, and reported only if the live table disagrees too.
    ``progress(items_read, items_in_export)`` is called every 1,000 items and at the end.
    Memory does not grow with the table: rows are sorted on disk in runs of ``run_rows``.

    :raises AuditError: the export is missing, malformed, incremental, not in DynamoDB JSON, of
        another table, or a data file does not match its checksum or item count.
    """
    if run_rows < 1:
        raise AuditError("run_rows must be at least 1")
    tables = _tables(models)
    meter = _Meter()
    region = next((getattr(m.Meta, "region", None) for m in models), None)
    export = open_export(path, s3_endpoint=s3_endpoint, region=region, meter=meter)
    table = next((t for t in tables if t.name == export.table), None)
    if table is None:
        raise AuditError(f"export {export.export_id} is of table {export.table!r}; the models "
                         "use " + ", ".join(repr(t.name) for t in tables))
    if progress is not None:
        progress(0, export.item_count)

    def on_item(done: int) -> None:
        if progress is not None:
            progress(done, export.item_count)

    summary, findings, tally, suspects, cleared = _audit_table(table, export, meter, on_item,
                                                               run_rows)
    return ExportReport((summary,), _ordered(findings), meter.cost(),
                        tuple(m for m in models if m in table.models), tuple(tally.warnings()),
                        export=ExportSummary(export.where, export.export_arn,
                                             export.exported_at, suspects, cleared))
