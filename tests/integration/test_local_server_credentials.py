"""The documented local-server examples run on a machine with no AWS credentials and no AWS
config: each is run as written, in a fresh interpreter with an empty HOME and no AWS_* variable.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(page: str, heading: str) -> list[str]:
    """The ```python blocks of ``page`` under ``heading``, up to the next heading of its level."""
    text = (DOCS / page).read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    following = re.compile(rf"^{level} ", re.MULTILINE).search(text, start + len(heading))
    section = text[start:following.start() if following else len(text)]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_without_aws(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-c", code], cwd=home, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("code_of", "printed"),
    [
        pytest.param(
            lambda: python_blocks("getting-started.md", "## Declare a model")[0]
            + python_blocks("getting-started.md", "## Try it without AWS")[0],
            "ACCT#a1f9c3\n",
            id="getting-started: Try it without AWS",
        ),
        pytest.param(
            lambda: python_blocks("testing.md", "## Without pytest")[0],
            "ACCT#1\n",
            id="testing: Without pytest",
        ),
    ],
)
def test_documented_example_needs_no_aws_credentials(code_of: object, printed: str,
                                                     tmp_path: Path) -> None:
    assert callable(code_of)
    result = run_without_aws(code_of(), tmp_path)
    assert (result.returncode, result.stdout) == (0, printed), result.stderr[-3000:]
    assert not (tmp_path / ".aws").exists()
