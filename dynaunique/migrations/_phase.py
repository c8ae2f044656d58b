"""One phase at run time: its model bound, which items are the model's records and the lock
each requires, and the segment of it being worked on, with its checkpoint in the ledger."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique._items import LockRef, ModelInfo, TypedKey, claim, key_of, locks_of, plain_key
from dynaunique.errors import DynauniqueError, InvalidValueError, MigrationError
from dynaunique.migrations._dynamo import TableKeys
from dynaunique.migrations._kinds import PhaseKind
from dynaunique.migrations._ledger import Counters, Pending, Progress
from dynaunique.migrations.operations import MigrationContext, Phase
from dynaunique.migrations.ratelimit import TokenBucket
from dynaunique.migrations.recorder import MigrationRecorder
from dynaunique.migrations.state import bind


@attrs.define
class PhaseRun:
    """What one phase needs at run time: the live model, its declaration bound, the table."""

    phase: Phase
    keys: TableKeys
    client: Any
    model: Any = None
    info: ModelInfo | None = None
    #: The live models of the phase's table, the phase's own included: who else an item of the
    #: table may be a record of.
    table_models: tuple[Any, ...] = ()
    #: The phase's label in progress reports, and the table's approximate item count (None for
    #: a phase that does not scan) — for the ``migration_progress`` events.
    label: str = ""
    estimate: int | None = None

    @property
    def name(self) -> str:
        """The lock name of the phase's constraint."""
        assert self.phase.constraint is not None
        return self.phase.constraint.name

    def load(self, raw: Mapping[str, Any] | None) -> Any:
        """The model instance ``raw`` is, or None when it is not one of the model's records.

        The audit's rule (:func:`dynaunique._items.claim` over the table's live models): ``raw``
        is this model's record iff the claim names this model — so a backfill locks exactly the
        records ``dynaunique check`` expects locks of — and PynamoDB can deserialize it.
        """
        if raw is None:
            return None
        owner, _ = claim(self.table_models, raw)
        if owner is None or owner is not self.model:
            return None
        try:
            return self.model.from_raw_data(copy.deepcopy(dict(raw)))
        except Exception:  # unreadable as the model: not one of its records
            return None

    def required(self, raw: Mapping[str, Any] | None) -> LockRef | None:
        """The lock of this phase's constraint that ``raw`` requires (None: no lock)."""
        instance = self.load(raw)
        if instance is None:
            return None
        assert self.info is not None and raw is not None
        try:
            return locks_of(self.info, instance).get(self.name)
        except InvalidValueError as exc:
            raise MigrationError(
                f"{self.info.name} {plain_key(self.key(raw))}: its value cannot be locked: {exc}"
            ) from exc

    def key(self, item: Mapping[str, Any]) -> TypedKey:
        """The typed primary key of an item of the table (a record read, or one to lock)."""
        key = key_of(self.keys.key_attributes, item)
        assert key is not None, "an item read by its key has its key attributes"
        return key


def phase_run(phase: Phase, keys: TableKeys, client: Any, models: Mapping[str, Any]) -> PhaseRun:
    """``phase`` ready to run on the table ``keys`` describes: for a fill or a sweep, its live
    model (of ``models``) bound to the phase's declaration, and the table's other models.

    :raises MigrationError: the model's key attributes are not the table's.
    """
    run = PhaseRun(phase, keys, client)
    if phase.kind not in (PhaseKind.FILL, PhaseKind.SWEEP):
        return run
    assert phase.constraint is not None
    run.model = models[phase.model]
    run.info = bind(run.model, phase.constraint, table=keys.table)
    same = [m for m in models.values()
            if getattr(m, "_du_info", None) is not None and m._du_info.table == keys.table]
    # The model comes first if the module points it at another table than the migration's.
    run.table_models = tuple(same) if run.model in same else (run.model, *same)
    if run.info.key_attributes != keys.key_attributes:
        raise MigrationError(
            f"{phase.model}'s key attributes {run.info.key_attributes} differ from "
            f"table {keys.table!r}'s {keys.key_attributes}"
        )
    return run


def run_python(phase: Phase, context: MigrationContext, migration: str) -> None:
    """Call a ``run`` phase's function; its failure becomes a :class:`MigrationError`."""
    assert phase.function is not None
    try:
        phase.function(context)
    except DynauniqueError:
        raise
    except Exception as exc:
        raise MigrationError(f"{migration}: {phase.describe()} failed: "
                             f"{type(exc).__name__}: {exc}") from exc


@attrs.define
class Segment:
    """One segment being worked on: its phase, its progress item and the uncommitted counts."""

    run: PhaseRun
    progress: Progress
    worker: str
    recorder: MigrationRecorder
    bucket: TokenBucket | None = None
    delta: Counters = attrs.field(factory=Counters)
    #: The runner's lease holder id: checkpoints are fenced by it (None: not fenced).
    holder: str | None = None

    def save(self) -> None:
        """Overwrite the segment's progress item in the ledger (one write unit, rate-limited,
        fenced by the runner's holder id)."""
        if self.bucket is not None:
            self.bucket.acquire(1.0)
        self.recorder.save_progress(self.progress, worker=self.worker, holder=self.holder)

    def intend(self, entries: Sequence[Pending], *, put: bool = False) -> None:
        """Record lock writes about to be sent (write-ahead), unless already recorded.

        A put is covered by any entry for the same lock key (resuming reads the lock item to
        find its owner); a delete needs its owner recorded, since the lock may then be gone.
        """
        if self.run.phase.kind == PhaseKind.REMOVE:
            return  # owner-guarded deletes of a constraint nobody maintains: nothing to verify
        known = {p.ident for p in self.progress.pending}
        locks = {p.lock for p in self.progress.pending}
        new = [e for e in entries if e.ident not in known and not (put and e.lock in locks)]
        if new:
            self.progress.pending.extend(new)
            self.save()

    def spend(self, response: Mapping[str, Any]) -> None:
        """Count the write units DynamoDB reports ``response`` consumed (and charge the cap)."""
        consumed = response.get("ConsumedCapacity") or {}
        units = float(consumed.get("CapacityUnits", 1.0)) if isinstance(consumed, dict) else 1.0
        self.delta.write_units += units
        if self.bucket is not None:
            self.bucket.charge(units - 1.0)
