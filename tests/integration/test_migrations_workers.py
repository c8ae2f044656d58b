"""Workers of a split backfill against the local server: started one after the other, side by
side, killed and taken over, stopped by their time bound; and what a worker with nothing left
does. Every run ends with exactly the locks the records require."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from support.cli_process import Forker
from support.migration_progress import Counting
from support.migrations_workspace import (
    DYNAUNIQUE,
    LiveWriters,
    Workspace,
    workspace_fixture,
)

from dynaunique.cli import cli
from dynaunique.errors import MigrationError
from dynaunique.migrations import RunState
from dynaunique.migrations._budget import budget_key
from dynaunique.migrations._dynamo import LEDGER_ATTR
from dynaunique.migrations._lease import Lease, SegmentLost
from dynaunique.migrations._ledger import Progress
from dynaunique.migrations.recorder import MigrationRecorder

TABLE = "mig_workers_accounts"
JOB = "0001_initial#0#F#0"


ws = workspace_fixture(TABLE)


@pytest.fixture(scope="module")
def workers(dynaunique_endpoint: str) -> Iterator[Forker]:
    """Where the worker processes are forked from (``support.cli_process``): each its own
    process, pid and exit status, killable with SIGKILL, without a CPU-second of imports."""
    forker = Forker(Workspace.environment(dynaunique_endpoint))
    yield forker
    forker.close()


def _migrate(ws: Workspace, *args: str) -> list[str]:
    return [*DYNAUNIQUE, "migrate", ws.module, "--endpoint", ws.endpoint, *args]


def _cli(ws: Workspace, workers: Forker, *args: str,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``dynaunique migrate`` in its own process (a worker the test can kill or time out)."""
    return workers.run(_migrate(ws, *args), cwd=ws.root, env=ws.process_env(), timeout=timeout)


# --- one after the other, side by side -----------------------------------------------------------


def test_workers_started_one_after_the_other_finish(ws: Workspace, workers: Forker) -> None:
    """The hang of issue 23: worker 0 of 2 alone used to print "waiting for segment(s) [1]"
    and never return. Now it runs segment 1 too and applies the migration; worker 1, started
    after it, finds nothing to apply."""
    ws.seed_unique_email(30)
    first = _cli(ws, workers, "--segment", "0", "--total-segments", "2", timeout=60)
    assert first.returncode == 0, first.stderr
    assert "Applied 0001_initial" in first.stdout
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    second = _cli(ws, workers, "--segment", "1", "--total-segments", "2", timeout=60)
    assert second.returncode == 0, second.stderr
    assert f"No migrations to apply for {ws.module}." in second.stdout


def test_workers_side_by_side_split_the_backfill(ws: Workspace) -> None:
    ws.seed_unique_email(40)
    errors: list[BaseException] = []
    reporters = [Counting(), Counting()]

    def worker(index: int) -> None:
        try:
            ws.project().executor(worker=(index, 2), page_size=5, poll_seconds=0.05,
                                  wait_seconds=30,
                                  progress_callback=reporters[index]).migrate()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert ws.locks() == ws.expected_locks()
    assert sum(r.records for r in reporters) == 40  # each record processed once
    assert ws.ledger() == ws.applied_only()


def test_a_worker_uses_the_recorded_split(ws: Workspace) -> None:
    ws.seed_unique_email(10)
    recorder = ws.project().recorder()
    recorder.start_job(JOB, 2, "fill Account.EMAIL")
    with pytest.raises(MigrationError, match="started split in 2 segments"):
        ws.project().executor(worker=(1, 3)).migrate()
    result = ws.project().executor(worker=(1, 2)).migrate()
    assert result.applied == ["0001_initial"]
    assert ws.locks() == ws.expected_locks()


# --- nothing left --------------------------------------------------------------------------------


