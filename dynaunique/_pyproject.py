"""``[tool.dynaunique]`` of a directory's ``pyproject.toml``, read as TOML (the raw table).

The one reader of the project's settings file: the migrations commands validate and resolve what
it holds (``dynaunique.migrations.project``), and the library reads ``home_region`` from it
(``dynaunique._transport.regions``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from dynaunique.errors import ConfigurationError

__all__ = ["toml_module", "tool_settings"]


def toml_module() -> Any:
    """``tomllib`` (standard from Python 3.11), else ``tomli``, else None."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def tool_settings(root: Path) -> dict[str, Any]:
    """The ``[tool.dynaunique]`` table of ``root/pyproject.toml`` ({} without one).

    :raises ConfigurationError: the file has settings but cannot be parsed (or, on Python 3.10
        without ``tomli``, cannot be read).
    """
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    if "tool.dynaunique" not in text:
        return {}
    toml = toml_module()
    if toml is None:
        raise ConfigurationError(f"{path} has [tool.dynaunique] settings, but reading TOML on "
                                 "Python 3.10 needs the `tomli` package: pip install tomli")
    try:
        data = toml.loads(text).get("tool", {}).get("dynaunique", {})
    except ValueError as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc
    return dict(data) if isinstance(data, dict) else {}
