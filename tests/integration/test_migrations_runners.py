"""The worker command of deploy/kubernetes/migrate-indexed-job.yaml and
deploy/batch/migrate-job-definition.json, run the way those runners run it: a Kubernetes
Indexed Job (one process per index, ``parallelism`` at a time, exit 75 rerun without counting
as a failure, a killed index retried) and an AWS Batch array job (``AWS_BATCH_JOB_ARRAY_INDEX``,
retried on 75 and on a kill). Every run ends with exactly the right locks.

A pod is a process forked from one Python that imported the CLI once (``support.cli_process``):
its own pid, exit status and SIGKILL, without a CPU-second of start-up per pod. A Batch child's
command goes through a real ``sh -c`` (the shell expands the job definition's variables), and the
command the shell would ``exec`` is forked the same way."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from support.cli_process import Forker
from support.deploy_policies import DEPLOY
from support.invariants import assert_clean
from support.migrations_workspace import DYNAUNIQUE, Workspace, workspace_fixture

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

TABLE = "mig_runner_accounts"
JOB = "0001_initial#0#F#0"
MANIFEST = yaml.safe_load((DEPLOY / "kubernetes" / "migrate-indexed-job.yaml").read_text())
BATCH = json.loads((DEPLOY / "batch" / "migrate-job-definition.json").read_text())


ws = workspace_fixture(TABLE)


@pytest.fixture(scope="module")
def pods(dynaunique_endpoint: str) -> Iterator[Forker]:
    """Where the Indexed Job's pods and the Batch children are forked from, once for the file:
    a workspace's process environment (each command gets its own test's)."""
    forker = Forker(Workspace.environment(dynaunique_endpoint))
    yield forker
    forker.close()


def _k8s_command(ws: Workspace, index: int, total: int, *extra: str) -> list[str]:
    """The Indexed Job's container command for ``index``, with the test's module and split
    (Kubernetes expands ``$(SEGMENT)`` from the completion-index annotation)."""
    [container] = MANIFEST["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["dynaunique"]
    args = [str(a) for a in container["args"]]
    args[args.index("myapp.models")] = ws.module
    args[args.index("--total-segments") + 1] = str(total)
    args = [str(index) if a == "$(SEGMENT)" else a for a in args]
    return [*DYNAUNIQUE, *args, *extra]


def _k8s_index(ws: Workspace, pods: Forker, index: int, total: int, *extra: str) -> list[int]:
    """One index of the Indexed Job: a pod, then another while the podFailurePolicy says so
    (75: Ignore, rerun; 1 or 2: FailJob), up to backoffLimitPerIndex failures. Exit codes."""
    spec = MANIFEST["spec"]
    ignore = {c for r in spec["podFailurePolicy"]["rules"] if r["action"] == "Ignore"
              for c in r["onExitCodes"]["values"]}
    fail_job = {c for r in spec["podFailurePolicy"]["rules"] if r["action"] == "FailJob"
                for c in r["onExitCodes"]["values"]}
    codes: list[int] = []
    for _ in range(30):
        code = pods.run(_k8s_command(ws, index, total, *extra), cwd=ws.root,
                        env=ws.process_env(), timeout=120).returncode
        codes.append(code)
        if code == 0 or code in fail_job:
            return codes
        if code not in ignore and len([c for c in codes if c not in ignore]) > \
                spec["backoffLimitPerIndex"]:
            return codes
    raise AssertionError(f"index {index} still running after {codes}")


def test_an_indexed_job_with_parallelism_1_runs_one_index_after_another(
        ws: Workspace, pods: Forker) -> None:
    """The first pod does the whole migration (rerun on 75 as the policy says); the pods of the
    later indexes find nothing to apply. No pod waits for a pod that never comes."""
    # ~1.1 write units a lock since #36's backfill: 30 locks at 15 units a second are ~2 s of
    # writes, a segment (~10 locks) ~0.7 s, so a 0.3 s pod stops after its first segment. (At
    # 60 units a second, CI once finished all three segments inside one 0.3 s pod.)
    models = ws.seed_unique_email(30)
    assert MANIFEST["spec"]["completionMode"] == "Indexed"
    codes = [_k8s_index(ws, pods, i, 3, "--endpoint", ws.endpoint, "--max-seconds", "0.3",
                        "--max-wcu", "15") for i in range(3)]
    assert codes[0][-1] == 0 and 75 in codes[0]  # time-bounded pods, rerun until done
    assert codes[1:] == [[0], [0]]
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    assert_clean([models.Account], ws.endpoint)


def test_an_index_killed_with_sigkill_is_retried_and_takes_its_segment_back(
        ws: Workspace, pods: Forker) -> None:
    models = ws.seed_unique_email(100)  # one page a segment (pages of 100), as with 150
    extra = ("--endpoint", ws.endpoint, "--lease-seconds", "2", "--max-wcu", "30")
    pod = pods.start(_k8s_command(ws, 1, 2, *extra), cwd=ws.root, env=ws.process_env())
    try:
        recorder = ws.project().recorder()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            (progress,) = recorder.progress(JOB, 2, [1])
            if progress.pending and ws.lock_count() >= 10:  # mid-page: locks not yet verified
                break
            time.sleep(0.05)
    finally:
        os.kill(pod.pid, signal.SIGKILL)
        assert pod.wait() == -signal.SIGKILL
    (killed,) = recorder.progress(JOB, 2, [1])
    assert killed.pending and not killed.done
    # The Job controller starts the index again, next to index 0's pod. Whichever of the two
    # finds only the dead pod's segment left waits (the manifest's --wait-seconds) until its
    # lease expires, takes it over and reconciles the unverified locks its intent names.
    with ThreadPoolExecutor(max_workers=2) as pool:
        retried = pool.submit(_k8s_index, ws, pods, 1, 2, *extra)
        other = pool.submit(_k8s_index, ws, pods, 0, 2, *extra)
        assert retried.result()[-1] == 0 and other.result()[-1] == 0
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    assert_clean([models.Account], ws.endpoint)


def _batch_child(ws: Workspace, pods: Forker, index: int, total: int) -> list[int]:
    """One child of the array job: the job definition's command with AWS_BATCH_JOB_ARRAY_INDEX
    set, retried as its retryStrategy says (up to ``attempts``). Each attempt runs the command
    through ``sh -c`` with ``dynaunique`` replaced by ``printf '%s\\0'``: the shell expands the
    definition's variables and prints the arguments ``dynaunique`` would get, which the forker
    then runs as ``dynaunique`` in a process of its own."""
    command = BATCH["containerProperties"]["command"]
    assert command[:2] == ["sh", "-c"] and command[2].startswith("exec dynaunique ")
    script = command[2].replace("exec dynaunique ", "exec printf '%s\\0' ", 1)
    script += f" --endpoint {shlex.quote(ws.endpoint)} --lease-seconds 2"
    env = ws.process_env(AWS_BATCH_JOB_ARRAY_INDEX=str(index), DYNAUNIQUE_MODULE=ws.module,
               DYNAUNIQUE_TOTAL_SEGMENTS=str(total))
    retry = {e["onExitCode"] for e in BATCH["retryStrategy"]["evaluateOnExit"]
             if "onExitCode" in e and e["action"] == "RETRY"}
    codes: list[int] = []
    for _ in range(BATCH["retryStrategy"]["attempts"]):
        expanded = subprocess.run(["sh", "-c", script], cwd=ws.root, env=env,
                                  capture_output=True, check=True, timeout=60).stdout
        args = expanded.decode().split("\0")[:-1]
        assert args[:3] == ["migrate", ws.module, "--segment"] and args[3] == str(index)
        run = pods.run([*DYNAUNIQUE, *args], cwd=ws.root, env=env, timeout=120)
        code = run.returncode
        codes.append(code)
        if code != 0:  # shown with the test's failure, if it fails
            print(f"child {index} exited {code}: {run.stderr[-2000:]}", file=sys.stderr)
        if str(code) not in retry:
            return codes
    return codes


def test_an_array_job_of_8_children_2_at_a_time_finishes(ws: Workspace, pods: Forker) -> None:
    models = ws.seed_unique_email(80)
    with ThreadPoolExecutor(max_workers=2) as pool:  # the compute environment runs two
        codes = list(pool.map(lambda i: _batch_child(ws, pods, i, 8), range(8)))
    assert all(c[-1] == 0 for c in codes), codes
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    assert_clean([models.Account], ws.endpoint)
