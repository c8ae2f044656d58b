"""How commands print tables: rich on a terminal, plain tab-separated rows when piped."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from dynaunique.cli import _output
from dynaunique.cli._output import Output

LONG = "user10" + "x" * 110 + "@x.io"


def _piped(monkeypatch: pytest.MonkeyPatch) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(_output.sys, "stdout", out)
    monkeypatch.setattr(_output.sys, "stderr", err)
    return Output(), out, err


def test_piped_a_table_is_a_header_and_one_line_per_row_whatever_the_length(
        monkeypatch: pytest.MonkeyPatch) -> None:
    output, out, err = _piped(monkeypatch)
    assert not output.terminal
    output.table(("kind", "value", "records holding it"), [
        ("missing lock", LONG, ["ACCT#1 / PROFILE", "ACCT#2 / PROFILE"]),
        (Text("held", "green"), "tab\there\nnewline\\slash", []),
    ], title="Findings")
    output.note("2 finding(s): " + "y" * 150)
    assert out.getvalue() == (
        "kind\tvalue\trecords holding it\n"
        f"missing lock\t{LONG}\tACCT#1 / PROFILE; ACCT#2 / PROFILE\n"
        "held\ttab\\there\\nnewline\\\\slash\t-\n"
    )
    # Titles and notes go to stderr, never wrapped either.
    assert err.getvalue() == "Findings\n2 finding(s): " + "y" * 150 + "\n"


def test_on_a_terminal_a_table_is_drawn_by_rich_and_values_are_not_markup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    output = Output()
    output.terminal = True
    output.out = Console(file=buffer, force_terminal=True, width=100, color_system=None)
    output.table(("constraint", "value"), [("EMAIL", "[red]not markup[/]")], title="Locks")
    output.note("1 lock(s)")
    text = buffer.getvalue()
    assert "┃ constraint ┃ value" in text
    assert "[red]not markup[/]" in text
    assert text.rstrip().endswith("1 lock(s)")
