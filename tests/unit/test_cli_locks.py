"""The lock commands without a server: a module that fails to import is one line and exit 2."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from click.testing import CliRunner

from dynaunique.cli import cli


@pytest.mark.parametrize("command", ["locks", "check", "makemigrations"])
@pytest.mark.parametrize(("source", "error"), [
    ("def broken(:\n", "SyntaxError"),
    ("raise RuntimeError('no database configured')\n", "RuntimeError: no database configured"),
])
def test_a_module_that_fails_to_import_is_one_line_and_exit_2(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, command: str, source: str,
        error: str) -> None:
    (tmp_path / "broken_models.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("broken_models", None)
    endpoint = [] if command == "makemigrations" else ["--endpoint", "http://127.0.0.1:9"]
    result = CliRunner().invoke(cli, [command, "broken_models", *endpoint])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "broken_models" in lines[0] and error in lines[0]
    assert "Traceback" not in result.output
