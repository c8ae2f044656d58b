"""conformance/run.py's pure parts: the import swap, JUnit parsing, the allow-list, regressions.

(The runner itself is run by CI: ``python -m conformance.run``.)
"""

from __future__ import annotations

import pytest

from conformance.run import (
    COLLECTION,
    MISSING,
    Outcome,
    Regression,
    find_regressions,
    node_id,
    parse_allowed,
    parse_junit,
    render_regressions,
    summary_table,
    swap_imports,
    unswapped_references,
)

# What pytest 9 writes for: a module that fails to import, a test in a class, a teardown error,
# a parametrized test passing and failing, a skipped test.
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="1" skipped="1"
tests="6">
<testcase classname="" name="tests.test_broken" time="0.000"><error message="collection failure"
>tests/test_broken.py:1: in &lt;module&gt;
    raise RuntimeError("boom")
E   RuntimeError: boom</error></testcase>
<testcase classname="tests.test_ok.TestA" name="test_x" time="0.000" />
<testcase classname="tests.test_ok" name="test_td" time="0.000"><error
message="failed on teardown with &quot;RuntimeError: teardown&quot;">E RuntimeError</error>
</testcase>
<testcase classname="tests.test_ok" name="test_p[1]" time="0.000" />
<testcase classname="tests.test_ok" name="test_p[2]" time="0.000"><failure
message="assert 2 == 1&#10;second line">v = 2</failure></testcase>
<testcase classname="tests.test_ok" name="test_s" time="0.000"><skipped type="pytest.skip"
message="why">why</skipped></testcase>
<testcase classname="tests.integration.model_test.T" name="test_i" time="0.000" />
</testsuite></testsuites>
"""


def test_swap_rewrites_only_the_exact_import_line() -> None:
    text = ("import os\nfrom pynamodb.models import Model\n"
            "from pynamodb.models import Model  \nx = 'from pynamodb.models import Model'\n")
    assert swap_imports(text) == (
        "import os\nfrom dynaunique import Model\nfrom dynaunique import Model\n"
        "x = 'from pynamodb.models import Model'\n", 2)


def test_other_references_to_pynamodb_models_are_reported() -> None:
    text = ("from dynaunique import Model\nfrom pynamodb.models import Model, MetaModel\n"
            "import pynamodb.models\nfrom pynamodb import attributes, models\n"
            "patch('pynamodb.models.Model.save')\nfrom pynamodb.attributes import X\n")
    assert unswapped_references(text) == [
        "from pynamodb.models import Model, MetaModel", "import pynamodb.models",
        "from pynamodb import attributes, models", "patch('pynamodb.models.Model.save')"]


@pytest.mark.parametrize(("classname", "name", "expected"), [
    ("tests.test_model.ModelTestCase", "test_save",
     "tests/test_model.py::ModelTestCase::test_save"),
    ("tests.test_model", "test_delete[True]", "tests/test_model.py::test_delete[True]"),
    ("tests.integration.model_integration_test", "test_x",
     "tests/integration/model_integration_test.py::test_x"),
    ("tests.test_model.Outer.Inner", "test_y", "tests/test_model.py::Outer::Inner::test_y"),
])
def test_node_id_from_junit_names(classname: str, name: str, expected: str) -> None:
    assert node_id(classname, name) == expected
    module = expected.split("::", 1)[0]
    assert node_id(classname, name, {module: True}) == expected


def test_node_id_trusts_the_files_over_capitalization() -> None:
    assert node_id("tests.Test_Caps.Cls", "t", {"tests/Test_Caps.py": True}) == \
        "tests/Test_Caps.py::Cls::t"


def test_parse_junit_gives_each_test_its_outcome_and_first_line() -> None:
    assert parse_junit(JUNIT) == {
        f"tests/test_broken.py::{COLLECTION}": Outcome("error", 'RuntimeError: boom'),
        "tests/test_ok.py::TestA::test_x": Outcome("passed"),
        "tests/test_ok.py::test_td": Outcome(
            "error", 'failed on teardown with "RuntimeError: teardown"'),
        "tests/test_ok.py::test_p[1]": Outcome("passed"),
        "tests/test_ok.py::test_p[2]": Outcome("failed", "assert 2 == 1"),
        "tests/test_ok.py::test_s": Outcome("skipped", "why"),
        "tests/integration/model_test.py::T::test_i": Outcome("passed"),
    }


def test_a_test_reported_twice_keeps_its_worst_outcome() -> None:
    xml = ("<testsuites><testsuite>"
           "<testcase classname='tests.test_a' name='test_t'/>"
           "<testcase classname='tests.test_a' name='test_t'><error message='teardown'/></testcase>"
           "<testcase classname='tests.test_a' name='test_t'><skipped message='s'/></testcase>"
           "</testsuite></testsuites>")
    assert parse_junit(xml) == {"tests/test_a.py::test_t": Outcome("error", "teardown")}


def test_parse_allowed_reads_id_and_reason_and_skips_comments() -> None:
    text = ("# accepted deviations\n\n"
            "tests/test_model.py::ModelTestCase::test_count -- counts by scan: locks excluded\n"
            "  tests/test_model.py::test_delete[True]  --  reason with -- inside  \n")
    assert parse_allowed(text) == {
        "tests/test_model.py::ModelTestCase::test_count": "counts by scan: locks excluded",
        "tests/test_model.py::test_delete[True]": "reason with -- inside",
    }


@pytest.mark.parametrize("line", ["tests/test_model.py::test_x", "tests/x.py::t -- ",
                                  " -- a reason"])
def test_an_allowed_line_without_id_or_reason_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="allowed list line 1: expected"):
        parse_allowed(line + "\n")


def test_regressions_are_baseline_passes_that_did_not_pass_swapped() -> None:
    baseline = {
        "tests/a.py::still": Outcome("passed"),
        "tests/a.py::broke": Outcome("passed"),
        "tests/a.py::skipped_now": Outcome("passed"),
        "tests/a.py::failed_before": Outcome("failed", "x"),
        "tests/b.py::gone": Outcome("passed"),
        "tests/c.py::vanished": Outcome("passed"),
    }
    swapped = {
        "tests/a.py::still": Outcome("passed"),
        "tests/a.py::broke": Outcome("failed", "assert 1 == 2"),
        "tests/a.py::skipped_now": Outcome("skipped", "s"),
        "tests/a.py::failed_before": Outcome("error", "y"),
        f"tests/b.py::{COLLECTION}": Outcome("error", "ImportError: nope"),
    }
    allowed = {"tests/a.py::broke": "known"}
    assert find_regressions(baseline, swapped, allowed) == [
        Regression("tests/a.py::broke", Outcome("failed", "assert 1 == 2"), "known"),
        Regression("tests/a.py::skipped_now", Outcome("skipped", "s"), None),
        Regression("tests/b.py::gone", Outcome(MISSING, "ImportError: nope"), None),
        Regression("tests/c.py::vanished", Outcome(MISSING, "not collected"), None),
    ]


def test_summary_table_counts_unit_and_integration_apart() -> None:
    baseline = parse_junit(JUNIT)
    swapped = {**baseline, "tests/test_ok.py::TestA::test_x": Outcome("failed", "x")}
    assert summary_table(baseline, swapped).splitlines() == [
        "part        outcome     baseline   swapped",
        "unit        passed             2         1",
        "unit        failed             1         2",
        "unit        error              2         2",
        "unit        skipped            1         1",
        "unit        total              6         6",
        "integration passed             1         1",
        "integration failed             0         0",
        "integration error              0         0",
        "integration skipped            0         0",
        "integration total              1         1",
    ]


def test_render_marks_allowed_regressions_with_their_reason() -> None:
    assert render_regressions([
        Regression("tests/a.py::x", Outcome("failed", "boom"), None),
        Regression("tests/a.py::y", Outcome("missing", "not collected"), "why not"),
    ]).splitlines() == [
        "REGRESSION tests/a.py::x  [failed] boom",
        "allowed    tests/a.py::y  [missing] not collected",
        "             reason: why not",
    ]
