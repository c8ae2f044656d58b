"""Reading dynaunique's structured log events out of captured records
(tests/integration/test_observe.py and tests/reliability/test_observe_faults.py)."""

from __future__ import annotations

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
