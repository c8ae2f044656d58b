"""The operations a migration file lists, each a frozen value that knows its inverse.

An operation changes the replayed :class:`~dynaunique.migrations.state.ProjectState`
(``state_forwards``) and says which *phases* apply it to the table (``phases``): ``fill`` writes
the locks a declaration requires, ``sweep`` deletes the locks of a constraint that its owners no
longer require, ``remove`` deletes every lock of a constraint, ``run`` calls a function. The
executor runs the phases; operations themselves do no I/O.

Migration files import this module as ``ops``::

    from dynaunique.migrations import operations as ops

    operations = [
        ops.AddUniqueConstraint(model="Account", table="accounts", constraint={
            "name": "EMAIL", "fields": ["email"], "normalize": "dynaunique.normalizers.casefold",
            "condition": None, "hashed": False,
        }),
    ]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

from dynaunique.errors import MigrationError
from dynaunique.migrations._kinds import PhaseKind
from dynaunique.migrations.state import ConstraintState, ProjectState, resolve

#: Phase kinds (the names this module exported before they were an enum).
FILL = PhaseKind.FILL
SWEEP = PhaseKind.SWEEP
REMOVE = PhaseKind.REMOVE
RUN = PhaseKind.RUN


def _to_state(value: ConstraintState | Mapping[str, Any]) -> ConstraintState:
    if isinstance(value, ConstraintState):
        return value
    if isinstance(value, Mapping):
        return ConstraintState.from_dict(value)
    raise MigrationError(f"a constraint is a dict (name, fields, normalize, condition, hashed), "
                         f"got {value!r}")


@attrs.frozen
class MigrationContext:
    """What a :class:`RunPython` function receives.

    ``models`` are the live model classes of the module by name (already pointed at the
    endpoint), ``client`` a botocore DynamoDB client, ``app`` the migrations' app label,
    ``backwards`` whether the migration is being unapplied.
    """

    app: str
    models: Mapping[str, Any]
    client: Any
    backwards: bool = False


RunFunction = Callable[[MigrationContext], Any]


@attrs.frozen
class Phase:
    """One step of applying an operation to the table; the executor's unit of resumable work.

    ``constraint`` is the declaration a ``fill``/``sweep`` computes locks with (or whose locks
    ``remove`` deletes); ``function`` is what a ``run`` phase calls.
    """

    kind: PhaseKind = attrs.field(converter=PhaseKind)
    model: str
    table: str | None
    constraint: ConstraintState | None = None
    function: RunFunction | None = attrs.field(default=None, eq=False)

    @property
    def scans(self) -> bool:
        """Whether the phase scans the table (and so is split into segments)."""
        return self.kind != RUN

    def describe(self) -> str:
        """A short label for progress output: ``fill Account.EMAIL``."""
        if self.kind == RUN:
            name = getattr(self.function, "__name__", "function")
            return f"run {name}"
        assert self.constraint is not None
        return f"{self.kind} {self.model}.{self.constraint.name}"


class Operation:
    """Base class of migration operations."""

    @property
    def reversible(self) -> bool:
        """Whether the operation can be unapplied."""
        return True

    def state_forwards(self, state: ProjectState) -> ProjectState:
        """The state after this operation."""
        raise NotImplementedError

    def phases(self, *, backwards: bool = False) -> tuple[Phase, ...]:
        """The phases that apply (or, ``backwards``, unapply) this operation."""
        raise NotImplementedError

    def describe(self) -> str:
        """One line for ``migrate --plan``."""
        raise NotImplementedError

    def deconstruct(self) -> tuple[str, dict[str, Any]]:
        """Class name and keyword arguments, for the writer."""
        raise NotImplementedError


@attrs.frozen
class _OneConstraint(Operation):
    """An operation that adds or removes one whole constraint: one phase each way."""

    #: The kind of the phase that applies it, and of the one that unapplies it.
    forward_kind: ClassVar[PhaseKind]
    backward_kind: ClassVar[PhaseKind]

    model: str
    table: str
    constraint: ConstraintState = attrs.field(converter=_to_state)

    def phases(self, *, backwards: bool = False) -> tuple[Phase, ...]:
        kind = self.backward_kind if backwards else self.forward_kind
        return (Phase(kind, self.model, self.table, self.constraint),)

    def deconstruct(self) -> tuple[str, dict[str, Any]]:
        return type(self).__name__, {"model": self.model, "table": self.table,
                                     "constraint": self.constraint.to_dict()}


@attrs.frozen
class AddUniqueConstraint(_OneConstraint):
    """Add ``constraint`` to ``model``: backfill a lock for every existing record.

    Duplicates stop the migration (reported, nothing overwritten). Unapplied by deleting the
    constraint's locks.
    """

    forward_kind = FILL
    backward_kind = REMOVE

    def state_forwards(self, state: ProjectState) -> ProjectState:
        existing = state.model(self.model)
        if existing is not None and existing.constraint(self.constraint.name) is not None:
            raise MigrationError(f"{self.model} already has constraint {self.constraint.name} "
                                 "at this point of the migration history")
        return state.with_constraint(self.model, self.table, self.constraint)

    def describe(self) -> str:
        return (f"Add unique constraint {self.constraint.describe()} to {self.model} "
                f"(table {self.table}): backfill its locks")


@attrs.frozen
class RemoveUniqueConstraint(_OneConstraint):
    """Remove ``constraint`` from ``model``: delete its locks (each guarded by its owner).

    ``constraint`` is the full declaration being removed, so unapplying can backfill it again.
    """

    forward_kind = REMOVE
    backward_kind = FILL

    def state_forwards(self, state: ProjectState) -> ProjectState:
        return state.without_constraint(self.model, self.constraint.name)

    def describe(self) -> str:
        return (f"Remove unique constraint {self.constraint.describe()} from {self.model} "
                f"(table {self.table}): delete its locks")


@attrs.frozen
class AlterUniqueConstraint(Operation):
    """Change a constraint in place (same lock name): fields, normalizer, condition or hashing.

    Applied in two phases under the *new* declaration: ``sweep`` deletes every lock of the
    constraint that its owner does not require under ``new`` (old-shape locks), then ``fill``
    writes the locks ``new`` requires. Unapplied the same way with ``old``. See
    docs/migrations.md for why a lock is never confused between the two shapes.
    """

    model: str
    table: str
    old: ConstraintState = attrs.field(converter=_to_state)
    new: ConstraintState = attrs.field(converter=_to_state)

    def __attrs_post_init__(self) -> None:
        if self.old.name != self.new.name:
            raise MigrationError(
                f"AlterUniqueConstraint keeps the lock name; {self.old.name!r} → "
                f"{self.new.name!r} is a RemoveUniqueConstraint plus an AddUniqueConstraint"
            )

    def state_forwards(self, state: ProjectState) -> ProjectState:
        current = state.model(self.model)
        if current is None or current.constraint(self.old.name) is None:
            raise MigrationError(f"{self.model} has no constraint {self.old.name} to alter at "
                                 "this point of the migration history")
        return state.with_constraint(self.model, self.table, self.new)

    def phases(self, *, backwards: bool = False) -> tuple[Phase, ...]:
        target = self.old if backwards else self.new
        return (Phase(SWEEP, self.model, self.table, target),
                Phase(FILL, self.model, self.table, target))

    def describe(self) -> str:
        return (f"Alter unique constraint of {self.model} (table {self.table}): "
                f"{self.old.describe()} → {self.new.describe()}: sweep old-shape locks, "
                "backfill new ones")

    def deconstruct(self) -> tuple[str, dict[str, Any]]:
        return "AlterUniqueConstraint", {"model": self.model, "table": self.table,
                                         "old": self.old.to_dict(), "new": self.new.to_dict()}


FunctionSpec = RunFunction | str | None


def _to_function(value: FunctionSpec) -> RunFunction | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = resolve(value)
    if not callable(value):
        raise MigrationError(f"RunPython takes callables or import paths, got {value!r}")
    return value


@attrs.frozen
class RunPython(Operation):
    """Call ``forwards(ctx)`` (and ``backwards(ctx)`` when unapplying) with a MigrationContext.

    Both may be callables defined in the migration file or import paths. Without
    ``backwards`` the migration cannot be unapplied (use ``RunPython.noop`` for "nothing to
    undo"). The function runs once per apply — make it idempotent: a run interrupted half-way
    is run again in full.
    """

    forwards: RunFunction = attrs.field(converter=_to_function)
    backwards: RunFunction | None = attrs.field(default=None, converter=_to_function)

    @staticmethod
    def noop(ctx: MigrationContext) -> None:
        """Does nothing: a backwards function for forwards changes that need no undoing."""

    @property
    def reversible(self) -> bool:
        """Whether a ``backwards`` function was given."""
        return self.backwards is not None

    def state_forwards(self, state: ProjectState) -> ProjectState:
        return state

    def phases(self, *, backwards: bool = False) -> tuple[Phase, ...]:
        function = self.backwards if backwards else self.forwards
        if function is None:
            raise MigrationError(f"RunPython({self.forwards.__name__}) has no backwards "
                                 "function: this migration cannot be unapplied")
        return (Phase(RUN, "", None, None, function),)

    def describe(self) -> str:
        name = getattr(self.forwards, "__name__", repr(self.forwards))
        return f"Run Python function {name}"

    def deconstruct(self) -> tuple[str, dict[str, Any]]:
        raise MigrationError("RunPython operations are written by hand, not generated")
