"""moto's condition expression parser, parsing each distinct expression once per server process.

moto parses a request's ``ConditionExpression`` three times — its request validation
(``responses``), the backend, and ``Table.put_item`` each build a ``ConditionExpressionParser`` and
call ``parse`` — and a transaction does so for each of its items. :func:`cached_parse` replaces
``ConditionExpressionParser.parse`` with one that remembers each answer, keyed by the expression,
its ``ExpressionAttributeNames`` and its ``ExpressionAttributeValues``. That changes no answer:

- the parse reads nothing but those three (the parser's own attributes, its class constants,
  moto's reserved words and the module's tables of operators): equal inputs, equal trees. The key
  keeps each input whole — dict order, and the type of every value (``True`` is not ``1``); an
  input holding anything but dicts, lists, strings, integers, booleans and ``None`` (never in a
  JSON request) is parsed as moto parses it, uncached;
- the tree is never changed after it is built: every ``expr``/``get_type`` of its classes only
  reads, and what they return is a new object or a string, number or boolean; moto's callers only
  call ``expr``. A tree is built from a private deep copy of the names and values, so it shares
  nothing with the request that first asked for it;
- the parse's other effect, the names and values it found (``expr_attr_names_found``,
  ``expr_attr_values_found``, which callers extend), is replayed onto each parser's own lists;
- a parse that fails is not remembered: it is done again, on the caller's parser, as moto does it.

:data:`SIGNATURES` and :data:`SOURCES` hold, for the patch's check, the parser and every class
of the tree it builds (their whole source), so a moto release that changes any of them is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

#: Remembered parses at most; past it the memory starts again (tests invent expressions).
LIMIT = 4096

_MODULE = "moto.dynamodb.comparisons"

#: Each name (of :data:`_MODULE`) with the parameters it takes and the source hashes it was
#: verified with (space-separated), in moto 5.2.0 to 5.2.5: the replaced ``parse``, the parser
#: class (all its steps), and each class or builder function of the tree.
_VERIFIED: dict[str, tuple[tuple[str, ...], str]] = {
    "ConditionExpressionParser.parse": (("self",), "5c9b63c5f49e"),
    "ConditionExpressionParser": (
        ("condition_expression", "expression_attribute_names", "expression_attribute_values"),
        "ba0de03156fe"),
    "Op": (("lhs", "rhs"), "4947d7f302d3"),
    "OpDefault": (("lhs", "rhs"), "019f09776eba"),
    "OpNot": (("lhs",), "1b7a5b78048d"),
    "OpAnd": (("lhs", "rhs"), "9645535ea4d2"),
    "OpOr": (("lhs", "rhs"), "f03c62b8d97c"),
    "OpLessThan": (("lhs", "rhs"), "5a6585f7bd52"),
    "OpGreaterThan": (("lhs", "rhs"), "2660ed9d9979"),
    "OpEqual": (("lhs", "rhs"), "0461c2a0188f"),
    "OpNotEqual": (("lhs", "rhs"), "1251a21f62ba"),
    "OpLessThanOrEqual": (("lhs", "rhs"), "8294a550215b"),
    "OpGreaterThanOrEqual": (("lhs", "rhs"), "d2c211f28c48"),
    "Operand": ((), "a9c5e0bc0679"),
    "AttributePath": (("path",), "9154a303c550"),
    "AttributeValue": (("value",), "69dd03f6e330"),
    "Func": (("arguments",), "37fbafbc8fc4"),
    "FuncAttrExists": (("attribute",), "8fdbff7ab247"),
    "FuncAttrNotExists": (("attribute",), "302b3911f2b2"),
    "FuncAttrType": (("attribute", "_type"), "db0b1ebac58c"),
    "FuncBeginsWith": (("attribute", "substr"), "263934d9c520"),
    "FuncContains": (("attribute", "operand"), "82be3d67670d"),
    "FuncNotContains": (("attribute", "operand"), "83092ddb3e94"),
    "FuncSize": (("attribute",), "7a94713a3ce3"),
    "FuncBetween": (("attribute", "start", "end"), "94543bc95011 d5ab22caf4aa"),  # to 5.2.3; since
    "FuncIn": (("attribute", "possible_values"), "6abaf098ad89"),
}
SIGNATURES: dict[str, tuple[str, ...]] = {
    f"{_MODULE}.{name}": params for name, (params, _) in _VERIFIED.items()
}
SOURCES: dict[str, frozenset[str]] = {
    f"{_MODULE}.{name}": frozenset(digests.split()) for name, (_, digests) in _VERIFIED.items()
}


class _Unkeyable(Exception):
    """An input the memory does not key (not plain JSON)."""


def _frozen(value: Any) -> Any:
    """``value`` as a hashable key, equal only for an equal value of the same types and order."""
    kind = type(value)
    if kind is dict:
        return (dict, tuple((_frozen(k), _frozen(v)) for k, v in value.items()))
    if kind is list:
        return (list, tuple(_frozen(element) for element in value))
    if kind in (str, int, bool) or value is None:
        return (kind, value)
    raise _Unkeyable


def cached_parse(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    parses: dict[Any, tuple[Any, tuple[str, ...], tuple[str, ...]]] = {}

    def parse(self: Any) -> Any:
        inputs = (
            self.condition_expression,
            self.expression_attribute_names,
            self.expression_attribute_values,
        )
        try:
            key = _frozen(list(inputs))
        except _Unkeyable:
            return original(self)
        known = parses.get(key)
        if known is None:
            private = type(self)(*copy.deepcopy(inputs))
            try:
                tree = original(private)
            except Exception:  # moto's error, raised as moto raises it (on the caller's parser)
                return original(self)
            known = (tree, tuple(private.expr_attr_names_found),
                     tuple(private.expr_attr_values_found))
            if len(parses) >= LIMIT:
                parses.clear()
            parses[key] = known
        tree, names, values = known
        self.expr_attr_names_found.extend(names)
        self.expr_attr_values_found.extend(values)
        return tree

    return parse
