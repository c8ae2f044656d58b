"""The Lambda handler driven by the state machine's own definition
(deploy/stepfunctions/migrate.asl.json, run by ``support.asl``): a status call, then a Map over
the segments whose items invoke the handler until it stops answering "more" (a Wait between
tries), again until the status says done — with time-bounded invocations, one of which dies and
is retried by the definition's Retry."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.asl import Machine
from support.deploy_policies import DEPLOY
from support.invariants import assert_clean
from support.migration_progress import InjectedCrash, crash_after_records
from support.migrations_workspace import UNIQUE_EMAIL, Workspace, open_workspace

from dynaunique.errors import ConfigurationError
from dynaunique.migrations import DuplicatesFound, aws_lambda
from dynaunique.migrations._assignments import Assignment, run_assignment
from dynaunique.migrations._lease import Lease
from dynaunique.migrations.aws_lambda import handler

TABLE = "mig_lambda_accounts"
SEGMENTS = 3
ASL = DEPLOY / "stepfunctions" / "migrate.asl.json"


@pytest.fixture
def ws(dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    workspace = open_workspace(tmp_path, dynaunique_db, TABLE, monkeypatch)
    # MAX_WCU 20: a segment's 20 records take more than one 1-second invocation, so the
    # invocations are really bounded (at 60 they fit in one since the backfill's lock put costs
    # one write unit again, #36).
    for name, value in {"MODULE": workspace.module, "TOTAL_SEGMENTS": str(SEGMENTS),
                        "LEASE_SECONDS": "1", "MAX_WCU": "20", "PAGE_SIZE": "5",
                        "MARGIN_SECONDS": "0.2"}.items():
        monkeypatch.setenv(f"DYNAUNIQUE_{name}", value)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynaunique_db)
    yield workspace


class Context:
    """Lambda's context: the invocation ends ``seconds`` after it started."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(max(0.0, self.ends - time.monotonic()) * 1000)


