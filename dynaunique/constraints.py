"""UniqueConstraint: the declaration of one uniqueness rule (fields, name, normalize, condition).

A constraint is a frozen attrs value: comparable, printable and hashable, so migrations can diff
and serialize it. It holds no reference to a model; ``Model`` binds it when the class is defined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.locks import validate_lock_name
from dynaunique.errors import ConfigurationError
from dynaunique.normalizers import Normalizer

Condition = Callable[[Any], bool]
NormalizeSpec = Normalizer | Mapping[str, Normalizer] | None


def _to_fields(value: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    fields = tuple(value)
    if not fields:
        raise ConfigurationError("a UniqueConstraint needs at least one field")
    for field in fields:
        if not isinstance(field, str) or not field:
            raise ConfigurationError(f"constraint fields are attribute names, got {field!r}")
    if len(set(fields)) != len(fields):
        raise ConfigurationError(f"a field appears twice in constraint fields {fields!r}")
    return fields


def _to_normalize(
    value: NormalizeSpec | tuple[tuple[str, Normalizer], ...],
) -> Normalizer | tuple[tuple[str, Normalizer], ...] | None:
    # A mapping is kept as sorted (field, normalizer) pairs so the constraint stays hashable.
    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs = tuple(sorted(value.items()))
    elif isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        pairs = tuple(value)
    elif callable(value):
        return value
    else:
        raise ConfigurationError(
            f"normalize= takes a callable or a mapping of field name to callable, got {value!r}"
        )
    for field, function in pairs:
        if not callable(function):
            raise ConfigurationError(f"normalize[{field!r}] is not callable: {function!r}")
    return pairs


@attrs.frozen
class UniqueConstraint:
    """No two records may hold the same (normalized) values of ``fields``.

    * ``fields`` — the model attribute names (python names) that together must be unique; one
      name or a tuple (a composite or scoped constraint: a slug unique per tenant).
    * ``name`` — the lock name (``UNIQ#<name>#...``). Required for composite constraints; a
      one-field constraint defaults to the field name upper-cased.
    * ``normalize`` — a callable applied to every field's value, or a mapping field → callable.
    * ``condition`` — a callable taking the model instance: the lock is held only while it is
      true (a partial unique index, e.g. only active members).
    * ``hashed`` — keep HMAC-SHA256 of the value in the key instead of the value itself.

    ``None`` in any field means no lock (SQL semantics: NULLs are distinct).
    """

    fields: tuple[str, ...] = attrs.field(converter=_to_fields)
    name: str = attrs.field(default="")
    normalize: Normalizer | tuple[tuple[str, Normalizer], ...] | None = attrs.field(
        default=None, converter=_to_normalize
    )
    condition: Condition | None = attrs.field(default=None)
    hashed: bool = attrs.field(default=False)
    #: Whether the lock name was written by the user (``name=`` or ``lock_name=``) rather than
    #: derived from the field name; only explicit names may be shared between models.
    explicit_name: bool = attrs.field(default=True, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.name:
            if len(self.fields) != 1:
                raise ConfigurationError(
                    f"UniqueConstraint(fields={self.fields!r}) needs a name= (the lock name)"
                )
            object.__setattr__(self, "name", self.fields[0].upper())
            object.__setattr__(self, "explicit_name", False)
        try:
            validate_lock_name(self.name)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        if self.condition is not None and not callable(self.condition):
            raise ConfigurationError(f"condition= must be callable, got {self.condition!r}")
        if not isinstance(self.hashed, bool):
            raise ConfigurationError(f"hashed= must be True or False, got {self.hashed!r}")
        if isinstance(self.normalize, tuple):
            unknown = {f for f, _ in self.normalize} - set(self.fields)
            if unknown:
                raise ConfigurationError(
                    f"normalize= names fields that are not in constraint {self.name}: "
                    f"{sorted(unknown)}"
                )

    def normalizer_for(self, field: str) -> Normalizer | None:
        """The normalizer that applies to ``field`` (or None)."""
        if self.normalize is None:
            return None
        if isinstance(self.normalize, tuple):
            return dict(self.normalize).get(field)
        return self.normalize

    def normalized(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """Apply the normalizers to one value per field (None stays None)."""
        out = []
        for field, value in zip(self.fields, values, strict=True):
            function = self.normalizer_for(field)
            out.append(function(value) if function is not None and value is not None else value)
        return tuple(out)

    def display_value(self, values: tuple[Any, ...]) -> Any:
        """The value as errors show it: a scalar for one field, a tuple for composites."""
        return values[0] if len(values) == 1 else values


class _RecordingValues(dict[str, Any]):
    """An instance's ``attribute_values`` that notes every attribute read through it."""

    def __init__(self, data: Mapping[str, Any], reads: set[str]) -> None:
        super().__init__(data)
        self.reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads.add(key)
        return super().__getitem__(key)


def _evaluate_condition(condition: Callable[[Any], bool], instance: Any,
                        reads: set[str] | None) -> bool:
    """Evaluate a constraint's condition, noting (into ``reads``) the attributes it reads.

    A deterministic condition that read only the attributes S of a state gives the same answer
    on every state that agrees on S — so guarding a write on S (plus the constrained fields) is
    enough to know the stored record holds exactly the locks this state holds.
    """
    values = getattr(instance, "attribute_values", None)
    if reads is None or not isinstance(values, dict):
        return bool(condition(instance))
    names: set[str] = set()
    instance.attribute_values = _RecordingValues(values, names)
    try:
        return bool(condition(instance))
    finally:
        instance.attribute_values = values
        attributes = type(instance).get_attributes()
        reads.update(attributes[n].attr_name for n in names if n in attributes)
