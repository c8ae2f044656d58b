"""Backfill bookkeeping without a server: the progress counters add up."""

from __future__ import annotations

from dynaunique.migrations import (
    Counters,
    SilentReporter,
)


def test_counters_add_up() -> None:
    total = Counters(scanned=1, written=2, write_units=1.5)
    total.add(Counters(scanned=3, duplicates=1, write_units=0.5))
    assert total == Counters(scanned=4, written=2, duplicates=1, write_units=2.0)
    assert SilentReporter().note("x") is None
