"""Logging without a server: the package logger is silent by default."""

from __future__ import annotations

import logging
import subprocess
import sys


def test_the_package_logger_is_silent_by_default() -> None:
    handlers = logging.getLogger("dynaunique").handlers
    assert [type(h) for h in handlers] == [logging.NullHandler]


def test_importing_the_package_alone_gives_its_logger_the_null_handler() -> None:
    """Not only once ``dynaunique.observe`` is imported on first use: a warning logged by a module
    imported before it (the transport's fence) would otherwise reach logging's last resort."""
    shown = subprocess.run(
        [sys.executable, "-c", "import logging, dynaunique; "
         "print([type(h).__name__ for h in logging.getLogger('dynaunique').handlers])"],
        capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "['NullHandler']"
