"""What a migration run tells its caller: progress as it goes (the progress callback's events,
the ``migration_progress`` log events), the result, and the duplicates that stopped it.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

import attrs

from dynaunique._lock.items import plain_key
from dynaunique.errors import MigrationError
from dynaunique.migrations._kinds import ProgressState, RunState
from dynaunique.migrations._ledger import Conflict, Counters
from dynaunique.migrations.options import ProgressCallback, ProgressEvent
from dynaunique.observe import emit
from dynaunique.observe import migrations_logger as _log


class Reporter(Protocol):
    """Receives progress, one method a moment: the protocol before the one progress callback
    (:data:`~dynaunique.migrations.ProgressCallback`). Deprecated; :func:`reporter_callback`
    turns one into a callback."""

    def phase_started(self, label: str, *, estimate: int | None,
                      so_far: Counters | None = None) -> None:
        """A phase starts (or resumes); ``estimate`` is the table's approximate item count,
        ``so_far`` what earlier runs of a resumed phase did (its duplicates are those standing
        then: an ``advance`` may lower them, as a re-check finds some fixed)."""

    def advance(self, label: str, delta: Counters) -> None:
        """A page of the phase was processed (called from scan threads)."""

    def phase_finished(self, label: str, totals: Counters) -> None:
        """A phase completed."""

    def note(self, text: str) -> None:
        """Something worth a line of output."""


class SilentReporter:
    """A reporter that reports nothing (deprecated: pass no ``progress_callback``); also a
    progress callback that ignores every event."""

    def __call__(self, event: ProgressEvent) -> None:
        """Nothing."""

    def phase_started(self, label: str, *, estimate: int | None,
                      so_far: Counters | None = None) -> None:
        """Nothing."""

    def advance(self, label: str, delta: Counters) -> None:
        """Nothing."""

    def phase_finished(self, label: str, totals: Counters) -> None:
        """Nothing."""

    def note(self, text: str) -> None:
        """Nothing."""


def reporter_callback(reporter: Reporter) -> ProgressCallback:
    """The progress callback that hands each event to ``reporter``'s method for it (``record``
    events have none)."""
    def forward(event: ProgressEvent) -> None:
        if event.state == ProgressState.RECORD:  # one a record: nothing to hand on
            return
        counters = event.counters if event.counters is not None else Counters()
        if event.state == ProgressState.STARTED:
            reporter.phase_started(event.label, estimate=event.estimate, so_far=event.counters)
        elif event.state == ProgressState.RUNNING:
            reporter.advance(event.label, counters)
        elif event.state == ProgressState.FINISHED:
            reporter.phase_finished(event.label, counters)
        elif event.state == ProgressState.NOTE:
            reporter.note(event.text)

    return forward


@attrs.frozen
class Duplicate:
    """One value held by more than one record: ``holder`` has the lock, ``others`` do not."""

    model: str
    constraint: str
    value: Any
    hashed: bool
    lock: str
    holder: dict[str, Any] | None
    holder_model: str | None
    others: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly dict (values as stored)."""
        value = self.value
        if isinstance(value, tuple):
            value = list(value)
        return {
            "model": self.model,
            "constraint": self.constraint,
            "value": None if self.hashed else _jsonable(value),
            "hashed": self.hashed,
            "lock": self.lock,
            "holder": _jsonable(self.holder),
            "holder_model": self.holder_model,
            "others": [_jsonable(o) for o in self.others],
        }



def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def group_conflicts(conflicts: Sequence[Conflict]) -> list[Duplicate]:
    """One :class:`Duplicate` per contested lock, holders and others merged."""
    groups: dict[tuple[str, str, str], list[Conflict]] = {}
    for conflict in conflicts:
        groups.setdefault((conflict.model, conflict.constraint, conflict.lock), []).append(conflict)
    out = []
    for (model, constraint, lock), members in sorted(groups.items()):
        first = members[0]
        holder = next((c.holder for c in members if c.holder is not None), None)
        holder_model = next((c.holder_model for c in members if c.holder is not None), None)
        others: list[dict[str, Any]] = []
        for c in members:
            key = plain_key(c.record)
            if key not in others and c.record != holder:
                others.append(key)
        out.append(Duplicate(model, constraint, first.value, first.hashed, lock,
                             plain_key(holder) if holder is not None else None, holder_model,
                             tuple(others)))
    return out


class DuplicatesFound(MigrationError):
    """Existing records share a value the new constraint says is unique; nothing was resolved.

    ``duplicates`` lists each contested value with the record holding its lock and the records
    that could not get it. No record was changed; fix the data (change or delete all but one
    holder of each value) and run ``migrate`` again: it re-checks these records and continues.
    """

    def __init__(self, migration: str, duplicates: Sequence[Duplicate], *,
                 incomplete: bool = False) -> None:
        self.migration = migration
        self.duplicates = list(duplicates)
        #: True when a segment stopped early because it found too many duplicates to store.
        self.incomplete = incomplete
        names = sorted({f"{d.model}.{d.constraint}" for d in self.duplicates})
        more = " (the scan stopped early: more may exist)" if incomplete else ""
        super().__init__(
            f"migration {migration} stopped: {len(self.duplicates)} value(s) of "
            f"{', '.join(names)} are held by more than one record{more}. No record was changed. "
            "Change or delete all but one holder of each value, then run `dynaunique migrate` "
            "again: it re-checks these records and continues."
        )



@attrs.define
class MigrateResult:
    """What ``migrate`` did: the migrations applied and unapplied, and the phase totals (of a
    phase this run stopped in, its totals so far: the sum of its segments' checkpoints)."""

    applied: list[str] = attrs.field(factory=list)
    unapplied: list[str] = attrs.field(factory=list)
    fake: bool = False
    totals: dict[str, Counters] = attrs.field(factory=dict)
    #: ``done``; ``more`` when the run stopped at its time bound (run it again); ``idle`` when a
    #: worker found nothing left for it (the segments in ``waiting`` are other workers').
    state: RunState = RunState.DONE
    waiting: list[int] = attrs.field(factory=list)


def progress_event(state: ProgressState, label: str, counters: Counters, total: int | None,
                    **segment: int) -> None:
    """The ``migration_progress`` event (INFO): a phase started, checkpointed a segment (its
    counts so far, ``segment`` of ``segments``), or finished (the phase's totals). ``total`` is
    the table's approximate item count, when the phase scans."""
    if not _log.isEnabledFor(logging.INFO):
        return
    where = f" (segment {segment['segment']} of {segment['segments']})" if segment else ""
    of = f" of about {total}" if total is not None else ""
    emit(_log, logging.INFO, "migration_progress",
         f"{label}: {state}{where}, {counters.scanned} items scanned{of}, {counters.records} "
         f"records, {counters.written} locks written", state=state.value, phase=label,
         scanned=counters.scanned, records=counters.records, written=counters.written,
         deleted=counters.deleted, duplicates=counters.duplicates, total=total, **segment)
