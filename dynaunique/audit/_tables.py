"""The tables the audit reads: the loaded models of each, and the one way a read is sent and billed.

Every request of the audit goes through :func:`_call` — dynaunique's one boundary and retry loop
(:func:`dynaunique._transport.connection.send`) — and is counted on a :class:`_Meter`, whose
:class:`Cost` each report carries.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import attrs

from dynaunique._lock.items import ModelInfo
from dynaunique._lock.locks import TypedKey, lock_primary_key, secret_id
from dynaunique._transport import regions as _regions
from dynaunique._transport.answers import Ok, Refused
from dynaunique._transport.clients import connection_for, connection_in, target_of
from dynaunique._transport.connection import RetryPolicy, exchange, send
from dynaunique.errors import AuditError
from dynaunique.model import Model

_READ_POLICY = RetryPolicy(max_conflict_retries=8, base_delay=0.02, max_delay=2.0)


@attrs.frozen
class Cost:
    """The requests a call sent: ``(("Scan", 3), ("TransactGetItems", 2))`` and items scanned.

    Scans are eventually consistent (half the read cost); GetItem and BatchGetItem are strongly
    consistent; TransactGetItems is serializable.
    """

    requests: tuple[tuple[str, int], ...] = ()
    #: Items the scans read (and were billed for) before any filter.
    items_scanned: int = 0

    @property
    def total(self) -> int:
        """The number of requests."""
        return sum(n for _, n in self.requests)

    def count(self, operation: str) -> int:
        """How many requests of one operation were sent."""
        return sum(n for op, n in self.requests if op == operation)

    def describe(self) -> str:
        """``"1 GetItem (strongly consistent)"``, ``"scan of 57 items (1 Scan request, ...)"``."""
        notes = {"GetItem": "strongly consistent", "BatchGetItem": "strongly consistent",
                 "TransactGetItems": "serializable"}
        parts: list[str] = []
        for operation, n in self.requests:
            if operation == "Scan":
                plural = "" if n == 1 else "s"
                parts.insert(0, f"scan of {self.items_scanned} items ({n} Scan request{plural}, "
                                "eventually consistent)")
            elif operation in notes:
                parts.append(f"{n} {operation} ({notes[operation]})")
            else:
                parts.append(f"{n} {operation}")
        return ", ".join(parts) if parts else "no request"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"requests": dict(self.requests), "items_scanned": self.items_scanned,
                "summary": self.describe()}


class _Meter:
    """Counts the requests of one call; shared by worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self.items_scanned = 0

    def add(self, operation: str, scanned: int = 0) -> None:
        with self._lock:
            self._counts[operation] = self._counts.get(operation, 0) + 1
            self.items_scanned += scanned

    def cost(self) -> Cost:
        with self._lock:
            return Cost(tuple(self._counts.items()), self.items_scanned)


def _call(meter: _Meter, connection: Any, operation: str, **params: Any) -> dict[str, Any]:
    """One read request through dynaunique's one boundary and retry loop; a failure that is
    not retried becomes an AuditError (``dynaunique._transport.answers.error_for``)."""
    response = send(connection, operation, params, policy=_READ_POLICY, error=AuditError)
    # A scan bills the items it reads before any filter: ScannedCount, not the matches.
    meter.add(operation, int(response.get("ScannedCount", 0)) if operation == "Scan" else 0)
    return response


def _exchange(meter: _Meter, connection: Any, operation: str,
              params: dict[str, Any]) -> Ok | Refused:
    """One conditional write of the audit (an MRSC intent's settlement) through the same
    boundary and retry loop as :func:`_call`: :class:`Ok`, or the refusal that is not retried
    (a failed condition) for the caller to read."""
    got = exchange(connection, operation, params, policy=_READ_POLICY, error=AuditError)
    meter.add(operation)
    return got