class Function:
    """The Lambda function, as the state machine invokes it: each invocation has ``seconds``
    to run; the first invocation for segment 0 dies mid-assignment, as Lambda stops one at its
    timeout — it neither checkpoints its page nor gives its lease back, and stops renewing it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, seconds: float = 1.0) -> None:
        self.seconds = seconds
        self.answers: list[tuple[int, str]] = []
        self.died = False
        self._dying = threading.local()
        release, drop = Lease.release, Lease.drop
        # The dying invocation's executor crashes at its 8th record, mid-page.
        crash = crash_after_records(8, when=lambda: getattr(self._dying, "on", False))

        def dying_run_assignment(assignment: Assignment, segment: int) -> dict[str, Any]:
            return run_assignment(assignment, segment, progress_callback=crash)

        def dying_release(lease: Lease) -> None:
            if getattr(self._dying, "on", False):
                lease._stop.set()
            else:
                release(lease)

        def dying_drop(lease: Lease, ident: str) -> None:
            if not getattr(self._dying, "on", False):
                drop(lease, ident)

        monkeypatch.setattr(aws_lambda, "run_assignment", dying_run_assignment)
        monkeypatch.setattr(Lease, "release", dying_release)
        monkeypatch.setattr(Lease, "drop", dying_drop)

    def __call__(self, payload: dict[str, Any]) -> Any:
        if payload.get("segment") == 0 and not self.died:
            self.died = True
            self._dying.on = True
            try:
                return handler(payload, Context(30))
            finally:
                self._dying.on = False
        answer = handler(payload, Context(self.seconds))
        if "segment" in payload:
            self.answers.append((payload["segment"], answer["status"]))
        return answer


def _machine(function: Any, max_concurrency: int = 0) -> Machine:
    definition = json.loads(ASL.read_text())
    definition["States"]["Segments"]["MaxConcurrency"] = max_concurrency
    # A function that dies is the error Step Functions reports for a Lambda timeout.
    return Machine(definition, function, scale=0.04, error_of=lambda exc: (
        "Sandbox.Timedout" if isinstance(exc, InjectedCrash) else type(exc).__name__))


def test_the_state_machine_completes_the_migration_with_bounded_and_retried_invocations(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    models = ws.seed_unique_email(60)
    function = Function(monkeypatch)
    machine = _machine(function)
    machine.run({})
    assert function.died
    per_segment = {s: [a for seg, a in function.answers if seg == s] for s in range(SEGMENTS)}
    # The retry of the dead invocation found its segment still leased, then took it over.
    assert per_segment[0][0] == "more"
    assert all(answers[-1] in ("phase done", "done") for answers in per_segment.values())
    assert sum(a.count("more") for a in per_segment.values()) >= SEGMENTS  # really bounded
    assert machine.transitions.count("Status") >= 2  # the map ran, then the status said done
    assert ws.locks() == ws.expected_locks()
    assert ws.ledger() == ws.applied_only()
    assert_clean([models.Account], ws.endpoint)
    assert handler({"action": "status"}, Context(60)) == {"done": True,
                                                          "segments": list(range(SEGMENTS))}


def test_a_migration_of_two_phases_runs_phase_after_phase(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """An alteration is a sweep, then a fill: the map runs the segments of each in turn.

    The items run one at a time (``MaxConcurrency`` 1) and each has the time to settle its
    segment: the sweep's last item goes on to its segment of the fill, and the map ends with two
    fill segments open, so a second map runs them. (With concurrent items that all finish the
    sweep together, each goes on to its fill segment and one map does both phases — correct, and
    seen in a fresh clone's CI run, so this test does not count on timing.)"""
    for i in range(20):
        ws.put_raw(f"ACCT#{i:03d}", email=f"User{i}@x.io")
    ws.deploy(email=", unique=True")
    ws.project().make_migrations()
    ws.project().executor().migrate()
    models = ws.deploy(email=UNIQUE_EMAIL)
    assert ws.project().make_migrations().name == "0002_alter_account_email"
    function = Function(monkeypatch, seconds=10.0)
    function.died = True  # no invocation dies here
    machine = _machine(function, max_concurrency=1)
    machine.run({})
    assert function.answers == [(0, "phase done"), (1, "phase done"), (2, "phase done"),
                                (0, "phase done"), (1, "done"), (2, "done")]
    assert machine.transitions.count("Segments") == 2  # a map for the sweep, one for the fill
    assert ws.locks() == ws.expected_locks()
    assert_clean([models.Account], ws.endpoint)


def test_duplicates_fail_the_execution_with_the_report(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.put_raw("ACCT#001", email="a@x.io")
    ws.put_raw("ACCT#002", email="A@x.io")
    ws.seed_unique_email(0)
    monkeypatch.setenv("DYNAUNIQUE_LEASE_SECONDS", "30")
    function = Function(monkeypatch, seconds=10.0)
    function.died = True
    with pytest.raises(DuplicatesFound) as info:
        _machine(function).run({})
    (duplicate,) = info.value.duplicates
    assert duplicate.value == "a@x.io"


#: Malformed events, each with the field its refusal must name.
BAD_EVENTS: list[tuple[dict[str, Any], str]] = [
    ({}, "segment"), ({"action": "stauts"}, "action"), ({"segment": None}, "segment"),
    ({"segment": "abc"}, "segment"), ({"segment": 1.7}, "segment"),
    ({"segment": True}, "segment"), ({"segment": -1}, "segment"),
    ({"segment": SEGMENTS}, "segment"), ({"segment": 1, "total_segments": "x"}, "total_segments"),
    ({"action": "status", "total_segments": 2.5}, "total_segments"),
    ({"segment": 1, "page_size": 0}, "page_size"), ({"segment": 1, "max_wcu": "lots"}, "max_wcu"),
]


def test_a_bad_event_is_refused_naming_the_field_and_nothing_runs(ws: Workspace) -> None:
    """A malformed event is a ConfigurationError that names its field, before any migration
    work: no KeyError, TypeError or ValueError, and a fraction or a bool never runs a segment."""
    ws.seed_unique_email(6)
    for event, field in BAD_EVENTS:
        with pytest.raises(ConfigurationError, match=field):
            handler(event, Context(30))
    assert ws.locks() == {}
    assert ws.ledger() == set()


def test_the_events_target_is_still_the_migration_to_migrate_to(
        ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wire keeps ``target`` (deployed state machines send it; ``DYNAUNIQUE_TARGET`` in the
    environment), which the handler hands on as ``Assignment.to_migration`` (issue 39's
    glossary): ``zero`` with nothing applied is done, the latest is not, and the event's word
    wins over the environment's."""
    from dynaunique.migrations import aws_lambda

    ws.seed_unique_email(3)
    assert aws_lambda._assignment({"target": "zero"}, None).to_migration == "zero"
    assert aws_lambda._assignment({}, None).to_migration is None
    assert handler({"action": "status"}, Context(30))["done"] is False
    assert handler({"action": "status", "target": "zero"}, Context(30))["done"] is True
    monkeypatch.setenv("DYNAUNIQUE_TARGET", "zero")
    assert handler({"action": "status"}, Context(30))["done"] is True
    assert aws_lambda._assignment({"target": "0001"}, None).to_migration == "0001"
    assert ws.ledger() == set()
