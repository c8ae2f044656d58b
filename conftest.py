"""The docs layer: sybil runs every code block of README.md and docs/*.md (tests/README.md).

The parsers, the evaluators and what they check are in ``tests/support/docs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sybil import Sybil

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from support import docs

pytest_collect_file = Sybil(
    parsers=docs.PARSERS,
    patterns=["README.md", "docs/*.md"],
    excludes=["*/README.md"],  # the root README only (a pattern matches a path's end)
    setup=docs.setup,
    teardown=docs.teardown,
    fixtures=["dynaunique_endpoint"],
).pytest()
