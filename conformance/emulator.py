"""Run the public DynamoDB conformance suite (nubo-db/dynamodb-conformance) against the local
server, score it by tier, and list every failure not recorded as known.

    python -m conformance.emulator [--tarball PATH] [--allowed PATH] [--work DIR] [--json PATH]
                                   [--fresh] [--record]

The suite is 601 vitest tests that drive the AWS SDK for JavaScript against an endpoint, with
answers recorded against real DynamoDB, in three tiers (1 core, 2 complete, 3 strict: exact
messages, validation order, limits). Steps: extract the tarball into a work folder; install its
npm dependencies (``npm ci``, or when the registry lacks the lock's
``@aws-sdk/client-dynamodb-streams@3.1012.0``, ``npm install`` of 3.1013.0 beside the other
pinned versions); start the local server (:class:`dynaunique.testing.LocalDynamoDB`, the one the
pytest plugin and the demo use); run vitest with its JSON reporter; print the score by tier, on
the whole suite and on the operations this library, its audit, migrations and stream guard send.

A failing test must be listed in ``conformance/emulator_allowed.txt`` (``<test id> -- <reason>``
per line, the id ``<file under tests/>::<full name>``). The exit status is 0 when every failure
is listed, 1 when one is not (or a test of the suite did not run), 2 when the runner could not
run (no tarball, no node/npm, vitest wrote no report). Listed tests that now pass are named, so
the list shrinks; ``--record`` rewrites the list with today's failures (keeping known reasons).

The tarball is not part of the repository (the suite is MIT-licensed, not ours): by default it is
``../shared/emulator-conformance/dynamodb-conformance-0ba4393.tar.gz`` beside the repository;
``--tarball`` or ``DYNAUNIQUE_EMULATOR_CONFORMANCE_TARBALL`` names another. The work folder
(default ``$XDG_CACHE_HOME/dynaunique/<tarball name>``) keeps ``node_modules`` between runs;
``--fresh`` installs again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

if __package__ in (None, ""):  # run as a script: python conformance/emulator.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.run import RunnerError, parse_allowed
from dynaunique.testing import LocalDynamoDB

REPOSITORY = Path(__file__).resolve().parent.parent
TARBALL_NAME = "dynamodb-conformance-0ba4393.tar.gz"
DEFAULT_TARBALL = REPOSITORY.parent / "shared" / "emulator-conformance" / TARBALL_NAME
DEFAULT_ALLOWED = Path(__file__).resolve().parent / "emulator_allowed.txt"
TARBALL_ENV = "DYNAUNIQUE_EMULATOR_CONFORMANCE_TARBALL"
SUITE_FOLDER = "dynamodb-conformance"
#: The lock pins a release the registry lacks; the README's workaround installs the next one.
STREAMS_WORKAROUND = "@aws-sdk/client-dynamodb-streams@3.1013.0"
#: How many tests the suite at 0ba4393 holds: fewer in a report means some did not run.
SUITE_TESTS = 601

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"

#: Folders (under ``tests/``) of operations this library never sends: ListTables, DeleteTable,
#: UpdateTable, PartiQL, tags, TTL and the legacy (pre-expression) parameters. Every other file
#: exercises PutItem, UpdateItem, DeleteItem, GetItem, BatchGetItem, BatchWriteItem,
#: TransactWriteItems, TransactGetItems, Query, Scan, CreateTable, DescribeTable or streams.
NOT_THE_LIBRARYS = ("tier1/listTables/", "tier1/deleteTable/", "tier1/updateTable/",
                    "tier2/partiql/", "tier2/tags/", "tier2/ttl/", "tier2/updateTable/",
                    "tier3/legacy-api/")
#: Folders that check exact error messages and validation order rather than behaviour.
WORDING = ("tier3/error-messages/", "tier3/validation-ordering/")
TIERS = ("tier1", "tier2", "tier3")
#: The score table's rows, in order.
ROWS = ("total", *TIERS, "library's operations", "their behaviour tests")


@attrs.frozen
class Outcome:
    """One test's result (``passed``/``failed``/``skipped``) and the first line of why."""

    status: str
    message: str = ""


@attrs.frozen
class Comparison:
    """A run against the allowed list."""

    unlisted: list[str]     # failing, not listed: a regression
    fixed: list[str]        # listed, and passing now: to remove from the list
    absent: list[str]       # listed, and not in the run at all


# --- pure parts ---------------------------------------------------------------------------------


def case_id(file: str, full_name: str) -> str:
    """A test's id: its file relative to the suite's ``tests/`` folder, ``::``, its full name."""
    _, sep, relative = file.replace("\\", "/").rpartition("tests/")
    return f"{relative if sep else file}::{full_name}"


