"""Cross-region drift of a global table: the lock items of each replica, compared.

On a global table with a home region every lock is granted in the home region and reaches the
other replicas by replication, so once replication has drained every replica holds the same lock
items with the same owners. :func:`compare_regions` scans the lock items of each named region
(one strongly consistent scan of each replica) and reports every lock key on which they differ:

- ``double_grant``: the replicas hold the lock for *different owners* — two regions granted one
  value (a write that bypassed the home region), or a lock handed over whose replication is in
  flight; the finding names each region and the owner it holds;
- ``not_everywhere``: some replicas hold the lock and others do not — replication in flight, or a
  grant or release made outside the home region.

No difference means the replicas agree on every lock: the check the failover runbook asks for
before the home region moves (docs/global-tables.md). Run ``check`` in each region too: it judges
the records against the locks of one replica.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.locks import OWNER_ATTR, RESERVED_PREFIX, SYSTEM_PREFIX
from dynaunique._transport import regions as _regions
from dynaunique._transport.clients import connection_for, connection_in
from dynaunique._transport.connection import policy_for, send
from dynaunique.errors import AuditError
from dynaunique.model import Model

__all__ = ["RegionDifference", "RegionReport", "compare_regions", "global_modes"]

#: A lock's owner as a replica holds it (its typed key), or None: the replica has no such lock.
Owner = Mapping[str, Any] | None


@attrs.frozen
class RegionDifference:
    """One lock key on which the replicas disagree: each region's owner of it (None: absent)."""

    table: str
    lock_key: str
    kind: str   # "double_grant" or "not_everywhere"
    owners: tuple[tuple[str, Owner], ...]

    def owner_labels(self) -> tuple[str, ...]:
        """Each region's owner as text (``-``: the region has no such lock)."""
        return tuple(_plain(o) if o is not None else "-" for _, o in self.owners)

    def describe(self) -> str:
        """``UNIQ#EMAIL#a@x.io: us-east-1 grants it to M1, eu-west-1 to M2``."""
        parts = [f"{region} {'to ' + _plain(owner) if owner is not None else 'has no lock'}"
                 for region, owner in self.owners]
        verb = "grants it" if self.kind == "double_grant" else "differs"
        return f"{self.lock_key}: {verb} — " + ", ".join(parts)


@attrs.frozen
class RegionReport:
    """What :func:`compare_regions` found: the regions, each table's mode, the differences."""

    regions: tuple[str, ...]
    modes: tuple[_regions.TableMode, ...]
    locks: tuple[tuple[str, int], ...]   # (region, lock items scanned there), summed per table
    differences: tuple[RegionDifference, ...] = ()

    @property
    def clean(self) -> bool:
        """True when every replica holds the same locks with the same owners."""
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "regions": list(self.regions),
            "modes": [m.describe() for m in self.modes],
            "locks": dict(self.locks),
            "differences": [
                {"table": d.table, "lock": d.lock_key, "kind": d.kind,
                 "owners": {r: _plain(o) if o is not None else None for r, o in d.owners}}
                for d in self.differences],
        }


def _plain(owner: Mapping[str, Any]) -> str:
    return "/".join(str(next(iter(v.values()))) for v in owner.values()) or "<none>"


def _locks_in(model: type[Model], meta: Any, table: str, hash_attr: str) -> dict[str, Owner]:
    connection, policy = connection_in(model, meta), policy_for(meta)
    found: dict[str, Owner] = {}
    start: dict[str, Any] | None = None
    while True:
        params: dict[str, Any] = {
            "TableName": table, "ConsistentRead": True,
            "FilterExpression": "begins_with(#h, :lock)",
            "ExpressionAttributeNames": {"#h": hash_attr},
            "ExpressionAttributeValues": {":lock": {"S": RESERVED_PREFIX}}}
        if start:
            params["ExclusiveStartKey"] = start
        page = send(connection, "Scan", params, policy=policy, error=AuditError)
        for item in page.get("Items", []):
            key = item[hash_attr].get("S", "")
            if key.startswith(SYSTEM_PREFIX):
                continue
            owner = item.get(OWNER_ATTR, {}).get("M")
            found[key] = dict(owner) if isinstance(owner, Mapping) else {}
        start = page.get("LastEvaluatedKey")
        if not start:
            return found


def compare_regions(models: Sequence[type[Model]], regions: Sequence[str]) -> RegionReport:
    """Compare the lock items of each model's table across ``regions`` (see the module).

    Each region is read with the model's own settings (endpoint, credentials) signed for that
    region. Raises :class:`AuditError` for fewer than two regions or a model without a table.
    """
    wanted = tuple(dict.fromkeys(regions))
    if len(wanted) < 2:
        raise AuditError(f"comparing replicas needs two regions or more, not {list(wanted)}")
    tables: dict[str, type[Model]] = {}
    for model in models:
        info = model._du_info
        if info is None:
            raise AuditError(f"{model.__name__} has no table")
        tables.setdefault(info.table, model)
    differences: list[RegionDifference] = []
    modes: list[_regions.TableMode] = []
    counts = dict.fromkeys(wanted, 0)
    for table, model in tables.items():
        info = model._du_info
        assert info is not None
        modes.append(_regions.table_mode(table, connection_for(model), model.Meta.host))
        held = {region: _locks_in(model, _regions.in_region(model.Meta, region), table,
                                  info.hash_attr)
                for region in wanted}
        for region, locks in held.items():
            counts[region] += len(locks)
        for key in sorted(set().union(*held.values())):
            owners = tuple((region, held[region].get(key)) for region in wanted)
            present = [o for _, o in owners if o is not None]
            if len(present) == len(owners) and all(o == present[0] for o in present):
                continue
            kind = ("double_grant" if len({repr(sorted(o.items())) for o in present}) > 1
                    else "not_everywhere")
            differences.append(RegionDifference(table, key, kind, owners))
    return RegionReport(wanted, tuple(modes), tuple(counts.items()), tuple(differences))


def global_modes(models: Sequence[type[Model]]) -> tuple[_regions.TableMode, ...]:
    """The mode of each global table ``models`` use, as their region sees it (one-region tables
    are left out); one ``DescribeTable`` per table per process, kept."""
    modes: dict[str, _regions.TableMode] = {}
    for model in models:
        table = model.Meta.table_name
        if table not in modes:
            modes[table] = _regions.table_mode(table, connection_for(model), model.Meta.host)
    return tuple(mode for mode in modes.values() if mode.is_global)
