"""``UpdateExpression`` for the in-memory model: SET, REMOVE, ADD and DELETE, as DynamoDB applies
them (every right-hand side read from the item before the update; overlapping paths, key
attributes and paths into missing parents refused with a ``ValidationException``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Context, Decimal
from typing import Any

from .memory_expr import Expressions, Item, Path, Unsupported, _Parser, normal, resolve, validation

_CLAUSES = ("SET", "REMOVE", "ADD", "DELETE")
# DynamoDB's numbers: 38 significant digits.
_NUMBERS = Context(prec=38)


def _number(text: str) -> str:
    """A number as DynamoDB writes a computed one: no exponent, no trailing zeros."""
    value = Decimal(text).normalize(_NUMBERS)
    return format(value, "f")


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None or "N" not in a or "N" not in b:
        raise validation("An operand in the update expression has an incorrect data type")
    result = _NUMBERS.add(Decimal(a["N"]), Decimal(b["N"])) if op == "+" else _NUMBERS.subtract(
        Decimal(a["N"]), Decimal(b["N"]))
    return {"N": _number(str(result))}


class _UpdateParser(_Parser):
    def actions(self) -> list[tuple[str, Path, Any]]:
        found: list[tuple[str, Path, Any]] = []
        seen: set[str] = set()
        while self.peek() is not None:
            clause = self.take().upper()
            if clause not in _CLAUSES:
                raise validation(f"Invalid UpdateExpression {self.text!r}: {clause!r}")
            if clause in seen:
                raise validation(f"Invalid UpdateExpression: The \"{clause}\" section can "
                                 f"only be used once in an update expression;")
            seen.add(clause)
            while True:
                found.append(self._action(clause))
                if self.peek() != ",":
                    break
                self.take(",")
        return found

    def _action(self, clause: str) -> tuple[str, Path, Any]:
        path = self.path()
        if clause == "REMOVE":
            return clause, path, None
        if clause == "SET":
            self.take("=")
            return clause, path, self._value()
        return clause, path, self.operand()

    def _value(self) -> Any:
        left = self._term()
        if self.peek() in ("+", "-"):
            op = self.take()
            return (op, left, self._term())
        return left

    def _term(self) -> Any:
        token = self.peek()
        if token in ("if_not_exists", "list_append") and self.peek(1) == "(":
            self.take()
            self.take("(")
            first = self._term() if token == "list_append" else ("path", self.path())
            self.take(",")
            second = self._term()
            self.take(")")
            return (token, first, second)
        return self.operand()


def _rhs(node: Any, item: Item) -> Any:
    kind = node[0]
    if kind == "value":
        return copy.deepcopy(node[1])
    if kind == "path":
        return copy.deepcopy(resolve(item, node[1]))
    if kind in ("+", "-"):
        return _arith(kind, _rhs(node[1], item), _rhs(node[2], item))
    if kind == "if_not_exists":
        present = resolve(item, node[1][1])
        return copy.deepcopy(present) if present is not None else _rhs(node[2], item)
    if kind == "list_append":
        a, b = _rhs(node[1], item), _rhs(node[2], item)
        if a is None or b is None or "L" not in a or "L" not in b:
            raise validation("An operand in the update expression has an incorrect data type")
        return {"L": a["L"] + b["L"]}
    raise Unsupported(f"{kind} in a SET is not modelled")


def _overlap(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _parent(item: Item, path: Path) -> tuple[Any, str | int] | None:
    """The container holding ``path``'s last part (a dict of attributes or map entries, or a
    list), or None when a parent is missing (an error for SET, nothing for REMOVE)."""
    container: Any = item
    for part in path[:-1]:
        value = _get(container, part)
        if value is None:
            return None
        if "M" in value:
            container = value["M"]
        elif "L" in value:
            container = value["L"]
        else:
            return None
    last = path[-1]
    if isinstance(last, int) != isinstance(container, list):
        return None
    return container, last


def _invalid_path() -> Exception:
    return validation("The document path provided in the update expression is invalid for update")


def apply_update(params: Mapping[str, Any], placeholders: Expressions, item: Item | None,
                 key: Item) -> Item:
    """``params``' ``UpdateExpression`` applied to ``item`` (a missing item starts as its key)."""
    parser = _UpdateParser(params["UpdateExpression"], placeholders)
    actions = parser.actions()
    parser.done()
    old = item or {}
    new = copy.deepcopy(item) if item is not None else copy.deepcopy(dict(key))
    for i, (_, path, _) in enumerate(actions):
        if str(path[0]) in key:
            raise validation(f"One or more parameter values were invalid: Cannot update "
                             f"attribute {path[0]}. This attribute is part of the key")
        for _, other, _ in actions[:i]:
            if _overlap(path, other):
                raise validation("Invalid UpdateExpression: Two document paths overlap with "
                                 "each other; must remove or rewrite one of these paths")
    planned = [(clause, path, None if clause == "REMOVE" else _rhs(node, old))
               for clause, path, node in actions]
    for clause, path, value in planned:
        place = _parent(new, path)
        if place is None:
            if clause == "REMOVE":
                continue
            raise _invalid_path()
        container, last = place
        current = _get(container, last)
        if clause == "SET":
            if value is None:
                raise validation("The provided expression refers to an attribute that does not "
                                 "exist in the item")
            _put(container, last, value)
        elif clause == "REMOVE":
            if isinstance(container, list):
                if isinstance(last, int) and last < len(container):
                    del container[last]
            else:
                container.pop(last, None)
        elif clause == "ADD":
            _put(container, last, _add(current, value))
        else:
            result = _delete(current, value)
            if result is None:
                container.pop(last, None)
            else:
                _put(container, last, result)
    return new


def _get(container: Any, last: str | int) -> Any:
    if isinstance(container, list):
        return container[last] if isinstance(last, int) and last < len(container) else None
    return container.get(last) if isinstance(last, str) else None


def _put(container: Any, last: str | int, value: Any) -> None:
    if isinstance(container, list):
        assert isinstance(last, int)
        if last < len(container):
            container[last] = value
        else:
            container.append(value)
    else:
        container[last] = value


def _add(current: Any, value: Any) -> Any:
    (kind, inner), = value.items()
    if kind == "N":
        if current is None:
            return {"N": _number(inner)}
        return _arith("+", current, value)
    if kind in ("SS", "NS", "BS"):
        if current is None:
            return copy.deepcopy(value)
        if kind not in current:
            raise validation("An operand in the update expression has an incorrect data type")
        present = normal(current)[1]
        merged = list(current[kind]) + [m for m in inner
                                        if next(iter(normal({kind: [m]})[1])) not in present]
        return {kind: merged}
    raise validation("Incorrect operand type for operator or function; operator: ADD")


def _delete(current: Any, value: Any) -> Any:
    (kind, _), = value.items()
    if kind not in ("SS", "NS", "BS"):
        raise validation("Incorrect operand type for operator or function; operator: DELETE")
    if current is None:
        return None
    if kind not in current:
        raise validation("An operand in the update expression has an incorrect data type")
    gone = normal(value)[1]
    kept = [m for m in current[kind] if next(iter(normal({kind: [m]})[1])) not in gone]
    return {kind: kept} if kept else None
