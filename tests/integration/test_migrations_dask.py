"""A migration run as tasks on a real Dask cluster (``distributed.LocalCluster``, two worker
processes), one of them killed mid-phase while the application keeps writing: the locks end
exactly right."""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from support.invariants import assert_clean
from support.migrations_workspace import LiveWriters, Workspace, workspace_fixture

from dynaunique.cli import cli
from dynaunique.migrations import DuplicatesFound, MigrationOptions, RunState, run_on_dask

# Found, not imported: every xdist worker collects this file and only one runs it, and importing
# distributed costs about 0.9 CPU-seconds (tests/README.md, "Time"); the fixture imports it.
# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = [pytest.mark.external,
              pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                 reason="distributed (Dask) is not installed")]

TABLE = "mig_dask_accounts"

#: Dask settings for a cluster that is idle most of the time (see the ``client`` fixture).
IDLE_SETTINGS = {
    "distributed.worker.multiprocessing-method": "forkserver",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}


ws = workspace_fixture(TABLE)


@pytest.fixture(scope="module")
def client(dynaunique_endpoint: str) -> Iterator[Any]:
    """A Dask cluster of two worker processes (one thread each), shared by this file's tests.

    The worker processes are forked from a forkserver (``multiprocessing-method``, Dask's own
    setting) that imported ``distributed`` once, rather than spawned as fresh Pythons: each is
    still a process of its own, which the last test kills and the nanny restarts. What the
    cluster does while nothing happens is slowed down: no statistical profiler sampling every
    10 ms, event-loop and system checks each second or more (Dask's own settings; none is
    about what the tests run)."""
    import dask
    import distributed

    with dask.config.set(IDLE_SETTINGS), \
            distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                     dashboard_address=None,
                                     silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as dask_client:
        dask_client.run(importlib.import_module, "dynaunique.migrations")  # warm the workers
        yield dask_client


def test_migrate_dask_runs_the_workers_as_tasks(ws: Workspace, client: Any) -> None:
    models = ws.seed_unique_email(30)
    result = CliRunner().invoke(cli, [
        "migrate", ws.module, "--endpoint", ws.endpoint, "--dask", client.scheduler.address,
        "--total-segments", "3", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["state"], out["applied"]) == ("done", ["0001_initial"])
    assert ws.locks() == ws.expected_locks()
    assert_clean([models.Account], ws.endpoint)
    again = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                     "--dask", client.scheduler.address, "--total-segments", "3"])
    assert again.exit_code == 0, again.output
    assert f"No migrations to apply for {ws.module}." in again.stdout


def test_duplicates_found_by_dask_tasks_are_reported(ws: Workspace, client: Any) -> None:
    ws.put_raw("ACCT#001", email="a@x.io")
    ws.put_raw("ACCT#002", email="A@x.io")
    ws.seed_unique_email(0)
    with pytest.raises(DuplicatesFound) as info:
        run_on_dask(ws.module, client, total_segments=2, endpoint=ws.endpoint,
                    directory=ws.root, timeout=60)
    (duplicate,) = info.value.duplicates
    assert duplicate.value == "a@x.io"
    assert {duplicate.holder["PK"], *(o["PK"] for o in duplicate.others)} == {"ACCT#001",
                                                                               "ACCT#002"}


def test_a_migration_on_dask_survives_a_killed_worker_under_live_writers(
        ws: Workspace, client: Any) -> None:
    records = 160
    models = ws.seed_unique_email(records)
    pids = client.run(os.getpid)  # Dask worker address -> process id
    assert len(set(pids.values())) == 2
    killed: list[int] = []
    mid_phase: list[bool] = []
    reports: list[dict[str, Any]] = []

    def kill_one_worker_mid_phase() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and ws.lock_count() < 10:
            time.sleep(0.1)
        pid = next(iter(pids.values()))
        mid_phase.append(not any(k.startswith("UNIQ#~MIGRATION#") for k in ws.ledger()))
        os.kill(pid, signal.SIGKILL)  # no lease given back, no checkpoint of its current page
        killed.append(pid)

    killer = threading.Thread(target=kill_one_worker_mid_phase)
    with LiveWriters(models.Account, records, threads=1) as writers:
        writers.wait_for(3)
        killer.start()
        # 4 segments at 40 WCU/s per task, 10 records a second (4 units each: a lock put and
        # its record's check, transactional), about 8 s of writes on two Dask workers, so the
        # kill lands mid-phase, in 2-second units of pages of 20 items.
        result = run_on_dask(ws.module, client, total_segments=4, max_seconds=2.0,
                             options=MigrationOptions(lease_seconds=2.0, max_wcu=160,
                                                      page_size=20),
                             endpoint=ws.endpoint, directory=ws.root, timeout=300,
                             on_report=reports.append)
        killer.join()
        during = writers.ops
    assert killed and mid_phase == [True]  # killed before the migration was recorded
    assert during > 3  # the application wrote while the tasks ran
    assert (result.state, result.applied) == (RunState.DONE, ["0001_initial"])
    assert any(r["state"] == "more" for r in reports)  # units were time-bounded and resubmitted
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    assert_clean([models.Account], ws.endpoint)


def test_an_unreachable_scheduler_is_one_line_and_exit_2(ws: Workspace,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """No scheduler listens on port 9: ``migrate --dask`` gives up after its connect timeout
    (shortened here) with one line on stderr and exit 2 — the command could not run, nothing
    was written — not a traceback after distributed's 30 s."""
    from dynaunique.migrations import _dask

    monkeypatch.setattr(_dask, "CONNECT_SECONDS", 1.0, raising=False)
    ws.seed_unique_email(3)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                      "--dask", "tcp://127.0.0.1:9"])
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert time.monotonic() - started < 15
    assert ws.locks() == {}
