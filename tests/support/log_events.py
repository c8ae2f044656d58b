"""Reading dynaunique's structured log events out of captured records
(tests/integration/test_observe.py and tests/reliability/test_observe_faults.py), and pinning
a logger's configuration for one test."""

from __future__ import annotations

import logging
from typing import Any

import pytest


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    """The ``dynaunique`` fields of the captured records of event ``name``, in order."""
    return [r.dynaunique for r in caplog.records  # type: ignore[attr-defined]
            if getattr(r, "dynaunique", {}).get("event") == name]


def levels(caplog: pytest.LogCaptureFixture, name: str) -> set[str]:
    """The level names the records of event ``name`` were logged at."""
    return {r.levelname for r in caplog.records
            if getattr(r, "dynaunique", {}).get("event") == name}


def configured_by_the_application(logger: logging.Logger,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``logger`` as an application that configured logging leaves it, for this test only: a
    handler of its own (so ``dynaunique.streams.aws_lambda`` adds none, and none that stops
    propagation outlives the test) and its records propagating to the root, where caplog reads
    them."""
    monkeypatch.setattr(logger, "handlers", [logging.NullHandler()])
    monkeypatch.setattr(logger, "propagate", True)
