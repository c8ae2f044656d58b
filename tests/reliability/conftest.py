"""Options and fixtures of the reliability suite: ``--soak``/``--soak-ops``, the fault proxy, and
the end-of-run report of what the suite measured (printed only when asked: ``--reliability-report``,
``-v``, or a soak of its own length; a quiet ``pytest -q`` ends with pytest's own summary).

The short soak runs by default (CI). The long form runs with ``--soak`` (or the environment
variable ``DYNAUNIQUE_SOAK=1``), ``--soak-ops N`` (or ``DYNAUNIQUE_SOAK_OPS=N``) sets the number
of operations. ``--soak`` is registered here, so pass it with this folder on the command line
(``pytest tests/reliability --soak``); the environment variables work from anywhere.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from .proxy import FaultProxy

SHORT_OPS = 150
LONG_OPS = 2500


class Summary:
    """Numbers the reliability tests measured, printed at the end of the pytest run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sections: list[tuple[str, list[str]]] = []
        #: Faults injected by the per-test proxies, by kind, and how many tests injected any.
        self.faults: Counter[str] = Counter()
        self.fault_tests = 0

    def add(self, title: str, lines: list[str]) -> None:
        """Add one titled block of lines to the end-of-run report."""
        with self._lock:
            self.sections.append((title, list(lines)))

    def add_faults(self, injected: dict[str, int]) -> None:
        """Count the faults one test's proxy injected."""
        with self._lock:
            self.faults.update(injected)
            self.fault_tests += 1

    def export(self) -> dict[str, object]:
        """What this process measured, as plain data (an xdist worker hands it to the
        controller, which :meth:`merge` s it: see the root conftest)."""
        with self._lock:
            return {"sections": [[title, lines] for title, lines in self.sections],
                    "faults": dict(self.faults), "fault_tests": self.fault_tests}

    def merge(self, exported: dict[str, Any]) -> None:
        """Add what :meth:`export` returned in another process."""
        with self._lock:
            self.sections.extend((title, list(lines)) for title, lines in exported["sections"])
            self.faults.update(exported["faults"])
            self.fault_tests += int(exported["fault_tests"])


_SUMMARY = Summary()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--soak``, ``--soak-ops`` and ``--reliability-report`` (unless a conftest
    higher up already did, so that ``pytest --soak`` can work from the repository root too)."""
    group = parser.getgroup("dynaunique-reliability")
    for name, kwargs in (
        ("--soak", {"action": "store_true", "default": False,
                    "help": f"run the long soak ({LONG_OPS} operations unless --soak-ops)"}),
        ("--soak-ops", {"type": int, "default": None,
                        "help": f"number of soak operations (default {SHORT_OPS}, or "
                                f"{LONG_OPS} with --soak)"}),
        ("--reliability-report", {"action": "store_true", "default": False,
                                  "help": "print what the reliability tests measured "
                                          "(also with -v, --soak or --soak-ops)"}),
    ):
        with contextlib.suppress(ValueError):  # already registered
            group.addoption(name, **kwargs)


def _option(config: pytest.Config, name: str) -> object:
    # The option is missing when this conftest was not loaded at startup (run from the root).
    try:
        return config.getoption(name)
    except ValueError:
        return None


@pytest.fixture
def soak_ops(request: pytest.FixtureRequest) -> int:
    """How many operations the soak runs: short by default, long on demand."""
    ops = _option(request.config, "--soak-ops") or os.environ.get("DYNAUNIQUE_SOAK_OPS")
    if ops:
        return int(str(ops))
    long_run = bool(_option(request.config, "--soak")) or os.environ.get("DYNAUNIQUE_SOAK") == "1"
    return LONG_OPS if long_run else SHORT_OPS


@pytest.fixture
def summary() -> Summary:
    """The end-of-run report the soak and fault tests write their numbers to."""
    return _SUMMARY


@pytest.fixture(scope="session")
def _proxy_server(dynaunique_endpoint: str) -> Iterator[FaultProxy]:
    # One proxy (one port) for the session: models pointed at it keep their clients.
    with FaultProxy(dynaunique_endpoint) as running:
        yield running


@pytest.fixture
def proxy(dynaunique_db: str, _proxy_server: FaultProxy) -> Iterator[FaultProxy]:
    """The :class:`FaultProxy` in front of the freshly reset local server, with no rules and
    no recorded requests."""
    _proxy_server.clear()
    before = dict(_proxy_server.injected)
    yield _proxy_server
    _proxy_server.wait_idle()
    injected = {f.value: n - before[f] for f, n in _proxy_server.injected.items()
                if n > before[f]}
    if injected:
        _SUMMARY.add_faults(injected)
    _proxy_server.clear()


#: The key of an xdist worker's ``workeroutput`` that carries its :class:`Summary`.
WORKER_OUTPUT = "dynaunique_reliability"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker, hand the numbers to the controller (which prints them)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKER_OUTPUT] = _SUMMARY.export()


def report_wanted(config: pytest.Config) -> bool:
    """Whether the run asked for the report: ``--reliability-report``, ``-v``, or a soak of its
    own length (``--soak``, ``--soak-ops``, or their variables), whose numbers are the point; a
    quiet ``pytest -q`` prints none of it."""
    asked = (_option(config, "--reliability-report") or _option(config, "--soak")
             or _option(config, "--soak-ops") or os.environ.get("DYNAUNIQUE_SOAK") == "1"
             or os.environ.get("DYNAUNIQUE_SOAK_OPS"))
    return bool(asked) or config.get_verbosity() > 0


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print what the soak measured and how many faults were injected, when asked."""
    if not report_wanted(terminalreporter.config):
        return
    if not (_SUMMARY.sections or _SUMMARY.faults):
        return
    terminalreporter.section("dynaunique reliability")
    for title, lines in _SUMMARY.sections:
        terminalreporter.write_line(f"{title}:")
        for line in lines:
            terminalreporter.write_line(f"  {line}")
    if _SUMMARY.faults:
        shown = ", ".join(f"{kind} {n}" for kind, n in sorted(_SUMMARY.faults.items()))
        terminalreporter.write_line(
            f"fault proxy: {_SUMMARY.fault_tests} tests injected faults: {shown}")