def parse_report(report: Mapping[str, Any]) -> dict[str, Outcome]:
    """Each test's outcome from vitest's JSON report.

    A file that failed to load (no test of it ran) is one failing test ``<file>::<load>``.
    """
    outcomes: dict[str, Outcome] = {}
    for result in report.get("testResults", []):
        name = str(result.get("name", ""))
        assertions = result.get("assertionResults") or []
        if not assertions and result.get("status") == FAILED:
            outcomes[case_id(name, "<load>")] = Outcome(FAILED, _first_line(result.get("message")))
        for assertion in assertions:
            status = assertion.get("status")
            status = status if status in (PASSED, FAILED) else SKIPPED
            messages = assertion.get("failureMessages") or []
            outcomes[case_id(name, str(assertion.get("fullName", "")))] = Outcome(
                status, _first_line(messages[0]) if messages else "")
    return outcomes


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0][:200] if lines else ""


def groups(tid: str) -> list[str]:
    """The score rows a test counts in (``total`` always; its tier; the library's subsets)."""
    path = tid.split("::", 1)[0]
    found = ["total", *(tier for tier in TIERS if path.startswith(tier + "/"))]
    if not path.startswith(NOT_THE_LIBRARYS):
        found.append("library's operations")
        if not path.startswith(WORDING):
            found.append("their behaviour tests")
    return found


def score(outcomes: Mapping[str, Outcome]) -> dict[str, tuple[int, int]]:
    """``(passed, tests)`` for each row of :data:`ROWS`; a skipped test counts as not passed."""
    counts = {row: [0, 0] for row in ROWS}
    for tid, outcome in outcomes.items():
        for row in groups(tid):
            counts[row][0] += outcome.status == PASSED
            counts[row][1] += 1
    return {row: (passed, tests) for row, (passed, tests) in counts.items()}


def percent(passed: int, tests: int) -> str:
    """``passed / tests`` as a percentage with one decimal (``-`` for no tests)."""
    return f"{100 * passed / tests:.1f} %" if tests else "-"


def score_table(scores: Mapping[str, tuple[int, int]]) -> str:
    """The scores as a fixed-width table, one row per :data:`ROWS` entry."""
    lines = [f"{'tests':<24}{'passed':>8}{'of':>6}{'score':>9}"]
    for row in ROWS:
        passed, tests = scores[row]
        lines.append(f"{row:<24}{passed:>8}{tests:>6}{percent(passed, tests):>9}")
    return "\n".join(lines)


def compare(outcomes: Mapping[str, Outcome], allowed: Mapping[str, str]) -> Comparison:
    """Failures (or skips) not listed; listed tests that passed; listed tests not run."""
    return Comparison(
        unlisted=sorted(t for t, o in outcomes.items() if o.status != PASSED and t not in allowed),
        fixed=sorted(t for t in allowed if t in outcomes and outcomes[t].status == PASSED),
        absent=sorted(t for t in allowed if t not in outcomes),
    )


def render_allowed(outcomes: Mapping[str, Outcome], reasons: Mapping[str, str],
                   header: str) -> str:
    """The allowed list of a run: each failing test with its known reason (or its message)."""
    lines = [header.rstrip("\n")]
    for tid, outcome in sorted(outcomes.items()):
        if outcome.status != PASSED:
            lines.append(f"{tid} -- {reasons.get(tid) or outcome.message or outcome.status}")
    return "\n".join(lines) + "\n"


def _header(text: str) -> str:
    """The leading comment lines of an allowed list."""
    kept = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            break
        kept.append(line)
    return "\n".join(kept)


# --- running ------------------------------------------------------------------------------------


def default_work(tarball: Path) -> Path:
    """Where the suite is extracted and its npm dependencies kept between runs."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "dynaunique" / tarball.name.removesuffix(".tar.gz")


def prepare(tarball: Path, work: Path, fresh: bool) -> Path:
    """Extract the suite into ``work`` and install its npm dependencies (unless already there
    for this very tarball); return the suite's folder."""
    for tool in ("node", "npm", "npx"):
        if shutil.which(tool) is None:
            raise RunnerError(f"{tool} is not on PATH (Node.js 20 runs the suite)")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    suite = work / SUITE_FOLDER
    marker = suite / "node_modules" / ".dynaunique-installed"
    installed = not fresh and marker.exists() and marker.read_text(encoding="utf-8") == digest
    if not installed and suite.exists():
        shutil.rmtree(suite)
    work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers()
                   if not m.name.startswith(f"{SUITE_FOLDER}/node_modules")]
        if hasattr(tarfile, "data_filter"):
            archive.extractall(work, members=members, filter="data")
        else:  # Python before 3.10.12/3.11.4: no filters; the tarball is one we ship beside us
            archive.extractall(work, members=members)
    if not (suite / "package.json").is_file():
        raise RunnerError(f"{tarball} holds no {SUITE_FOLDER}/package.json")
    if installed:
        return suite
    started = time.monotonic()
    log = work / "npm.log"
    with log.open("wb") as out:
        ok = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=suite, stdout=out,
                            stderr=subprocess.STDOUT, check=False).returncode == 0
        if not ok:
            ok = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save",
                                 STREAMS_WORKAROUND], cwd=suite, stdout=out,
                                stderr=subprocess.STDOUT, check=False).returncode == 0
    if not ok:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RunnerError(f"npm could not install the suite's dependencies; log tail:\n{tail}")
    marker.write_text(digest, encoding="utf-8")
    print(f"npm dependencies installed in {time.monotonic() - started:.0f} s", flush=True)
    return suite


