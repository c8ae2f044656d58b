"""Fixtures of the ui tests: a read-only and a repairing ``dynaunique ui`` on the session's local
server (one each per module), and the audit tables, created empty before each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import support.audit_models as fm
from support.tables import raw_tables
from ui_server import UIServer, running_ui

from dynaunique.testing import reset_local_dynamodb


@pytest.fixture(scope="module")
def read_only(dynaunique_endpoint: str) -> Iterator[UIServer]:
    """``dynaunique ui support.audit_models --endpoint ...``: no repairs."""
    with running_ui("--endpoint", dynaunique_endpoint) as server:
        yield server


@pytest.fixture(scope="module")
def repairing(dynaunique_endpoint: str) -> Iterator[UIServer]:
    """The same with ``--allow-repair``."""
    with running_ui("--endpoint", dynaunique_endpoint, "--allow-repair") as server:
        yield server


@pytest.fixture
def raw(dynaunique_endpoint: str) -> Any:
    """The audit tables, created empty, and a plain boto3 client to break them with.

    The servers above outlive one test, so the ``dynamodb`` fixture (per test) cannot be used:
    this resets the same session server.
    """
    reset_local_dynamodb(dynaunique_endpoint)
    return raw_tables(dynaunique_endpoint, *fm.MODELS)
