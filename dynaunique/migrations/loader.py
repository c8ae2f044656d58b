"""Load migration files from a directory, order them by their dependencies and replay them.

A migration file is plain Python named ``NNNN_name.py`` holding ``dependencies`` (names of
earlier migrations of the same directory) and ``operations`` (a list of
:mod:`dynaunique.migrations.operations` values). Which migrations are applied is the ledger's
business (:mod:`dynaunique.migrations.recorder`); this module only reads files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import attrs

from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.migrations.operations import Operation
from dynaunique.migrations.state import ProjectState

#: ``0001_initial``: four digits, an underscore, a python-identifier-like name.
MIGRATION_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)$")
#: ``migrate MODULE zero`` unapplies everything.
ZERO = "zero"
#: The first line ``makemigrations`` writes (:func:`dynaunique.migrations.writer.render`): it
#: names the app (the models module) the migration belongs to.
_LABEL_LINE = re.compile(r'^"""Migration \S+ of (\S+), written by')


def label_of(path: Path) -> str | None:
    """The app label a migration file names in its first line (None: a hand-written file that
    does not say)."""
    with path.open(encoding="utf-8") as file:
        match = _LABEL_LINE.match(file.readline())
    return match.group(1) if match else None


def labels_in(directory: Path) -> dict[Path, str | None]:
    """Each migration file of ``directory`` (none if it does not exist) with its label."""
    if not directory.is_dir():
        return {}
    return {path: label_of(path) for path in sorted(directory.glob("*.py"))
            if MIGRATION_NAME.match(path.stem)}


class _UnknownTarget(MigrationError):
    """A target that names no migration, or several: a usage mistake, so the CLI exits 2
    (one line on stderr) as for any configuration mistake; still a :class:`MigrationError`."""

    exit_code = 2


@attrs.frozen
class Migration:
    """One migration file: its name, the migrations it follows and its operations."""

    name: str
    dependencies: tuple[str, ...] = ()
    operations: tuple[Operation, ...] = ()
    path: Path | None = attrs.field(default=None, eq=False)

    @property
    def number(self) -> int:
        """The leading four-digit number."""
        match = MIGRATION_NAME.match(self.name)
        return int(match.group(1)) if match else 0

    @property
    def reversible(self) -> bool:
        """Whether every operation can be unapplied."""
        return all(op.reversible for op in self.operations)


def load_file(path: Path) -> Migration:
    """Execute one migration file and read its ``dependencies`` and ``operations``."""
    name = path.stem
    if not MIGRATION_NAME.match(name):
        raise MigrationError(f"{path} is not named like a migration (0001_name.py)")
    digest = hashlib.sha1(str(path.parent.resolve()).encode("utf-8")).hexdigest()[:12]
    module_name = f"_dynamigrations_{digest}_{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise MigrationError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered so that functions and classes defined in the file can be looked up by module.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except MigrationError as exc:
        raise MigrationError(f"{path}: {exc}") from exc
    except Exception as exc:
        raise MigrationError(f"{path} failed to load: {type(exc).__name__}: {exc}") from exc
    dependencies = getattr(module, "dependencies", [])
    operations = getattr(module, "operations", None)
    if not isinstance(dependencies, (list, tuple)) or not all(
        isinstance(d, str) for d in dependencies
    ):
        raise MigrationError(f"{path}: dependencies must be a list of migration names")
    if not isinstance(operations, (list, tuple)):
        raise MigrationError(f"{path}: a migration file needs an `operations = [...]` list")
    for op in operations:
        if not isinstance(op, Operation):
            raise MigrationError(f"{path}: {op!r} is not a migration operation")
    return Migration(name, tuple(dependencies), tuple(operations), path)


def topological_order(migrations: dict[str, Migration]) -> list[str]:
    """The names in an order where every migration follows its dependencies (ties by name)."""
    for migration in migrations.values():
        for dependency in migration.dependencies:
            if dependency not in migrations:
                raise MigrationError(f"migration {migration.name} depends on {dependency!r}, "
                                     "which does not exist")
    remaining = {name: set(m.dependencies) for name, m in migrations.items()}
    order: list[str] = []
    while remaining:
        ready = sorted(name for name, deps in remaining.items() if not deps)
        if not ready:
            raise MigrationError(f"migrations {sorted(remaining)} depend on each other in a cycle")
        name = ready[0]
        order.append(name)
        del remaining[name]
        for deps in remaining.values():
            deps.discard(name)
    return order


class MigrationLoader:
    """Load migration files from disk and order them; the ledger says which are applied.

    ``directory`` may not exist yet (no migrations). ``migrations`` maps name → Migration and
    ``order`` lists the names so that each follows its dependencies.
    """

    def __init__(self, directory: Path, labels: tuple[str, ...] = ()) -> None:
        """``labels``: the app's names (its label first); a file naming another app is refused
        before any file runs, so one module never replays another's migrations."""
        self.directory = Path(directory)
        self.migrations: dict[str, Migration] = {}
        found = labels_in(self.directory)
        for path, label in found.items():
            if labels and label is not None and label not in labels:
                raise ConfigurationError(
                    f"{path} is a migration of {label}, not of {labels[0]}: each models module "
                    "keeps its migrations in a directory of its own (replaying another's would "
                    "remove its constraints); pass another --migrations-dir, or set "
                    f'migrations_dir under [tool.dynaunique.modules."{labels[0]}"]'
                )
        for path in found:
            migration = load_file(path)
            self.migrations[migration.name] = migration
        self.order = topological_order(self.migrations)

    @classmethod
    def from_migrations(cls, directory: Path, migrations: Iterable[Migration]) -> MigrationLoader:
        """A loader over migrations built in memory (tests, previews)."""
        loader = cls.__new__(cls)
        loader.directory = Path(directory)
        loader.migrations = {m.name: m for m in migrations}
        loader.order = topological_order(loader.migrations)
        return loader

    @property
    def leaves(self) -> list[str]:
        """Migrations no other migration depends on (one, unless two branches conflict)."""
        depended = {d for m in self.migrations.values() for d in m.dependencies}
        return [name for name in self.order if name not in depended]

    def leaf(self) -> str | None:
        """The latest migration, or None when there is none.

        :raises MigrationError: two migrations both follow the same predecessor.
        """
        leaves = self.leaves
        if len(leaves) > 1:
            raise MigrationError(
                f"conflicting migrations in {self.directory}: {', '.join(leaves)} are all "
                "latest; edit one so its dependencies name the other, then rerun"
            )
        return leaves[0] if leaves else None

    def next_number(self) -> int:
        """The number the next migration file gets."""
        return max((m.number for m in self.migrations.values()), default=0) + 1

    def state(self, upto: str | None = None) -> ProjectState:
        """The state after replaying every migration up to and including ``upto`` (all: None)."""
        state = ProjectState()
        for name in self.order:
            for op in self.migrations[name].operations:
                try:
                    state = op.state_forwards(state)
                except MigrationError as exc:
                    raise MigrationError(f"replaying {name}: {exc}") from exc
            if name == upto:
                break
        return state

    def resolve(self, target: str) -> str | None:
        """A full migration name for ``target`` (a name or a unique prefix such as ``0002``);
        None for ``zero``."""
        if target == ZERO:
            return None
        if target in self.migrations:
            return target
        matches = [name for name in self.order if name.startswith(target)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise _UnknownTarget(f"no migration called {target!r} in {self.directory} (known: "
                                 f"{', '.join(self.order) or 'none'})")
        raise _UnknownTarget(f"{target!r} matches several migrations: {', '.join(matches)}")
