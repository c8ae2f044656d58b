"""What the local server's moto patch and HTTP front check before they touch anything: a function
found by its dotted name, and how it differs from the parameters and source hash it was verified
with (:mod:`dynaunique.testing._moto_patch`, :mod:`dynaunique.testing._moto_front`)."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["ABSENT", "difference", "find", "source_hash"]

#: Among a function's verified hashes: the function may also be missing (a verified release
#: lacks it).
ABSENT = "absent"


def source_hash(function: Callable[..., Any]) -> str:
    """The first 12 hex digits of the SHA-256 of ``inspect.getsource(function)`` (UTF-8).

    ``python -c "from dynaunique.testing._moto_patch import installed_hashes as h; print(h())"``
    prints them for the installed moto, to record a newly verified release.
    """
    return hashlib.sha256(_source(function).encode("utf-8")).hexdigest()[:12]


def _source(function: Callable[..., Any]) -> str:
    """``inspect.getsource(function)``, computed faster for a class on a Python whose classes
    have no ``__firstlineno__`` (before 3.13): there inspect parses the whole module again for
    each class (23 classes of one moto module: 0.7 CPU-seconds a server start); this finds
    every class of a module in one parse, as inspect finds one (its first class of that
    qualified name, from its first decorator), then takes the same block of lines.
    ``tests/unit/test_local_server_patch.py`` checks both agree on everything checked."""
    if not isinstance(function, type) or "__firstlineno__" in vars(function):
        return inspect.getsource(function)
    lines, _ = inspect.findsource(inspect.getmodule(function) or function)
    start = _class_starts("".join(lines)).get(function.__qualname__)
    if start is None:
        return inspect.getsource(function)
    return "".join(inspect.getblock(lines[start:]))


@functools.lru_cache(maxsize=8)
def _class_starts(source: str) -> dict[str, int]:
    """Each class qualified name of a module's source → the index of its first line (its first
    decorator's), the first definition of a name winning, functions' classes under
    ``NAME.<locals>``."""
    starts: dict[str, int] = {}

    def visit(node: ast.AST, stack: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                inner = (*stack, child.name)
                first = child.decorator_list[0].lineno if child.decorator_list else child.lineno
                starts.setdefault(".".join(inner), first - 1)
                visit(child, inner)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, (*stack, child.name, "<locals>"))
            else:
                visit(child, stack)

    visit(ast.parse(source), ())
    return starts


def find(dotted: str) -> Any:
    """The moto function ``dotted`` names, unwrapped; the exception if it cannot be found."""
    import importlib

    module_name, _, rest = dotted.rpartition(".")
    module_name, _, class_name = module_name.rpartition(".")
    try:
        try:  # a module-level function: ``package.module.function``
            owner = importlib.import_module(f"{module_name}.{class_name}")
        except ImportError:  # a method: ``package.module.Class.method``
            owner = getattr(importlib.import_module(module_name), class_name)
        function = getattr(owner, rest)
    except (ImportError, AttributeError) as exc:
        return exc
    return getattr(function, "__wrapped__", function)


def difference(dotted: str, expected: tuple[str, ...],
               verified: frozenset[str]) -> tuple[bool, str] | None:
    """How the installed function ``dotted`` differs from what is relied on, None if it fits:
    ``(True, message)`` when only its source changed, ``(False, message)`` when it is gone or
    takes other parameters."""
    function = find(dotted)
    if isinstance(function, Exception):
        return None if ABSENT in verified else (False, f"{dotted} is gone ({function})")
    actual = tuple(inspect.signature(function).parameters)
    if actual != expected:
        return False, f"{dotted} takes {actual}, this patch expects {expected}"
    digest = source_hash(function)
    if digest in verified:
        return None
    return True, (f"{dotted} has changed (source sha256 {digest}, verified: "
                  + ", ".join(sorted(verified)) + ")")
