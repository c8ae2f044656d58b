"""Migrations of lock items: adding a unique constraint to a table that already holds data.

Django's workflow, for DynamoDB: ``makemigrations`` diffs the models' constraints against the
state replayed from migration files and writes the next file; ``migrate`` backfills (or removes)
locks and records each migration in a ledger kept in the table itself; duplicates stop it with a
report and touch no record. The modules, one job each:

* :mod:`~dynaunique.migrations.state` — constraints as plain data (callables as import paths);
* :mod:`~dynaunique.migrations.operations` — what migration files list;
* :mod:`~dynaunique.migrations.autodetector` — state diff → operations;
* :mod:`~dynaunique.migrations.writer` — operations → migration file source;
* :mod:`~dynaunique.migrations.loader` — migration files → ordered migrations and state;
* :mod:`~dynaunique.migrations.recorder` — the ledger: applied migrations and progress (its
  layout in ``_ledger``, the lease in ``_lease``, the calls to DynamoDB in ``_dynamo``);
* :mod:`~dynaunique.migrations.executor` — plan and run: which steps (``_plan``), scanning a
  phase in segments (``_segments``), a page's work (``_pages``), one record's lock
  (``_reconcile``), one lock write (``_lockwrites``), what the caller is told (``_report``);
* :mod:`~dynaunique.migrations.options` — how a run goes (:class:`MigrationOptions`) and what
  it tells its caller (:class:`ProgressEvent`, to one ``progress_callback``);
* :mod:`~dynaunique.migrations.project` — settings and wiring for one models module;
* ``_assignments`` — one time-bounded assignment as plain data, for any engine; ``_dask`` —
  :func:`run_on_dask`, the assignments as tasks on a Dask cluster.

See docs/migrations.md.
"""

from __future__ import annotations

from dynaunique.migrations._dask import run_on_dask
from dynaunique.migrations._kinds import RunState
from dynaunique.migrations._ledger import Counters
from dynaunique.migrations._phase import LockSecretError
from dynaunique.migrations._plan import MigrationStatus, Step
from dynaunique.migrations._report import (
    Duplicate,
    DuplicatesFound,
    MigrateResult,
    Reporter,
    SilentReporter,
)
from dynaunique.migrations.executor import MigrationExecutor
from dynaunique.migrations.loader import Migration, MigrationLoader
from dynaunique.migrations.operations import (
    AddUniqueConstraint,
    AlterUniqueConstraint,
    MigrationContext,
    Operation,
    RemoveUniqueConstraint,
    RunPython,
)
from dynaunique.migrations.options import (
    InvalidOptionError,
    MigrationOptions,
    ProgressCallback,
    ProgressEvent,
)
from dynaunique.migrations.project import MakeResult, Project, Settings, load_settings
from dynaunique.migrations.recorder import MigrationRecorder
from dynaunique.migrations.state import ConstraintState, ProjectState

__all__ = [
    "AddUniqueConstraint",
    "AlterUniqueConstraint",
    "ConstraintState",
    "Counters",
    "Duplicate",
    "DuplicatesFound",
    "InvalidOptionError",
    "LockSecretError",
    "MakeResult",
    "MigrateResult",
    "Migration",
    "MigrationContext",
    "MigrationExecutor",
    "MigrationLoader",
    "MigrationOptions",
    "MigrationRecorder",
    "MigrationStatus",
    "Operation",
    "ProgressCallback",
    "ProgressEvent",
    "Project",
    "ProjectState",
    "RemoveUniqueConstraint",
    "Reporter",
    "RunPython",
    "RunState",
    "Settings",
    "SilentReporter",
    "Step",
    "load_settings",
    "run_on_dask",
]