@attrs.frozen
class _Table:
    """The loaded models of one table on one endpoint."""

    name: str
    connection: Any = attrs.field(eq=False, repr=False)
    models: tuple[type[Model], ...]
    hash_attr: str
    range_attr: str | None
    ttl_attr: str | None
    #: Lock names the loaded models declare on this table.
    declared: frozenset[str]

    @property
    def key_attributes(self) -> tuple[str, str | None]:
        """The table's hash and range key attribute names."""
        return self.hash_attr, self.range_attr

    def model_named(self, name: str | None) -> type[Model] | None:
        """The loaded model of this table with that class name."""
        return next((m for m in self.models if m.__name__ == name), None)

    @property
    def hashed(self) -> frozenset[str]:
        """Lock names a loaded model of this table declares hashed."""
        return frozenset(b.name for m in self.models for b in _info(m).constraints
                         if b.constraint.hashed)

    def secret_id(self, name: str) -> str | None:
        """The fingerprint of the current secret of hashed lock name ``name`` (None: no loaded
        model declares it hashed). Raises ConfigurationError when that model has no secret."""
        for model in self.models:
            info = _info(model)
            if any(b.name == name and b.constraint.hashed for b in info.constraints):
                return secret_id(info.secret())
        return None

    def lock_pk(self, key: str) -> TypedKey:
        """The primary key of the lock item with hash key ``key``."""
        return lock_primary_key(self.key_attributes, key)


def _info(model: type[Model]) -> ModelInfo:
    info = model._du_info
    if info is None:
        raise AuditError(f"{model.__name__} has no table")
    return info


def _tables(models: Sequence[type[Model]]) -> list[_Table]:
    """The models grouped by table and endpoint, in the order the models first name them."""
    groups: dict[tuple[str, tuple[str, str]], list[type[Model]]] = {}
    connections: dict[tuple[str, str], Any] = {}
    for model in models:
        info = _info(model)
        connection = connection_for(model)
        # Each model has its own client: a table is one per endpoint and region, not per client.
        where = target_of(connection)
        connections.setdefault(where, connection)
        groups.setdefault((info.table, where), []).append(model)
    tables = []
    for (name, connection_id), members in groups.items():
        keys = {_info(m).key_attributes for m in members}
        if len(keys) > 1:
            raise AuditError(
                f"the models of table {name!r} disagree on its key attributes: "
                + ", ".join(f"{m.__name__} {_info(m).key_attributes}" for m in members))
        hash_attr, range_attr = keys.pop()
        ttl = next((_info(m).ttl_attr for m in members if _info(m).ttl_attr), None)
        declared = frozenset(b.name for m in members for b in _info(m).constraints)
        tables.append(_Table(name, connections[connection_id], tuple(members), hash_attr,
                             range_attr, ttl, declared))
    return tables


def _strong(table: _Table) -> bool:
    """Whether ``table`` is a global table with multi-Region strong consistency (MRSC): no
    transaction there. Its mode is asked once per process (``_regions.table_mode``)."""
    model = table.models[0]
    mode = _regions.table_mode(table.name, table.connection, getattr(model.Meta, "host", None))
    return mode.consistency == "STRONG"


def _at_home(table: _Table) -> _Table:
    """``table`` with the connection a write of its models goes through: a global table's home
    region (as the library's writes, ``dynaunique._transport.regions.route``), else ``table``
    itself. An MRSC table is ``table`` itself: every replica takes a write synchronously, so
    there is no home region (its repairs are single-item writes, ``_intents``).

    :raises GlobalTableError: an eventually consistent global table without a home region
        named; nothing was sent.
    """
    model = table.models[0]
    if _strong(table):
        return table
    meta = _regions.route(model.Meta, lambda _meta: table.connection)
    if meta is model.Meta:
        return table
    return attrs.evolve(table, connection=connection_in(model, meta))


def _in_region(table: _Table, region: str) -> _Table:
    """``table`` read in ``region``'s replica: its models' settings signed for that region."""
    model = table.models[0]
    meta = _regions.in_region(model.Meta, region)
    if meta is model.Meta:
        return table
    return attrs.evolve(table, connection=connection_in(model, meta))


def _table_for(tables: Sequence[_Table], name: str) -> _Table:
    for table in tables:
        if table.name == name:
            return table
    raise AuditError(f"no loaded model uses table {name!r}")


def _one_table(models: Sequence[type[Model]], table: str | None) -> _Table:
    """The table named ``table``, or the only table of ``models`` when it is None."""
    tables = _tables(models)
    if table is not None:
        return _table_for(tables, table)
    if len(tables) != 1:
        raise AuditError(f"the models use {len(tables)} tables: say which")
    return tables[0]
