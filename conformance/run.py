"""Run PynamoDB's own test suite twice — with its ``Model`` and with ``dynaunique.Model`` — and
list every test that passes with the first and not with the second.

    python -m conformance.run [--tarball PATH] [--allowed PATH] [--keep DIR] [--json PATH]
                              [--select PATH ...]

Steps: extract the tarball of PynamoDB's ``tests/`` and ``pytest.ini`` into two temporary folders;
in the second, rewrite ``from pynamodb.models import Model`` to ``from dynaunique import Model``;
start the local DynamoDB-compatible server (:class:`dynaunique.testing.LocalDynamoDB`) and point
``PYNAMODB_INTEGRATION_TEST_DDB_URL`` at it, so the integration tests run too; run pytest in each
folder with a JUnit XML report; compare the outcomes test by test.

A *regression* is a test that passed in the baseline and failed, errored, was skipped or was not
collected in the swapped run. The exit status is 0 when every regression is listed in the
allow-list (``conformance/allowed.txt``: ``<test id> -- <reason>`` per line), 1 when one is not,
2 when the runner itself could not run (no tarball, a missing test dependency, pytest crashed).

The tarball is not part of the repository (it is PynamoDB's code, MIT-licensed): by default it is
``../shared/conformance/pynamodb-6.1.0-tests.tar.gz`` beside the repository; ``--tarball`` or
``DYNAUNIQUE_CONFORMANCE_TARBALL`` names another.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

if __package__ in (None, ""):  # run as a script: python conformance/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dynaunique.testing import LocalDynamoDB, reset_local_dynamodb

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_TARBALL = REPOSITORY.parent / "shared" / "conformance" / "pynamodb-6.1.0-tests.tar.gz"
DEFAULT_ALLOWED = Path(__file__).resolve().parent / "allowed.txt"
TARBALL_ENV = "DYNAUNIQUE_CONFORMANCE_TARBALL"
DDB_URL_ENV = "PYNAMODB_INTEGRATION_TEST_DDB_URL"

#: The one import form of Model that PynamoDB 6.1.0's tests use, and what replaces it.
ORIGINAL_IMPORT = "from pynamodb.models import Model"
SWAPPED_IMPORT = "from dynaunique import Model"
# Any other reference to pynamodb.models left after the rewrite would be a Model the swapped run
# does not swap (a new tarball with another import form): the runner refuses instead of
# silently comparing PynamoDB with itself.
_OTHER_MODEL_REFERENCE = re.compile(
    r"pynamodb\.models\b|from\s+pynamodb\s+import\s+[^\n]*\bmodels\b")
_SWAP_LINE = re.compile(r"^from pynamodb\.models import Model[ \t]*$", re.MULTILINE)

#: Modules PynamoDB's tests import or configure that dynaunique itself does not need.
TEST_DEPENDENCIES = {"pytest_mock": "pytest-mock", "pytest_env": "pytest-env",
                     "freezegun": "freezegun", "blinker": "blinker"}

PASSED, SKIPPED, FAILED, ERROR, MISSING = "passed", "skipped", "failed", "error", "missing"
_SEVERITY = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3, MISSING: 4}
OUTCOMES = (PASSED, FAILED, ERROR, SKIPPED)
INTEGRATION_PREFIX = "tests/integration/"
COLLECTION = "<collection>"


class RunnerError(Exception):
    """The runner could not run the suite (exit status 2)."""


@attrs.frozen
class Outcome:
    """One test's result: ``passed``/``skipped``/``failed``/``error``, and the first line of why."""

    status: str
    message: str = ""


@attrs.frozen
class Regression:
    """A test that passed in the baseline and not in the swapped run."""

    test_id: str
    swapped: Outcome
    allowed_reason: str | None


# --- pure parts ---------------------------------------------------------------------------------


def swap_imports(text: str) -> tuple[str, int]:
    """``text`` with each ``from pynamodb.models import Model`` line swapped, and how many."""
    return _SWAP_LINE.subn(SWAPPED_IMPORT, text)


