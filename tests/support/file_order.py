"""The order in which ``--dist loadfile`` hands the test files to the xdist workers.

xdist hands files out in collection order once pyproject.toml turns its own order off
(``--no-loadscope-reorder``; that order, the files with most tests first, left the long files of
few tests, a browser, a Dask cluster, the rate-limited migrations, for the end, one worker
finishing alone). Here the longest files go first, the classic LPT schedule: the run ends on
short files. The seconds are measured, one worker's wall time a file
(``python tests/support/cpu_profile.py FOLDER --durations tests/durations.json``); files not in
``tests/durations.json`` keep their collection order, after the measured ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

#: Each test file's wall time in one worker, measured, the longest first.
DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"


class _Item(Protocol):
    nodeid: str


def longest_first(items: list[_Item], durations: Path = DURATIONS) -> None:
    """Sort ``items`` in place, the longest files first. A test's place within its file never
    changes, and a file's tests stay together (the sort is stable and its key is the file's)."""
    seconds: dict[str, float] = json.loads(durations.read_text(encoding="utf-8"))
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))
