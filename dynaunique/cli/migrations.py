"""Commands of the migrations group (being written)."""

from __future__ import annotations

import click

#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = []
