"""The migrate command without a server: the progress bar."""

from __future__ import annotations


def test_the_progress_bar_shows_scanned_items_locks_and_duplicates() -> None:
    import io

    from rich.console import Console

    from dynaunique.cli._migrations import RichReporter
    from dynaunique.migrations import Counters, ProgressEvent
    from dynaunique.migrations._kinds import ProgressState

    buffer = io.StringIO()
    reporter = RichReporter(Console(file=buffer, force_terminal=True, width=160))
    label = "0001_initial: fill Account.EMAIL"
    counters = Counters(scanned=10, records=9, written=8, duplicates=1)
    # The executor's progress callback: the bar is fed events.
    for event in (ProgressEvent(ProgressState.STARTED, label, estimate=10),
                  ProgressEvent(ProgressState.RUNNING, label, counters, segment=0, segments=1),
                  ProgressEvent(ProgressState.RECORD),
                  ProgressEvent(ProgressState.FINISHED, label, counters),
                  ProgressEvent(ProgressState.NOTE, text="Applied 0001_initial")):
        reporter(event)
    reporter.stop()
    output = buffer.getvalue()
    assert "0001_initial: fill Account.EMAIL" in output
    assert "10/10" in output
    assert "scanned 10, records 9, locks written 8, duplicates 1" in output
    assert "Applied 0001_initial" in output


def test_a_resumed_phase_counts_the_duplicates_standing_not_a_difference() -> None:
    import io

    from rich.console import Console

    from dynaunique.cli._migrations import PlainReporter
    from dynaunique.migrations import Counters

    buffer = io.StringIO()
    reporter = PlainReporter(Console(file=buffer, width=200), every=0.0)
    label = "0001_initial: fill Account.EMAIL"
    reporter.phase_started(label, estimate=None, so_far=Counters(scanned=20, duplicates=2))
    reporter.advance(label, Counters(duplicates=-1))  # a re-check found one fixed
    reporter.advance(label, Counters(scanned=3, records=3, written=3, duplicates=-1))
    assert buffer.getvalue().splitlines() == [
        f"  {label}",
        "    scanned 0, records 0, locks written 0, duplicates 1",
        "    scanned 3, records 3, locks written 3, duplicates 0",
    ]