def test_a_worker_with_nothing_left_exits_at_once_or_waits_up_to_its_bound(
        ws: Workspace) -> None:
    ws.seed_unique_email(20)
    recorder = ws.project().recorder()
    recorder.start_job(JOB, 2, "fill Account.EMAIL")
    other = recorder.acquire(seconds=30, worker=(1, 2))  # a live worker: it renews its lease
    try:
        assert other.take(JOB, 2, 1) is not None  # ... and is running segment 1
        started = time.monotonic()
        result = ws.project().executor(worker=(0, 2)).migrate()
        assert time.monotonic() - started < 10
        assert (result.state, result.waiting, result.applied) == (RunState.IDLE, [1], [])
        done, open_ = recorder.progress(JOB, 2)
        assert done.done and not open_.stored  # it ran its own segment, not the leased one

        started = time.monotonic()
        result = ws.project().executor(worker=(0, 2), wait_seconds=1.0,
                                       poll_seconds=0.1).migrate()
        assert result.state == RunState.IDLE
        assert time.monotonic() - started >= 1.0

        idle = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                        "--segment", "0", "--total-segments", "2", "--json"])
        assert idle.exit_code == 0, idle.output
        assert json.loads(idle.stdout)["state"] == "idle"
        assert json.loads(idle.stdout)["waiting"] == [1]
    finally:
        other.release()
    # The lease is given back: the next worker takes segment 1 and finishes.
    plain = CliRunner().invoke(cli, ["migrate", ws.module, "--endpoint", ws.endpoint,
                                     "--segment", "0", "--total-segments", "2"])
    assert plain.exit_code == 0, plain.output
    assert "Applied 0001_initial" in plain.stdout
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()


def test_a_waiting_worker_takes_the_segment_a_worker_gives_back(ws: Workspace) -> None:
    ws.seed_unique_email(20)
    recorder = ws.project().recorder()
    recorder.start_job(JOB, 2, "fill Account.EMAIL")
    other = recorder.acquire(seconds=30, worker=(1, 2))
    ident = other.take(JOB, 2, 1)
    assert ident is not None
    timer = threading.Timer(0.5, other.release)  # that worker stops (say, its time bound)
    timer.start()
    try:
        result = ws.project().executor(worker=(0, 2), wait_seconds=30,
                                       poll_seconds=0.05).migrate()
    finally:
        timer.join()
    assert (result.state, result.applied) == (RunState.DONE, ["0001_initial"])
    assert ws.locks() == ws.expected_locks()


# --- killed, taken over --------------------------------------------------------------------------


def _mid_segment(ws: Workspace, workers: Forker, total: int, *options: str) -> tuple[Any, Any]:
    """A worker process on segment 0 of ``total`` (with ``options``), once a page of its
    segment is checkpointed: (the ledger's recorder, the process)."""
    recorder = ws.project().recorder()
    process = workers.start(_migrate(ws, "--segment", "0", "--total-segments", str(total),
                                     *options), cwd=ws.root, env=ws.process_env())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        (seen,) = recorder.progress(JOB, total, [0])
        if seen.last_key is not None:
            return recorder, process
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    pytest.fail("the worker never started its segment")


