"""The docs layer: sybil runs every code block of README.md and docs/*.md (tests/README.md).

The parsers, the evaluators and what they check are in ``tests/support/docs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sybil import Sybil

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from support import docs, selection

pytest_collect_file = Sybil(
    parsers=docs.PARSERS,
    patterns=["README.md", "docs/*.md"],
    excludes=["*/README.md"],  # the root README only (a pattern matches a path's end)
    setup=docs.setup,
    teardown=docs.teardown,
    fixtures=["dynaunique_endpoint"],
).pytest()


def pytest_configure(config: pytest.Config) -> None:
    """A file or test named on the command line runs even if it is ``external`` or
    ``exhaustive`` (``support/selection.py``)."""
    config.option.markexpr = selection.markexpr(
        config.option.markexpr, config.args, Path(config.invocation_params.dir),
        config.args_source == pytest.Config.ArgsSource.ARGS)
