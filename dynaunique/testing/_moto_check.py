"""What the local server's moto patch and HTTP front check before they touch anything: a function
found by its dotted name, and how it differs from the parameters and source hash it was verified
with (:mod:`dynaunique.testing._moto_patch`, :mod:`dynaunique.testing._moto_front`)."""

from __future__ import annotations

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
    return hashlib.sha256(inspect.getsource(function).encode("utf-8")).hexdigest()[:12]


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
