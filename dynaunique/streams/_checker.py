"""The stream guard's checker: stream records in, findings out — each confirmed on a consistent
read.

For a batch of records the checker collects the suspects of every change (``_changes``), reads
each lock key once — the lock, its owner and the records that touched it, in one serializable
TransactGetItems (the audit's ``_read_key``) — and judges what it read with the audit's
``_judge``. A finding is a statement about the table as it is now, never about a stream record:
the other half of a transaction that a record belongs to may be in a later batch, and by the
time the record is read the table may have moved on.

On an MRSC table (no transactions: each lock is first a pending intent) a lock still marked
pending is a write in flight while its grace period lasts, and a marked lock whose owner holds
the value is the normal state between a write's record write and its clearing the mark: neither
is reported. A duplicate (two records holding one value) is, as always. The guard does not wait
for a grace period to end: a writer that stopped leaves an intent that refuses no write after
it (the next writer takes it over) and that ``dynaunique check``/``repair`` report and settle.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.locks import TypedKey
from dynaunique.audit import AuditReport, Finding, RepairOutcome, apply_repair, plan_repair
from dynaunique.audit._check import SecretWarning
from dynaunique.audit._judge import _judge, _unreadable
from dynaunique.audit._kinds import INTENT_KINDS, KINDS
from dynaunique.audit._reads import _read_key
from dynaunique.audit._stored import _interpret, _lock_info
from dynaunique.audit._tables import Cost, _call, _in_region, _Meter, _Table, _tables
from dynaunique.errors import AuditError, ConfigurationError
from dynaunique.model import Model
from dynaunique.observe import emit

from ._across import DoubleGrant, read_across
from ._changes import Change, StreamRecordError, Suspects, change_of, suspects_of

#: The stream guard's events: ``stream_finding``, ``stream_double_grant``, ``stream_repair``,
#: ``stream_repair_refused``, ``stream_record_failed`` (docs/observability.md).
streams_logger = logging.getLogger("dynaunique.streams")


@attrs.frozen
class BatchResult:
    """What the checker made of one batch of stream records."""

    #: Stream records in the batch.
    records: int
    #: Confirmed findings, in the order reports list them.
    findings: tuple[Finding, ...]
    #: Sequence numbers of the records that could not be handled (retry them), in batch order.
    failed: tuple[str, ...]
    #: What the repair did (empty unless the checker repairs).
    repairs: tuple[RepairOutcome, ...]
    #: Why the repair was refused (the audit's refusal: locks another secret made), or None.
    refused: str | None
    cost: Cost
    #: ``(table, lock key)`` (``record:<key>`` for a record that could not be read) → the
    #: sequence numbers of the stream records that led to reading it.
    sources: Mapping[tuple[str, str], tuple[str, ...]] = attrs.field(factory=dict, repr=False)
    #: Values granted to different records in different regions (a checker given ``regions``).
    double_grants: tuple[DoubleGrant, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"records": self.records,
                "findings": [finding_dict(f, self.sources) for f in self.findings],
                "double_grants": [d.to_dict() for d in self.double_grants],
                "failed": list(self.failed), "repairs": [r.to_dict() for r in self.repairs],
                "refused": self.refused, "cost": self.cost.to_dict()}


def finding_dict(finding: Finding,
                 sources: Mapping[tuple[str, str], tuple[str, ...]]) -> dict[str, Any]:
    """A finding's JSON form (the audit's) with the sequence numbers of the stream records
    that led to it (``sequences``)."""
    key = finding.lock_key
    if not key and finding.holders:
        key = _record_name(finding.holders[0].key)
    return {**finding.to_dict(), "sequences": list(sources.get((finding.table, key), ()))}


class Checker:
    """Judge stream records of ``models``' tables: every lock value a change touches is read
    again consistently and judged as ``dynaunique check`` judges it.

    ``repair=True`` sends the audit's guarded repair (:func:`dynaunique.audit.apply_repair`) for
    what it found, with its refusal: while a finding rests on locks another secret made, or a
    hashed constraint's missing lock cannot be told the current secret's, nothing is repaired.
    A hashed constraint counts as confirmed once the checker has read one of its locks carrying
    the current secret's fingerprint. Its repairs of a global table go to the home region, as
    the library's writes do.

    ``regions`` (two or more; a global table's replicas): every lock key a change touches is
    also read in each of these regions, and a value granted to different records in different
    regions — a write that bypassed the home region — is reported as a :class:`DoubleGrant`
    naming each region (``stream_double_grant``), once the replicas agree on it; it waits for
    them at most ``settle_seconds`` (``dynaunique.streams._across``).

    The stream guard's class (it checks what was written, as ``check`` does); it was named
    ``Guard``, which :mod:`dynaunique.streams` still gives, with a :class:`DeprecationWarning`.
    """

    def __init__(self, models: Sequence[type[Model]], *, repair: bool = False,
                 regions: Sequence[str] = (), settle_seconds: float = 10.0) -> None:
        self.models = tuple(models)
        self.tables = {table.name: table for table in _tables(self.models)}
        self.repair = repair
        self.regions = tuple(dict.fromkeys(regions))
        if len(self.regions) == 1:
            raise ConfigurationError(
                f"the checker compares two regions or more, not {list(self.regions)}")
        self.settle_seconds = settle_seconds
        #: (table, region) → the table as read in that region's replica.
        self._regional: dict[tuple[str, str | None], _Table] = {}
        #: ``(table, lock name)`` of the hashed constraints a lock with the current secret's
        #: fingerprint was read for.
        self.confirmed: set[tuple[str, str]] = set()

    def table(self, name: str) -> _Table:
        """The loaded models' table ``name``.

        :raises StreamRecordError: no loaded model uses it.
        """
        table = self.tables.get(name)
        if table is None:
            raise StreamRecordError(f"no loaded model uses table {name!r}")
        return table

    def table_in(self, name: str, region: str | None) -> _Table:
        """The loaded models' table ``name`` as read in ``region``'s replica (None: where the
        models point)."""
        table = self.table(name)
        if region is None:
            return table
        if (name, region) not in self._regional:
            self._regional[(name, region)] = _in_region(table, region)
        return self._regional[(name, region)]

    def judge(self, records: Iterable[Mapping[str, Any]], *,
              table: str | None = None, region: str | None = None) -> BatchResult:
        """Judge a batch of stream records (Lambda's ``Records``, or GetRecords' records of
        ``table``) on what ``region``'s replica holds (None: where the models point). A record
        that cannot be parsed, or whose values could not be read, is listed in
        :attr:`BatchResult.failed`; the others are judged all the same."""
        meter = _Meter()
        failed: dict[str, str] = {}
        order: list[str] = []
        suspects: dict[str, Suspects] = {}
        sources: dict[tuple[str, str], list[str]] = {}
        count = 0
        for number, record in enumerate(records):
            count += 1
            sequence = _sequence_of(record, number)
            order.append(sequence)
            try:
                change = change_of(record, table)
                found = suspects_of(self.table(change.table), change)
            except StreamRecordError as exc:
                failed[sequence] = str(exc)
                continue
            suspects.setdefault(change.table, Suspects()).merge(found)
            for key in [*found.locks, *(_record_name(k) for k in found.unreadable.values())]:
                sources.setdefault((change.table, key), []).append(change.sequence)
        findings: list[Finding] = []
        grants: list[DoubleGrant] = []
        for name, found in suspects.items():
            table_ = self.table_in(name, region)
            checks: list[tuple[str, Callable[[], Finding | DoubleGrant | None]]] = [
                (key, functools.partial(self._recheck, table_, key, list(wanted.values()), meter))
                for key, wanted in found.locks.items()]
            checks += [(_record_name(record_key),
                        functools.partial(self._reread, table_, record_key, meter))
                       for record_key in found.unreadable.values()]
            if self.regions:
                across = {r: self.table_in(name, r) for r in self.regions}
                checks += [(key, functools.partial(
                    read_across, across, key, list(wanted.values()), meter,
                    settle_seconds=self.settle_seconds)) for key, wanted in found.locks.items()]
            for source, check in checks:
                try:
                    finding = check()
                except AuditError as exc:  # its reads failed: its records are retried
                    for sequence in sources.get((name, source), ()):
                        failed.setdefault(sequence, str(exc))
                    continue
                if isinstance(finding, DoubleGrant):
                    grants.append(finding)
                elif finding is not None and finding.kind not in INTENT_KINDS:
                    # An MRSC intent still marked (within its grace period, or its owner
                    # holding the value) is a write in flight, not a violation.
                    findings.append(finding)
        rank = {kind: i for i, kind in enumerate(KINDS)}
        findings.sort(key=lambda f: (rank[f.kind], f.table, f.lock_key,
                                     [h.label for h in f.holders]))
        by_key = {where: tuple(seqs) for where, seqs in sources.items()}
        for sequence, reason in failed.items():
            emit(streams_logger, logging.ERROR, "stream_record_failed",
                 f"stream record {sequence} not handled: {reason}", sequence=sequence,
                 reason=reason)
        for finding in findings:
            # The finding's fields (its ``message`` is the record's message).
            fields = {k: v for k, v in finding_dict(finding, by_key).items() if k != "message"}
            emit(streams_logger, logging.WARNING, "stream_finding", finding.message, **fields)
        for grant in grants:
            emit(streams_logger, logging.WARNING, "stream_double_grant", grant.message,
                 **{k: v for k, v in grant.to_dict().items() if k != "message"},
                 sequences=list(by_key.get((grant.table, grant.lock_key), ())))
        repairs, refused = self._repair(findings) if self.repair and findings else ((), None)
        return BatchResult(count, tuple(findings),
                           tuple(s for s in order if s in failed), repairs, refused,
                           meter.cost(), by_key, tuple(grants))

    def _recheck(self, table: _Table, key: str, records: Sequence[TypedKey],
                 meter: _Meter) -> Finding | None:
        lock_item, read = _read_key(table, key, records, meter)
        if lock_item is not None:
            lock = _lock_info(table, lock_item)
            if lock.hashed and lock.secret_id is not None \
                    and lock.secret_id == table.secret_id(lock.constraint):
                self.confirmed.add((table.name, lock.constraint))
        return _judge(table, key, lock_item, read)

    def _reread(self, table: _Table, key: TypedKey, meter: _Meter) -> Finding | None:
        """An image whose locks could not be computed: the record as stored now, judged alone."""
        item = _call(meter, table.connection, "GetItem", TableName=table.name, Key=key,
                     ConsistentRead=True).get("Item")
        record = _interpret(table, key, item, keep_item=True)
        if record.exists and record.requires is None:
            return _unreadable(table, record)
        if record.requires:
            # Readable now (it changed since): its locks are judged like any other's.
            return next((f for lock_key in record.requires
                         if (f := self._recheck(table, lock_key, [key], meter)) is not None),
                        None)
        return None

    def _repair(self, findings: Sequence[Finding]) -> tuple[tuple[RepairOutcome, ...], str | None]:
        warnings = tuple(
            SecretWarning(table.name, name, str(table.secret_id(name)), ())
            for table in self.tables.values() for name in sorted(table.hashed)
            if (table.name, name) not in self.confirmed)
        plan = plan_repair(AuditReport((), tuple(findings), Cost(), self.models, warnings))
        if plan.other_secret:
            names = sorted({f"{f.constraint} on {f.table!r}" for f in plan.other_secret})
            reason = (f"repair refused: {len(plan.other_secret)} finding(s) of {', '.join(names)} "
                      "rest on hashed locks this checker cannot tell the current secret's (a lock "
                      "made with another secret, or a missing lock of a constraint none of whose "
                      "locks it has read carries the current secret's fingerprint); check the "
                      "lock secret, then run dynaunique repair")
            emit(streams_logger, logging.WARNING, "stream_repair_refused", reason,
                 reason=reason, findings=[f.lock_key for f in plan.other_secret])
            return (), reason
        result = apply_repair(plan)
        for outcome in result.outcomes:
            emit(streams_logger, logging.INFO, "stream_repair",
                 f"{outcome.action.kind} {outcome.action.finding.lock_key}: {outcome.status} "
                 f"({outcome.message})", action=outcome.action.to_dict(),
                 status=outcome.status.value, detail=outcome.message, writes=outcome.writes)
        return result.outcomes, None


def _record_name(key: TypedKey) -> str:
    return "record:" + repr(sorted((k, sorted(v.items())) for k, v in key.items()))


def _sequence_of(record: Mapping[str, Any], number: int) -> str:
    """The record's SequenceNumber, or (a record without one) its place in the batch."""
    data = record.get("dynamodb") if isinstance(record, Mapping) else None
    sequence = data.get("SequenceNumber") if isinstance(data, Mapping) else None
    return sequence if isinstance(sequence, str) else f"#{number}"


__all__ = ["BatchResult", "Change", "Checker", "DoubleGrant", "finding_dict", "streams_logger"]
