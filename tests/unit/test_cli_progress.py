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