def run_vitest(suite: Path, endpoint: str) -> dict[str, Any]:
    """Run the whole suite against ``endpoint``; return vitest's JSON report."""
    report = suite / "report.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ)
    env.update(AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_REGION="us-east-1",
               DYNAMODB_ENDPOINT=endpoint, NO_COLOR="1")
    log = suite / "vitest.log"
    with log.open("wb") as out:
        status = subprocess.run(["npx", "--no-install", "vitest", "run", "--reporter=json",
                                 f"--outputFile={report}"], cwd=suite, env=env, stdout=out,
                                stderr=subprocess.STDOUT, check=False).returncode
    if not report.exists():
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RunnerError(f"vitest exited with status {status} and no report; log tail:\n{tail}")
    loaded: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return loaded


def _list(title: str, ids: Iterable[str], outcomes: Mapping[str, Outcome] | None = None) -> None:
    ids = list(ids)
    if not ids:
        return
    print(f"\n{title} ({len(ids)}):")
    for tid in ids:
        message = outcomes[tid].message if outcomes is not None and tid in outcomes else ""
        print(f"  {tid}" + (f"\n      {message}" if message else ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the suite, print the scores and the comparison; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m conformance.emulator",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tarball", type=Path,
                        default=Path(os.environ.get(TARBALL_ENV, DEFAULT_TARBALL)),
                        help=f"the suite (default ${TARBALL_ENV} or {DEFAULT_TARBALL})")
    parser.add_argument("--allowed", type=Path, default=DEFAULT_ALLOWED,
                        help="known failures (default conformance/emulator_allowed.txt)")
    parser.add_argument("--work", type=Path, default=None,
                        help="extract and install here (default: a cache folder, kept)")
    parser.add_argument("--fresh", action="store_true", help="install the npm dependencies again")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every test's outcome to this file")
    parser.add_argument("--record", action="store_true",
                        help="rewrite the allowed list with this run's failures")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        return _run(args, started)
    except RunnerError as exc:
        print(f"emulator conformance: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, started: float) -> int:
    if not args.tarball.is_file():
        raise RunnerError(f"no tarball at {args.tarball} (use --tarball or ${TARBALL_ENV})")
    text = args.allowed.read_text(encoding="utf-8") if args.allowed.exists() else ""
    try:
        allowed = parse_allowed(text)
    except ValueError as exc:
        raise RunnerError(str(exc)) from exc
    suite = prepare(args.tarball, args.work or default_work(args.tarball), args.fresh)
    with LocalDynamoDB() as endpoint:
        ran = time.monotonic()
        outcomes = parse_report(run_vitest(suite, endpoint))
        print(f"vitest: {len(outcomes)} tests in {time.monotonic() - ran:.0f} s", flush=True)
    print(f"\nThe DynamoDB conformance suite ({args.tarball.name}) against the local server\n")
    print(score_table(score(outcomes)))
    if args.json is not None:
        args.json.write_text(json.dumps({t: attrs.asdict(o) for t, o in sorted(outcomes.items())},
                                        indent=1), encoding="utf-8")
    if args.record:
        args.allowed.write_text(render_allowed(outcomes, allowed, _header(text)),
                                encoding="utf-8")
        print(f"\nrecorded {sum(o.status != PASSED for o in outcomes.values())} failures "
              f"in {args.allowed}")
        allowed = parse_allowed(args.allowed.read_text(encoding="utf-8"))
    result = compare(outcomes, allowed)
    _list(f"FAILING, not in {args.allowed.name}", result.unlisted, outcomes)
    _list(f"passing now: remove from {args.allowed.name}", result.fixed)
    _list(f"in {args.allowed.name} but not run", result.absent)
    short = len(outcomes) < SUITE_TESTS
    if short:
        print(f"\nonly {len(outcomes)} of the suite's {SUITE_TESTS} tests ran")
    print(f"\n{len(allowed)} known failures, {len(result.unlisted)} not listed; "
          f"wall time {time.monotonic() - started:.0f} s")
    return 1 if result.unlisted or short else 0


if __name__ == "__main__":
    sys.exit(main())
