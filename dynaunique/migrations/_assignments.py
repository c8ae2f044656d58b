"""One assignment of a migration, as any engine runs it: a worker's time-bounded run described
by plain, picklable data (:class:`Assignment`), so that a Dask task, a Lambda invocation or a
container can rebuild the project from the module's name and run it (:func:`run_assignment`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs

from dynaunique.migrations._kinds import RunState
from dynaunique.migrations._report import Duplicate, DuplicatesFound
from dynaunique.migrations.options import MigrationOptions, ProgressCallback
from dynaunique.migrations.project import Project, load_settings

#: What :func:`run_assignment` reports when duplicates stopped the migration (not a
#: :class:`RunState`: the run failed).
DUPLICATES = "duplicates"


@attrs.frozen
class Assignment:
    """What a worker needs to rebuild the migration and run one time-bounded stretch of it.

    ``module`` is the models module (dotted path), imported with ``directory`` (default: the
    current directory) first on ``sys.path``; ``to_migration`` the migration to migrate to (a
    name or prefix, ``zero``, or None for the latest: ``migrate``'s ``TARGET``); ``options``
    how the assignment runs (its ``worker`` is set per segment by :func:`run_assignment`),
    ``max_seconds`` its time bound (it stops at a page
    boundary past it: a smaller ``options.page_size`` keeps the bound tighter).
    """

    module: str
    total_segments: int
    options: MigrationOptions = attrs.field(factory=MigrationOptions)
    to_migration: str | None = None
    migrations_dir: str | None = None
    endpoint: str | None = None
    directory: str | None = None
    max_seconds: float | None = None

    def project(self) -> Project:
        """The project, its models imported and pointed at ``endpoint``."""
        from dynaunique._transport.endpoint import point_models
        from dynaunique._user_models import load_models  # every tool's one model loader

        directory = Path(self.directory) if self.directory is not None else Path.cwd()
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
        settings = load_settings(self.module, directory)
        models = load_models(self.module)
        point_models(models, self.endpoint or settings.endpoint)
        migrations_dir = Path(self.migrations_dir) if self.migrations_dir else None
        return Project(self.module, models, migrations_dir=migrations_dir, settings=settings)


def run_assignment(assignment: Assignment, segment: int, *,
             progress_callback: ProgressCallback | None = None) -> dict[str, Any]:
    """Run ``assignment`` as a worker starting with ``segment`` (``progress_callback`` gets its
    events); what it did, as plain data:

    ``{"state": "done" | "more" | "idle" | "duplicates", "segment", "applied", "unapplied",
    "waiting"}`` — with ``"duplicates"`` (each a :meth:`Duplicate.to_json
    <dynaunique.migrations.Duplicate.to_json>`), ``"migration"``, ``"message"`` and
    ``"incomplete"`` when duplicates stopped it. Any other failure raises.
    """
    worker = assignment.options.replace(worker=(segment, assignment.total_segments))
    executor = assignment.project().executor(worker, progress_callback=progress_callback)
    out: dict[str, Any] = {"segment": segment, "applied": [], "unapplied": [], "waiting": []}
    try:
        result = executor.migrate(assignment.to_migration, max_seconds=assignment.max_seconds)
    except DuplicatesFound as exc:
        return {**out, "state": DUPLICATES, "migration": exc.migration, "message": str(exc),
                "incomplete": exc.incomplete,
                "duplicates": [d.to_json() for d in exc.duplicates]}
    return {**out, "state": str(result.state), "applied": result.applied,
            "unapplied": result.unapplied, "waiting": result.waiting}


def state_of(report: dict[str, Any]) -> RunState:
    """The :class:`RunState` of a :func:`run_assignment` report.

    :raises DuplicatesFound: the report says duplicates stopped the assignment (the same error, with
        the same report, as a run in this process would raise).
    """
    if report["state"] == DUPLICATES:
        raise DuplicatesFound(report["migration"], [
            Duplicate(d["model"], d["constraint"], d["value"], d["hashed"], d["lock"],
                      d["holder"], d["holder_model"], tuple(d["others"]))
            for d in report["duplicates"]], incomplete=report["incomplete"])
    return RunState(report["state"])
