"""What typed names and values mean: a field or lock name's constraint, text as values, a filter.

A field or lock name resolves to one model's bound constraint (:func:`pick_model`), command-line
text to the python values its fields take (:func:`parse_value`), and a listing's filters to
the tables to scan and one server-side FilterExpression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs
from pynamodb import attributes as pa

from dynaunique._lock.items import BoundConstraint
from dynaunique._lock.locks import (
    MODEL_ATTR,
    RESERVED_PREFIX,
    SYSTEM_PREFIX,
    VALUE_ATTR,
    encode_component,
)
from dynaunique.errors import AuditError
from dynaunique.model import Model

from ._tables import _info, _Table, _tables


def _pool(models: Sequence[type[Model]], model: str | None) -> list[type[Model]]:
    """``models``, or only the one named ``model``."""
    pool = [m for m in models if model is None or m.__name__ == model]
    if not pool:
        raise AuditError(f"no loaded model is named {model!r}; the models are "
                         f"{[m.__name__ for m in models]}")
    return pool


def _bound(model: type[Model], field_or_constraint: str) -> BoundConstraint:
    for bound in _info(model).constraints:
        if field_or_constraint in (bound.name, *(
                (bound.constraint.fields[0],) if len(bound.constraint.fields) == 1 else ())):
            return bound
    declared = [b.name for b in _info(model).constraints]
    raise AuditError(f"{model.__name__} has no unique field or constraint named "
                     f"{field_or_constraint!r}; it has {declared}")


def pick_model(models: Sequence[type[Model]], field_or_constraint: str, *,
               model: str | None = None) -> type[Model]:
    """The model whose constraint ``field_or_constraint`` (a field or lock name) to use.

    Several models may declare one shared lock name; they are interchangeable only when their
    constraints are identical (same fields and normalizer) on one table, otherwise pass ``model``.
    """
    found: list[tuple[type[Model], BoundConstraint]] = []
    for candidate in _pool(models, model):
        try:
            found.append((candidate, _bound(candidate, field_or_constraint)))
        except AuditError:
            continue
    if not found:
        raise AuditError(f"no loaded model declares a unique field or constraint named "
                         f"{field_or_constraint!r}")
    first_model, first = found[0]
    for other_model, other in found[1:]:
        if (other.constraint != first.constraint
                or _info(other_model).table != _info(first_model).table):
            raise AuditError(f"{first_model.__name__} and {other_model.__name__} both declare "
                             f"{field_or_constraint!r} differently: say which model")
    return first_model


def parse_value(model: type[Model], field_or_constraint: str, texts: Sequence[str]) -> Any:
    """Turn command-line text into the python value(s) a constraint's fields take.

    One text per field (a tuple for a composite constraint); numbers, booleans, binary (UTF-8)
    and datetimes are converted as their attributes expect.
    """
    bound = _bound(model, field_or_constraint)
    fields = bound.constraint.fields
    if len(texts) != len(fields):
        raise AuditError(f"constraint {bound.name} takes {len(fields)} value(s) {fields}, got "
                         f"{len(texts)}")
    attributes = model.get_attributes()
    values = []
    for field, text in zip(fields, texts, strict=True):
        attribute = attributes[field]
        value: Any
        if isinstance(attribute, pa.UTCDateTimeAttribute):
            value = attribute.deserialize(text)  # type: ignore[no-untyped-call]
        elif isinstance(attribute, pa.NumberAttribute):
            try:
                value = Decimal(text)
            except InvalidOperation as exc:
                raise AuditError(f"{field} takes a number, got {text!r}") from exc
        elif isinstance(attribute, pa.BooleanAttribute):
            value = text.strip().lower() in ("1", "true", "yes", "y")
        elif isinstance(attribute, pa.BinaryAttribute):
            value = text.encode("utf-8")
        else:
            value = text
        values.append(value)
    return values[0] if len(values) == 1 else tuple(values)


def _lock_name(models: Sequence[type[Model]], constraint: str,
               model: str | None) -> tuple[str, type[Model] | None]:
    """``email`` → (``EMAIL``, its model); a name no model declares stays as it is."""
    try:
        chosen = pick_model(models, constraint, model=model)
    except AuditError:
        return constraint, None
    return _bound(chosen, constraint).name, chosen


def _encoded_prefix(model: type[Model] | None, constraint: str, value_prefix: Any) -> str:
    """The start of the encoded value part of the lock keys whose values start with the prefix."""
    parts = list(value_prefix) if isinstance(value_prefix, (tuple, list)) else [value_prefix]
    if model is None:
        return "#".join(encode_component(p) for p in parts)
    bound = _bound(model, constraint)
    if bound.constraint.hashed:
        raise AuditError(f"{bound.name} is hashed: its locks keep only a digest, so values "
                         "cannot be matched by prefix; look one value up exactly instead")
    fields = bound.constraint.fields
    if len(parts) > len(fields):
        raise AuditError(f"{bound.name} has {len(fields)} field(s), got {len(parts)} values")
    encoded = []
    for field, conv, part in zip(fields, bound.to_lockable, parts, strict=False):
        normalizer = bound.constraint.normalizer_for(field)
        value = normalizer(part) if normalizer is not None else part
        encoded.append(encode_component(conv(value)))
    return "#".join(encoded)


@attrs.frozen
class _LockFilter:
    """A lock listing's filters, as the tables to scan and one server-side FilterExpression."""

    tables: tuple[_Table, ...]
    filters: tuple[str, ...]
    names: Mapping[str, str]
    values: Mapping[str, Any]

    def scan_params(self, table: _Table) -> dict[str, Any]:
        """The Scan parameters that keep this filter's locks of ``table``."""
        names = {**self.names, "#h": table.hash_attr}
        used = {k: v for k, v in names.items() if any(k in f for f in self.filters)}
        return {"FilterExpression": " AND ".join(self.filters),
                "ExpressionAttributeNames": used, "ExpressionAttributeValues": dict(self.values)}


def _lock_filter(models: Sequence[type[Model]], model: str | None, constraint: str | None,
                 value_prefix: Any) -> _LockFilter:
    """The filter of :func:`list_locks` and :func:`lock_page` (their docstrings say what)."""
    pool = _pool(models, model)
    names: dict[str, str] = {"#m": MODEL_ATTR, "#v": VALUE_ATTR}
    filters = ["begins_with(#h, :prefix)", "NOT begins_with(#h, :system)"]
    values: dict[str, Any] = {":system": {"S": SYSTEM_PREFIX}}
    prefix = RESERVED_PREFIX
    if constraint is not None:
        name, owner_model = _lock_name(models, constraint, model)
        prefix = f"{RESERVED_PREFIX}{name}#"
        if value_prefix is not None:
            prefix += _encoded_prefix(owner_model, constraint, value_prefix)
    elif value_prefix is not None:
        filters.append("begins_with(#v, :value)")
        values[":value"] = {"S": str(value_prefix)}
    values[":prefix"] = {"S": prefix}
    if model is not None:
        filters.append("#m = :model")
        values[":model"] = {"S": model}
    return _LockFilter(tuple(_tables(pool)), tuple(filters), names, values)
