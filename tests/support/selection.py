"""What a named test file runs: the markers the default run leaves out do not hide it.

pyproject.toml's addopts deselect ``external`` and ``exhaustive`` tests (tests/README.md, "Two
runs") so that ``python -m pytest -q`` stays short; but whoever names a file or a test on the
command line (``pytest tests/ui/test_ui_browser.py``, ``pytest tests/unit/test_normalizers.py::
test_nfkc_casefold_is_a_fixed_point_on_every_string``) means to run it, as Django's test runner
and pytest itself without addopts would. So when every argument names a file or a test (none a
folder) and ``-m`` is still the default one, the run deselects only ``slow`` (which stays on
demand, as before). A ``-m`` of your own always wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: The ``-m`` of pyproject.toml's addopts (tests/unit/test_ci_runs.py checks they agree).
DEFAULT = "not slow and not external and not exhaustive"
#: What a run that names files deselects instead.
NAMED = "not slow"


def names_files(args: Sequence[str], root: Path) -> bool:
    """Whether every argument names a file or a test in one (``path::name``), not a folder."""
    paths = [Path(arg.split("::", 1)[0]) for arg in args if not arg.startswith("-")]
    return bool(paths) and all((p if p.is_absolute() else root / p).is_file() for p in paths)


def markexpr(current: str, args: Sequence[str], root: Path, from_command_line: bool) -> str:
    """The ``-m`` expression to run with."""
    if current == DEFAULT and from_command_line and names_files(args, root):
        return NAMED
    return current
