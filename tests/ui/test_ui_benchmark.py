"""benchmarks/ui.py runs end to end on a small table: every lock is paged through exactly once
(it asserts that itself), the sparse search finds its one match, and it prints each measure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# benchmarks/ is a folder of the repository, not part of the installed package.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import ui as bench  # noqa: E402


def test_the_paging_benchmark_runs_on_a_small_table(dynaunique_db: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = bench.main(["--records", "60", "--page-size", "10", "--http-pages", "3",
                       "--endpoint", dynaunique_db])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("seeded 60 records, 120 locks (180 items) in ")
    assert lines[1].startswith("lock_page, 10 locks a page, the whole listing (120 locks): ")
    assert lines[2].startswith("one bare boto3 Scan (Limit=10) at the same places")
    assert lines[3].startswith("GET /locks over HTTP (render included), 10 a page: 3 pages: ")
    assert lines[4].startswith("GET /locks, EMAIL values starting 'user000059' (1 match among")
    assert lines[5].startswith("list_locks, the whole listing at once (120 locks): ")
    assert lines[-1].startswith("slowest page: ")
    assert code == 0, lines
