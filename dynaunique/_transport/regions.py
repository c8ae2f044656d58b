"""Global tables: a table's replicas and mode, learned once per process, and where a call goes.

A DynamoDB global table's transaction is atomic only in the region that ran it (multi-Region
eventual consistency, MREC) or is refused outright (multi-Region strong consistency, MRSC). So
before dynaunique's first write to a table, :func:`table_mode` asks ``DescribeTable`` once
(``Replicas``, ``MultiRegionConsistency``) and keeps the answer for the process; and
:func:`route` — called where a write gets its connection (``_connection.sending_for``) and by the
consistent lookups — decides where the call goes:

- a table without replicas: where the model points, as always;
- MRSC: where the model points; the flush's writes (``_connection.sending_for``) go there by
  the protocol without transactions (``dynaunique._write.strong``: :func:`strong` tells it so),
  and any other write routed here (the migrations' transactions) is refused
  (:class:`~dynaunique.errors.GlobalTableError`), nothing is sent (the audit's repair settles
  an MRSC table in place, without routing);
- MREC: to the table's *home region* — ``Meta.home_region``, else the environment variable
  ``DYNAUNIQUE_HOME_REGION``, else ``home_region`` under ``[tool.dynaunique]`` in the current
  directory's ``pyproject.toml`` — signed for it, at its resolved endpoint (or the model's own
  ``host`` when one is set). Without a home region a write is refused; a consistent lookup then
  stays local.

The route is kept per ``Meta`` (and made again when its table, region, host or home region
changes), so a write after the first pays a few attribute reads, no request.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from dynaunique.errors import DynauniqueError, GlobalTableError

__all__ = ["HOME_REGION_ENV", "TableMode", "forget", "home_region", "in_region", "remember",
           "route", "strong", "table_mode"]

#: The environment variable naming the home region of every global table the process writes.
HOME_REGION_ENV = "DYNAUNIQUE_HOME_REGION"

_log = logging.getLogger("dynaunique.regions")


@attrs.frozen
class TableMode:
    """What ``DescribeTable`` said of a table, seen from ``region``.

    ``replicas`` are the *other* regions holding it (empty: not a global table);
    ``consistency`` is ``"EVENTUAL"`` or ``"STRONG"`` for a global table, else None.
    """

    table: str
    region: str
    replicas: tuple[str, ...] = ()
    consistency: str | None = None

    @property
    def is_global(self) -> bool:
        """Whether the table has a replica in another region."""
        return bool(self.replicas)

    @property
    def regions(self) -> tuple[str, ...]:
        """Every region holding the table, this one included, sorted."""
        return tuple(sorted({self.region, *self.replicas}))

    def describe(self) -> str:
        """``global table (eventual consistency) in eu-west-1, us-east-1``, or ``one region``."""
        if not self.is_global:
            return f"one region ({self.region})"
        mode = "strong" if self.consistency == "STRONG" else "eventual"
        return f"global table ({mode} consistency) in {', '.join(self.regions)}"


#: (table, region, host) → its mode, learned once per process.
_modes: dict[tuple[Any, ...], TableMode] = {}
#: (Meta, write, strong) → (what the route was made of, the Meta to connect with, the mode).
_routes: dict[tuple[Any, bool, bool], tuple[tuple[Any, ...], Any, TableMode | None]] = {}
_lock = threading.Lock()
#: Counts :func:`forget` calls: a route kept elsewhere (``_connection.sending_for``) is made
#: again when it changed.
known = 0


def forget(host: str | None = None) -> None:
    """Forget every table's mode and every route (a test that remade its tables calls it), or
    only the modes of tables at endpoint ``host`` (a reset local server)."""
    with _lock:
        for key in [k for k in _modes if host is None or k[2] == host]:
            del _modes[key]
        _routes.clear()
    global known
    known += 1
    _pyproject_home.cache_clear()


def _mode_of(table: str, region: str, described: Any) -> TableMode:
    replicas = described.get("Replicas") if isinstance(described, dict) else None
    mode = TableMode(table, region, tuple(sorted(
        str(r["RegionName"]) for r in replicas or []
        if r.get("RegionName") and r["RegionName"] != region)))
    if mode.is_global:
        mode = attrs.evolve(mode, consistency=str(described.get("MultiRegionConsistency")
                                                  or "EVENTUAL"))
    return mode


def remember(table: str, region: str, host: str | None, described: Any) -> None:
    """Keep what a ``CreateTable`` or ``DescribeTable`` answer (its ``TableDescription``) says of
    ``table``, so the first write need not ask (``dynaunique.testing.create_tables`` tells what
    it created)."""
    with _lock:
        _modes[(table, region, host)] = _mode_of(table, region, described)


def table_mode(table: str, connection: Any, host: str | None = None) -> TableMode:
    """The mode of ``table`` as ``connection``'s region sees it: one ``DescribeTable`` the first
    time per (table, region, host) in this process, then the kept answer.

    A table that does not exist is not remembered (the write will say so); a ``DescribeTable``
    refused otherwise (no permission) is remembered as a one-region table, with a warning.
    """
    from botocore.exceptions import BotoCoreError

    try:
        region = str(connection.client.meta.region_name)
    except BotoCoreError:   # no client can be made (no region): the write itself will say so
        return TableMode(table, "")
    key = (table, region, host)
    known = _modes.get(key)
    if known is not None:
        return known
    from pynamodb.exceptions import TableDoesNotExist, TableError

    try:
        described = connection.describe_table(table)
    except TableDoesNotExist:
        return TableMode(table, region)
    except (TableError, DynauniqueError) as exc:
        _log.warning("DescribeTable %s failed (%s): treated as a one-region table; a global "
                     "table would then not be detected", table, exc)
        described = {}
    mode = _mode_of(table, region, described)
    with _lock:
        _modes[key] = mode
    return mode


def home_region(meta: Any) -> str | None:
    """The home region a model names: ``Meta.home_region``, else ``DYNAUNIQUE_HOME_REGION``, else
    ``[tool.dynaunique] home_region`` in ``./pyproject.toml`` (None: none)."""
    named = getattr(meta, "home_region", None) or os.environ.get(HOME_REGION_ENV) or None
    return str(named) if named else _pyproject_home(str(Path.cwd()))


@functools.lru_cache(maxsize=4)
def _pyproject_home(directory: str) -> str | None:
    from dynaunique._pyproject import tool_settings

    value = tool_settings(Path(directory)).get("home_region")
    if value is not None and not isinstance(value, str):
        raise GlobalTableError(f"[tool.dynaunique] home_region = {value!r} is not a region name")
    return value


class _HomeMeta:
    """A model's ``Meta`` with its region replaced by the home region (everything else, host
    and credentials included, is the model's own)."""

    def __init__(self, meta: Any, region: str) -> None:
        self._meta = meta
        self.region = region

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meta, name)


