"""The documented local-server examples run on a machine with no AWS credentials and no AWS
config: each is run as written, in a process of its own with an empty HOME and no AWS_* variable.
The first is a fresh interpreter (``python -c CODE``); the second is the same command forked from
a Python that imported dynaunique but created no botocore session, read no credentials and no
config (``support.cli_process``), so it costs its own work, not Python's start-up again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import cli_process

DOCS = Path(__file__).resolve().parents[2] / "docs"


def python_blocks(page: str, heading: str) -> list[str]:
    """The ```python blocks of ``page`` under ``heading``, up to the next heading of its level."""
    text = (DOCS / page).read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    following = re.compile(rf"^{level} ", re.MULTILINE).search(text, start + len(heading))
    section = text[start:following.start() if following else len(text)]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def run_without_aws(code: str, home: Path, *, real: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(home)
    if not real:
        return cli_process.shared(env).run([sys.executable, "-c", code], cwd=home, env=env,
                                           timeout=120)
    return subprocess.run([sys.executable, "-c", code], cwd=home, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("code_of", "printed", "real"),
    [
        pytest.param(
            lambda: python_blocks("getting-started.md", "## Declare a model")[0]
            + python_blocks("getting-started.md", "## A server inside your program")[0],
            "ACCT#a1f9c3\n",
            True,
            id="getting-started: A server inside your program",
        ),
        pytest.param(
            lambda: python_blocks("testing.md", "## Without pytest")[0],
            "ACCT#1\n",
            False,
            id="testing: Without pytest",
        ),
    ],
)
def test_documented_example_needs_no_aws_credentials(code_of: object, printed: str, real: bool,
                                                     tmp_path: Path) -> None:
    assert callable(code_of)
    result = run_without_aws(code_of(), tmp_path, real=real)
    assert (result.returncode, result.stdout) == (0, printed), result.stderr[-3000:]
    assert not (tmp_path / ".aws").exists()
