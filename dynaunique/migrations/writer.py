"""Render operations as a migration file's Python source and write it next to the others.

The output is plain, deterministic Python (no timestamp), so a generated file can be reviewed,
committed and compared in tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dynaunique.errors import MigrationError
from dynaunique.migrations.loader import MIGRATION_NAME
from dynaunique.migrations.operations import Operation

_INDENT = "    "


def literal(value: Any, depth: int = 0) -> str:
    """``value`` (None, bool, int, str, list, dict of those) as Python source."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # JSON string escapes are valid Python escapes; double quotes match ruff's style.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v, depth + 1) for v in value)
        return f"[{inner}]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = _INDENT * (depth + 1)
        lines = [f"{pad}{literal(str(k))}: {literal(v, depth + 1)}," for k, v in value.items()]
        return "{\n" + "\n".join(lines) + "\n" + _INDENT * depth + "}"
    raise MigrationError(f"cannot write {value!r} into a migration file")


def render_operation(op: Operation, depth: int = 1) -> str:
    """One operation call, keyword per line: ``ops.AddUniqueConstraint(model=..., ...)``."""
    name, kwargs = op.deconstruct()
    pad = _INDENT * (depth + 1)
    lines = [f"{pad}{key}={literal(value, depth + 1)}," for key, value in kwargs.items()]
    return f"{_INDENT * depth}ops.{name}(\n" + "\n".join(lines) + f"\n{_INDENT * depth})"


def render(name: str, *, label: str, dependencies: Sequence[str],
           operations: Sequence[Operation]) -> str:
    """The full source of migration ``name`` of ``label`` (the models module)."""
    body = "".join(render_operation(op) + ",\n" for op in operations)
    if operations:
        ops_text = "operations = [\n" + body + "]\n"
    else:
        ops_text = (
            "operations: list[ops.Operation] = [\n"
            "    # ops.RunPython(forwards, backwards), with def forwards(ctx): ... above\n"
            "]\n"
        )
    return (
        f'"""Migration {name} of {label}, written by `dynaunique makemigrations`."""\n'
        "\n"
        "from __future__ import annotations\n"
        "\n"
        "from dynaunique.migrations import operations as ops\n"
        "\n"
        f"dependencies = {literal(list(dependencies))}\n"
        "\n"
        f"{ops_text}"
    )


def write(directory: Path, name: str, source: str) -> Path:
    """Write ``source`` as ``directory/name.py``; the directory becomes a package if new.

    :raises MigrationError: the file exists already, or ``name`` is not a migration name.
    """
    if not MIGRATION_NAME.match(name) or not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise MigrationError(f"{name!r} is not a migration name (0002_some_name)")
    directory.mkdir(parents=True, exist_ok=True)
    init = directory / "__init__.py"
    if not init.exists():
        init.write_text('"""dynaunique migrations (`dynaunique makemigrations` writes these)."""\n',
                        encoding="utf-8")
    path = directory / f"{name}.py"
    if path.exists():
        raise MigrationError(f"{path} exists already")
    path.write_text(source, encoding="utf-8")
    return path
