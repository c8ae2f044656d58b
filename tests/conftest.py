"""Shared test configuration.

The local DynamoDB fixtures (``dynaunique_db``, ``dynaunique_endpoint``) come from dynaunique's
pytest plugin (``dynaunique.testing._pytest_plugin``), which the ``pytest11`` entry point loads
automatically once the package is installed (``pip install -e '.[dev]'``); do not list it in
``pytest_plugins`` (it would be registered twice). Add fixtures here only when several test modules
share them.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--soak`` / ``--soak-ops N``: the long form of tests/reliability's soak, registered here so
    that ``python -m pytest --soak`` works from the repository root."""
    group = parser.getgroup("dynaunique-reliability")
    group.addoption("--soak", action="store_true", default=False,
                    help="run the long soak (see tests/reliability/test_soak.py)")
    group.addoption("--soak-ops", type=int, default=None,
                    help="number of soak operations")
