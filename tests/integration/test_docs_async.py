"""docs/async.md's example runs: its ``python`` blocks, in order, against the local server.

(``py`` blocks on that page are illustrations, not run.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dynaunique.testing import create_tables, use_endpoint

pytestmark = pytest.mark.anyio

PAGE = Path(__file__).resolve().parents[2] / "docs" / "async.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


async def test_the_async_page_example_runs(dynaunique_aio_db: str) -> None:
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 2, "the page's runnable example changed shape"
    namespace: dict[str, Any] = {"__name__": "docs_async"}
    exec(compile(blocks[0], f"{PAGE}:app", "exec"), namespace)
    account = namespace["Account"]
    use_endpoint(dynaunique_aio_db, account)
    create_tables(account)
    exec(compile(blocks[1], f"{PAGE}:main", "exec"), namespace)
    await namespace["main"]()
    # The ten racers left one account holding the address, and its lock.
    assert account.count() == 2
