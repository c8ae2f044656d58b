"""The reliability report (tests/reliability/conftest.py) is printed only when asked: a quiet
``pytest -q`` ends with pytest's own summary (tests/README.md, "The reliability report")."""

from __future__ import annotations

import pytest
from reliability import conftest as reliability

pytest_plugins = ["pytester"]

_CONFTEST = """
from reliability.conftest import pytest_addoption, pytest_terminal_summary, summary
"""

_TEST = """
def test_a_soak_measures(summary):
    summary.add("soak", ["150 operations, 0 duplicates"])
    summary.add_faults({"reset": 2})
"""


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # A fresh summary: the inner run must not print (or add to) this process's numbers.
    monkeypatch.setattr(reliability, "_SUMMARY", reliability.Summary())
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_soak=_TEST)
    return pytester


_REPORT = ["*= dynaunique reliability =*", "soak:", "  150 operations, 0 duplicates",
           "fault proxy: 1 tests injected faults: reset 2"]


def test_a_quiet_run_prints_no_report(run: pytest.Pytester,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DYNAUNIQUE_SOAK", raising=False)
    monkeypatch.delenv("DYNAUNIQUE_SOAK_OPS", raising=False)
    result = run.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "dynaunique reliability" not in result.stdout.str()
    assert "150 operations" not in result.stdout.str()


@pytest.mark.parametrize("asked", [["-q", "--reliability-report"], ["-v"], ["-q", "--soak"],
                                   ["-q", "--soak-ops", "20"]])
def test_the_report_is_printed_when_asked(run: pytest.Pytester, asked: list[str]) -> None:
    result = run.runpytest_inprocess(*asked, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(_REPORT)


@pytest.mark.parametrize("variable", [("DYNAUNIQUE_SOAK", "1"), ("DYNAUNIQUE_SOAK_OPS", "20")])
def test_a_soak_asked_for_in_the_environment_prints_it_too(
        run: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: tuple[str, str]) -> None:
    monkeypatch.setenv(*variable)
    result = run.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(_REPORT)
