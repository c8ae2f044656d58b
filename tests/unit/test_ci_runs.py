"""What the default run leaves out, CI runs (tests/README.md, "Two runs").

pyproject.toml's addopts deselect three markers; ``slow`` is on demand, every other one must be
selected by a ``python -m pytest`` line of ``.ci/run``, so that no test is silently never run.
The expressions are pytest's own (``_pytest.mark.expression``), evaluated as ``-m`` does.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression
from support import selection

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli on Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
ON_DEMAND = {"slow"}


def _ini() -> dict[str, Any]:
    """pyproject.toml's ``[tool.pytest.ini_options]``."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return dict(options["tool"]["pytest"]["ini_options"])


def _default_expression() -> str:
    addopts = shlex.split(_ini()["addopts"])
    return addopts[addopts.index("-m") + 1]


def _markers() -> list[str]:
    return [line.split(":", 1)[0] for line in _ini()["markers"]]


def _ci_expressions() -> list[str]:
    """The ``-m`` of each ``python -m pytest`` command of .ci/run (none: the default's)."""
    found = []
    for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*python -m pytest\b", line):
            words = shlex.split(line)
            found.append(words[words.index("-m", 3) + 1] if "-m" in words[3:]
                         else _default_expression())
    return found


def _selects(expression: str, *markers: str) -> bool:
    """Whether ``-m expression`` runs a test that carries ``markers`` (and no other)."""
    return Expression.compile(expression).evaluate(lambda name, **_: name in markers)


def test_the_default_run_leaves_out_exactly_the_slow_external_and_exhaustive_tests() -> None:
    left_out = [m for m in _markers() if not _selects(_default_expression(), m)]
    assert left_out == ["slow", "external", "exhaustive"]
    assert _selects(_default_expression(), "an-unmarked-test")


def test_ci_runs_every_test_the_default_run_leaves_out_except_the_slow_ones() -> None:
    expressions = _ci_expressions()
    assert expressions[0] == _default_expression()  # the README's command comes first
    never_run = [m for m in _markers()
                 if m not in ON_DEMAND and not any(_selects(e, m) for e in expressions)]
    assert never_run == []
    # Nothing runs twice: the second step selects no test the first one ran.
    assert not _selects(expressions[1], "an-unmarked-test")
    # A slow case of an exhaustive test (the repair's replaying reference: 2 minutes) stays
    # on demand: CI's second step does not run it.
    assert _selects(expressions[1], "exhaustive")
    assert not _selects(expressions[1], "exhaustive", "slow")
    assert not _selects(expressions[1], "external", "slow")


# --- a file named on the command line runs (support/selection.py) ------------------------------


def test_the_selection_s_default_is_pyproject_s() -> None:
    assert _default_expression() == selection.DEFAULT


@pytest.mark.parametrize(("args", "expected"), [
    (["tests/unit/test_normalizers.py"], "not slow"),
    (["tests/unit/test_normalizers.py::test_nfkc_casefold_is_a_fixed_point_on_every_string"],
     "not slow"),
    (["README.md", "tests/ui/test_ui_browser.py", "-x"], "not slow"),
    (["tests/unit"], selection.DEFAULT),                          # a folder: the default run
    (["tests/unit", "tests/unit/test_deploy.py"], selection.DEFAULT),
    (["tests/unit/no_such_file.py"], selection.DEFAULT),
    ([], selection.DEFAULT),
])
def test_naming_files_deselects_only_the_slow_tests(args: list[str], expected: str) -> None:
    assert selection.markexpr(selection.DEFAULT, args, ROOT, True) == expected


def test_testpaths_and_an_own_m_keep_their_expression() -> None:
    # No argument given: pytest runs testpaths (README.md is a file, tests/ a folder).
    assert selection.markexpr(selection.DEFAULT, ["README.md"], ROOT, False) == selection.DEFAULT
    assert selection.markexpr("external", ["tests/unit/test_deploy.py"], ROOT, True) == "external"


# --- every claimed Python (noxfile.py; issue 40) -----------------------------------------------


def _noxfile_constant(name: str) -> Any:
    import ast

    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    (value,) = [node.value for node in tree.body if isinstance(node, ast.AnnAssign | ast.Assign)
                and name in [getattr(t, "id", None) for t in
                             (node.targets if isinstance(node, ast.Assign) else [node.target])]]
    return ast.literal_eval(value)


def test_the_classifiers_name_exactly_the_pythons_nox_tests() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    claimed = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
               if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert claimed == _noxfile_constant("PYTHONS")
    assert project["requires-python"] == f">={claimed[0]}"


def test_ci_runs_nox_on_every_python_but_the_main_one() -> None:
    pythons, main = _noxfile_constant("PYTHONS"), _noxfile_constant("MAIN")
    (line,) = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
               if re.match(r"\s*(\S+=\S+\s+)?python -m nox\b", line)]
    words = shlex.split(line.split("python -m nox", 1)[1])
    assert words[0] == "--python"
    assert words[1:] == [p for p in pythons if p != main]
    assert main in pythons