def unswapped_references(text: str) -> list[str]:
    """The lines of ``text`` that still reach ``pynamodb.models`` (an import form not swapped)."""
    return [line for line in text.splitlines() if _OTHER_MODEL_REFERENCE.search(line)]


def node_id(classname: str, name: str, module_exists: Mapping[str, bool] | None = None) -> str:
    """A pytest-style id (``tests/test_x.py::Class::test``) from a JUnit classname and name.

    JUnit writes ``tests.test_x.Class``; the module is the longest dotted prefix that is a file
    (``module_exists`` answers for ``tests/test_x.py``; without it, the longest prefix whose last
    part is not capitalized).
    """
    parts = classname.split(".") if classname else []
    split = 0
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if module_exists is not None:
            if module_exists.get(candidate, False):
                split = end
                break
        elif not parts[end - 1][:1].isupper():
            split = end
            break
    if split == 0:
        return "::".join([*parts, name]) if parts else name
    return "::".join(["/".join(parts[:split]) + ".py", *parts[split:], name])


def parse_junit(xml_text: str,
                module_exists: Mapping[str, bool] | None = None) -> dict[str, Outcome]:
    """Each test's outcome from pytest's JUnit XML; the worst one when a test appears twice.

    A module that failed to import appears as ``<module path>::<collection>`` with ``error``.
    """
    root = ET.fromstring(xml_text)
    outcomes: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        name = case.get("name", "")
        if not classname and name:  # a collection error: name is the dotted module
            tid = name.replace(".", "/") + ".py::" + COLLECTION
        else:
            tid = node_id(classname, name, module_exists)
        outcome = Outcome(PASSED)
        for child in case:
            status = {"failure": FAILED, "error": ERROR, "skipped": SKIPPED}.get(child.tag)
            if status is None:
                continue
            candidate = Outcome(status, _first_line(child.get("message"), child.text))
            if _SEVERITY[candidate.status] > _SEVERITY[outcome.status]:
                outcome = candidate
        previous = outcomes.get(tid)
        if previous is None or _SEVERITY[outcome.status] > _SEVERITY[previous.status]:
            outcomes[tid] = outcome
    return outcomes


def _first_line(message: str | None, text: str | None) -> str:
    """What went wrong, in one line: the message, or for a bare "collection failure" the last
    ``E`` line of the report (the exception raised while importing the module)."""
    if message and message != "collection failure":
        return message.strip().splitlines()[0][:200] if message.strip() else ""
    raised = [line[1:].strip() for line in (text or "").splitlines() if line.startswith("E ")]
    return (raised[-1] if raised else message or "")[:200]


def parse_allowed(text: str) -> dict[str, str]:
    """The allow-list: ``<test id> -- <reason>`` per line; ``#`` starts a comment line.

    :raises ValueError: a line has no reason (every allowed regression must say why).
    """
    allowed: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tid, sep, reason = line.partition(" -- ")
        if not sep or not tid.strip() or not reason.strip():
            raise ValueError(f"allowed list line {number}: expected '<test id> -- <reason>', "
                             f"got {raw!r}")
        allowed[tid.strip()] = reason.strip()
    return allowed


def find_regressions(baseline: Mapping[str, Outcome], swapped: Mapping[str, Outcome],
                     allowed: Mapping[str, str]) -> list[Regression]:
    """Tests passing in ``baseline`` that did not pass in ``swapped``, sorted by id.

    A test absent from the swapped run is ``missing`` (its module failed to import, say).
    """
    found = []
    for tid, outcome in sorted(baseline.items()):
        if outcome.status != PASSED:
            continue
        now = swapped.get(tid)
        if now is None:
            module = tid.split("::", 1)[0]
            collection = swapped.get(f"{module}::{COLLECTION}")
            now = Outcome(MISSING, collection.message if collection else "not collected")
        if now.status != PASSED:
            found.append(Regression(tid, now, allowed.get(tid)))
    return found


