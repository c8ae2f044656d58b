"""Hypothesis example counts: a quick default run and a deep one (``--hypothesis-profile deep``).

A property test states the count it was written with, ``@settings(max_examples=examples(300))``;
the default run tries a quarter of it (the ``quick`` profile, loaded by tests/conftest.py), and
``python -m pytest --hypothesis-profile deep`` (or ``-m slow --hypothesis-profile deep``) tries
the full count. Only the pure tests whose time is the examples' generation use it (tests/README.md,
"Time"); the tests whose every example talks to the local server keep their small fixed counts.
"""

from __future__ import annotations

from hypothesis import settings

QUICK = "quick"
DEEP = "deep"
_FULL = 100  # the deep profile's max_examples: examples(n) is n there


def register() -> None:
    """Register both profiles and load ``quick``; hypothesis's ``--hypothesis-profile`` option
    (applied at ``pytest_configure``, after this conftest) loads another."""
    settings.register_profile(QUICK, max_examples=_FULL // 4)
    settings.register_profile(DEEP, max_examples=_FULL)
    settings.load_profile(QUICK)


def examples(stated: int) -> int:
    """The number of examples to try for a test written with ``stated``: ``stated`` under the
    deep profile, a quarter of it (at least 10) under the quick one."""
    return max(10, stated * settings().max_examples // _FULL)
