"""The check command's progress bar: on a terminal only, and labelled with what it reads."""

from __future__ import annotations

import io
import sys

import pytest

from dynaunique.cli import _locks


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _bar_text(monkeypatch: pytest.MonkeyPatch, *label: str) -> str:
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("TTY_INTERACTIVE", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with _locks._progress(True, *label) as update:
        assert update is not None
        update(3, 10)
    return terminal.getvalue()


def test_the_scan_bar_says_scanning(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "scanning" in _bar_text(monkeypatch)


def test_the_export_bar_says_what_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _bar_text(monkeypatch, "reading the export")
    assert "reading the export" in text and "scanning" not in text


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with _locks._progress(True, "reading the export") as update:
        assert update is None
    with _locks._progress(False) as update:
        assert update is None


# --- count, rate and ETA at 80 columns (issue 40) ---------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _rendered(width: int, label: str, counts: str | None) -> list[str]:
    """The lines of one bar 40 % through 5,000 items at 100 items a second, as a terminal of
    ``width`` columns shows them."""
    from rich.console import Console

    from dynaunique.cli._output import progress_bar

    clock = _Clock()
    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    fields = None if counts is None else "{task.fields[counts]}"
    bar = progress_bar(console, fields=fields, get_time=clock)
    task = bar.add_task(label, total=5000, counts=counts or "")
    for _ in range(20):  # 20 s at 100 items a second
        clock.now += 1.0
        bar.update(task, advance=100)
    console.print(bar.make_tasks_table(bar.tasks))
    return console.file.getvalue().splitlines()


MIGRATE_COUNTS = ("scanned 2000, records 2000, locks written 1990, already right 4, deleted 1, "
                  "duplicates 5")


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize(("label", "counts"), [
    ("scanning", None),
    ("reading the export", None),
    ("0003_add_handle: fill Account.HANDLE", MIGRATE_COUNTS),
])
def test_the_bar_keeps_count_rate_eta_and_elapsed_within_the_width(
        width: int, label: str, counts: str | None) -> None:
    lines = _rendered(width, label, counts)
    assert len(lines) == 1
    line = lines[0]
    assert len(line) <= width
    assert "2000/5000" in line
    assert "100/s" in line
    assert "ETA 0:00:30" in line  # 3,000 items left at 100 a second
    assert "0:00:20" in line      # elapsed
    assert label[:6] in line


def test_what_does_not_fit_is_cut_with_an_ellipsis_and_shows_whole_when_it_fits() -> None:
    narrow = _rendered(80, "0003_add_handle: fill Account.HANDLE",
                       MIGRATE_COUNTS)[0]
    assert "…" in narrow
    wide = _rendered(200, "0003_add_handle: fill Account.HANDLE",
                     MIGRATE_COUNTS)[0]
    assert "…" not in wide
    assert "0003_add_handle: fill Account.HANDLE" in wide
    assert MIGRATE_COUNTS in wide
