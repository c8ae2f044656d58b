"""Constraint declarations as plain data: what the models declare, and what migrations replay.

A :class:`ConstraintState` is a constraint with every callable replaced by its import path, so it
can be written into a migration file, compared with ``==`` and turned back into a
:class:`~dynaunique.constraints.UniqueConstraint`. A :class:`ProjectState` is every model's
constraints at one point of the migration history (or as the live code declares them).
Pure: no I/O besides importing the callables a path names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import ModelInfo
from dynaunique._model.binding import bind_constraint
from dynaunique._model.sharing import import_path
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.normalizers import Composed, compose

#: One normalizer as stored: an import path, or the paths of a ``compose(...)`` chain.
NormalizerPath = str | tuple[str, ...]
#: ``normalize=`` as stored: None, one normalizer, or (field, normalizer) pairs sorted by field.
NormalizeSpec = NormalizerPath | tuple[tuple[str, NormalizerPath], ...] | None


def _pairs(spec: NormalizeSpec) -> tuple[tuple[str, NormalizerPath], ...] | None:
    """The (field, normalizer) pairs when ``spec`` is the per-field form, else None."""
    if isinstance(spec, tuple) and spec and all(isinstance(p, tuple) for p in spec):
        return tuple(p for p in spec if isinstance(p, tuple) and isinstance(p[0], str))
    return None


# --- callables <-> import paths ------------------------------------------------------------------


def resolve(path: str) -> Any:
    """Import the object an import path names: ``"dynaunique.normalizers.casefold"``.

    The longest importable module prefix is imported and the rest is looked up as attributes,
    so ``"builtins.str.casefold"`` works too.
    """
    if not isinstance(path, str) or not path or path.startswith(".") or ".." in path:
        raise MigrationError(f"{path!r} is not an import path (package.module.name)")
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only "this prefix is not a module" means: try a shorter one.
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue
            raise MigrationError(f"importing {module_name!r} for {path!r} failed: {exc}") from exc
        except ImportError as exc:
            raise MigrationError(f"importing {module_name!r} for {path!r} failed: {exc}") from exc
        try:
            for attribute in parts[cut:]:
                target = getattr(target, attribute)
        except AttributeError:
            break
        return target
    raise MigrationError(f"cannot import {path!r}: no such module or attribute")


class UnrecordableError(MigrationError, ConfigurationError):
    """A declaration migrations cannot record (a lambda normalizer, a local function): a
    configuration mistake, so the CLI exits 2."""

    exit_code = 2


def callable_path(function: Any, *, what: str) -> str:
    """The import path of a named module-level callable; a clear error for anything else.

    ``what`` says where the callable was found (``"Account.EMAIL normalize="``) for the message.
    """
    advice = (
        "migrations store callables by import path: define a named function at module level "
        "(def normalize_email(value): ...) and pass that"
    )
    path = import_path(function) if callable(function) else None
    if path is None:
        name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
        if isinstance(name, str) and "<lambda>" in name:
            raise UnrecordableError(f"{what} is a lambda, which has no import path; {advice}")
        if isinstance(name, str) and "<locals>" in name:
            raise UnrecordableError(
                f"{what} is {name}, a function defined inside another function; {advice}"
            )
        raise UnrecordableError(f"{what} is {function!r}, which has no import path; {advice}")
    try:
        found = resolve(path)
    except MigrationError:
        found = None
    if found is not function and found != function:
        raise UnrecordableError(f"{what} is {function!r}, which cannot be imported back from "
                             f"{path!r}; {advice}")
    return path


def _normalizer_path(function: Any, *, what: str) -> NormalizerPath:
    if isinstance(function, Composed):
        return tuple(callable_path(f, what=what) for f in function.functions)
    return callable_path(function, what=what)


def _resolve_normalizer(spec: NormalizerPath) -> Callable[[Any], Any]:
    if isinstance(spec, tuple):
        return compose(*(resolve(p) for p in spec))
    function = resolve(spec)
    if not callable(function):
        raise MigrationError(f"{spec!r} is not callable")
    return function  # type: ignore[no-any-return]


# --- converters used by ConstraintState ----------------------------------------------------------


def _to_fields(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _to_normalizer_path(value: Any) -> NormalizerPath:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, str) for p in value):
        return tuple(value)
    raise MigrationError(f"a normalizer is an import path or a list of them, got {value!r}")


def _to_normalize(value: Any) -> NormalizeSpec:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _to_normalizer_path(v)) for k, v in value.items()))
    if (isinstance(value, tuple) and value and all(isinstance(p, tuple) and len(p) == 2
                                                   and isinstance(p[0], str) for p in value)):
        return tuple(sorted((k, _to_normalizer_path(v)) for k, v in value))
    return _to_normalizer_path(value)


@attrs.frozen
class ConstraintState:
    """One unique constraint as migrations store it: callables replaced by import paths.

    * ``name`` — the lock name (``UNIQ#<name>#...``), the constraint's identity;
    * ``fields`` — the python attribute names;
    * ``normalize`` — None, one import path, a tuple of paths (``compose(...)``), or
      ``(field, path)`` pairs;
    * ``condition`` — the import path of the condition, or None;
    * ``hashed`` — whether the key holds an HMAC of the value.
    """

    name: str
    fields: tuple[str, ...] = attrs.field(converter=_to_fields)
    normalize: NormalizeSpec = attrs.field(default=None, converter=_to_normalize)
    condition: str | None = None
    hashed: bool = False

    @classmethod
    def from_constraint(cls, constraint: UniqueConstraint, *, owner: str) -> ConstraintState:
        """Serialize a declared constraint; ``owner`` (the model name) is used in errors."""
        what = f"{owner}.{constraint.name}"
        normalize: NormalizeSpec
        if constraint.normalize is None:
            normalize = None
        elif isinstance(constraint.normalize, tuple):
            normalize = tuple(
                (field, _normalizer_path(f, what=f"{what} normalize[{field!r}]"))
                for field, f in constraint.normalize
            )
        else:
            normalize = _normalizer_path(constraint.normalize, what=f"{what} normalize=")
        condition = None
        if constraint.condition is not None:
            condition = callable_path(constraint.condition, what=f"{what} condition=")
        return cls(name=constraint.name, fields=constraint.fields, normalize=normalize,
                   condition=condition, hashed=constraint.hashed)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConstraintState:
        """Read the dict form a migration file holds."""
        unknown = set(data) - {"name", "fields", "normalize", "condition", "hashed"}
        if unknown:
            raise MigrationError(f"unknown constraint keys {sorted(unknown)} in {dict(data)!r}")
        try:
            return cls(
                name=data["name"],
                fields=data["fields"],
                normalize=data.get("normalize"),
                condition=data.get("condition"),
                hashed=bool(data.get("hashed", False)),
            )
        except KeyError as exc:
            raise MigrationError(f"a constraint needs {exc.args[0]!r}: {dict(data)!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """The dict form written into migration files (lists instead of tuples)."""
        normalize: Any
        pairs = _pairs(self.normalize)
        if pairs is not None:
            normalize = {k: (list(v) if isinstance(v, tuple) else v) for k, v in pairs}
        elif isinstance(self.normalize, tuple):
            normalize = list(self.normalize)
        else:
            normalize = self.normalize
        return {
            "name": self.name,
            "fields": list(self.fields),
            "normalize": normalize,
            "condition": self.condition,
            "hashed": self.hashed,
        }

    def to_constraint(self) -> UniqueConstraint:
        """The live :class:`UniqueConstraint` this state describes (imports the callables)."""
        normalize: Any
        pairs = _pairs(self.normalize)
        if pairs is not None:
            normalize = {k: _resolve_normalizer(v) for k, v in pairs}
        elif self.normalize is None:
            normalize = None
        else:
            normalize = _resolve_normalizer(self.normalize)  # type: ignore[arg-type]
        condition = resolve(self.condition) if self.condition is not None else None
        return UniqueConstraint(self.fields, name=self.name, normalize=normalize,
                                condition=condition, hashed=self.hashed)

    def describe(self) -> str:
        """A one-line summary: ``EMAIL (email; normalize casefold; hashed)``."""
        parts = [", ".join(self.fields)]
        if self.normalize is not None:
            parts.append(f"normalize {_short(self.normalize)}")
        if self.condition is not None:
            parts.append(f"when {self.condition.rsplit('.', 1)[-1]}")
        if self.hashed:
            parts.append("hashed")
        return f"{self.name} ({'; '.join(parts)})"


def _short(spec: NormalizeSpec) -> str:
    pairs = _pairs(spec)
    if pairs is not None:
        return ", ".join(f"{k}: {_short(v)}" for k, v in pairs)
    if isinstance(spec, str):
        return spec.rsplit(".", 1)[-1]
    if spec is None:
        return "-"
    return "+".join(str(p).rsplit(".", 1)[-1] for p in spec)


@attrs.frozen
class ModelState:
    """One model's table and constraints (by lock name) at one point of the history."""

    name: str
    table: str
    constraints: tuple[tuple[str, ConstraintState], ...] = ()

    def constraint(self, name: str) -> ConstraintState | None:
        """The constraint called ``name``, or None."""
        return dict(self.constraints).get(name)


@attrs.frozen
class ProjectState:
    """Every model's constraints, keyed by model name. Immutable: changes return a new state."""

    models: tuple[tuple[str, ModelState], ...] = ()

    @classmethod
    def from_models(cls, models: Iterable[Any]) -> ProjectState:
        """The state the live model classes declare (models without constraints are left out).

        :raises MigrationError: a normalizer or condition has no import path (a lambda, a local
            function) — migrations could not replay it.
        """
        states: dict[str, ModelState] = {}
        for model in models:
            info: ModelInfo | None = model._du_info
            if info is None or not info.constraints:
                continue
            if info.name in states:
                raise MigrationError(f"two models are called {info.name!r}; model names identify "
                                     "models in migrations")
            constraints = tuple(
                (b.name, ConstraintState.from_constraint(b.constraint, owner=info.name))
                for b in info.constraints
            )
            states[info.name] = ModelState(info.name, info.table, tuple(sorted(constraints)))
        return cls(tuple(sorted(states.items())))

    def model(self, name: str) -> ModelState | None:
        """The model called ``name``, or None."""
        return dict(self.models).get(name)

    @property
    def tables(self) -> set[str]:
        """Every table a model with a constraint lives in."""
        return {m.table for _, m in self.models if m.constraints}

    def with_constraint(self, model: str, table: str, constraint: ConstraintState) -> ProjectState:
        """A copy with ``constraint`` added to (or replacing the same name in) ``model``."""
        models = dict(self.models)
        current = models.get(model)
        constraints = dict(current.constraints) if current is not None else {}
        if current is not None and current.table != table:
            if constraints:
                raise MigrationError(f"{model} lives in table {current.table!r}, not {table!r}")
            constraints = {}
        constraints[constraint.name] = constraint
        models[model] = ModelState(model, table, tuple(sorted(constraints.items())))
        return ProjectState(tuple(sorted(models.items())))

    def without_constraint(self, model: str, name: str) -> ProjectState:
        """A copy with constraint ``name`` of ``model`` removed."""
        models = dict(self.models)
        current = models.get(model)
        if current is None or current.constraint(name) is None:
            raise MigrationError(f"{model} has no constraint {name!r} at this point of the "
                                 "migration history")
        constraints = {k: v for k, v in current.constraints if k != name}
        if constraints:
            models[model] = ModelState(model, current.table, tuple(sorted(constraints.items())))
        else:
            del models[model]
        return ProjectState(tuple(sorted(models.items())))


def bind(model: Any, constraint: ConstraintState, *, table: str | None = None) -> ModelInfo:
    """A ``ModelInfo`` of the live ``model`` that holds exactly ``constraint`` (as recorded).

    Migrations compute locks for the declaration a migration recorded, not for whatever the
    class declares today; the fields are looked up on the live class for their stored names.
    """
    info: ModelInfo | None = model._du_info
    if info is None:
        raise MigrationError(f"{model.__name__} has no table")
    name = info.name

    def unknown(field: str) -> MigrationError:
        return MigrationError(
            f"constraint {constraint.name} of {name} names field {field!r}, which "
            f"{name} no longer has; its locks cannot be computed"
        )

    bound = bind_constraint(constraint, model.get_attributes(), unknown=unknown)
    return attrs.evolve(info, constraints=(bound,), table=table or info.table)
