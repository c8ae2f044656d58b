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
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
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
