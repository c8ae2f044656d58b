"""setup.cfg holds only what cannot live in pyproject.toml: flake8's configuration (editors run
flake8, which never reads pyproject.toml), in step with ruff's."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the package's own fallback (pyproject.toml)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def _setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    assert parser.read(ROOT / "setup.cfg", encoding="utf-8")
    return parser


def test_setup_cfg_configures_flake8_only() -> None:
    # No [metadata]/[options] (setuptools reads pyproject.toml's [project]), no [tool:pytest],
    # [mypy] or [coverage:*]: those tools read pyproject.toml, where their settings are.
    assert _setup_cfg().sections() == ["flake8"]


def test_flake8_uses_ruffs_line_length() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert _setup_cfg()["flake8"].getint("max-line-length") == pyproject["tool"]["ruff"][
        "line-length"] == 100
