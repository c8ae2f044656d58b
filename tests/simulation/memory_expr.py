"""DynamoDB's expressions for the in-memory model: typed values, paths, conditions, updates and
projections, exactly as DynamoDB evaluates them, refusing loudly what is not modelled.

- **Values** are the wire's typed values (``{"S": "a"}``); :func:`normal` makes equal DynamoDB
  values equal Python values (numbers as ``Decimal``, sets as frozensets, binary as bytes).
- **Paths**: ``#name`` placeholders or plain names, ``.`` into maps, ``[n]`` into lists.
- **Conditions** (``ConditionExpression``, ``FilterExpression``, ``KeyConditionExpression``):
  ``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``, ``AND``/``OR``/``NOT``,
  parentheses, ``attribute_exists``, ``attribute_not_exists``, ``attribute_type``,
  ``begins_with``, ``contains`` and ``size``. A comparison with a missing attribute is false
  (``<>`` too would be, by DynamoDB's rule that any comparison with a missing operand fails;
  the library never sends one, so it is :class:`Unsupported` rather than guessed).
- **Updates**: ``SET`` (a value, a path, ``+``/``-``, ``if_not_exists``, ``list_append``),
  ``REMOVE``, ``ADD`` (numbers, sets) and ``DELETE`` (sets); every right-hand side is read from
  the item as it was before the update, as DynamoDB does.
- **Projections**: top-level and map paths.

Placeholders a request defines but no expression uses are refused (``ValidationException``), as
DynamoDB refuses them: :class:`Expressions` collects the ones used.
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import botocore.exceptions

Item = dict[str, Any]
Path = tuple[str | int, ...]


class Unsupported(Exception):
    """The request uses something the in-memory model does not implement."""


def client_error(operation: str, code: str, message: str, status: int = 400,
                 **extra: Any) -> botocore.exceptions.ClientError:
    """The ``ClientError`` botocore raises for DynamoDB's refusal ``code``."""
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message},
                                "ResponseMetadata": {"HTTPStatusCode": status}, **extra}
    return botocore.exceptions.ClientError(response, operation)  # type: ignore[arg-type]


def validation(message: str) -> botocore.exceptions.ClientError:
    return client_error("", "ValidationException", message)


# --- values --------------------------------------------------------------------------------------


def normal(value: Any) -> Any:
    """A typed value in a form where equal DynamoDB values are equal Python values."""
    if not isinstance(value, Mapping) or len(value) != 1:
        raise Unsupported(f"not a typed value: {value!r}")
    (kind, inner), = value.items()
    if kind == "N":
        return ("N", Decimal(inner).normalize())
    if kind == "M":
        return ("M", tuple(sorted((k, normal(v)) for k, v in inner.items())))
    if kind == "L":
        return ("L", tuple(normal(v) for v in inner))
    if kind == "SS":
        return (kind, frozenset(inner))
    if kind == "BS":
        return (kind, frozenset(_bytes(b) for b in inner))
    if kind == "NS":
        return (kind, frozenset(Decimal(n).normalize() for n in inner))
    if kind == "B":
        return ("B", _bytes(inner))
    return (kind, inner)


def _bytes(value: str | bytes) -> bytes:
    """A binary value: bytes as botocore takes them, base64 text as the wire carries them."""
    return value if isinstance(value, bytes) else base64.b64decode(value)


def same_value(a: Any, b: Any) -> bool:
    """DynamoDB's ``=`` on two typed values."""
    return bool(normal(a) == normal(b))


def ordered(value: Any) -> Any:
    """A scalar's sort key (``N`` by number, ``S`` by code point = UTF-8 order, ``B`` by byte)."""
    kind, inner = normal(value)
    if kind not in ("N", "S", "B"):
        raise Unsupported(f"ordering of a {kind} value is not modelled")
    return kind, inner


# --- tokens and paths ----------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(<>|<=|>=|=|<|>|\(|\)|,|\.|\[|\]|\+|-|#[A-Za-z0-9_]+|:[A-Za-z0-9_]+"
                    r"|[0-9]+|[A-Za-z_][A-Za-z0-9_]*)")
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"}
_COMPARATORS = {"=", "<>", "<", "<=", ">", ">="}
_CONDITION_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "attribute_type",
                        "begins_with", "contains"}


def tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise Unsupported(f"cannot read expression {text!r} at {text[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


def resolve(item: Mapping[str, Any], path: Path) -> Any:
    """The typed value at ``path`` (attribute, then map keys and list indexes), or None."""
    value: Any = item.get(str(path[0]))
    for part in path[1:]:
        if isinstance(part, int):
            if not isinstance(value, Mapping) or "L" not in value or part >= len(value["L"]):
                return None
            value = value["L"][part]
        else:
            if not isinstance(value, Mapping) or "M" not in value:
                return None
            value = value["M"].get(part)
    return value


class Expressions:
    """The placeholders of one request and which of them its expressions used."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.names: Mapping[str, str] = params.get("ExpressionAttributeNames") or {}
        self.values: Mapping[str, Any] = params.get("ExpressionAttributeValues") or {}
        self.used_names: set[str] = set()
        self.used_values: set[str] = set()

    def name(self, token: str) -> str:
        if not token.startswith("#"):
            if token.upper() in _KEYWORDS:
                raise validation(f"Invalid expression: unexpected keyword {token}")
            return token
        if token not in self.names:
            raise validation(f"An expression attribute name used in the document path is not "
                             f"defined; attribute name: {token}")
        self.used_names.add(token)
        return self.names[token]

    def value(self, token: str) -> Any:
        if token not in self.values:
            raise validation(f"An expression attribute value used in expression is not "
                             f"defined; attribute value: {token}")
        self.used_values.add(token)
        return self.values[token]

    def check_all_used(self) -> None:
        unused_names = sorted(set(self.names) - self.used_names)
        if unused_names:
            raise validation("Value provided in ExpressionAttributeNames unused in expressions: "
                             f"keys: {{{', '.join(unused_names)}}}")
        unused_values = sorted(set(self.values) - self.used_values)
        if unused_values:
            raise validation("Value provided in ExpressionAttributeValues unused in "
                             f"expressions: keys: {{{', '.join(unused_values)}}}")


class _Parser:
    """A recursive-descent reader over one expression's tokens."""

    def __init__(self, text: str, placeholders: Expressions) -> None:
        self.text = text
        self.ph = placeholders
        self.tokens = tokens(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> str | None:
        at = self.pos + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def at(self, *words: str) -> bool:
        token = self.peek()
        return token is not None and token.upper() in words

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected.upper()):
            raise validation(f"Invalid expression {self.text!r}: expected {expected!r}, "
                             f"got {token!r}")
        self.pos += 1
        return token

    def done(self) -> None:
        if self.pos != len(self.tokens):
            raise validation(f"Invalid expression {self.text!r}: unexpected "
                             f"{self.tokens[self.pos:]}")

    def path(self) -> Path:
        token = self.take()
        if token[0] in ":()[],.=<>+-" or token.isdigit():
            raise validation(f"Invalid expression {self.text!r}: expected a path, got {token!r}")
        parts: list[str | int] = [self.ph.name(token)]
        while self.peek() in (".", "["):
            if self.take() == ".":
                parts.append(self.ph.name(self.take()))
            else:
                index = self.take()
                if not index.isdigit():
                    raise validation(f"Invalid list index {index!r} in {self.text!r}")
                parts.append(int(index))
                self.take("]")
        return tuple(parts)

    # --- conditions: nested tuples

    def condition(self) -> Any:
        node = self._and()
        while self.at("OR"):
            self.take()
            node = ("or", node, self._and())
        return node

    def _and(self) -> Any:
        node = self._not()
        while self.at("AND"):
            self.take()
            node = ("and", node, self._not())
        return node

    def _not(self) -> Any:
        if self.at("NOT"):
            self.take()
            return ("not", self._not())
        return self._primary()

    def _primary(self) -> Any:
        token = self.peek()
        if token == "(":
            self.take("(")
            node = self.condition()
            self.take(")")
            return node
        if token in _CONDITION_FUNCTIONS and self.peek(1) == "(":
            self.take()
            self.take("(")
            args = [self.operand()]
            while self.peek() == ",":
                self.take(",")
                args.append(self.operand())
            self.take(")")
            if token in ("attribute_exists", "attribute_not_exists") and len(args) != 1:
                raise validation(f"{token} takes one path")
            return (token, *args)
        left = self.operand()
        if self.at("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            return ("between", left, low, self.operand())
        if self.at("IN"):
            self.take()
            self.take("(")
            options = [self.operand()]
            while self.peek() == ",":
                self.take(",")
                options.append(self.operand())
            self.take(")")
            return ("in", left, *options)
        op = self.take()
        if op not in _COMPARATORS:
            raise validation(f"Invalid expression {self.text!r}: {op!r} is not a comparator")
        return (op, left, self.operand())

    def operand(self) -> Any:
        token = self.peek()
        if token is not None and token.startswith(":"):
            self.take()
            return ("value", self.ph.value(token))
        if token == "size" and self.peek(1) == "(":
            self.take()
            self.take("(")
            path = self.path()
            self.take(")")
            return ("size", path)
        if token is not None and token[0].isalpha() and self.peek(1) == "(":
            raise Unsupported(f"function {token!r} is not modelled (in {self.text!r})")
        return ("path", self.path())


def parse_condition(text: str, placeholders: Expressions) -> Any:
    parser = _Parser(text, placeholders)
    tree = parser.condition()
    parser.done()
    return tree


def operand_value(node: Any, item: Item) -> Any:
    kind = node[0]
    if kind == "value":
        return node[1]
    if kind == "path":
        return resolve(item, node[1])
    value = resolve(item, node[1])   # size(path)
    if value is None:
        return None
    (vkind, inner), = value.items()
    if vkind == "B":
        return {"N": str(len(_bytes(inner)))}
    if vkind in ("S", "SS", "NS", "BS", "L", "M"):
        return {"N": str(len(inner))}
    raise Unsupported(f"size() of a {vkind} value is not modelled")


def holds(tree: Any, item: Item | None) -> bool:
    """Whether the parsed condition ``tree`` holds on ``item`` (None: no item)."""
    return bool(_eval(tree, item or {}))


def _eval(node: Any, item: Item) -> bool:
    kind = node[0]
    if kind == "or":
        return _eval(node[1], item) or _eval(node[2], item)
    if kind == "and":
        return _eval(node[1], item) and _eval(node[2], item)
    if kind == "not":
        return not _eval(node[1], item)
    if kind in ("attribute_exists", "attribute_not_exists"):
        if node[1][0] != "path":
            raise validation(f"{kind} takes a path")
        present = resolve(item, node[1][1]) is not None
        return present if kind == "attribute_exists" else not present
    values = [operand_value(operand, item) for operand in node[1:]]
    if any(v is None for v in values):
        if kind == "<>":
            raise Unsupported("<> with a missing attribute is not modelled")
        return False
    if kind == "attribute_type":
        return bool(next(iter(values[0])) == values[1].get("S"))
    if kind == "begins_with":
        k1, k2 = next(iter(values[0])), next(iter(values[1]))
        if k1 != k2 or k1 not in ("S", "B"):
            return False
        return bool(normal(values[0])[1].startswith(normal(values[1])[1]))
    if kind == "contains":
        return _contains(values[0], values[1])
    if kind == "in":
        return any(same_value(values[0], option) for option in values[1:])
    if kind in ("=", "<>"):
        equal = same_value(values[0], values[1])
        return equal if kind == "=" else not equal
    keys = [ordered(v) for v in values]
    if len({k[0] for k in keys}) != 1:
        return False   # comparing values of two types is false
    if kind == "between":
        return bool(keys[1][1] <= keys[0][1] <= keys[2][1])
    a, b = keys[0][1], keys[1][1]
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[kind])


def _contains(container: Any, element: Any) -> bool:
    (kind, inner), = container.items()
    if kind == "S":
        return "S" in element and element["S"] in inner
    if kind in ("SS", "NS", "BS"):
        return bool(normal(element) in {(kind[0], v) for v in normal(container)[1]})
    if kind == "L":
        return any(same_value(element, v) for v in inner)
    return False


def projection(text: str, placeholders: Expressions) -> list[Path]:
    """The paths of a ``ProjectionExpression``."""
    parser = _Parser(text, placeholders)
    paths = [parser.path()]
    while parser.peek() == ",":
        parser.take(",")
        paths.append(parser.path())
    parser.done()
    return paths


def project(item: Item, paths: list[Path]) -> Item:
    """The parts of ``item`` the projection's ``paths`` name (maps kept as maps)."""
    out: Item = {}
    for path in paths:
        if any(isinstance(p, int) for p in path):
            raise Unsupported("a list index in a projection is not modelled")
        value = resolve(item, path)
        if value is None:
            continue
        target = out
        for part in path[:-1]:
            target = target.setdefault(str(part), {"M": {}})["M"]
        target[str(path[-1])] = copy.deepcopy(value)
    return out
