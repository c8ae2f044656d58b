"""Shared test configuration.

The local DynamoDB fixtures (``dynaunique_db``, ``dynaunique_endpoint``) come from dynaunique's
pytest plugin (``dynaunique.testing._pytest_plugin``), which the ``pytest11`` entry point loads
automatically once the package is installed (``pip install -e '.[dev]'``); do not list it in
``pytest_plugins`` (it would be registered twice). Add fixtures here only when several test modules
share them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from support import botocore_loader, examples, file_order

# Every botocore session of a test process shares one data loader (support/botocore_loader.py):
# about 160 ms of CPU saved per session, and PynamoDB makes one per model connection.
botocore_loader.install()
# Hypothesis: the quick profile by default, `--hypothesis-profile deep` for the stated counts.
examples.register()


@pytest.fixture(scope="session", autouse=True)
def _fake_aws_environment() -> Any:
    """Fake credentials and a region for every test, where the environment has none: what the
    plugin's ``dynaunique_endpoint`` sets when a test first asks for the server, set before the
    first test, so that a file of pure tests (tests/unit/test_plan.py saves through a stub
    transport) passes alone as it does after a server test in the same worker."""
    from dynaunique.testing import FAKE_AWS_ENV

    with pytest.MonkeyPatch.context() as patch:
        for name, value in FAKE_AWS_ENV.items():
            if not os.environ.get(name):
                patch.setenv(name, value)
        yield


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--soak`` / ``--soak-ops N``: the long form of tests/reliability's soak, and
    ``--reliability-report``: its numbers printed at the end; registered here so that
    ``python -m pytest --soak`` works from the repository root."""
    group = parser.getgroup("dynaunique-reliability")
    group.addoption("--soak", action="store_true", default=False,
                    help="run the long soak (see tests/reliability/test_soak.py)")
    group.addoption("--soak-ops", type=int, default=None,
                    help="number of soak operations")
    group.addoption("--reliability-report", action="store_true", default=False,
                    help="print what the reliability tests measured (also with -v, --soak or "
                         "--soak-ops)")


# --- pytest-xdist: how many workers, which file first, and the reliability report -------------

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (``support/file_order.py``)."""
    file_order.longest_first(items)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default, see pyproject.toml): two workers a core. Each worker has its own
    local server (a second process) and most tests wait on HTTP to it, so a core runs two
    workers' tests better than one (``-n 3`` measured no saving: CHANGELOG.md, "Tests in
    minutes"). ``-n 0`` runs in-process."""
    return 2 * (os.cpu_count() or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of an xdist run: collect each worker's reliability numbers.

    Workers run tests/reliability/conftest.py, the controller does not (it collects nothing),
    so the numbers are merged into that module's summary here and printed below."""
    exported = getattr(node, "workeroutput", {}).get("dynaunique_reliability")
    if exported:
        from reliability import conftest as reliability

        reliability._SUMMARY.merge(exported)
        _WORKER_SUMMARIES.append(reliability)


_WORKER_SUMMARIES: list[Any] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """The controller of an xdist run prints the workers' reliability numbers when asked
    (without xdist, tests/reliability/conftest.py prints its own)."""
    if _WORKER_SUMMARIES and config.pluginmanager.hasplugin("dsession"):
        _WORKER_SUMMARIES[0].pytest_terminal_summary(terminalreporter)
