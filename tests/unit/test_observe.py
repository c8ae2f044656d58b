"""Logging without a server: the package logger is silent by default."""

from __future__ import annotations

import logging


def test_the_package_logger_is_silent_by_default() -> None:
    handlers = logging.getLogger("dynaunique").handlers
    assert [type(h) for h in handlers] == [logging.NullHandler]
