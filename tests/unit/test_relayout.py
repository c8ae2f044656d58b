"""tools/relayout.py, the script that puts the core in its three folders (issue 39): its rewrites
as exact text, and one run on a small clone of the package's shape (git, no server)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("relayout", ROOT / "tools" / "relayout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["relayout"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


relayout = _load()
MOVES = {"dynaunique._flush": "dynaunique._write.flush",
         "dynaunique._wire": "dynaunique._transport.wire",
         "dynaunique._model.mixed": "dynaunique._write.mixed"}


def _from(source: str, package: str | None = None, make_absolute: bool = False) -> list[str] | None:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ImportFrom)
    result: list[str] | None = relayout.rewrite_import_from(node, package, MOVES, make_absolute)
    return result


def test_an_import_of_modules_by_name_keeps_the_names_it_binds() -> None:
    assert _from("from dynaunique import _flush, observe, _wire as w") == [
        "from dynaunique._write import flush as _flush",
        "from dynaunique import observe",
        "from dynaunique._transport import wire as w"]
    assert _from("from dynaunique._model import mixed, binding") == [
        "from dynaunique._write import mixed", "from dynaunique._model import binding"]


def test_an_import_from_a_moved_module_is_left_to_the_dotted_names() -> None:
    assert _from("from dynaunique._flush import flush") is None
    assert _from("from dynaunique import observe") is None
    assert relayout.rewrite_names("from dynaunique._flush import flush", MOVES) == (
        "from dynaunique._write.flush import flush", 1)


def test_relative_imports_resolve_from_the_files_old_package() -> None:
    # Only the module changes: the head is replaced, the names and comments stay.
    report = relayout.Report()
    assert relayout.rewrite_python_imports(
        "from .mixed import (  # why\n    judge,\n)\n", "dynaunique._model", MOVES, False,
        "x.py", report) == ("from dynaunique._write.mixed import (  # why\n    judge,\n)\n", 1)
    assert report.warnings == []
    assert _from("from .. import _flush", "dynaunique._model") == [
        "from dynaunique._write import flush as _flush"]
    assert _from("from ._names import x", "dynaunique.audit") is None
    # A file that moves: its relative imports become absolute (a new head for the statement).
    assert _from("from . import observe", "dynaunique", make_absolute=True) == [
        "from dynaunique import"]


def test_dotted_names_and_paths_match_whole_names_only() -> None:
    text = ('mock.patch("dynaunique._wire._send"); dynaunique._wireless; mydynaunique._flush; '
            "see dynaunique/_flush.py and dynaunique/cli/_flush.py")
    assert relayout.rewrite_names(text, MOVES) == (
        'mock.patch("dynaunique._transport.wire._send"); dynaunique._wireless; '
        "mydynaunique._flush; see dynaunique/_write/flush.py and dynaunique/cli/_flush.py", 2)


def test_a_docstring_line_made_long_joins_its_paragraph_and_a_list_item_keeps_its_indent() -> None:
    source = ('"""Intro.\n\n'
              "1. build it (``dynaunique._write.flush``), plan it (pure: "
              "``dynaunique._write.mixed``) now\n"
              "   and merge.\n"
              '"""\n')
    report = relayout.Report()
    text, wrapped = relayout.reflow(source, MOVES, 60, "x.py", report)
    assert text == ('"""Intro.\n\n'
                    "1. build it (``dynaunique._write.flush``), plan it (pure:\n"
                    "   ``dynaunique._write.mixed``) now and merge.\n"
                    '"""\n')
    assert (wrapped, report.warnings) == (1, [])


def test_a_divider_loses_dashes_and_code_is_only_reported() -> None:
    source = ("# --- for dynaunique._write.flush " + "-" * 40 + "\n"
              "x = 'dynaunique._write.flush' + 'a string that goes past sixty'\n")
    report = relayout.Report()
    text, _ = relayout.reflow(source, MOVES, 60, "x.py", report)
    assert text.split("\n")[0] == "# --- for dynaunique._write.flush " + "-" * 26
    assert text.split("\n")[1] == source.split("\n")[1]
    assert report.warnings == ["x.py:2: over 60 characters, left as it is"]


MAP = """# Decisions

## Map of the package

| module | what it does |
|---|---|
| `model.py` | The model. |
| `_model/mixed.py` | Mixed tables. |
| `_flush.py` | The write path. |
| `_wire.py` | The shim. |
| `aio.py` | Async. |

## Function budgets

Text.
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_a_run_moves_rewrites_and_a_second_run_changes_nothing(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    files = {
        "dynaunique/__init__.py": '"""The package."""\n',
        "dynaunique/_flush.py": "from dynaunique import _wire, observe\n\nX = _wire.Y\n",
        "dynaunique/_wire.py": "Y = 1\n",
        "dynaunique/observe.py": "",
        "dynaunique/_model/__init__.py": "",
        "dynaunique/_model/mixed.py": "from .. import _flush\n",
        "tests/test_x.py": 'import dynaunique._flush\n\nP = "dynaunique._wire.Y"\n',
        "docs/decisions.md": MAP,
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert relayout.main(["--root", str(tmp_path)]) == 0
    # (Sorted by ruff's import sort when ruff is found, as beside this Python.)
    assert sorted((tmp_path / "dynaunique/_write/flush.py").read_text(
        encoding="utf-8").splitlines()) == [
        "", "X = _wire.Y", "from dynaunique import observe",
        "from dynaunique._transport import wire as _wire"]
    assert not (tmp_path / "dynaunique/_lock").exists()  # nothing moved there
    assert (tmp_path / "dynaunique/_write/mixed.py").read_text(encoding="utf-8") == (
        "from dynaunique._write import flush as _flush\n")
    assert (tmp_path / "tests/test_x.py").read_text(encoding="utf-8") == (
        'import dynaunique._write.flush\n\nP = "dynaunique._transport.wire.Y"\n')
    assert not (tmp_path / "dynaunique/_flush.py").exists()
    assert (tmp_path / "dynaunique/_write/__init__.py").read_text(encoding="utf-8").startswith(
        '"""The write pipeline:')
    docs = (tmp_path / "docs/decisions.md").read_text(encoding="utf-8")
    rows = [line.split(" |")[0] for line in docs.splitlines() if line.startswith("| `")]
    assert rows == ["| `model.py`", "| `_write/__init__.py`", "| `_write/mixed.py`",
                    "| `_write/flush.py`", "| `_transport/__init__.py`",
                    "| `_transport/wire.py`", "| `aio.py`"]
    assert docs.index("## Layout: three layers") < docs.index("## Function budgets")
    capsys.readouterr()
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "y")
    assert relayout.main(["--root", str(tmp_path)]) == 0
    assert "move 0 modules (3 already moved" in capsys.readouterr().out
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, check=True,
                            capture_output=True, text=True).stdout
    assert status == ""
