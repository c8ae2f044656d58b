"""Backfill bookkeeping without a server: the progress counters add up."""

from __future__ import annotations

from dynaunique.migrations import (
    Counters,
    ProgressEvent,
    SilentReporter,
)
from dynaunique.migrations._kinds import ProgressState


def test_counters_add_up() -> None:
    total = Counters(scanned=1, written=2, write_units=1.5)
    total.add(Counters(scanned=3, duplicates=1, write_units=0.5))
    assert total == Counters(scanned=4, written=2, duplicates=1, write_units=2.0)
    assert SilentReporter().note("x") is None
    assert SilentReporter()(ProgressEvent(ProgressState.NOTE, text="x")) is None


# --- the lock puts: batches of a round, and their size under a cap --------------------------


def test_a_round_is_split_in_batches_every_thread_gets_one() -> None:
    from dynaunique.migrations._pages import _batches

    assert _batches(list(range(7)), 3, 1) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _batches(list(range(10)), 50, 4) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert _batches(list(range(120)), 50, 1) == [list(range(40)), list(range(40, 80)),
                                                 list(range(80, 120))]
    assert _batches([5, 9], 50, 16) == [[5], [9]]
    assert _batches([], 50, 4) == []


def test_a_capped_run_puts_a_tenth_of_a_seconds_worth_a_task() -> None:
    from types import SimpleNamespace

    from dynaunique.migrations._lockwrites import batch_size
    from dynaunique.migrations.ratelimit import Limiter

    def size(bucket: object) -> int:
        return batch_size(SimpleNamespace(bucket=bucket))  # type: ignore[arg-type]

    assert [size(None), size(Limiter()), size(Limiter(8)), size(Limiter(400)),
            size(Limiter(100_000))] == [50, 50, 1, 40, 50]   # a put: one write unit
