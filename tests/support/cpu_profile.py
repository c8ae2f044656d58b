"""Where a test run's CPU goes, per test file: the pytest process itself, its local server, and
every other process it started (CLI subprocesses, their servers, Dask workers, Chromium).

A pytest plugin, and the report of what it wrote::

    PYTHONPATH=$PWD:$PWD/tests CPU_PROFILE_OUT=/tmp/cpu python -m pytest -p support.cpu_profile
    python tests/support/cpu_profile.py /tmp/cpu        # one row a file, the costliest first
    python tests/support/cpu_profile.py /tmp/cpu --durations tests/durations.json

``--durations`` writes each file's wall seconds, the longest first: the order in which
``tests/conftest.py`` hands files to the xdist workers.

Each test is charged the CPU-seconds its process, its live descendants (read from ``/proc``) and
its reaped children spent between the start and the end of its run (setup and teardown included,
so a module's fixtures are charged to the test that started them). Linux only.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_ROWS: list[list[Any]] = []


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid → (parent pid, CPU-seconds of it and its reaped children, command line)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK, command)
    return found


def _sample() -> tuple[float, float, float, float]:
    """(monotonic time, this process's CPU, its local servers', every other descendant's)."""
    me = os.getpid()
    processes = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    server = other = 0.0
    stack = list(children.get(me, []))
    while stack:
        pid = stack.pop()
        parent, cpu, command = processes[pid]
        if parent == me and "dynaunique.testing" in command:
            server += cpu
        else:
            other += cpu
        stack.extend(children.get(pid, []))
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (time.monotonic(), own.ru_utime + own.ru_stime, server,
            other + reaped.ru_utime + reaped.ru_stime)


try:
    import pytest
except ImportError:  # pragma: no cover - the report below needs no pytest
    pass
else:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        before = _sample()
        yield
        after = _sample()
        _ROWS.append([item.nodeid, *(round(b - a, 3) for a, b in zip(before, after, strict=True))])
        if len(_ROWS) % 50 == 0:  # a run stopped midway still leaves most of its rows
            _write()

    def pytest_sessionfinish(session: pytest.Session) -> None:
        _write()

    def _write() -> None:
        folder = Path(os.environ.get("CPU_PROFILE_OUT", "cpu-profile"))
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (folder / f"{worker}.json").write_text(json.dumps(_ROWS), encoding="utf-8")


def _files(folder: Path) -> dict[str, list[float]]:
    """Per test file: [tests, wall, pytest, server, other], summed over the workers' rows."""
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for path in folder.glob("*.json"):
        for nodeid, *numbers in json.loads(path.read_text(encoding="utf-8")):
            row = files[nodeid.split("::")[0]]
            row[0] += 1
            for index, number in enumerate(numbers, 1):
                row[index] += number
    return files


def report(folder: Path, top: int = 60) -> str:
    """One row a test file: tests, wall and CPU-seconds (pytest, server, other processes)."""
    lines = [f"{'file':58} {'tests':>5} {'wall':>7} {'pytest':>7} {'server':>7} {'other':>7} "
             f"{'cpu':>7}"]
    ranked = sorted(_files(folder).items(), key=lambda kv: -sum(kv[1][2:]))
    for name, (count, wall, own, server, other) in ranked[:top]:
        lines.append(f"{name[-58:]:58} {int(count):5d} {wall:7.1f} {own:7.1f} {server:7.1f} "
                     f"{other:7.1f} {own + server + other:7.1f}")
    return "\n".join(lines)


def durations(folder: Path) -> dict[str, float]:
    """Each file's wall seconds (setup and teardown included), the longest first."""
    walls = {name: row[1] for name, row in _files(folder).items()}
    return {name: round(wall, 1) for name, wall in sorted(walls.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    if sys.argv[2:3] == ["--durations"]:
        Path(sys.argv[3]).write_text(json.dumps(durations(Path(sys.argv[1])), indent=0) + "\n",
                                     encoding="utf-8")
    else:
        print(report(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
