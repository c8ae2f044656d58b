"""The pytest plugin's names cannot collide with a project's own: every fixture it defines is
``dynaunique_``-prefixed, and it implements no hook. Read from the source (``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTING = Path(__file__).resolve().parents[2] / "dynaunique" / "testing"
#: The plugin module and the module whose fixtures it imports.
PLUGIN_MODULES = ("_pytest_plugin.py", "aio.py")


def _functions() -> dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for name in PLUGIN_MODULES:
        tree = ast.parse((TESTING / name).read_text(encoding="utf-8"))
        found[name] = [node for node in ast.walk(tree)
                       if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return found


def _is_fixture(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)


def test_every_fixture_of_the_plugin_is_prefixed() -> None:
    fixtures = {node.name for nodes in _functions().values() for node in nodes
                if _is_fixture(node)}
    assert fixtures == {"dynaunique_endpoint", "dynaunique_db", "dynaunique_models",
                        "dynaunique_aio_db"}


def test_the_plugin_implements_no_hook() -> None:
    hooks = [node.name for nodes in _functions().values() for node in nodes
             if node.name.startswith("pytest_")]
    assert hooks == []

