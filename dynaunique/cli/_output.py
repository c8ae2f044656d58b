"""Where a command prints: rich tables on a terminal, plain rows when the output is piped.

On a terminal a table is drawn with rich (a long value folds inside its cell). When stdout is
not a terminal (``| grep``, ``> file``, CI, click's CliRunner) nothing is ever wrapped or cut:
each table is a header line and one tab-separated line per row on stdout, and every other line
(summaries, costs, advice) goes to stderr, so stdout holds the rows only. A tab, newline or
backslash inside a value is written ``\\t``, ``\\n``, ``\\\\``; several values in one cell (the
records holding a value) are separated by ``"; "``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column, Table
from rich.text import Text

#: A cell: plain text (printed literally, never read as rich markup), or styled text.
Cell = str | Text


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


class Output:
    """One command's output. Created per command, so that click's CliRunner, which swaps
    ``sys.stdout``, captures it."""

    def __init__(self) -> None:
        #: Whether stdout is a terminal (rich tables) or not (plain rows).
        self.terminal = sys.stdout.isatty()
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=not self.terminal)
        self.err = Console(file=sys.stderr, highlight=False, soft_wrap=True)

    def note(self, text: str, style: str | None = None) -> None:
        """A line that is not a row: on stdout on a terminal, on stderr otherwise."""
        console = self.out if self.terminal else self.err
        console.print(Text(text, style=style or ""))

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Cell | Sequence[str]]], *,
              title: str | None = None) -> None:
        """Print ``rows`` under ``columns``; a cell that is a list holds several values."""
        if self.terminal:
            table = Table(title=title, title_justify="left", show_lines=False)
            for column in columns:
                # fold: a value is never cut short with an ellipsis; an operator copies it.
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(*(_rich_cell(cell) for cell in row))
            self.out.print(table)
            return
        if title:
            self.err.print(Text(title))
        lines = ["\t".join(columns)]
        lines.extend("\t".join(_plain_cell(cell) for cell in row) for row in rows)
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.flush()


def _rich_cell(cell: Cell | Sequence[str]) -> Text:
    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return Text(cell)
    return Text("\n".join(cell) or "-")


def _plain_cell(cell: Cell | Sequence[str]) -> str:
    if isinstance(cell, Text):
        return _escaped(cell.plain)
    if isinstance(cell, str):
        return _escaped(cell)
    return "; ".join(_escaped(value) for value in cell) or "-"


# --- progress bars -------------------------------------------------------------------------------


class _Rate(ProgressColumn):
    """Items a second (``1,234/s``; ``-/s`` until rich has two samples)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "-/s", style="progress.data.speed")


class _Eta(ProgressColumn):
    """Time left at the current rate (``ETA 0:01:05``; ``ETA -:--:--`` without a total)."""

    def render(self, task: Task) -> Text:
        remaining = 0.0 if task.finished else task.time_remaining
        shown = "-:--:--" if remaining is None else str(timedelta(seconds=int(remaining)))
        return Text(f"ETA {shown}", style="progress.remaining")


#: Columns of the fixed part: spinner, bar, count (up to 6 digits each side), rate, ETA,
#: elapsed, and the gap after each column: 59, which leaves 21 columns of 80.
_FIXED_WIDTH = (1 + 1) + (12 + 1) + (13 + 1) + (9 + 1) + (11 + 1) + (7 + 1)
_FLEXIBLE_MIN = 12


def progress_bar(console: Console, *, fields: str | None = None, transient: bool = False,
                 get_time: Callable[[], float] | None = None) -> Progress:
    """The commands' one progress bar: label, bar, count, rate, ETA and elapsed time, and
    ``fields`` (a ``{task.fields[...]}`` template) last. The label and the fields share what the
    console's width leaves and are cut with an ellipsis, so the count, the rate and the times
    always show, at 80 columns too (the label takes at most half of what is left, and 40
    columns, when there are fields)."""
    flexible = max(_FLEXIBLE_MIN, console.width - _FIXED_WIDTH)
    label_width = flexible if fields is None else max(_FLEXIBLE_MIN // 2, min(40, flexible // 2))
    columns: list[ProgressColumn | str] = [
        SpinnerColumn(),
        TextColumn("{task.description}", table_column=Column(
            no_wrap=True, overflow="ellipsis", max_width=label_width)),
        BarColumn(bar_width=12),
        MofNCompleteColumn(table_column=Column(no_wrap=True)),
        _Rate(table_column=Column(no_wrap=True)),
        _Eta(table_column=Column(no_wrap=True)),
        TimeElapsedColumn(table_column=Column(no_wrap=True)),
    ]
    if fields is not None:
        columns.append(TextColumn(fields, table_column=Column(
            no_wrap=True, overflow="ellipsis",
            max_width=max(_FLEXIBLE_MIN // 2, flexible - label_width - 1))))
    return Progress(*columns, console=console, transient=transient, get_time=get_time)
