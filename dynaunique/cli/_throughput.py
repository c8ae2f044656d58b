"""``migrate``'s throughput options: ``--concurrency`` (lock writes in flight per segment),
``--max-wcu`` and ``--max-rcu`` (capacity caps over all workers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., Any])

_OPTIONS = [
    click.option("--concurrency", type=click.IntRange(1, 256), default=None,
                 help="Lock writes of a scanned page in flight at once, per segment (default "
                      "1, or [tool.dynaunique] concurrency)."),
    click.option("--max-wcu", type=click.FloatRange(min=0.1), default=None,
                 help="Cap on write capacity units per second (over all workers, shared "
                      "through the ledger)."),
    click.option("--max-rcu", type=click.FloatRange(min=0.1), default=None,
                 help="Cap on the scan's read capacity units per second (over all workers)."),
]


def throughput_options(command: _F) -> _F:
    """Add the throughput options to ``command``."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command
