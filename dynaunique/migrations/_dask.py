"""Run a migration's assignments as tasks on an existing Dask cluster (``distributed``, the
optional ``dask`` extra): :func:`run_on_dask`.

The driver submits one task per segment; each task is a worker's time-bounded run
(:func:`._assignments.run_assignment`) that takes any open segment of the current phase under
its lease.
A task that stopped at its time bound (``more``) is submitted again; one that found nothing left
(``idle``) is dropped while other tasks run, and submitted again when it is the last one. A task
whose Dask worker died is rerun by the scheduler; the dead worker's segment lease expires and
another task takes it over. The driver returns when a task reports the migration done (or
raises, on duplicates), once none of its tasks runs any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dynaunique.errors import ConfigurationError, MigrationError, UnreachableError
from dynaunique.migrations._assignments import Assignment, run_assignment, state_of
from dynaunique.migrations._kinds import RunState
from dynaunique.migrations._report import MigrateResult
from dynaunique.migrations.options import MigrationOptions, legacy_options
from dynaunique.migrations.project import load_settings, options_from

#: How long to try to connect to the scheduler before giving up (distributed's default: 30 s).
CONNECT_SECONDS = 10.0


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigurationError("running a migration on Dask needs the `distributed` package: "
                                 "pip install -e '/path/to/clone[dask]'") from None
    return distributed


def _connect(distributed: Any, address: Any) -> Any:
    try:
        return distributed.Client(address, timeout=CONNECT_SECONDS)
    except (OSError, asyncio.TimeoutError) as exc:  # refused, timed out, a bad address
        raise UnreachableError(f"cannot reach the Dask scheduler at {address}: {exc}; nothing "
                               "ran (check --dask's address and that the scheduler "
                               "runs)") from exc
    except ValueError as exc:  # an unknown scheme
        raise ConfigurationError(f"not a Dask scheduler address: {address!r} ({exc})") from exc


def run_on_dask(module: str, scheduler: Any, *, total_segments: int, target: str | None = None,
                max_seconds: float = 300.0, options: MigrationOptions | None = None,
                endpoint: str | None = None, migrations_dir: str | os.PathLike[str] | None = None,
                directory: str | os.PathLike[str] | None = None, timeout: float | None = None,
                on_report: Callable[[dict[str, Any]], None] | None = None,
                **legacy: Any) -> MigrateResult:
    """Apply ``module``'s migrations up to ``target`` with assignments run as tasks on the Dask
    cluster at ``scheduler`` (an address such as ``tcp://10.0.0.5:8786``, or a
    ``distributed.Client``).

    Each phase is split in ``total_segments`` segments and that many tasks are submitted; each
    runs for up to ``max_seconds`` (then it is submitted again). ``options`` (a
    :class:`~dynaunique.migrations.MigrationOptions`; default: ``directory``'s
    ``[tool.dynaunique]`` settings) is how each task runs: ``max_wcu`` and ``max_rcu`` cap the
    units of all tasks together, ``concurrency`` is each task's lock writes in flight, a task
    stops at a page boundary (``page_size`` items scanned). A task with nothing left waits up to
    ``wait_seconds`` (when 0: 1.5 times ``lease_seconds``) for a segment to come free — a dead
    task's, once its lease expired. The cluster's workers must be able to import ``module``
    (``directory`` is put first on their ``sys.path``; default: the current directory) and
    reach the endpoint. ``on_report`` receives each task's report (see
    :func:`~dynaunique.migrations._assignments.run_assignment`). The knobs this function took as
    keyword arguments before ``options`` (``lease_seconds=``, ``max_wcu=``, ...) and
    ``unit_seconds=`` (now ``max_seconds=``, as ``migrate --max-seconds``) still work, with a
    :class:`DeprecationWarning`.

    :raises DuplicatesFound: a backfill found records sharing a value.
    :raises MigrationError: a task failed, or ``timeout`` seconds passed.
    :raises UnreachableError: no scheduler answered at ``scheduler`` within
        :data:`CONNECT_SECONDS` (nothing ran).
    """
    unit_seconds = legacy.pop("unit_seconds", None)
    if unit_seconds is not None:
        warnings.warn("run_on_dask(..., unit_seconds=...) is deprecated: pass max_seconds= "
                      "(each task's time bound, as migrate --max-seconds)",
                      DeprecationWarning, stacklevel=2)
        max_seconds = unit_seconds
    folder = os.fspath(directory or os.getcwd())
    if options is None:
        options = options_from(load_settings(module, Path(folder)))
    options = legacy_options(options, {k: v for k, v in legacy.items() if v is not None},
                             "run_on_dask")
    distributed = _distributed()
    if not 1 <= total_segments <= 1000:
        raise MigrationError("total_segments must be between 1 and 1000")
    client = scheduler if isinstance(scheduler, distributed.Client) else \
        _connect(distributed, scheduler)
    if options.wait_seconds <= 0:
        options = options.replace(
            wait_seconds=min(options.lease_seconds * 1.5, max_seconds))
    assignment = Assignment(module, total_segments, options.replace(poll_seconds=0.5),
                            to_migration=target,
                            migrations_dir=os.fspath(migrations_dir) if migrations_dir else None,
                            endpoint=endpoint, directory=folder, max_seconds=max_seconds)
    counter = itertools.count()
    segments: dict[str, int] = {}

    def submit(segment: int) -> Any:
        key = f"dynaunique-migrate-{segment}-{next(counter)}"
        segments[key] = segment
        return client.submit(run_assignment, assignment, segment, pure=False, key=key)

    started = time.monotonic()
    result = MigrateResult(state=RunState.MORE)
    tasks = distributed.as_completed([submit(i) for i in range(total_segments)])
    try:
        for future in tasks:
            if timeout is not None and time.monotonic() - started > timeout:
                raise MigrationError(f"the migration did not finish on Dask within {timeout} s; "
                                     "its progress is in the ledger: run it again to resume")
            try:
                report = future.result()
            except distributed.KilledWorker:  # the scheduler gave up on the task: run it anew
                report = {"state": str(RunState.MORE), "segment": segments[future.key],
                          "applied": [], "unapplied": [], "waiting": []}
            if on_report is not None:
                on_report(report)
            state = state_of(report)  # raises DuplicatesFound
            _merge(result, report)
            if state == RunState.DONE:
                result.state = RunState.DONE
            elif result.state != RunState.DONE and (state == RunState.MORE
                                                    or tasks.count() == 0):
                # More to do; or nothing left for this task while no other task runs (the
                # segments it waited for are a dead worker's, whose leases expire).
                tasks.add(submit(report["segment"]))
    finally:
        # A running task cannot be cancelled: let the others end their assignments (each ends within
        # max_seconds and a page), so that no task of this run still writes once it returned.
        left = list(tasks.futures)
        if left:
            with contextlib.suppress(Exception):
                distributed.wait(left, timeout=max_seconds + 60)
            for future in left:
                future.cancel()
        if client is not scheduler:
            client.close()
    return result


def _merge(result: MigrateResult, report: dict[str, Any]) -> None:
    for name in report["applied"]:
        if name not in result.applied:
            result.applied.append(name)
    for name in report["unapplied"]:
        if name not in result.unapplied:
            result.unapplied.append(name)
