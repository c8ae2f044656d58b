"""The benchmark suite's quick run works end to end: it writes every table, and the request
counts — deterministic, unlike the timings — are the physical minimum for every operation."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# benchmarks/ is a folder of the repository, not part of the installed package: plain `pytest`
# (unlike `python -m pytest`) does not put the repository root on sys.path.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import attrs  # noqa: E402
import pytest  # noqa: E402

from benchmarks import overhead  # noqa: E402
from benchmarks import run as bench  # noqa: E402
from benchmarks import server as scale  # noqa: E402

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

# operation → (requests sent in order, items written, items read); see docs/performance.md.
MINIMUM = {
    "create": (("TransactWriteItems",), 3, 0),
    "update_unique": (("TransactWriteItems",), 3, 0),
    "update_plain": (("PutItem",), 1, 0),
    "update_actions_unique": (("TransactWriteItems",), 3, 0),
    "update_actions_plain": (("UpdateItem",), 1, 0),
    "delete_loaded": (("TransactWriteItems",), 3, 0),
    "delete_unloaded": (("GetItem", "TransactWriteItems"), 3, 1),
    "get_by_unique": (("GetItem", "GetItem"), 0, 2),
    "swap": (("TransactWriteItems",), 4, 0),
}

HEADINGS = (
    "# Performance",
    "## Machine and versions",
    "## Round trips and items per operation",
    "## Client-side cost per write, paired against hand-written boto3",
    "## How far one save's path wanders",
    "## Client-side overhead per save",
    "## Throughput under contention",
    "## Bulk: migration backfill and audit, per record",
)


#: Smaller than ``--quick`` where a count only makes a timing steadier (the test asserts what was
#: measured and written, never a time): every part still runs, on every transport and server.
#: (``--quick`` also runs the server-scaling part's patched points on the session's server,
#: a table each: only the stock-moto point starts a server.)
SMOKE = attrs.evolve(bench.QUICK, stub_rounds=30, null_rounds=10, warmup=5, profile_rounds=15,
                     stage_rounds=15, case_rounds=5)
SMOKE_SCALE = (scale.Plan(0, False, 5), scale.Plan(200, False, 5), scale.Plan(200, True, 2))


def test_quick_suite_writes_the_report_with_every_table(dynaunique_db: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "QUICK", SMOKE)
    monkeypatch.setattr(scale, "QUICK", SMOKE_SCALE)
    out = tmp_path / "performance.md"
    suite = bench.produce(["--quick", "--peer", "off", "--endpoint", dynaunique_db,
                           "--out", str(out)])

    page = out.read_text(encoding="utf-8")
    for heading in HEADINGS:
        assert f"\n{heading}\n" in f"\n{page}", heading
    assert "| create (k = 2 unique values) | 1 RT / 3 written (TransactWrite), 6 WCU |" in page

    # 1. Round trips and items: dynaunique and the hand-written code both at the minimum.
    rows = {row.key: row for row in suite.roundtrips.rows}
    assert set(rows) == set(MINIMUM)
    for key, (operations, written, read) in MINIMUM.items():
        dyn = rows[key].dynaunique
        assert (dyn.operations, dyn.written, dyn.read) == (operations, written, read), key
        assert dyn.same_counts(rows[key].minimum), key
        hand = rows[key].handwritten
        if hand is not None:
            assert (hand.round_trips, hand.written, hand.read) == (len(operations), written,
                                                                   read), key
    assert suite.roundtrips.state.clean

    # 2. The paired cases (every write shape, every implementation) and the trace of one save.
    assert suite.cases is not None and suite.cases.rounds == bench.QUICK.case_rounds
    assert set(suite.cases.ratios) == {"create", "update_unique", "update_plain", "atomic_10",
                                       "atomic_100", "k_1", "k_2", "k_5", "k_10"}
    for times in suite.cases.times.values():
        assert all(q["median"] > 0 for q in times.values())
    assert suite.trace is not None
    ours, theirs = suite.trace
    assert ours.functions > 0 and "dynaunique/_write/flush.py" in ours.modules
    assert theirs.functions > 0 and "pynamodb/models.py" in theirs.modules

    # 3. Overhead: every implementation timed on both transports.
    assert [r.transport for r in suite.overhead] == ["stub (before-send handler)",
                                                     "null HTTP server on 127.0.0.1"]
    for result in suite.overhead:
        assert result.rounds == bench.QUICK.stub_rounds or result.rounds == bench.QUICK.null_rounds
        for op in overhead.OPS:
            assert all(result.times[op][v]["median"] > 0 for v in overhead.VARIANTS)
    assert suite.profile is not None and suite.profile.tree
    assert suite.stages is not None
    if suite.stages.skipped is None:
        for op in overhead.OPS:
            assert set(suite.stages.steps[op]) == set(overhead.STEP_NAMES)
            assert suite.stages.save[op] > 0 and suite.stages.floor[op] > 0

    # 4. Contention: one account per email, every lock right, one request per attempt at least.
    assert [r.implementation for r in suite.contention] == ["dynaunique", "hand-written boto3"]
    for race in suite.contention:
        assert race.errors == 0
        assert race.created == race.distinct_emails
        assert race.created + race.taken == race.attempts
        assert race.requests >= race.attempts
        assert race.state.clean and race.state.records == race.created

    # 4. Bulk: a part whose module exists ran and was right; a missing module is reported.
    kinds = {r.kind for r in suite.bulk.runs}
    for part, module in (("backfill", "dynaunique.migrations"), ("audit", "dynaunique.audit")):
        if importlib.util.find_spec(module) is None:
            assert part in suite.bulk.not_measured and part not in kinds
        else:
            assert part not in suite.bulk.not_measured, suite.bulk.not_measured[part]
            assert part in kinds
    assert all(r.correct for r in suite.bulk.runs)
    for run in suite.bulk.runs:
        if run.kind == "backfill":
            assert run.written >= 2 * run.records  # k = 2 locks per record at least

    # 5. The embedded server at scale: every point measured; the patched points' tables were on
    # the session's server, and are gone from it.
    assert suite.server is not None
    assert [(p.items, p.stock_moto) for p in suite.server.points] == [
        (plan.items, plan.stock_moto) for plan in SMOKE_SCALE]
    assert all(p.rates and min(p.rates) > 0 for p in suite.server.points)
    assert f"\n{scale.HEADING}\n" in page
    tables = scale._client(dynaunique_db).list_tables()["TableNames"]
    assert not [name for name in tables if name.startswith(scale.TABLE)], tables
