"""Resolve what every migrations command needs for one models module: settings, the migrations
directory, the app label, the ledger's table and the clients — and ``makemigrations`` itself.

Settings come from ``[tool.dynaunique]`` in ``pyproject.toml`` in the current directory
(``[tool.dynaunique.modules."<module>"]`` overrides them for one module); command-line options
override both. Keys: ``migrations_dir``, ``endpoint``, ``segments``, ``max_wcu``, ``max_rcu``,
``concurrency``, ``ledger_table``, ``app``, ``lease_seconds`` (and ``home_region``, which the
library reads: ``dynaunique._transport.regions``).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from dynaunique._pyproject import tool_settings
from dynaunique._transport.clients import connection_for, connection_in
from dynaunique._transport.regions import route
from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.migrations import writer
from dynaunique.migrations.autodetector import detect_changes, suggest_name
from dynaunique.migrations.executor import MigrationExecutor
from dynaunique.migrations.loader import MigrationLoader, labels_in
from dynaunique.migrations.operations import (
    AddUniqueConstraint,
    AlterUniqueConstraint,
    Operation,
    RemoveUniqueConstraint,
)
from dynaunique.migrations.options import MigrationOptions, ProgressCallback
from dynaunique.migrations.recorder import MigrationRecorder, describe_table
from dynaunique.migrations.state import ProjectState

#: The directory ``makemigrations`` writes to, next to the models module, by default.
DEFAULT_DIRECTORY = "dynamigrations"

_SETTING_TYPES: dict[str, tuple[type, ...]] = {
    "migrations_dir": (str,),
    "endpoint": (str,),
    "segments": (int,),
    "max_wcu": (int, float),
    "max_rcu": (int, float),
    "concurrency": (int,),
    "ledger_table": (str,),
    "app": (str,),
    "lease_seconds": (int, float),
    "home_region": (str,),
}


@attrs.frozen
class Settings:
    """``[tool.dynaunique]`` settings (None: not set)."""

    migrations_dir: Path | None = None
    endpoint: str | None = None
    segments: int | None = None
    max_wcu: float | None = None
    max_rcu: float | None = None
    concurrency: int | None = None
    ledger_table: str | None = None
    app: str | None = None
    lease_seconds: float | None = None
    #: Read by the library itself (``dynaunique._transport.regions``), not by the migrations
    #: commands.
    home_region: str | None = None


def load_settings(module: str, directory: Path | None = None) -> Settings:
    """Read ``[tool.dynaunique]`` (and the module's override table) from ``pyproject.toml``.

    :raises ConfigurationError: an unknown key, a value of the wrong type, or (Python 3.10
        without ``tomli``) a pyproject that has settings but cannot be parsed.
    """
    root = directory if directory is not None else Path.cwd()
    path = root / "pyproject.toml"
    data = tool_settings(root)
    if not data:
        return Settings()
    merged = {k: v for k, v in data.items() if k != "modules"}
    merged.update(data.get("modules", {}).get(module, {}))
    values: dict[str, Any] = {}
    for key, value in merged.items():
        types = _SETTING_TYPES.get(key)
        if types is None:
            raise ConfigurationError(f"{path}: unknown [tool.dynaunique] key {key!r}; known: "
                                     f"{', '.join(sorted(_SETTING_TYPES))}")
        if not isinstance(value, types) or isinstance(value, bool):
            raise ConfigurationError(f"{path}: [tool.dynaunique] {key} = {value!r} has the "
                                     "wrong type")
        values[key] = value
    if "migrations_dir" in values:
        values["migrations_dir"] = (root / values["migrations_dir"]).resolve()
    return Settings(**values)


def options_from(settings: Settings, **changes: Any) -> MigrationOptions:
    """:class:`MigrationOptions` from ``[tool.dynaunique]``'s ``segments``, ``max_wcu``,
    ``max_rcu``, ``concurrency`` and ``lease_seconds`` over the defaults, then ``changes`` (a
    change of None keeps the setting).

    :raises InvalidOptionError: an unknown option, or a value out of range.
    """
    values = {"segments": settings.segments, "max_wcu": settings.max_wcu,
              "max_rcu": settings.max_rcu, "concurrency": settings.concurrency,
              "lease_seconds": settings.lease_seconds}
    values.update((k, v) for k, v in changes.items() if v is not None)
    return MigrationOptions().replace(**{k: v for k, v in values.items() if v is not None})


@attrs.frozen
class MakeResult:
    """What ``makemigrations`` found and (unless ``check``) wrote."""

    operations: tuple[Operation, ...]
    name: str | None = None
    path: Path | None = None
    source: str | None = None

    @property
    def changed(self) -> bool:
        """Whether a migration was (or, with ``check``, would be) written."""
        return self.name is not None


def describe_operation(op: Operation) -> str:
    """The line ``makemigrations`` prints for an operation."""
    if isinstance(op, AddUniqueConstraint):
        return f"+ Add unique constraint {op.constraint.describe()} to {op.model}"
    if isinstance(op, RemoveUniqueConstraint):
        return f"- Remove unique constraint {op.constraint.name} from {op.model}"
    if isinstance(op, AlterUniqueConstraint):
        return f"~ Alter unique constraint {op.old.describe()} → {op.new.describe()} on {op.model}"
    return f"* {op.describe()}"


class Project:
    """One models module (``MODULE``) as the migrations commands see it.

    ``models`` are the module's model classes (``dynaunique._user_models.load_models``), already
    pointed at the endpoint.
    """

    def __init__(self, module: str, models: Sequence[Any], *,
                 migrations_dir: Path | None = None, settings: Settings | None = None) -> None:
        self.module = module
        self.models = {m.__name__: m for m in models}
        self.settings = settings if settings is not None else Settings()
        self.directory = Path(
            migrations_dir or self.settings.migrations_dir or self._default_directory()
        )

    def _default_directory(self) -> Path:
        """``dynamigrations/`` next to the module, unless its files are another module's (two
        models modules in one package): then ``dynamigrations_<module's last name>/``."""
        module = sys.modules.get(self.module)
        filename = getattr(module, "__file__", None)
        if filename is None:
            raise ConfigurationError(f"cannot tell where {self.module!r} lives; pass "
                                     "--migrations-dir")
        parent = Path(filename).resolve().parent
        labels = {label for label in labels_in(parent / DEFAULT_DIRECTORY).values() if label}
        if labels and not labels & set(self.labels):
            return parent / f"{DEFAULT_DIRECTORY}_{self.module.rsplit('.', 1)[-1]}"
        return parent / DEFAULT_DIRECTORY

    @property
    def app(self) -> str:
        """The ledger's app label: ``[tool.dynaunique] app``, else the module's dotted path."""
        return self.settings.app or self.module

    @property
    def labels(self) -> tuple[str, ...]:
        """The names this module's migration files may carry: its app label, and its dotted
        path (which the files name when ``app`` was set after they were written)."""
        return tuple(dict.fromkeys((self.app, self.module)))

    def loader(self) -> MigrationLoader:
        """The migration files on disk (refused if they are another module's)."""
        return MigrationLoader(self.directory, self.labels)

    def live_state(self) -> ProjectState:
        """The constraints the module's models declare now."""
        return ProjectState.from_models(self.models.values())

    # --- makemigrations --------------------------------------------------------------------------

    def make_migrations(self, *, name: str | None = None, check: bool = False,
                        empty: bool = False) -> MakeResult:
        """Diff the models against the replayed migrations and write the next migration file.

        ``check`` computes without writing; ``empty`` writes a file with no operations (for a
        hand-written ``RunPython``). Nothing to do → a result with no name, nothing written.
        """
        loader = self.loader()
        leaf = loader.leaf()
        new = self.live_state()
        operations = detect_changes(loader.state(), new)
        if not operations and not empty:
            return MakeResult(())
        suffix = name or suggest_name(operations, initial=not loader.migrations)
        if not suffix.replace("_", "").isalnum() or not suffix.isascii():
            raise MigrationError(f"--name {suffix!r}: use letters, digits and underscores")
        full = f"{loader.next_number():04d}_{suffix.lower()}"
        source = writer.render(full, label=self.app, dependencies=[leaf] if leaf else [],
                               operations=operations)
        if check:
            return MakeResult(tuple(operations), full, None, source)
        path = writer.write(self.directory, full, source)
        # The file must replay to exactly what the models declare; never leave one that doesn't.
        replayed = self.loader().state()
        if not empty and replayed != new:
            path.unlink()
            raise MigrationError(f"the written migration {full} did not replay to the models' "
                                 "state (a bug in dynaunique); nothing was written")
        return MakeResult(tuple(operations), full, path, source)

    def pending_changes(self) -> list[Operation]:
        """Changes the models have that no migration holds yet (what ``makemigrations
        --check`` reports; ``migrate`` does not look)."""
        return detect_changes(self.loader().state(), self.live_state())

    # --- the ledger ------------------------------------------------------------------------------

    def ledger_table(self, loader: MigrationLoader | None = None) -> str:
        """The table the ledger lives in: ``ledger_table``, else the one table of the models.

        :raises ConfigurationError: the models and migrations span several tables (set
            ``[tool.dynaunique] ledger_table``) or none.
        """
        if self.settings.ledger_table:
            return self.settings.ledger_table
        loader = loader if loader is not None else self.loader()
        tables = set(self.live_state().tables) | set(loader.state().tables)
        for migration in loader.migrations.values():
            for op in migration.operations:
                table = getattr(op, "table", None)
                if isinstance(table, str):
                    tables.add(table)
        if not tables:
            tables = {m._du_info.table for m in self.models.values() if m._du_info is not None}
        if not tables:
            raise ConfigurationError(
                f"{self.module} has no model with a table, so there is no table to keep its "
                f"migrations ledger in; set ledger_table = \"<table>\" under "
                f'[tool.dynaunique.modules."{self.module}"] in pyproject.toml'
            )
        if len(tables) != 1:
            named = sorted(tables)
            raise ConfigurationError(
                f"{self.module} spans tables {named} (its models' and migrations' tables), "
                "and dynaunique records which of its migrations are applied in one table, the "
                f"ledger, which it cannot choose for you; set ledger_table = \"{named[0]}\" "
                f'under [tool.dynaunique.modules."{self.module}"] (or [tool.dynaunique] for '
                "every module) in pyproject.toml, naming the table that should keep the ledger"
            )
        return next(iter(tables))

    def connection_for(self, table: str, *, write: bool = False) -> Any:
        """The PynamoDB connection of the model that lives in ``table`` (else of any model of the
        module) — on a global table with a home region, signed for the home region
        (docs/global-tables.md): the ledger, the scans and the lock writes all go there.

        ``write=True`` (a run that writes: :meth:`executor`) routes as the library's writes do:
        a global table without a home region, or one with strong consistency, is refused with
        :class:`~dynaunique.errors.GlobalTableError` before anything is written, as ``repair``
        refuses it. A read (``showmigrations``) is never refused."""
        model = next((m for m in self.models.values()
                      if getattr(m.Meta, "table_name", None) == table), None)
        if model is None:
            if not self.models:
                raise ConfigurationError(f"{self.module} has no models")
            model = next(iter(self.models.values()))
        own = connection_for(model)
        # As a consistent lookup routes (never refused): home when the table has one, else
        # where the model points, as before.
        homed = route(model.Meta, lambda _meta: own, write=write)
        return own if homed is model.Meta else connection_in(model, homed)

    def client_for(self, table: str, *, write: bool = False) -> Any:
        """Deprecated: :meth:`connection_for` (it returns a PynamoDB connection, not a botocore
        client); removed in the release after next."""
        warnings.warn("Project.client_for() is deprecated: use Project.connection_for() (it "
                      "returns a PynamoDB Connection; its .client is the botocore client)",
                      DeprecationWarning, stacklevel=2)
        return self.connection_for(table, write=write)

    def recorder(self, loader: MigrationLoader | None = None, *,
                 write: bool = False) -> MigrationRecorder:
        """The ledger of this module's app, in its table (``write``: see :meth:`connection_for`)."""
        table = self.ledger_table(loader)
        connection = self.connection_for(table, write=write)
        return MigrationRecorder(connection, describe_table(connection, table), self.app)

    def options(self, **changes: Any) -> MigrationOptions:
        """The :class:`MigrationOptions` of a run of this module: :func:`options_from` its
        settings and ``changes``."""
        return options_from(self.settings, **changes)

    def executor(self, options: MigrationOptions | None = None, *,
                 progress_callback: ProgressCallback | None = None,
                 **changes: Any) -> MigrationExecutor:
        """A :class:`MigrationExecutor` over this module, run with ``options`` (default:
        :meth:`options`) changed by ``changes`` (``executor(page_size=10)``)."""
        loader = self.loader()
        options = self.options(**changes) if options is None else options.replace(
            **{k: v for k, v in changes.items() if v is not None})
        return MigrationExecutor(loader, self.recorder(loader, write=True), self.models, options,
                                 connection_for=partial(self.connection_for, write=True),
                                 progress_callback=progress_callback)
