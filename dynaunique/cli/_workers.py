"""``migrate``'s options for workers and the engines that run them (``--max-seconds``,
``--wait-seconds``, ``--lease-seconds``, ``--dask``), and what it prints when a run ends:
applied, nothing left for this worker, or more to do (exit status 75).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from dynaunique.migrations import MigrateResult, RunState

_F = TypeVar("_F", bound=Callable[..., Any])

#: ``migrate``'s exit status when it stopped at a checkpoint with more to do (its time bound):
#: BSD's EX_TEMPFAIL, "try again later" — run the same command again to continue.
EXIT_MORE = 75

_OPTIONS = [
    click.option("--max-seconds", type=click.FloatRange(min=0, min_open=True), default=None,
                 help="Stop at the first checkpoint after this many seconds and exit 75 if "
                      "there is more to do (with --dask: each task's time bound, default 300)."),
    click.option("--wait-seconds", type=click.FloatRange(min=0), default=0.0,
                 show_default=True,
                 help="A worker with nothing left (the rest is leased by running workers) "
                      "waits this long for a segment to come free, then exits 0."),
    click.option("--lease-seconds", type=click.FloatRange(min=0.1), default=None,
                 help="How long a lease outlives its holder (default 60, or "
                      "[tool.dynaunique])."),
    click.option("--dask", "dask", metavar="ADDRESS", default=None,
                 help="Run the migration as --total-segments worker tasks on the Dask cluster "
                      "whose scheduler is ADDRESS (pip install -e '/path/to/clone[dask]')."),
]


def worker_options(command: _F) -> _F:
    """Add the worker options to ``command``."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def print_result(out: Console, err: Console, module: str, result: MigrateResult, *,
                 fake: bool, max_seconds: float | None, as_json: bool) -> None:
    """Print how the run ended (unless ``as_json``); exit 75 when there is more to do."""
    if not as_json:
        if result.state == RunState.IDLE:
            out.print(f"Nothing left for this worker: segment(s) {result.waiting} of the current "
                      "phase are leased by running workers, which finish the migration.")
        elif not (result.applied or result.unapplied or result.state == RunState.MORE):
            out.print(f"No migrations to apply for {module}.")
        verb = "Faked" if fake else "Applied"
        for name in result.applied:
            out.print(f"{verb} {name}")
        for name in result.unapplied:
            out.print(f"{'Faked unapplying' if fake else 'Unapplied'} {name}")
    if result.state == RunState.MORE:
        bound = f" after --max-seconds {max_seconds:g}" if max_seconds is not None else ""
        err.print(f"More to do: stopped at a checkpoint{bound}; run the same command again to "
                  f"continue (exit status {EXIT_MORE}).")
        raise SystemExit(EXIT_MORE)
