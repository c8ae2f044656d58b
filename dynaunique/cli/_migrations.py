"""Commands of the migrations group: ``makemigrations``, ``migrate``, ``showmigrations``.

They parse options, build a :class:`dynaunique.migrations.Project` and print what it returns:
a rich progress bar on a terminal, plain log lines otherwise, JSON with ``--json``.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import TaskID
from rich.text import Text

from dynaunique._user_models import load_models, open_models
from dynaunique.cli._common import endpoint_option, exit_code_of
from dynaunique.cli._output import Output, progress_bar
from dynaunique.cli._throughput import throughput_options
from dynaunique.cli._workers import print_result, worker_options
from dynaunique.errors import DynauniqueError
from dynaunique.migrations import (
    Counters,
    DuplicatesFound,
    ProgressEvent,
    Project,
    Step,
    load_settings,
    run_on_dask,
)
from dynaunique.migrations._report import reporter_callback
from dynaunique.migrations.project import describe_operation

_F = TypeVar("_F", bound=Callable[..., Any])


def _console(stderr: bool = False) -> Console:
    # Off a terminal (pipes, CI, CliRunner) keep lines long instead of wrapping keys mid-way.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 200
    return Console(stderr=stderr, highlight=False, markup=False, width=width,
                   soft_wrap=width is not None)


def _error_line(exc: DynauniqueError) -> Text:
    return Text.assemble(("Error:", "bold red"), " ", str(exc))


def _fail(exc: DynauniqueError) -> None:
    _console(stderr=True).print(_error_line(exc))
    raise SystemExit(exit_code_of(exc))


def _handle_errors(command: _F) -> _F:
    """Show a dynaunique error as one line and exit with its code (1 or 2)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except DuplicatesFound:
            raise
        except DynauniqueError as exc:
            _fail(exc)

    return wrapper  # type: ignore[return-value]


def _project(module: str, migrations_dir: Path | None, endpoint: str | None, *,
             connect: bool = True) -> Project:
    if connect:
        models, settings = open_models(module, endpoint)
    else:  # makemigrations reads files only: no endpoint, region or credentials needed
        settings = load_settings(module)
        models = load_models(module)
    return Project(module, models, migrations_dir=migrations_dir, settings=settings)


migrations_dir_option = click.option(
    "--migrations-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the migration files (default: dynamigrations/ next to MODULE).",
)


# --- makemigrations ------------------------------------------------------------------------------


@click.command("makemigrations")
@click.argument("module")
@click.option("--name", "-n", default=None, help="Name the migration (0002_<NAME>).")
@migrations_dir_option
@click.option("--check", is_flag=True, help="Exit 1 if a migration is missing; write nothing.")
@click.option("--empty", is_flag=True, help="Write a migration with no operations (RunPython).")
@_handle_errors
def makemigrations(module: str, name: str | None, migrations_dir: Path | None, check: bool,
                   empty: bool) -> None:
    """Write the next migration of MODULE's unique constraints (a dotted module path)."""
    project = _project(module, migrations_dir, None, connect=False)
    result = project.make_migrations(name=name, check=check, empty=empty)
    console = _console()
    if not result.changed:
        console.print(f"No changes detected in {module}: its migrations are up to date.")
        return
    if check:
        console.print(f"{module} has changes with no migration yet ({result.name} would hold):")
        for op in result.operations:
            console.print(f"  {describe_operation(op)}")
        console.print("Run `dynaunique makemigrations` to write it.")
        raise SystemExit(1)
    console.print(f"Wrote {result.path}")
    for op in result.operations:
        console.print(f"  {describe_operation(op)}")


# --- migrate -------------------------------------------------------------------------------------


class PlainReporter:
    """Log lines on stderr: a phase's start and end, and its counters every few seconds. A
    progress callback: each event goes to its method (:func:`reporter_callback`)."""

    def __init__(self, console: Console, every: float = 5.0) -> None:
        self.console = console
        self.every = every
        self._totals: dict[str, Counters] = {}
        self._last = 0.0
        self._lock = threading.Lock()
        self._forward = reporter_callback(self)

    def __call__(self, event: ProgressEvent) -> None:
        """The executor's progress callback."""
        self._forward(event)

    def phase_started(self, label: str, *, estimate: int | None,
                      so_far: Counters | None = None) -> None:
        """Print the phase."""
        self._begin(label, so_far)
        about = f" (table holds about {estimate} items)" if estimate else ""
        self.console.print(f"  {label}{about}")

    def _begin(self, label: str, so_far: Counters | None) -> None:
        # This run's counts, except duplicates: those standing (a resumed phase starts with the
        # earlier runs' and a re-check lowers them), never a negative difference.
        with self._lock:
            self._totals[label] = Counters(duplicates=so_far.duplicates if so_far else 0)

    def advance(self, label: str, delta: Counters) -> None:
        """Sum up; print now and then."""
        with self._lock:
            totals = self._totals.setdefault(label, Counters())
            totals.add(delta)
            if time.monotonic() - self._last < self.every:
                return
            self._last = time.monotonic()
        self.console.print(f"    {_counts(totals)}")

    def phase_finished(self, label: str, totals: Counters) -> None:
        """Print the totals."""
        self.console.print(f"  {label}: done — {_counts(totals)}")

    def note(self, text: str) -> None:
        """Print ``text``."""
        self.console.print(text)


