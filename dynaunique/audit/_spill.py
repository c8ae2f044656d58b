"""Rows sorted by key in memory that does not grow with their number: sorted runs on disk, merged.

The export audit (:mod:`dynaunique.audit._export_check`) needs, for every lock key, the lock item
and the records that require it — rows that arrive in the order of the export's files, not by
key. :class:`_Spill` keeps at most ``run_rows`` rows in memory (each payload marshalled): each
full batch is sorted and written to a temporary file (``marshal``: the rows are plain data it
wrote itself), and
:meth:`_Spill.sorted` merges the runs (``heapq.merge``), at most :data:`_FAN_IN` files open at
once (more runs are first merged into fewer). docs/decisions.md says why this and not sqlite or
an in-memory dict, with the measurement.
"""

from __future__ import annotations

import heapq
import marshal
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any

#: One row: (sort key, kind, payload): sorted by key, then kind; payload is plain data.
Row = tuple[str, int, Any]

#: Rows held in memory before a sorted run is written (their payloads marshalled: a lock item
#: is about 300 bytes, so some 40 MB).
RUN_ROWS = 100_000
#: Runs merged at once (open files).
_FAN_IN = 64


def _order(row: Row) -> tuple[str, int]:
    return row[0], row[1]


def _write_run(rows: Iterable[Row], directory: str) -> str:
    handle, path = tempfile.mkstemp(prefix="run-", suffix=".marshal", dir=directory)
    with os.fdopen(handle, "wb", buffering=1 << 20) as out:
        for row in rows:
            marshal.dump(row, out)
    return path


def _read_run(path: str) -> Iterator[Row]:
    source: IO[bytes]
    with open(path, "rb", buffering=1 << 16) as source:
        while True:
            try:
                yield marshal.load(source)
            except EOFError:
                return


class _Spill:
    """Collect rows (:meth:`add`), then read them back sorted by (key, kind) (:meth:`sorted`),
    rows of equal (key, kind) in the order they were added.

    Use it as a context manager: its temporary directory is removed on exit.
    """

    def __init__(self, *, run_rows: int = RUN_ROWS, directory: str | None = None) -> None:
        if run_rows < 1:
            raise ValueError("run_rows must be at least 1")
        self._run_rows = run_rows
        self._tmp = tempfile.TemporaryDirectory(prefix="dynaunique-spill-", dir=directory)
        self._rows: list[Row] = []
        self._runs: list[str] = []
        #: Rows added so far.
        self.count = 0

    def __enter__(self) -> _Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the runs written so far."""
        self._rows = []
        self._runs = []
        self._tmp.cleanup()

    @property
    def runs(self) -> int:
        """Sorted runs written to disk so far."""
        return len(self._runs)

    def add(self, row: Row) -> None:
        """Keep one row (written out with its batch once ``run_rows`` are held)."""
        # The payload is held marshalled: a few hundred bytes, not a tree of small dicts.
        self._rows.append((row[0], row[1], marshal.dumps(row[2])))
        self.count += 1
        if len(self._rows) >= self._run_rows:
            self._write_out()

    def _write_out(self) -> None:
        if self._rows:
            self._rows.sort(key=_order)  # stable: equal keys keep the order they came in
            self._runs.append(_write_run(self._rows, self._tmp.name))
            self._rows = []

    def sorted(self) -> Iterator[Row]:
        """Every row added, sorted by (key, kind). Adding rows afterwards is not allowed."""
        if not self._runs:
            self._rows.sort(key=_order)
            rows: Iterable[Row] = self._rows
        else:
            self._write_out()
            while len(self._runs) > _FAN_IN:
                # Merge the oldest runs first, so rows of equal (key, kind) keep their order.
                first, self._runs = self._runs[:_FAN_IN], self._runs[_FAN_IN:]
                merged = _write_run(heapq.merge(*map(_read_run, first), key=_order),
                                    self._tmp.name)
                for path in first:
                    os.remove(path)
                self._runs.insert(0, merged)
            rows = heapq.merge(*map(_read_run, self._runs), key=_order)
        for key, kind, payload in rows:
            yield key, kind, marshal.loads(payload)