def in_region(meta: Any, region: str) -> Any:
    """``meta`` signed for ``region`` (its other settings kept): a ``Meta`` to connect with."""
    return meta if getattr(meta, "region", None) == region else _HomeMeta(meta, region)


def route(meta: Any, connect: Callable[[Any], Any], *, write: bool = True,
          strong: bool = False) -> Any:
    """The ``Meta`` whose connection a call of ``meta``'s model goes through (see the module).

    ``connect`` builds a ``Meta``'s connection (``_clients.connection_for``); it is asked at
    most for the first call of a route. ``write=False`` is a consistent lookup: it goes home
    when there is a home region, and is never refused. ``strong=True``: the caller writes a
    multi-Region strong consistency table by the protocol without transactions (the flush):
    not refused, and :func:`strong` says so afterwards.

    Raises:
        GlobalTableError: a write to a global table that dynaunique cannot keep unique: strong
            consistency, or eventual consistency with no home region (or one that holds no
            replica). Nothing was sent.
    """
    made_of = (getattr(meta, "table_name", None), getattr(meta, "region", None),
               getattr(meta, "host", None), getattr(meta, "home_region", None),
               os.environ.get(HOME_REGION_ENV))
    known = _routes.get((meta, write, strong))
    if known is not None and known[0] == made_of:
        return known[1]
    table = made_of[0]
    if not table:
        return meta
    mode = table_mode(str(table), connect(meta), made_of[2])
    chosen = _choose(meta, mode, write, strong)
    with _lock:
        _routes[(meta, write, strong)] = (made_of, chosen, mode)
    return chosen


def strong(meta: Any) -> bool:
    """Whether the flush's route of ``meta`` (``route(..., strong=True)``, made before) goes to
    a multi-Region strong consistency table: its writes go by the protocol without
    transactions."""
    known = _routes.get((meta, True, True))
    mode = known[2] if known is not None else None
    return mode is not None and mode.is_global and mode.consistency == "STRONG"


def _choose(meta: Any, mode: TableMode, write: bool, strong: bool) -> Any:
    if not mode.is_global:
        return meta
    where = f"table {mode.table} is a {mode.describe()}"
    if mode.consistency == "STRONG":
        if not write or strong:   # a read, or the flush's protocol without transactions
            return meta
        raise GlobalTableError(
            f"{where}: DynamoDB refuses TransactWriteItems on multi-Region strong consistency "
            "tables, and this write is a transaction (a model's save(), delete() and update() "
            "write such a table by the protocol without transactions, and repair settles it in "
            "place); nothing was written (docs/global-tables.md).", table=mode.table,
            mode=mode.consistency, regions=mode.regions)
    home = home_region(meta)
    if home is None:
        if not write:
            return meta
        raise GlobalTableError(
            f"{where}: a lock granted in one region would not stop the same value in another, so "
            "dynaunique writes it only in a home region, and none is set; nothing was written. "
            f"Name one of {', '.join(mode.regions)} in Meta.home_region, the environment "
            f"variable {HOME_REGION_ENV} or home_region under [tool.dynaunique] "
            "(docs/global-tables.md).", table=mode.table, mode=mode.consistency,
            regions=mode.regions)
    if home not in mode.regions:
        raise GlobalTableError(
            f"{where}: its home region {home} holds no replica of it; nothing was written",
            table=mode.table, mode=mode.consistency, regions=mode.regions)
    if home == mode.region:
        return meta
    return in_region(meta, home)
