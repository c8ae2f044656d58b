"""What the docs layer (tests/support/docs.py) promises of the pages, read from the files: no
hidden setup anywhere, few deliberate fragments, and the local recipe shown before any Python;
and of its runner: a server step that SIGTERM does not stop fails."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from support import docs

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PYTHON_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```", re.DOTALL | re.MULTILINE)


def _python_blocks(page: Path) -> list[str]:
    return [match.group(2) for match in _PYTHON_BLOCK.finditer(page.read_text(encoding="utf-8"))]


def test_no_page_has_an_invisible_block() -> None:
    hidden = [page.name for page in PAGES if "invisible-code-block" in page.read_text("utf-8")]
    assert hidden == []


def test_at_most_five_python_blocks_are_fragments_and_each_says_why() -> None:
    fragments = [(page.name, block.split("\n", 1)[0]) for page in PAGES
                 for block in _python_blocks(page)
                 if block.lstrip().startswith(docs.FRAGMENT)]
    assert len(fragments) <= docs.MAX_FRAGMENTS, fragments
    assert all(len(first.strip()) > len(docs.FRAGMENT) + 3 for _, first in fragments), fragments


def test_no_python_block_is_skipped_behind_the_readers_back() -> None:
    skipped = [page.name for page in PAGES
               if re.search(r"<!-- skip: next[^\n]*-->\s*\n[ \t]*```python",
                            page.read_text("utf-8"))]
    assert skipped == []  # a fragment says so on its first line instead


def test_getting_started_shows_the_recipe_before_its_first_python_block() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text("utf-8")
    first_python = page.index("```python")
    for name in docs.recipe("http://127.0.0.1:8000"):
        assert -1 < page.find(f"{name}=") < first_python, name
    assert -1 < page.find("$ dynaunique serve") < first_python


# A server that ignores SIGTERM: prints its one line, then its pid to a file, then waits.
_DEAF_SERVER = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open("pid", "w").write(str(os.getpid()))
print("READY", flush=True)
time.sleep(60)
"""


def test_a_server_step_that_sigterm_does_not_stop_fails_and_is_killed(tmp_path: Path) -> None:
    with pytest.raises(docs.Mismatch, match=r"still running 1 s after SIGTERM \(killed then\); "
                                            r"its terminal showed:\nREADY"):
        docs._in_terminal([sys.executable, "-c", _DEAF_SERVER], dict(os.environ), tmp_path,
                          until_lines=1, stop_within=1.0)
    with pytest.raises(ProcessLookupError):  # killed, and reaped
        os.kill(int((tmp_path / "pid").read_text()), 0)
