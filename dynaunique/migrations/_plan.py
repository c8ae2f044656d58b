"""Which migrations to apply or unapply, like Django's ``migration_plan``: the steps from the
ledger's state to a target, what the ledger says about each, and whether they can run.

Pure reading: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique.errors import MigrationError
from dynaunique.migrations._kinds import PhaseKind
from dynaunique.migrations._ledger import job_id
from dynaunique.migrations.loader import Migration, MigrationLoader
from dynaunique.migrations.operations import Phase
from dynaunique.migrations.recorder import MigrationRecorder
from dynaunique.migrations.state import bind


@attrs.frozen
class Step:
    """One migration to apply (``backwards=False``) or unapply."""

    migration: Migration
    backwards: bool = False

    @property
    def name(self) -> str:
        """The migration's name."""
        return self.migration.name

    def jobs(self) -> list[tuple[str, Phase]]:
        """The phases to run, in order, each with its ledger job id."""
        operations = list(enumerate(self.migration.operations))
        if self.backwards:
            operations.reverse()
        out = []
        for index, op in operations:
            for number, phase in enumerate(op.phases(backwards=self.backwards)):
                out.append((job_id(self.name, index, self.backwards, number), phase))
        return out

    def all_job_ids(self) -> list[str]:
        """Every job id this migration can have in the ledger, in both directions."""
        out: list[str] = []
        for index, op in enumerate(self.migration.operations):
            for backwards in (False, True):
                try:
                    count = len(op.phases(backwards=backwards))
                except MigrationError:
                    continue
                out.extend(job_id(self.name, index, backwards, n) for n in range(count))
        return out


@attrs.frozen
class MigrationStatus:
    """What ``showmigrations`` prints for one migration."""

    name: str
    applied: bool
    fake: bool = False
    #: A description of work done toward the opposite state, when a run was interrupted.
    partial: str | None = None


def plan_steps(loader: MigrationLoader, applied: set[str], target: str | None) -> list[Step]:
    """The steps that bring the ledger (``applied``) to ``target``; see
    :meth:`~dynaunique.migrations.MigrationExecutor.plan`."""
    order = loader.order
    migrations = loader.migrations
    for name in order:
        if name in applied:
            missing = [d for d in migrations[name].dependencies if d not in applied]
            if missing:
                raise MigrationError(
                    f"inconsistent history: {name} is applied but its dependency "
                    f"{', '.join(missing)} is not; `migrate --fake` it or fix the ledger"
                )
    goal_name = loader.leaf() if target is None else loader.resolve(target)
    goal = _ancestors(loader, goal_name) if goal_name is not None else set()
    forwards = [Step(migrations[n]) for n in order if n in goal and n not in applied]
    backwards = [Step(migrations[n], backwards=True) for n in reversed(order)
                 if n in applied and n not in goal]
    return backwards + forwards


def _ancestors(loader: MigrationLoader, name: str) -> set[str]:
    seen: set[str] = set()
    stack = [name]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        stack.extend(loader.migrations[current].dependencies)
    return seen


def statuses(loader: MigrationLoader, recorder: MigrationRecorder,
           applied: Mapping[str, Mapping[str, Any]]) -> list[MigrationStatus]:
    """Each migration on disk: applied or not, and what an interrupted run left behind."""
    steps = [Step(loader.migrations[n], backwards=n in applied) for n in loader.order]
    all_jobs = [j for s in steps for j in s.all_job_ids()]
    started = recorder.jobs_started(all_jobs)
    out = []
    for step in steps:
        partial = None
        try:
            jobs = step.jobs()
        except MigrationError:
            jobs = []
        notes = []
        for job, phase in jobs:
            total = started.get(job)
            if total is None:
                continue
            progress = recorder.progress(job, total)
            done = sum(1 for p in progress if p.done)
            conflicts = sum(len(p.conflicts) for p in progress)
            note = f"{phase.describe()} {done}/{total} segments done"
            if conflicts:
                note += f", {conflicts} duplicate(s) to fix"
            notes.append(note)
        if notes:
            verb = "partly unapplied" if step.backwards else "partly applied"
            partial = f"{verb}: " + "; ".join(notes)
        record = applied.get(step.name, {})
        out.append(MigrationStatus(step.name, step.name in applied,
                                   bool(record.get("fake", False)), partial))
    return out


def check_steps(steps: Sequence[Step], models: Mapping[str, Any]) -> None:
    """Fail before any write when a step cannot run; see
    :meth:`~dynaunique.migrations.MigrationExecutor.check_runnable`."""
    for step in steps:
        if step.backwards and not step.migration.reversible:
            raise MigrationError(f"migration {step.name} cannot be unapplied (a RunPython "
                                 "without a backwards function)")
        for _, phase in step.jobs():
            if phase.kind in (PhaseKind.FILL, PhaseKind.SWEEP):
                model = models.get(phase.model)
                assert phase.constraint is not None
                if model is None:
                    raise MigrationError(
                        f"{step.name} needs model {phase.model} to compute the locks of "
                        f"{phase.constraint.name}, but the module no longer defines it"
                    )
                bind(model, phase.constraint, table=phase.table)
