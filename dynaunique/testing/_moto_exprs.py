"""moto's expression functions where they answer otherwise than DynamoDB, as the patch replaces
them (:mod:`dynaunique.testing._moto_patch`), each a narrow fix around moto's own function:

- ``begins_with`` on two binary values compares their bytes (moto's matches strings only, so a
  binary prefix matched nothing);
- ``size()`` of an attribute an item does not have makes the comparison false, as DynamoDB does
  (moto raised, and the request got an HTTP 500 as soon as one item lacked the attribute);
- a projection path element ``#name[0]`` resolves its expression name (moto resolved only whole
  elements, so it called ``#name`` unused and refused the request).

Each is tested over HTTP against DynamoDB's recorded answer in
``tests/integration/test_local_server_requests.py``; :data:`SIGNATURES` and :data:`SOURCES` are
what the patch checks of the functions they wrap (the same source in moto 5.2.0 to 5.2.6).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["SIGNATURES", "SOURCES", "begins_with", "projection_parse", "size"]

SIGNATURES: dict[str, tuple[str, ...]] = {
    "moto.dynamodb.comparisons.FuncBeginsWith.expr": ("self", "item"),
    "moto.dynamodb.comparisons.FuncSize.expr": ("self", "item"),
    "moto.dynamodb.responses.ProjectionExpressionParser.parse": ("self",),
}
SOURCES: dict[str, frozenset[str]] = {
    "moto.dynamodb.comparisons.FuncBeginsWith.expr": frozenset({"fd83c56abac9"}),
    "moto.dynamodb.comparisons.FuncSize.expr": frozenset({"c684582c6b2a"}),
    "moto.dynamodb.responses.ProjectionExpressionParser.parse": frozenset({"13726302ae9c"}),
}

# A path element that is an expression name followed by list indexes: "#l[0]", "#l[1][2]".
_INDEXED_NAME = re.compile(r"(#[^\[\]]+)((?:\[\d+\])+)")


def begins_with(original: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """``FuncBeginsWith.expr``, comparing two binary values' bytes."""

    def expr(self: Any, item: Any) -> bool:
        if self.attr.get_type(item) == "B" and self.substr.get_type(item) == "B":
            return bytes(self.attr.expr(item)).startswith(bytes(self.substr.expr(item)))
        return original(self, item)

    return expr


def size(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``FuncSize.expr``: ``None`` (every comparison false) for a missing attribute."""

    def expr(self: Any, item: Any) -> Any:
        if self.attr.get_type(item) is None:
            return None
        return original(self, item)

    return expr


def projection_parse(original: Callable[[Any], list[list[str]]]) -> Callable[[Any], Any]:
    """``ProjectionExpressionParser.parse``, resolving ``#name[0]`` path elements too."""

    def parse(self: Any) -> list[list[str]]:
        names = self.expression_attribute_names
        paths = original(self)
        for path in paths:
            for position, element in enumerate(path):
                indexed = _INDEXED_NAME.fullmatch(element)
                if indexed is not None and indexed.group(1) in names:
                    self.expr_attr_names_found.append(indexed.group(1))
                    path[position] = names[indexed.group(1)] + indexed.group(2)
        return paths

    return parse
