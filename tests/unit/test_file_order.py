"""The order in which the xdist workers get the test files (support/file_order.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import file_order

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class _Item:
    nodeid: str


def test_the_longest_measured_files_go_first_and_each_file_stays_whole(tmp_path: Path) -> None:
    measured = tmp_path / "durations.json"
    measured.write_text(json.dumps({"b.py": 5.0, "c.md": 30.0}), encoding="utf-8")
    items: list[Any] = [_Item(n) for n in (
        "a.py::one", "a.py::two", "b.py::one", "b.py::two", "c.md::line:3", "c.md::line:9",
        "d.py::one")]
    file_order.longest_first(items, measured)
    assert [i.nodeid for i in items] == [
        "c.md::line:3", "c.md::line:9", "b.py::one", "b.py::two", "a.py::one", "a.py::two",
        "d.py::one"]


def test_every_measured_file_exists() -> None:
    """A file renamed or removed leaves its entry behind: remeasure (tests/README.md)."""
    seconds = json.loads(file_order.DURATIONS.read_text(encoding="utf-8"))
    assert [name for name in seconds if not (ROOT / name).is_file()] == []
    assert list(seconds.values()) == sorted(seconds.values(), reverse=True)
