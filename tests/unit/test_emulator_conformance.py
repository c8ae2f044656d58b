"""conformance/emulator.py's pure parts: vitest's report, the score by tier, the allowed list.

(The runner itself is run by CI: ``python -m conformance.emulator``.)
"""

from __future__ import annotations

import pytest

from conformance.emulator import (
    Comparison,
    Outcome,
    case_id,
    compare,
    groups,
    parse_allowed,
    parse_report,
    percent,
    render_allowed,
    score,
    score_table,
)

# What vitest 3's JSON reporter writes: a passing, a failing and a skipped test, and a file that
# failed to load (no assertion results).
REPORT = {
    "testResults": [
        {"name": "/w/dynamodb-conformance/tests/tier1/putItem/basic.test.ts", "status": "failed",
         "message": "", "assertionResults": [
             {"fullName": "PutItem — basic puts an item", "status": "passed",
              "failureMessages": []},
             {"fullName": "PutItem — basic rejects x", "status": "failed",
              "failureMessages": ["AssertionError: expected 1 to be 2\n    at line"]},
             {"fullName": "PutItem — basic todo", "status": "pending", "failureMessages": []},
         ]},
        {"name": "/w/dynamodb-conformance/tests/tier2/ttl/basic.test.ts", "status": "failed",
         "message": "Error: cannot load\nstack", "assertionResults": []},
    ],
}


def test_an_id_is_the_file_under_tests_and_the_full_name() -> None:
    assert case_id("/a/tests/x/tests/tier1/q.test.ts", "Q — a b") == "tier1/q.test.ts::Q — a b"
    assert case_id("C:\\s\\tests\\tier3\\l.test.ts", "L") == "tier3/l.test.ts::L"
    assert case_id("elsewhere.ts", "E") == "elsewhere.ts::E"


def test_the_report_gives_each_test_its_outcome_and_first_line() -> None:
    assert parse_report(REPORT) == {
        "tier1/putItem/basic.test.ts::PutItem — basic puts an item": Outcome("passed"),
        "tier1/putItem/basic.test.ts::PutItem — basic rejects x": Outcome(
            "failed", "AssertionError: expected 1 to be 2"),
        "tier1/putItem/basic.test.ts::PutItem — basic todo": Outcome("skipped"),
        "tier2/ttl/basic.test.ts::<load>": Outcome("failed", "Error: cannot load"),
    }


@pytest.mark.parametrize(("tid", "expected"), [
    ("tier1/putItem/basic.test.ts::t", ["total", "tier1", "library's operations",
                                         "their behaviour tests"]),
    ("tier2/streams/basic.test.ts::t", ["total", "tier2", "library's operations",
                                         "their behaviour tests"]),
    ("tier3/error-messages/putItem.test.ts::t", ["total", "tier3", "library's operations"]),
    ("tier3/validation-ordering/query.test.ts::t", ["total", "tier3", "library's operations"]),
    ("tier3/limits/batchLimits.test.ts::t", ["total", "tier3", "library's operations",
                                             "their behaviour tests"]),
    ("tier1/listTables/basic.test.ts::t", ["total", "tier1"]),
    ("tier1/updateTable/basic.test.ts::t", ["total", "tier1"]),
    ("tier2/partiql/executeStatement.test.ts::t", ["total", "tier2"]),
    ("tier3/legacy-api/expected.test.ts::t", ["total", "tier3"]),
])
def test_each_test_counts_in_its_tier_and_the_library_s_subsets(tid: str,
                                                                 expected: list[str]) -> None:
    assert groups(tid) == expected


def test_scores_count_skips_as_not_passed() -> None:
    assert score(parse_report(REPORT)) == {
        "total": (1, 4), "tier1": (1, 3), "tier2": (0, 1), "tier3": (0, 0),
        "library's operations": (1, 3), "their behaviour tests": (1, 3),
    }


def test_score_table() -> None:
    assert percent(485, 601) == "80.7 %"
    assert percent(0, 0) == "-"
    assert score_table(score(parse_report(REPORT))) == "\n".join([
        "tests                     passed    of    score",
        "total                          1     4   25.0 %",
        "tier1                          1     3   33.3 %",
        "tier2                          0     1    0.0 %",
        "tier3                          0     0        -",
        "library's operations           1     3   33.3 %",
        "their behaviour tests          1     3   33.3 %",
    ])


def test_the_allowed_list_is_conformance_run_s_format_with_vitest_ids() -> None:
    text = ("# known\n\n"
            "tier1/a.test.ts::A — rejects x -- moto accepts it\n"
            "  tier3/b.test.ts::B -- y  \n")
    assert parse_allowed(text) == {"tier1/a.test.ts::A — rejects x": "moto accepts it",
                                   "tier3/b.test.ts::B": "y"}


def test_compare_names_unlisted_failures_fixed_and_absent_entries() -> None:
    outcomes = {"a::ok": Outcome("passed"), "a::new": Outcome("failed", "m"),
                "a::known": Outcome("failed", "m"), "a::was": Outcome("passed"),
                "a::skip": Outcome("skipped")}
    allowed = {"a::known": "r", "a::was": "r", "a::gone": "r"}
    assert compare(outcomes, allowed) == Comparison(
        unlisted=["a::new", "a::skip"], fixed=["a::was"], absent=["a::gone"])


def test_render_allowed_keeps_known_reasons_and_the_header() -> None:
    outcomes = {"b::t": Outcome("failed", "msg"), "a::t": Outcome("failed", "other"),
                "c::t": Outcome("passed"), "d::t": Outcome("skipped")}
    assert render_allowed(outcomes, {"a::t": "known"}, "# head\n") == (
        "# head\na::t -- known\nb::t -- msg\nd::t -- skipped\n")
    assert parse_allowed(render_allowed(outcomes, {}, "")) == {
        "a::t": "other", "b::t": "msg", "d::t": "skipped"}
