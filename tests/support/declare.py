"""Declare a test's model in one call: its name, its table, its Meta options and its fields, in
the order a ``class ...(Model)`` statement would give them.

Many test files need a small model of their own (its own table, so that tests cannot see each
other's items, and often its own name, which lock items and messages carry). Written as class
statements they differ only in names and values; ``declare`` says just those.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from dynaunique import Model
from dynaunique.attributes import UnicodeAttribute


def declare(name: str, table: str, /, *, meta: dict[str, Any] | None = None,
            **fields: Any) -> Any:
    """``class <name>(Model)`` with ``Meta.table_name = table`` plus ``meta``, and ``fields``.

    The class is made by Model's own metaclass, exactly as the class statement would make it,
    and belongs to the calling module (as ``collections.namedtuple`` does), so its name, module
    and qualified name read as if it were written there.
    """
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    body = {"__module__": module, "__qualname__": name,
            "Meta": type("Meta", (), {"table_name": table, **(meta or {})}), **fields}
    return types.new_class(name, (Model,), exec_body=lambda namespace: namespace.update(body))


def pk_attr() -> UnicodeAttribute:
    """The hash key most test models have: ``pk``, stored as "PK"."""
    return UnicodeAttribute(hash_key=True, attr_name="PK")


def sk_attr(default: str | None = None) -> UnicodeAttribute:
    """The range key most test models with one have: ``sk``, stored as "SK"."""
    return UnicodeAttribute(range_key=True, attr_name="SK", default=default)
