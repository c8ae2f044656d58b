"""Read locks and records in small pieces for read-only inspectors: a page, an item, a count.

A listing is read a page at a time by cursor; a lock or a record with one consistent GetItem;
counting the locks scans each table once, projecting only the keys.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import claim
from dynaunique._lock.locks import RESERVED_PREFIX, SYSTEM_PREFIX, TypedKey, split_lock_key, untyped
from dynaunique.errors import AuditError
from dynaunique.model import Model

from ._names import _lock_filter
from ._reads import _scan_pages
from ._stored import LockInfo, RecordRef, _is_lock_item, _json_value, _lock_info
from ._tables import Cost, _call, _info, _Meter, _one_table, _tables

#: The most items one Scan request of :func:`lock_page` evaluates when matches are sparse.
_MAX_PAGE_REQUEST = 1000


@attrs.frozen
class LockPage:
    """One page of :func:`lock_page`: matching locks in scan order, and where the next begins."""

    locks: tuple[LockInfo, ...]
    #: Pass it back as ``cursor`` for the next page; None when the last table is exhausted.
    next_cursor: str | None
    cost: Cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"locks": [lock.to_dict() for lock in self.locks],
                "next_cursor": self.next_cursor, "cost": self.cost.to_dict()}


def _encode_cursor(table: str, key: Mapping[str, Any] | None, density: float) -> str:
    def plain(value: Mapping[str, Any]) -> dict[str, Any]:
        (kind, raw), = value.items()
        if kind == "B":  # boto3 hands binary keys over as bytes: JSON needs text
            return {"B64": base64.b64encode(bytes(raw)).decode("ascii")}
        return {kind: raw}

    body = {"t": table, "k": None if key is None else {k: plain(v) for k, v in key.items()},
            "d": density}
    return base64.urlsafe_b64encode(json.dumps(body, sort_keys=True).encode()).decode("ascii")


def _decode_cursor(cursor: str) -> tuple[str, TypedKey | None, float]:
    try:
        body = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        table, raw_key, density = body["t"], body["k"], float(body["d"])
        if (not isinstance(table, str) or not (raw_key is None or isinstance(raw_key, dict))
                or not 1.0 <= density <= _MAX_PAGE_REQUEST):
            raise ValueError(cursor)
        key: TypedKey | None = None
        if raw_key is not None:
            key = {}
            for name, value in raw_key.items():
                (kind, raw), = value.items()
                if kind not in ("S", "N", "B64") or not isinstance(raw, str):
                    raise ValueError(cursor)
                key[name] = {"B": base64.b64decode(raw)} if kind == "B64" else {kind: raw}
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error) as exc:
        raise AuditError(f"not a page cursor of this listing: {cursor!r}") from exc
    return table, key, density


def lock_page(models: Sequence[type[Model]], *, model: str | None = None,
              constraint: str | None = None, value_prefix: Any = None,
              cursor: str | None = None, limit: int = 50, max_requests: int = 10,
              max_seconds: float | None = None) -> LockPage:
    """One page of :func:`list_locks`: at most ``limit`` matching locks, never the whole table.

    The filters are those of :func:`list_locks`. The page is read with Scan requests that start
    where ``cursor`` (a previous page's ``next_cursor``) left off. The first request evaluates
    ``limit`` items — or, after the first page, as many as the density of matches seen so far
    (carried in the cursor) says will fill the page, so that a page usually costs one request.
    A request that fills too little sizes the next one from what it saw (twice as many items
    when it matched nothing), up to 1,000 items, for at most ``max_requests`` requests and, when
    ``max_seconds`` is given, no further request that would likely end later (each request is
    assumed to take as long as the average so far): a page may
    hold fewer than ``limit`` locks and still have a ``next_cursor``. When a request matched
    more locks than the page has room for, the next page starts after the last lock shown (any
    item's key is a valid ``ExclusiveStartKey``), so no lock is skipped or shown twice. Locks
    come in scan order (DynamoDB's hash order, not sorted), one table after the other.
    """
    if limit < 1 or max_requests < 1:
        raise AuditError("limit and max_requests must be at least 1")
    wanted = _lock_filter(models, model, constraint, value_prefix)
    tables = sorted(wanted.tables, key=lambda t: t.name)
    meter = _Meter()
    began = time.monotonic()
    index, start, density = 0, None, None
    if cursor is not None:
        name, start, density = _decode_cursor(cursor)
        index = next((i for i, t in enumerate(tables) if t.name == name), -1)
        if index < 0:
            raise AuditError(f"the page cursor names table {name!r}, which no loaded model uses")
    locks: list[LockInfo] = []
    evaluated = matched = 0
    # A tenth more than the density predicts: one request should fill the page.
    request_limit = limit if density is None else _page_request(limit * density * 1.1)
    for sent in range(1, max_requests + 1):
        table = tables[index]
        params = wanted.scan_params(table)
        params["Limit"] = request_limit
        if start is not None:
            params["ExclusiveStartKey"] = start
        response = _call(meter, table.connection, "Scan", TableName=table.name, **params)
        room = limit - len(locks)
        matches = [i for i in response.get("Items", ()) if _is_lock_item(table, i)]
        evaluated += int(response.get("ScannedCount", request_limit))
        matched += len(matches)
        locks.extend(_lock_info(table, item) for item in matches[:room])
        if len(matches) > room:
            return LockPage(tuple(locks), _encode_cursor(
                table.name, table.lock_pk(locks[-1].key), _density(evaluated, matched, limit)),
                meter.cost())
        start = response.get("LastEvaluatedKey") or None
        if start is None:
            index += 1
            if index == len(tables):
                return LockPage(tuple(locks), None, meter.cost())
        spent = time.monotonic() - began
        # No request that would likely end past the budget: each costs about the average.
        if len(locks) == limit or (max_seconds is not None
                                   and spent + spent / sent > max_seconds):
            break
        room = limit - len(locks)
        request_limit = _page_request(room * 1.2 * evaluated / matched if matched
                                      else request_limit * 2)
    return LockPage(tuple(locks), _encode_cursor(tables[index].name, start,
                                                 _density(evaluated, matched, limit)),
                    meter.cost())


def _page_request(items: float) -> int:
    return max(1, min(int(items + 0.999), _MAX_PAGE_REQUEST))


def _density(evaluated: int, matched: int, limit: int) -> float:
    """Items evaluated per matching lock, as the next page's first request should assume."""
    return round(min(max(evaluated / max(matched, 1), 1.0), _MAX_PAGE_REQUEST / limit), 3)


@attrs.frozen
class LockCounts:
    """The result of :func:`count_locks`: lock items per table and lock name."""

    #: ``(table, lock name, number of locks)``, sorted.
    counts: tuple[tuple[str, str, int], ...]
    cost: Cost

    def of(self, table: str, constraint: str) -> int:
        """The number of ``constraint`` locks in ``table`` (0 when there is none)."""
        return next((n for t, c, n in self.counts if (t, c) == (table, constraint)), 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"counts": [{"table": t, "constraint": c, "locks": n} for t, c, n in self.counts],
                "cost": self.cost.to_dict()}


def count_locks(models: Sequence[type[Model]]) -> LockCounts:
    """How many lock items each lock name has: one scan per table, projecting only the key.

    Every item is read (and billed) as by any scan; only the key attributes of the locks come
    back. Lock names no model declares any more are counted too.
    """
    meter = _Meter()
    counts: dict[tuple[str, str], int] = {}
    for table in _tables(models):
        names = {"#h": table.hash_attr}
        projection = "#h"
        if table.range_attr is not None:
            names["#r"] = table.range_attr
            projection += ", #r"
        for item in _scan_pages(
                table, meter, ProjectionExpression=projection, ExpressionAttributeNames=names,
                FilterExpression="begins_with(#h, :prefix) AND NOT begins_with(#h, :system)",
                ExpressionAttributeValues={":prefix": {"S": RESERVED_PREFIX},
                                           ":system": {"S": SYSTEM_PREFIX}}):
            parsed = split_lock_key(str(item[table.hash_attr].get("S", "")))
            if parsed is not None and _is_lock_item(table, item):
                counts[(table.name, parsed[0])] = counts.get((table.name, parsed[0]), 0) + 1
    return LockCounts(tuple((t, c, n) for (t, c), n in sorted(counts.items())), meter.cost())


def read_lock(models: Sequence[type[Model]], key: str, *,
              table: str | None = None) -> LockInfo | None:
    """The lock item with hash key ``key`` (``UNIQ#EMAIL#ada@x.io``): ONE consistent GetItem.

    ``table`` is needed only when the models use several tables. None when there is no such
    lock (or ``key`` names no lock).
    """
    chosen = _one_table(models, table)
    if split_lock_key(key) is None:
        return None
    item = _call(_Meter(), chosen.connection, "GetItem", TableName=chosen.name,
                 Key=chosen.lock_pk(key), ConsistentRead=True).get("Item")
    return _lock_info(chosen, item) if item is not None else None


#: How :class:`StoredRecord` shows the value of a field that a hashed constraint protects.
HIDDEN = "hashed"


@attrs.frozen
class StoredRecord:
    """A record as stored, for display: its key, its model and its attributes.

    The fields of hashed constraints (of any loaded model of the table) show :data:`HIDDEN`:
    hashing exists so that the value is not shown to whoever reads locks.
    """

    ref: RecordRef
    #: ``(attribute name, plain value)``, sorted by name; hashed fields hold :data:`HIDDEN`.
    attributes: tuple[tuple[str, Any], ...]
    #: The attribute names whose values are hidden.
    hidden: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"record": _json_value(self.ref.to_dict()),
                "attributes": {k: _json_value(v) for k, v in self.attributes},
                "hidden": list(self.hidden)}


def hashed_attributes(models: Sequence[type[Model]], table: str) -> frozenset[str]:
    """The stored attribute names of every hashed constraint's fields on ``table``."""
    return frozenset(name for model in models if _info(model).table == table
                     for bound in _info(model).constraints if bound.constraint.hashed
                     for name in bound.attr_names)


def read_record(models: Sequence[type[Model]], key: Mapping[str, Any], *,
                table: str | None = None) -> StoredRecord | None:
    """The item with typed primary key ``key``: ONE consistent GetItem, hashed fields hidden.

    ``model`` of the result is the loaded model the item is a record of (the rule in
    :mod:`dynaunique.audit`'s docstring), None when no model claims it.
    """
    chosen = _one_table(models, table)
    item = _call(_Meter(), chosen.connection, "GetItem", TableName=chosen.name, Key=dict(key),
                 ConsistentRead=True).get("Item")
    if item is None:
        return None
    model, _ = claim(chosen.models, item)
    hidden = hashed_attributes(chosen.models, chosen.name)
    shown = tuple(sorted((name, HIDDEN if name in hidden else untyped(value))
                         for name, value in item.items()))
    return StoredRecord(RecordRef(chosen.name, dict(key), model.__name__ if model else None),
                        shown, tuple(sorted(hidden & set(item))))