def count(outcomes: Mapping[str, Outcome], integration: bool) -> dict[str, int]:
    """How many tests of one part (unit or integration) ended in each outcome."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for tid, outcome in outcomes.items():
        if tid.startswith(INTEGRATION_PREFIX) == integration and outcome.status in counts:
            counts[outcome.status] += 1
    return counts


def summary_table(baseline: Mapping[str, Outcome], swapped: Mapping[str, Outcome]) -> str:
    """Pass/fail counts of both runs side by side, unit and integration tests apart."""
    lines = [f"{'part':<12}{'outcome':<10}{'baseline':>10}{'swapped':>10}"]
    for part, integration in (("unit", False), ("integration", True)):
        before, after = count(baseline, integration), count(swapped, integration)
        for status in OUTCOMES:
            lines.append(f"{part:<12}{status:<10}{before[status]:>10}{after[status]:>10}")
        lines.append(f"{part:<12}{'total':<10}{sum(before.values()):>10}{sum(after.values()):>10}")
    return "\n".join(lines)


# --- running ------------------------------------------------------------------------------------


def check_dependencies() -> None:
    """Refuse to run without PynamoDB's test dependencies (the ``conformance`` extra)."""
    missing = [dist for module, dist in TEST_DEPENDENCIES.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        raise RunnerError(f"missing test dependencies {missing}: "
                          "pip install -e '.[conformance]'")


def extract(tarball: Path, into: Path) -> Path:
    """Extract ``tarball`` (``tests/`` and ``pytest.ini``) into ``into``; return ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
        else:  # Python before 3.10.12/3.11.4: no filters; the tarball is one we ship beside us
            archive.extractall(into)
    if not (into / "tests").is_dir():
        raise RunnerError(f"{tarball} holds no tests/ folder")
    return into


def swap_tree(root: Path) -> int:
    """Rewrite every test module under ``root/tests`` to import dynaunique's Model.

    :raises RunnerError: nothing was swapped, or a reference to ``pynamodb.models`` remains.
    """
    swapped = 0
    leftovers: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        text, n = swap_imports(path.read_text(encoding="utf-8"))
        if n:
            path.write_text(text, encoding="utf-8")
            swapped += n
        leftovers += [f"{path.relative_to(root)}: {line.strip()}"
                      for line in unswapped_references(text)]
    if leftovers:
        raise RunnerError("import forms of pynamodb.models this runner does not swap:\n  "
                          + "\n  ".join(leftovers))
    if swapped == 0:
        raise RunnerError(f"no '{ORIGINAL_IMPORT}' found under {root / 'tests'}")
    return swapped


def run_pytest(root: Path, endpoint: str, select: Sequence[str], label: str) -> dict[str, Outcome]:
    """Run pytest in ``root`` against ``endpoint``; return the outcome of every test."""
    report = root / f"junit-{label}.xml"
    log = root / f"pytest-{label}.log"
    env = dict(os.environ)
    env[DDB_URL_ENV] = endpoint
    # Nothing may reach AWS: a request that misses the local server (a write sent by a client the
    # unit tests do not mock) goes to a closed local port and fails at once.
    env["HTTP_PROXY"] = env["HTTPS_PROXY"] = "http://127.0.0.1:9"
    env["NO_PROXY"] = "127.0.0.1,localhost"
    for name in ("http_proxy", "https_proxy", "no_proxy"):
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        sys.executable, "-m", "pytest", *select,
        "-p", "no:cacheprovider",
        # dynaunique's own fixtures (a pytest11 plugin) have no business in PynamoDB's suite.
        "-p", "no:dynaunique",
        # A module that fails to import in one run must not stop the other modules from running.
        "--continue-on-collection-errors",
        "-o", "junit_family=xunit2",
        f"--junitxml={report}",
        "-q",
    ]
    with log.open("wb") as out:
        status = subprocess.run(command, cwd=root, env=env, stdout=out,
                                stderr=subprocess.STDOUT, check=False).returncode
    if status not in (0, 1) or not report.exists():
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RunnerError(f"pytest ({label}) exited with status {status}; log tail:\n{tail}")
    modules = {str(p.relative_to(root)): True for p in (root / "tests").rglob("*.py")}
    return parse_junit(report.read_text(encoding="utf-8"), modules)


def render_regressions(regressions: Iterable[Regression]) -> str:
    """One line per regression: id, swapped outcome and message, and the allow-list reason."""
    lines = []
    for r in regressions:
        mark = "allowed" if r.allowed_reason is not None else "REGRESSION"
        lines.append(f"{mark:<11}{r.test_id}  [{r.swapped.status}] {r.swapped.message}")
        if r.allowed_reason is not None:
            lines.append(f"{'':<11}  reason: {r.allowed_reason}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run both suites, print the comparison; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m conformance.run",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tarball", type=Path,
                        default=Path(os.environ.get(TARBALL_ENV, DEFAULT_TARBALL)),
                        help=f"PynamoDB's tests (default ${TARBALL_ENV} or {DEFAULT_TARBALL})")
    parser.add_argument("--allowed", type=Path, default=DEFAULT_ALLOWED,
                        help="allow-list of accepted regressions (default conformance/allowed.txt)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="extract into this folder and keep it (logs and JUnit XML included)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write every test's outcome in both runs to this file")
    parser.add_argument("--select", nargs="+", default=["tests"],
                        help="test paths or node ids to run, relative to the suite (default tests)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        return _run(args, started)
    except RunnerError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, started: float) -> int:
    if not args.tarball.is_file():
        raise RunnerError(f"no tarball at {args.tarball} (use --tarball or ${TARBALL_ENV})")
    check_dependencies()
    try:
        allowed = parse_allowed(args.allowed.read_text(encoding="utf-8")) \
            if args.allowed.exists() else {}
    except ValueError as exc:
        raise RunnerError(str(exc)) from exc
    with tempfile.TemporaryDirectory(prefix="dynaunique-conformance-") as scratch:
        work = args.keep if args.keep is not None else Path(scratch)
        baseline_root = extract(args.tarball, work / "baseline")
        swapped_root = extract(args.tarball, work / "swapped")
        swaps = swap_tree(swapped_root)
        with LocalDynamoDB() as endpoint:
            results = {}
            for label, root in (("baseline", baseline_root), ("swapped", swapped_root)):
                # The integration tests use fixed table names: each run starts on an empty server.
                reset = time.monotonic()
                reset_local_dynamodb(endpoint)
                results[label] = run_pytest(root, endpoint, args.select, label)
                print(f"{label}: {len(results[label])} tests in {time.monotonic() - reset:.0f} s",
                      flush=True)
    baseline, swapped = results["baseline"], results["swapped"]
    regressions = find_regressions(baseline, swapped, allowed)
    improvements = sorted(t for t, o in swapped.items() if o.status == PASSED
                          and baseline.get(t, Outcome(MISSING)).status != PASSED)
    print(f"\nPynamoDB's tests, {swaps} imports of Model swapped for dynaunique's "
          f"({args.tarball.name})\n")
    print(summary_table(baseline, swapped))
    unallowed = [r for r in regressions if r.allowed_reason is None]
    print(f"\n{len(regressions)} regressions ({len(unallowed)} not in {args.allowed.name}):")
    if regressions:
        print(render_regressions(regressions))
    stale = sorted(set(allowed) - {r.test_id for r in regressions})
    if stale:
        print(f"\nallowed but not regressing (remove from {args.allowed.name}):")
        print("\n".join(f"  {t}" for t in stale))
    if improvements:
        print(f"\npassing only in the swapped run: {', '.join(improvements)}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "baseline": {t: attrs.asdict(o) for t, o in sorted(baseline.items())},
            "swapped": {t: attrs.asdict(o) for t, o in sorted(swapped.items())},
            "regressions": [r.test_id for r in regressions],
        }, indent=1), encoding="utf-8")
    print(f"\nwall time {time.monotonic() - started:.0f} s")
    return 1 if unallowed else 0


if __name__ == "__main__":
    sys.exit(main())