def test_a_killed_worker_s_segment_is_taken_over_after_its_lease_expires(
        ws: Workspace, workers: Forker) -> None:
    """kill -9 of a worker mid-segment: its lease is neither renewed nor given back. Another
    worker runs its own segment, waits, takes the dead one's segment once its lease expired and
    resumes it from the checkpoint; the ledger is clean afterwards."""
    models = ws.seed_unique_email(240)
    # A slow worker (80 write units a second: 20 records, a guarded lock put costing 4) on
    # segment 0 of 2, with a 2-second lease.
    recorder, victim = _mid_segment(ws, workers, 2, "--lease-seconds", "2", "--max-wcu", "80")
    os.kill(victim.pid, signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL
    (dead,) = recorder.progress(JOB, 2, [0])
    assert not dead.done and dead.counters.records > 0  # killed mid-segment, past a checkpoint
    assert f"UNIQ#~LEASE#{ws.module}#{JOB}#2#0" in ws.ledger()  # its lease was left behind
    with LiveWriters(models.Account, 240) as writers:
        writers.wait_for(3)
        result = ws.project().executor(worker=(1, 2), lease_seconds=2, wait_seconds=30,
                                       poll_seconds=0.1, page_size=50).migrate()
    assert (result.state, result.applied) == (RunState.DONE, ["0001_initial"])
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()  # the dead worker's lease item is cleared too


def test_a_checkpoint_of_a_worker_whose_segment_was_taken_over_is_refused(
        ws: Workspace) -> None:
    """The fence: a worker that stalled past its lease cannot overwrite the checkpoint of the
    worker that took its segment over (it would drop that worker's intents)."""
    ws.seed_unique_email(1)
    recorder = ws.project().recorder()
    recorder.save_progress(Progress(JOB, 2, 0), holder="stalled")
    (stalled,) = recorder.progress(JOB, 2, [0])
    (taker,) = recorder.progress(JOB, 2, [0])
    taker.last_key = {"PK": {"S": "ACCT#000"}, "SK": {"S": "PROFILE"}}
    recorder.save_progress(taker, holder="taker")
    recorder.save_progress(taker, holder="taker")  # its own later checkpoints land
    with pytest.raises(SegmentLost, match="taken over by another runner"):
        recorder.save_progress(stalled, holder="stalled2")
    (stored,) = recorder.progress(JOB, 2, [0])
    assert (stored.holder, stored.last_key) == ("taker", taker.last_key)


@pytest.mark.external  # a worker process stopped and woken, a takeover: about 10 s
def test_a_worker_stopped_past_its_lease_leaves_nothing_after_a_takeover(
        ws: Workspace, workers: Forker) -> None:
    """SIGSTOP of a worker mid-segment, past its lease: another worker takes the segment over,
    finishes and records the migration (clearing its ledger). Woken, the stalled worker's
    checkpoint must not land on the item that is gone (the fence used to accept an absent
    item): no ``UNIQ#~PROGRESS#`` debris."""
    ws.seed_unique_email(240)
    _, stalled = _mid_segment(ws, workers, 1, "--lease-seconds", "1", "--max-wcu", "1000")
    try:
        stalled.send_signal(signal.SIGSTOP)
        result = ws.project().executor(worker=(0, 1), lease_seconds=1, wait_seconds=30,
                                       poll_seconds=0.1).migrate()
        assert (result.state, result.applied) == (RunState.DONE, ["0001_initial"])
        assert ws.ledger() == ws.applied_only()
    finally:
        stalled.send_signal(signal.SIGCONT)
    woken = stalled.result(timeout=60)
    assert ws.ledger() == ws.applied_only(), woken.stdout + woken.stderr
    assert ws.locks() == ws.expected_locks()
    # Its checkpoint refused, it gives the segment up and ends as any worker whose migration
    # another worker completed while it ran: the migration is applied, exit 0.
    assert (woken.returncode, woken.stdout.splitlines()[-1]) == (0, "Applied 0001_initial")


def test_a_worker_stalled_before_its_first_checkpoint_leaves_nothing_after_a_takeover(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, but the worker stalls before its segment's first checkpoint (the item never
    stored, so the fence lets it start absent): the takeover finishes and clears the ledger
    meanwhile, the late checkpoint lands, and the worker — once it finds the migration
    recorded — clears what it wrote by the split it knows (the job's header is gone)."""
    ws.seed_unique_email(30)
    save, renew = MigrationRecorder.save_progress, Lease.renew
    stalled: set[str] = set()

    def stalling_renew(lease: Lease) -> None:
        if lease.holder not in stalled:
            renew(lease)

    def stalling_save(recorder: Any, progress: Progress, **kwargs: Any) -> None:
        holder = kwargs.get("holder")
        if not stalled and not progress.stored and holder is not None:
            stalled.add(holder)  # stalled here: its leases lapse, another worker takes over
            time.sleep(0.6)
            taker = ws.project().executor(worker=(0, 1), lease_seconds=0.3, wait_seconds=10,
                                          poll_seconds=0.05).migrate()
            assert (taker.state, ws.ledger()) == (RunState.DONE, ws.applied_only())
            stalled.discard(holder)  # woken: its renewals find its leases gone
        save(recorder, progress, **kwargs)

    monkeypatch.setattr(MigrationRecorder, "save_progress", stalling_save)
    monkeypatch.setattr(Lease, "renew", stalling_renew)
    woken = ws.project().executor(worker=(0, 1), lease_seconds=0.3, page_size=10).migrate()
    assert woken.state == RunState.DONE
    assert ws.ledger() == ws.applied_only()
    assert ws.locks() == ws.expected_locks()


# --- the time bound ------------------------------------------------------------------------------


def test_max_seconds_stops_at_a_checkpoint_and_reruns_finish_under_live_writers(
        ws: Workspace) -> None:
    models = ws.seed_unique_email(60)  # 3 pages a segment
    states = []
    with LiveWriters(models.Account, 60) as writers:
        writers.wait_for(3)
        for _ in range(40):
            result = ws.project().executor(segments=2, page_size=10, max_wcu=60).migrate(
                max_seconds=0.3)
            states.append(result.state)
            if result.state == RunState.DONE:
                break
            progress = ws.project().recorder().progress(JOB, 2)
            assert not all(p.done for p in progress)
            assert any(p.last_key is not None for p in progress)  # checkpointed mid-scan
    assert states[0] == RunState.MORE and states[-1] == RunState.DONE
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()


@pytest.mark.parametrize("worker", [["--segment", "0", "--total-segments", "1"], []],
                         ids=["worker", "single"])
def test_max_seconds_exits_75_and_a_worker_rerun_finishes(ws: Workspace,
                                                          worker: list[str]) -> None:
    ws.seed_unique_email(150)  # two pages of 100
    args = ["migrate", ws.module, "--endpoint", ws.endpoint, *worker]
    stopped = CliRunner().invoke(cli, [*args, "--max-wcu", "100", "--max-seconds", "0.2",
                                       "--json"])
    assert stopped.exit_code == 75, stopped.output
    assert "More to do: stopped at a checkpoint after --max-seconds 0.2" in stopped.stderr
    (progress,) = ws.project().recorder().progress(JOB, 1)
    assert progress.last_key is not None and not progress.done
    # --json reports what the stopped phase has done so far (the locks it wrote), not {}.
    report = json.loads(stopped.stdout)
    assert report["state"] == "more"
    ((label, so_far),) = report["totals"].items()
    assert label.startswith("0001_initial: ")
    assert so_far["written"] == ws.lock_count() > 0
    assert so_far["records"] == so_far["scanned"] == progress.counters.scanned
    finished = CliRunner().invoke(cli, [*args, "--json"])
    assert finished.exit_code == 0, finished.output
    done = json.loads(finished.stdout)
    assert done["state"] == "done"
    assert done["totals"][label]["written"] == 150
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()


def test_a_shared_budget_dated_in_the_future_holds_no_worker_past_max_seconds(
        ws: Workspace) -> None:
    """A worker whose clock ran an hour ahead left the shared --max-wcu bucket empty and dated
    an hour on: a later worker used to wait for its own clock to pass it, with no deadline.
    An ``at`` more than the tolerated skew ahead counts as that much ahead, so the worker
    waits about a second for the refill and the run ends at its --max-seconds (or done)."""
    ws.seed_unique_email(30)
    recorder = ws.project().recorder()
    ws.client.put_item(TableName=TABLE, Item={
        **budget_key(recorder.keys, recorder.app, "WCU"), LEDGER_ATTR: {"M": {
            "kind": {"S": "budget"}, "name": {"S": "WCU"}, "rate": {"N": "100"},
            "tokens": {"N": "0"}, "at": {"N": repr(time.time() + 3600)},
            "version": {"N": "7"}}}})
    ended: list[Any] = []
    args = ["migrate", ws.module, "--endpoint", ws.endpoint, "--segment", "0",
            "--total-segments", "1", "--max-wcu", "100", "--max-seconds", "1"]
    started = time.monotonic()
    run = threading.Thread(target=lambda: ended.append(CliRunner().invoke(cli, args)),
                           daemon=True)
    run.start()
    run.join(timeout=30)
    assert ended, "the worker still waits on the budget 30 s later"
    assert ended[0].exit_code in (0, 75), ended[0].output
    assert time.monotonic() - started < 15
    assert ws.lock_count() > 0  # it got units after about a second, not an hour


def test_a_worker_joining_as_the_last_one_leaves_gets_in(ws: Workspace) -> None:
    """The last worker to leave deletes the workers' lease. A worker joining at that moment —
    its create refused (the lease was there), the lease gone before it added itself — used to be
    refused as "another `dynaunique migrate` is running" (seen with Dask tasks coming and
    going); it now creates the lease anew."""
    ws.seed_unique_email(1)
    recorder = ws.project().recorder()
    first = recorder.acquire(seconds=30, worker=(0, 2))
    client = recorder.connection.client

    def leave(**_: Any) -> None:  # between the joiner's put and its update
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", leave)
        first.release()

    client.meta.events.register("before-call.dynamodb.UpdateItem", leave)
    try:
        second = recorder.acquire(seconds=30, worker=(1, 2))
    finally:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", leave)
    try:
        assert second.take(JOB, 2, 0) is not None
    finally:
        second.release()
    assert ws.ledger() == set()


def test_a_run_whose_bound_is_over_before_it_starts_still_makes_progress(
        ws: Workspace) -> None:
    """A bound shorter than the run's start-up (a busy machine, a Lambda with little time
    left) still gets one page done, so reruns on exit 75 always converge."""
    ws.seed_unique_email(30)
    states, checkpoints = [], [None]
    for _ in range(20):
        result = ws.project().executor(worker=(0, 1), page_size=10).migrate(max_seconds=1e-9)
        states.append(result.state)
        if result.state == RunState.DONE:
            break
        (progress,) = ws.project().recorder().progress(JOB, 1)
        assert progress.last_key not in checkpoints  # one page further each run
        checkpoints.append(progress.last_key)
    assert states[0] == RunState.MORE and states[-1] == RunState.DONE
    assert ws.locks() == ws.expected_locks()