class RichReporter(PlainReporter):
    """A progress bar per phase (items scanned, locks written, duplicates)."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.progress = progress_bar(console, fields="{task.fields[counts]}")
        self._tasks: dict[str, TaskID] = {}

    def phase_started(self, label: str, *, estimate: int | None,
                      so_far: Counters | None = None) -> None:
        """Add a bar."""
        self._begin(label, so_far)
        self.progress.start()
        self._tasks[label] = self.progress.add_task(label, total=estimate or None, counts="")

    def advance(self, label: str, delta: Counters) -> None:
        """Move the bar."""
        with self._lock:
            totals = self._totals.setdefault(label, Counters())
            totals.add(delta)
            counts = _counts(totals)
        task = self._tasks.get(label)
        if task is not None:
            self.progress.update(task, advance=delta.scanned, counts=counts)

    def phase_finished(self, label: str, totals: Counters) -> None:
        """Complete the bar."""
        task = self._tasks.get(label)
        if task is not None:
            self.progress.update(task, total=self.progress.tasks[task].completed or 1,
                                 completed=self.progress.tasks[task].completed or 1,
                                 counts=_counts(totals))

    def note(self, text: str) -> None:
        """Print above the bars."""
        self.progress.console.print(text)

    def stop(self) -> None:
        """Leave the bars on screen."""
        self.progress.stop()


def _counts(c: Counters) -> str:
    parts = [f"scanned {c.scanned}", f"records {c.records}", f"locks written {c.written}"]
    if c.present:
        parts.append(f"already right {c.present}")
    if c.deleted:
        parts.append(f"deleted {c.deleted}")
    parts.append(f"duplicates {c.duplicates}")
    return ", ".join(parts)


def _print_plan(console: Console, module: str, steps: list[Step]) -> None:
    if not steps:
        console.print(f"No migrations to apply for {module}.")
        return
    console.print(f"Planned operations for {module}:")
    for step in steps:
        verb = "Unapply" if step.backwards else "Apply"
        console.print(f"  {verb} {step.name}")
        operations = list(step.migration.operations)
        if step.backwards:
            operations.reverse()
        for op in operations:
            prefix = "undo: " if step.backwards else ""
            console.print(f"    {prefix}{op.describe()}")


def _plan_json(steps: list[Step]) -> list[dict[str, Any]]:
    return [
        {"migration": s.name, "backwards": s.backwards,
         "operations": [op.describe() for op in s.migration.operations],
         "phases": [p.describe() for _, p in s.jobs()]}
        for s in steps
    ]


def _print_duplicates(exc: DuplicatesFound) -> None:
    rows = []
    for d in exc.duplicates:
        value = "(hashed)" if d.hashed else repr(d.value)
        holder = _key_text(d.holder) if d.holder is not None else "?"
        if d.holder_model and d.holder_model != d.model:
            holder += f" ({d.holder_model})"
        rows.append((f"{d.model}.{d.constraint}", value, holder,
                     [_key_text(o) for o in d.others]))
    # A rich table on a terminal; one tab-separated line per duplicate when piped.
    Output().table(("constraint", "value", "lock held by", "also holding the value"), rows,
                   title=f"Duplicates found by {exc.migration}")


def _key_text(key: dict[str, Any]) -> str:
    return " / ".join(str(v) for v in key.values())


@click.command("migrate")
@click.argument("module")
@click.argument("target", required=False)
@click.option("--plan", "show_plan", is_flag=True, help="Print what would run; send no write.")
@click.option("--fake", is_flag=True, help="Record migrations as applied without running them.")
@click.option("--segments", type=click.IntRange(1, 1000), default=None,
              help="Scan segments (threads) for a backfill (default 1, or [tool.dynaunique]).")
@click.option("--segment", type=click.IntRange(0, 999), default=None,
              help="Work as one of several workers, starting with this segment (with "
                   "--total-segments).")
@click.option("--total-segments", type=click.IntRange(1, 1000), default=None,
              help="How many segments the workers split each backfill into.")
@throughput_options
@click.option("--accept-other-secret", is_flag=True,
              help="Treat hashed locks the current lock secret did not make as its own (after "
                   "retiring a secret on purpose): sweep them, re-lock under the current one. "
                   "Without it, a migration that meets them stops.")
@worker_options
@migrations_dir_option
@endpoint_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@_handle_errors
def migrate(module: str, target: str | None, show_plan: bool, fake: bool, segments: int | None,  # noqa: PLR0912  # a click command: its option checks, then one branch a mode
            segment: int | None, total_segments: int | None, concurrency: int | None,
            max_wcu: float | None, max_rcu: float | None,
            accept_other_secret: bool, max_seconds: float | None, wait_seconds: float,
            lease_seconds: float | None, dask: str | None, migrations_dir: Path | None,
            endpoint: str | None,
            as_json: bool) -> None:
    """Apply MODULE's migrations up to TARGET (default: the latest; `zero`: unapply all).

    A backfill that stops (crash, duplicates, Ctrl-C, --max-seconds: exit 75) resumes where
    it stopped when rerun.
    """
    if (segment is None) != (total_segments is None) and dask is None:
        raise click.UsageError("--segment and --total-segments go together")
    if segment is not None and total_segments is not None and segment >= total_segments:
        raise click.UsageError("--segment must be less than --total-segments")
    if dask is not None and (segment is not None or fake):
        raise click.UsageError("--dask runs the workers itself: no --segment or --fake")
    project = _project(module, migrations_dir, endpoint)
    out = _console()
    err = _console(stderr=True)
    # No autodetector here (Django's migrate runs one to warn of unmigrated model changes):
    # `makemigrations --check` is the tool for that, in CI (docs/decisions.md).
    reporter: PlainReporter | None
    if as_json:
        reporter = None
    elif err.is_terminal:
        reporter = RichReporter(err)
    else:
        reporter = PlainReporter(err)
    worker = (segment, total_segments) if segment is not None and total_segments else None
    options = project.options(
        segments=segments, max_wcu=max_wcu, max_rcu=max_rcu, concurrency=concurrency,
        worker=worker, accept_other_secret=accept_other_secret, wait_seconds=wait_seconds,
        lease_seconds=lease_seconds)
    executor = project.executor(options, progress_callback=reporter)
    if show_plan:
        steps = executor.plan(target)
        if as_json:
            click.echo(json.dumps({"plan": _plan_json(steps)}))
        else:
            _print_plan(out, module, steps)
        return
    try:
        if dask is not None:
            result = run_on_dask(module, dask, total_segments=total_segments or segments or 1,
                                 target=target, max_seconds=max_seconds or 300.0,
                                 options=options, endpoint=endpoint,
                                 migrations_dir=migrations_dir)
        else:
            result = executor.migrate(target, fake=fake, max_seconds=max_seconds)
    except DuplicatesFound as exc:
        if as_json:
            click.echo(json.dumps({
                "error": "duplicates", "migration": exc.migration, "message": str(exc),
                "incomplete": exc.incomplete,
                "duplicates": [d.to_json() for d in exc.duplicates],
            }))
        else:
            _print_duplicates(exc)
            err.print(_error_line(exc))
        raise SystemExit(exc.exit_code) from None
    finally:
        if isinstance(reporter, RichReporter):
            reporter.stop()
    if as_json:
        click.echo(json.dumps({
            "applied": result.applied, "unapplied": result.unapplied, "fake": result.fake,
            "totals": {k: _counters_json(v) for k, v in result.totals.items()},
            "state": str(result.state), "waiting": result.waiting,
        }))
    print_result(out, err, module, result, fake=fake, max_seconds=max_seconds, as_json=as_json)


def _counters_json(c: Counters) -> dict[str, Any]:
    return {"scanned": c.scanned, "records": c.records, "skipped": c.skipped,
            "written": c.written, "present": c.present, "deleted": c.deleted,
            "duplicates": c.duplicates, "write_units": c.write_units}


# --- showmigrations ------------------------------------------------------------------------------


@click.command("showmigrations")
@click.argument("module")
@migrations_dir_option
@endpoint_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@_handle_errors
def showmigrations(module: str, migrations_dir: Path | None, endpoint: str | None,
                   as_json: bool) -> None:
    """List MODULE's migrations: [X] applied, [ ] not, and any partly applied one."""
    project = _project(module, migrations_dir, endpoint)
    executor = project.executor()
    statuses = executor.status()
    out = _console()
    if as_json:
        click.echo(json.dumps([
            {"name": s.name, "applied": s.applied, "fake": s.fake, "partial": s.partial}
            for s in statuses
        ]))
        return
    out.print(f"{module} (ledger: table {executor.recorder.table}, app {project.app})")
    if not statuses:
        out.print(" (no migrations)")
    for s in statuses:
        mark = "[X]" if s.applied else "[ ]"
        extra = " (fake)" if s.fake else ""
        if s.partial:
            extra += f"  ({s.partial})"
        out.print(f" {mark} {s.name}{extra}")


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [makemigrations, migrate, showmigrations]
