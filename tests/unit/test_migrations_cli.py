"""The migrate command without a server: the progress bar."""

from __future__ import annotations


def test_the_progress_bar_shows_scanned_items_locks_and_duplicates() -> None:
    import io

    from rich.console import Console

    from dynaunique.cli._migrations import RichReporter
    from dynaunique.migrations import Counters

    buffer = io.StringIO()
    reporter = RichReporter(Console(file=buffer, force_terminal=True, width=160))
    reporter.phase_started("0001_initial: fill Account.EMAIL", estimate=10)
    reporter.advance("0001_initial: fill Account.EMAIL",
                     Counters(scanned=10, records=9, written=8, duplicates=1))
    reporter.phase_finished("0001_initial: fill Account.EMAIL",
                            Counters(scanned=10, records=9, written=8, duplicates=1))
    reporter.note("Applied 0001_initial")
    reporter.stop()
    output = buffer.getvalue()
    assert "0001_initial: fill Account.EMAIL" in output
    assert "10/10" in output
    assert "scanned 10, records 9, locks written 8, duplicates 1" in output
    assert "Applied 0001_initial" in output
