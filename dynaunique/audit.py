"""Inspect, check and repair lock items: find where locks and records disagree, and fix it safely.

Four questions, four entry points, each returning a frozen report object (the CLI only prints
them):

* :func:`who_holds` — "who holds email X?": ONE strongly consistent GetItem of the lock, its key
  built exactly as a save builds it (same normalizer, encoding, hashing).
* :func:`owner_locks` — the locks one record should hold and whether it holds them: a GetItem of
  the record and one BatchGetItem of its expected locks, no scan.
* :func:`list_locks` — every lock item matching a filter: a scan (lock items have one item per
  partition, so no query can list several).
* :func:`check` — a full audit: one scan of each table (parallel segments when asked), every
  suspicious lock key confirmed by a TransactGetItems (a serializable snapshot of the lock, its
  owner and the records that require it), so writes racing with the scan are never reported.

:func:`plan_repair` turns an :class:`AuditReport` into guarded writes (pure), and
:func:`apply_repair` sends them. Repair never modifies a record: it deletes orphan locks, writes
missing ones and hands a lock over from a record that no longer needs it to the one that does —
each as one TransactWriteItems that also carries ConditionChecks on the records involved, so a
record that changed since it was read cancels the write instead of leaving a missing lock or an
orphan behind. docs/operating-locks.md explains why each guard is there.

How items are told apart: an item whose hash key starts with ``UNIQ#`` is a lock (``UNIQ#~``
items are dynaunique's system items and are skipped); every other item is a record of one of the
loaded models of its table — the one whose ``Meta.is_record(raw)`` hook claims it (an item every
hook turns away is no record); else the only one, when one model uses the table; else the one a
PynamoDB discriminator names; else the best fit: a model for which the item has every non-nullable
attribute beats one for which it has not, then the model declaring more of the item's attributes
wins. A tie between models that would require different locks makes the record *unreadable*
(reported, never repaired). So load every model that writes to a table.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs
from pynamodb import attributes as pa

from dynaunique.connection import Refused, RetryPolicy, connection_for, send
from dynaunique.errors import AuditError, ConfigurationError, DynauniqueError, WriteConflict
from dynaunique.locks import (
    CREATED_ATTR,
    LOCK_SORT_KEY,
    MODEL_ATTR,
    OWNER_ATTR,
    RESERVED_PREFIX,
    SECRET_HASH_TAG,
    SYSTEM_PREFIX,
    VALUE_ATTR,
    decode_value,
    encode_component,
    lock_item,
    lock_key,
    lock_primary_key,
    split_lock_key,
    untyped,
)
from dynaunique.model import Model
from dynaunique.transaction import execute, render
from dynaunique.unit_of_work import (
    BoundConstraint,
    ConditionCheck,
    Expression,
    HeldBy,
    LockDelete,
    LockPut,
    LockRef,
    ModelInfo,
    Plan,
    TypedKey,
    locks_of,
    unchanged_guard,
)

#: A lock whose owner record is gone, or no longer holds the value the lock protects.
ORPHAN = "orphan"
#: A record holds a value that no lock protects.
MISSING = "missing"
#: The one record that holds a value is not the lock's owner (the owner is gone or moved on).
FOREIGN_OWNER = "foreign_owner"
#: Several records hold the same normalized value under one constraint.
DUPLICATE = "duplicate"
#: A lock of a constraint name no loaded model declares on that table.
UNKNOWN_CONSTRAINT = "unknown_constraint"
#: A record whose locks cannot be computed (ambiguous model, invalid value).
UNREADABLE = "unreadable"
#: Every finding kind, in the order reports list them.
KINDS = (DUPLICATE, MISSING, FOREIGN_OWNER, ORPHAN, UNKNOWN_CONSTRAINT, UNREADABLE)
#: How each kind reads in a table (the ``check`` command's and the ``ui`` page's words).
KIND_LABELS = {
    DUPLICATE: "duplicate",
    MISSING: "missing lock",
    FOREIGN_OWNER: "foreign owner",
    ORPHAN: "orphan lock",
    UNKNOWN_CONSTRAINT: "unknown constraint",
    UNREADABLE: "unreadable record",
}

# What a repair did with one action (RepairOutcome.status):
#: The action's write was applied.
FIXED = "fixed"
#: A re-check found the drift already gone; nothing was written.
ALREADY_FIXED = "already_fixed"
#: A re-check found the key drifted into something no repair fixes (e.g. a duplicate).
NOT_FIXED = "not_fixed"
#: The records kept changing under the action's guards; given up, nothing was written.
SKIPPED = "skipped"
#: The write raised a dynaunique error other than a conflict; the outcome's detail carries it.
FAILED = "failed"

_READ_POLICY = RetryPolicy(max_conflict_retries=8, base_delay=0.02, max_delay=2.0)
# TransactGetItems takes at most 100 items; one slot is the lock itself.
_MAX_RECORDS_PER_READ = 99
# How often apply_repair re-reads and retries an action whose guard failed.
_REPAIR_ATTEMPTS = 4

Progress = Callable[[int, "int | None"], None]


# --- costs ---------------------------------------------------------------------------------------


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
    not retried becomes an AuditError."""
    try:
        response = send(connection, operation, params, policy=_READ_POLICY)
    except Refused as refused:
        raise AuditError(f"{operation} on {params.get('TableName', 'the table')} failed: "
                         f"{refused.code}: {refused.message}") from refused.error
    except DynauniqueError as exc:
        raise AuditError(f"{operation}: {exc}") from exc
    # A scan bills the items it reads before any filter: ScannedCount, not the matches.
    meter.add(operation, int(response.get("ScannedCount", 0)) if operation == "Scan" else 0)
    return response


# --- what a report is made of ----------------------------------------------------------------


def _plain(key: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if key is None:
        return None
    return {k: untyped(v) for k, v in key.items()}


def _label(key: Mapping[str, Any] | None) -> str:
    if key is None:
        return "-"
    return " / ".join(str(untyped(v)) for v in key.values())


def _key_id(key: Mapping[str, Any]) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    return tuple(sorted((k, tuple(sorted(v.items()))) for k, v in key.items()))


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


@attrs.frozen
class RecordRef:
    """A record by its primary key (typed, as DynamoDB has it) and the model it was read as."""

    table: str
    key: TypedKey
    #: The model class name, or None when no loaded model claims the item.
    model: str | None = None

    @property
    def label(self) -> str:
        """``ACCT#1 / PROFILE``: the key values, hash first."""
        return _label(self.key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"table": self.table, "key": _plain(self.key), "model": self.model}


@attrs.frozen
class LockInfo:
    """One lock item as stored."""

    table: str
    #: The lock's hash key, ``UNIQ#EMAIL#ada@lovelace.io``.
    key: str
    #: The lock name (``EMAIL``) parsed from the key.
    constraint: str
    #: The key's encoded value part (a digest for hashed constraints).
    encoded: str
    #: The normalized value from the lock's ``value`` attribute; None for hashed constraints.
    value: Any
    hashed: bool
    #: The model that wrote the lock (its ``model`` attribute).
    model: str | None
    #: The owning record's typed primary key, or None when the lock has no owner.
    owner: TypedKey | None
    created: str | None
    #: The TTL copied from the record (epoch seconds), when its model has one.
    expires: int | None

    @property
    def owner_label(self) -> str:
        """The owner's key values, ``ACCT#1 / PROFILE``."""
        return _label(self.owner)

    @property
    def shown_value(self) -> str:
        """The value as a table shows it: ``hashed`` when the lock keeps only a digest."""
        if self.hashed:
            return "hashed"
        if isinstance(self.value, tuple):
            return " / ".join(str(v) for v in self.value)
        return str(self.value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "table": self.table, "key": self.key, "constraint": self.constraint,
            "value": _json_value(self.value), "hashed": self.hashed, "model": self.model,
            "owner": _json_value(_plain(self.owner)), "created": self.created,
            "expires": self.expires,
        }


@attrs.frozen
class LockListing:
    """The result of :func:`list_locks`: matching locks (sorted by key) and what it cost."""

    locks: tuple[LockInfo, ...]
    cost: Cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"locks": [lock.to_dict() for lock in self.locks], "cost": self.cost.to_dict()}


@attrs.frozen
class ExpectedLock:
    """A lock a record's current values require, and what DynamoDB holds under that key."""

    lock: LockRef
    #: ``held`` (the lock names this record), ``missing`` or ``foreign`` (names another owner).
    status: str
    #: The stored lock item, when there is one.
    stored: LockInfo | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"constraint": self.lock.constraint, "key": self.lock.key,
                "value": None if self.lock.hashed else _json_value(self.lock.value),
                "hashed": self.lock.hashed, "status": self.status,
                "stored": self.stored.to_dict() if self.stored is not None else None}


@attrs.frozen
class OwnerLocks:
    """The result of :func:`owner_locks`: one record and the locks its values require."""

    #: The record, or None when no record has that key.
    record: RecordRef | None
    locks: tuple[ExpectedLock, ...]
    cost: Cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"record": self.record.to_dict() if self.record is not None else None,
                "locks": [lock.to_dict() for lock in self.locks], "cost": self.cost.to_dict()}


@attrs.frozen
class _Record:
    """A record as read: exists or not, and which lock keys its current values require."""

    ref: RecordRef
    exists: bool
    #: The raw item (kept only for records read to confirm a finding; None after a scan).
    item: dict[str, Any] | None = attrs.field(eq=False, repr=False)
    #: lock key → LockRef; None when the locks cannot be computed (see ``problem``).
    requires: dict[str, LockRef] | None = attrs.field(eq=False)
    #: Why ``requires`` is None: None for an item no loaded model claims.
    problem: str | None = None


@attrs.frozen
class Evidence:
    """The consistent snapshot a finding was confirmed on: the lock item and the records read."""

    lock_item: dict[str, Any] | None
    records: tuple[_Record, ...]


@attrs.frozen
class Finding:
    """One disagreement between lock items and records, confirmed by a consistent read."""

    #: One of :data:`KINDS`.
    kind: str
    table: str
    #: The lock item's hash key concerned ("" for an unreadable record).
    lock_key: str
    #: The lock name.
    constraint: str
    #: The normalized value (None when hashed or unknown).
    value: Any
    hashed: bool
    #: The stored lock, when there is one.
    lock: LockInfo | None
    #: The records whose current values require ``lock_key`` (for ``unreadable``: the record).
    holders: tuple[RecordRef, ...]
    #: For ``orphan``/``foreign_owner``: ``gone`` (the owner record does not exist), ``changed``
    #: (it no longer holds the value), ``unknown`` (no loaded model reads it) or ``none`` (the
    #: lock names no owner).
    owner_state: str | None
    #: A few words for a table column: ``its owner does not exist``.
    detail: str
    #: One sentence saying what is wrong.
    message: str
    #: The consistent read the finding rests on; repairs are guarded on exactly this state.
    evidence: Evidence = attrs.field(eq=False, repr=False)

    @property
    def shown_value(self) -> str:
        """The value as a table shows it (``hashed`` for hashed constraints)."""
        if self.hashed:
            return "hashed"
        if self.value is None:
            return "-"
        if isinstance(self.value, tuple):
            return " / ".join(str(v) for v in self.value)
        return str(self.value)

    @property
    def repairable(self) -> bool:
        """Whether :func:`plan_repair` can fix it without a person deciding (or a migration)."""
        if self.kind in (MISSING,):
            return True
        if self.kind in (ORPHAN, FOREIGN_OWNER):
            return self.owner_state in ("gone", "changed")
        return False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "kind": self.kind, "table": self.table, "lock_key": self.lock_key,
            "constraint": self.constraint, "value": _json_value(self.value),
            "hashed": self.hashed, "lock": self.lock.to_dict() if self.lock else None,
            "holders": [_json_value(h.to_dict()) for h in self.holders],
            "owner_state": self.owner_state, "detail": self.detail, "message": self.message,
            "repairable": self.repairable,
        }


@attrs.frozen
class TableSummary:
    """What the scan of one table saw."""

    table: str
    items_scanned: int
    records: int
    locks: int
    #: ``UNIQ#~`` items (and ``UNIQ#`` items that are not locks).
    system_items: int
    #: Items without the table's key attributes (none, on a healthy table).
    other_items: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return attrs.asdict(self)


@attrs.frozen
class AuditReport:
    """The result of :func:`check`: what was scanned, every confirmed finding, and the cost."""

    tables: tuple[TableSummary, ...]
    findings: tuple[Finding, ...]
    cost: Cost
    #: The models the check ran with (repair needs them).
    models: tuple[type[Model], ...] = attrs.field(eq=False, repr=False, default=())

    @property
    def clean(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def counts(self) -> dict[str, int]:
        """Findings per kind (every kind present, zeros included)."""
        counts = dict.fromkeys(KINDS, 0)
        for finding in self.findings:
            counts[finding.kind] += 1
        return counts

    def of_kind(self, kind: str) -> tuple[Finding, ...]:
        """The findings of one kind."""
        return tuple(f for f in self.findings if f.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"clean": self.clean, "counts": self.counts(),
                "tables": [t.to_dict() for t in self.tables],
                "findings": [f.to_dict() for f in self.findings], "cost": self.cost.to_dict()}


@attrs.frozen
class RepairAction:
    """One guarded fix: the finding, and the writes that fix it (one TransactWriteItems)."""

    #: ``delete_orphan``, ``put_missing``, ``transfer`` or ``drop_unknown``.
    kind: str
    finding: Finding
    plan: Plan = attrs.field(eq=False, repr=False)

    @property
    def description(self) -> str:
        """One line: what will be written and on which condition."""
        f = self.finding
        owner = f.lock.owner_label if f.lock else "-"
        if self.kind == "delete_orphan":
            state = "does not exist" if f.owner_state == "gone" else "does not hold the value"
            return f"delete, if still owned by {owner} and {owner} still {state}"
        if self.kind == "put_missing":
            holder = f.holders[0].label
            return f"write for {holder}, if no lock exists and {holder} is unchanged"
        if self.kind == "transfer":
            holder = f.holders[0].label
            return (f"hand over from {owner} to {holder}, if still owned by {owner}, {owner} "
                    f"still without the value and {holder} unchanged")
        return f"delete, if still owned by {owner}"

    def request(self) -> dict[str, Any]:
        """The TransactWriteItems request this action sends (without its token)."""
        return render(self.plan)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind, "description": self.description,
                "finding": self.finding.to_dict()}


@attrs.frozen
class RepairPlan:
    """The result of :func:`plan_repair`: actions to send, and findings a person must decide."""

    actions: tuple[RepairAction, ...]
    #: Findings no repair fixes (duplicates, unknown constraints, unreadable records, ...).
    unfixable: tuple[Finding, ...]
    models: tuple[type[Model], ...] = attrs.field(eq=False, repr=False, default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"actions": [a.to_dict() for a in self.actions],
                "unfixable": [dict(f.to_dict(), remedy=remedy(f)) for f in self.unfixable]}


@attrs.frozen
class RepairOutcome:
    """What happened to one action: ``fixed``, ``already_fixed``, ``not_fixed``, ``skipped``,
    ``failed``."""

    action: RepairAction
    status: str
    message: str
    #: TransactWriteItems sent for this action (0 when the state had already been fixed).
    writes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"action": self.action.to_dict(), "status": self.status, "message": self.message,
                "writes": self.writes}


@attrs.frozen
class RepairResult:
    """The result of :func:`apply_repair`."""

    outcomes: tuple[RepairOutcome, ...]
    unfixable: tuple[Finding, ...]
    cost: Cost

    @property
    def ok(self) -> bool:
        """True when every action ended fixed (or already fixed) and nothing was unfixable."""
        return not self.unfixable and all(
            o.status in (FIXED, ALREADY_FIXED) for o in self.outcomes)

    def counts(self) -> dict[str, int]:
        """Outcomes per status."""
        counts = dict.fromkeys((FIXED, ALREADY_FIXED, NOT_FIXED, SKIPPED, FAILED), 0)
        for outcome in self.outcomes:
            counts[outcome.status] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ok": self.ok, "counts": self.counts(),
                "outcomes": [o.to_dict() for o in self.outcomes],
                "unfixable": [dict(f.to_dict(), remedy=remedy(f)) for f in self.unfixable],
                "cost": self.cost.to_dict()}


def remedy(finding: Finding) -> str:
    """What a person should do about a finding repair cannot fix."""
    if finding.kind == DUPLICATE:
        return ("decide which record keeps the value, change the others (through the "
                "library), then run repair to write the keeper's lock if it is missing")
    if finding.kind == UNKNOWN_CONSTRAINT:
        return ("load the model that declares it, remove it with a migration, or run repair "
                f"--drop-unknown {finding.constraint}")
    if finding.kind == UNREADABLE:
        return "fix the record by hand: its locks cannot be computed"
    if finding.owner_state == "unknown":
        return "the owner is not a record of the loaded models: load the module that defines it"
    if finding.owner_state == "none":
        return "the lock names no owner: inspect it and delete it by hand"
    return "run repair"


# --- tables, models and records ----------------------------------------------------------------


@attrs.frozen
class _Table:
    """The loaded models of one table on one endpoint."""

    name: str
    client: Any = attrs.field(eq=False, repr=False)
    models: tuple[type[Model], ...]
    hash_attr: str
    range_attr: str | None
    ttl_attr: str | None
    #: Lock names the loaded models declare on this table.
    declared: frozenset[str]

    def model_named(self, name: str | None) -> type[Model] | None:
        return next((m for m in self.models if m.__name__ == name), None)

    def key_of(self, item: Mapping[str, Any]) -> TypedKey | None:
        if self.hash_attr not in item:
            return None
        key = {self.hash_attr: item[self.hash_attr]}
        if self.range_attr is not None:
            if self.range_attr not in item:
                return None
            key[self.range_attr] = item[self.range_attr]
        return key

    def lock_pk(self, key: str) -> TypedKey:
        return lock_primary_key((self.hash_attr, self.range_attr), key)


def _info(model: type[Model]) -> ModelInfo:
    info = model._du_info
    if info is None:
        raise AuditError(f"{model.__name__} has no table")
    return info


def _tables(models: Sequence[type[Model]]) -> list[_Table]:
    groups: dict[tuple[str, int], list[type[Model]]] = {}
    clients: dict[int, Any] = {}
    for model in models:
        info = _info(model)
        client = connection_for(model.Meta)
        clients[id(client)] = client
        groups.setdefault((info.table, id(client)), []).append(model)
    tables = []
    for (name, client_id), members in groups.items():
        keys = {_info(m).key_attributes for m in members}
        if len(keys) > 1:
            raise AuditError(
                f"the models of table {name!r} disagree on its key attributes: "
                + ", ".join(f"{m.__name__} {_info(m).key_attributes}" for m in members))
        hash_attr, range_attr = keys.pop()
        ttl = next((_info(m).ttl_attr for m in members if _info(m).ttl_attr), None)
        declared = frozenset(b.name for m in members for b in _info(m).constraints)
        tables.append(_Table(name, clients[client_id], tuple(members), hash_attr, range_attr,
                             ttl, declared))
    return tables


def _table_for(tables: Sequence[_Table], name: str) -> _Table:
    for table in tables:
        if table.name == name:
            return table
    raise AuditError(f"no loaded model uses table {name!r}")


def _fits(model: type[Model], item: Mapping[str, Any]) -> bool:
    """Whether ``item`` has every attribute ``model`` requires (non-nullable ones)."""
    for attribute in model.get_attributes().values():
        if not attribute.null and attribute.attr_name not in item:
            return False
    return True


def _hook(model: type[Model], item: Mapping[str, Any]) -> bool | None:
    """``Meta.is_record(raw_item)`` when the model defines it (migrations use the same hook)."""
    hook = getattr(model.Meta, "is_record", None)
    return None if hook is None else bool(hook(dict(item)))


def _claim(table: _Table, item: Mapping[str, Any]) -> tuple[type[Model] | None, str | None]:
    """The model ``item`` is a record of (the module docstring states the rule), or a problem.

    ``(None, None)`` means no model claims it: a ``Meta.is_record`` hook turned it away.
    """
    verdicts = {model: _hook(model, item) for model in table.models}
    claimed = [m for m, v in verdicts.items() if v is True]
    if len(claimed) == 1:
        return claimed[0], None
    models = claimed or [m for m, v in verdicts.items() if v is None]
    if not models:
        return None, None
    if len(models) == 1:
        return models[0], None
    for model in models:
        try:
            stored = model._get_discriminator_class(dict(item))
        except Exception:  # an unknown discriminator value: not this model
            stored = None
        if stored is not None:
            owners = [m for m in models if issubclass(stored, m)]
            if owners:
                return max(owners, key=lambda m: len(m.__mro__)), None

    def rank(model: type[Model]) -> tuple[bool, int]:
        names = {a.attr_name for a in model.get_attributes().values()}
        return _fits(model, item), sum(1 for name in item if name in names)

    best = max(rank(m) for m in models)
    candidates = [m for m in models if rank(m) == best]
    if len(candidates) == 1:
        return candidates[0], None
    keys = set()
    for model in candidates:
        try:
            keys.add(frozenset(r.key for r in locks_of(_info(model),
                                                       model.from_raw_data(dict(item))).values()))
        except ConfigurationError:
            raise
        except Exception:  # unreadable as this model: not the same locks
            keys.add(frozenset({model.__name__}))
    if len(keys) == 1:
        return candidates[0], None
    return None, ("several models fit it equally and require different locks: "
                  + ", ".join(m.__name__ for m in candidates))


def _interpret(table: _Table, key: TypedKey, item: dict[str, Any] | None,
               *, keep_item: bool) -> _Record:
    if item is None:
        return _Record(RecordRef(table.name, key, None), False, None, {})
    model, problem = _claim(table, item)
    kept = item if keep_item else None
    if model is None and problem is None:
        # Not a record of any loaded model (Meta.is_record said so): nothing of it to check.
        return _Record(RecordRef(table.name, key, None), False, None, {})
    if model is None:
        return _Record(RecordRef(table.name, key, None), True, kept, None, problem)
    ref = RecordRef(table.name, key, model.__name__)
    try:
        locks = locks_of(_info(model), model.from_raw_data(dict(item)))
    except ConfigurationError:
        raise  # e.g. no secret for a hashed constraint: nothing can be checked
    except Exception as exc:  # a value written around the library that it cannot read
        return _Record(ref, True, kept, None, f"{model.__name__} cannot compute its locks: {exc}")
    return _Record(ref, True, kept, {lock.key: lock for lock in locks.values()})


def _value_in_key(encoded: str) -> Any:
    values = decode_value(encoded)
    if values is None:
        return None
    return values[0] if len(values) == 1 else values


def _lock_info(table: _Table, item: Mapping[str, Any]) -> LockInfo:
    key = str(item[table.hash_attr].get("S", ""))
    parsed = split_lock_key(key)
    name, encoded = parsed if parsed is not None else ("", key)
    owner = item.get(OWNER_ATTR, {}).get("M")
    expires = None
    if table.ttl_attr is not None and table.ttl_attr in item:
        try:
            expires = int(Decimal(item[table.ttl_attr].get("N", "")))
        except (InvalidOperation, ValueError):
            expires = None
    return LockInfo(
        table=table.name, key=key, constraint=name, encoded=encoded,
        value=untyped(item[VALUE_ATTR]) if VALUE_ATTR in item else _value_in_key(encoded),
        # Only a hashed constraint's key hides its value (a lock missing its `value` attribute
        # still spells the value in its key).
        hashed=encoded.startswith(SECRET_HASH_TAG),
        model=item.get(MODEL_ATTR, {}).get("S"),
        owner=dict(owner) if isinstance(owner, dict) else None,
        created=item.get(CREATED_ATTR, {}).get("S"),
        expires=expires,
    )


def _is_lock_item(table: _Table, item: Mapping[str, Any]) -> bool | None:
    """True for a lock, None for a dynaunique system item, False for anything else."""
    hash_value = item.get(table.hash_attr, {}).get("S")
    if not isinstance(hash_value, str) or not hash_value.startswith(RESERVED_PREFIX):
        return False
    if split_lock_key(hash_value) is None:
        return None
    if table.range_attr is not None and item.get(table.range_attr) != {"S": LOCK_SORT_KEY}:
        return None
    return True


def _owner_key(table: _Table, lock: LockInfo | None) -> TypedKey | None:
    """The lock's owner as a primary key of this table (None when absent or malformed)."""
    if lock is None or lock.owner is None:
        return None
    names = [table.hash_attr] + ([table.range_attr] if table.range_attr else [])
    if set(lock.owner) != set(names):
        return None
    return {name: lock.owner[name] for name in names}


# --- judging one lock key ------------------------------------------------------------------------


def _judge(table: _Table, key: str, lock_item_: dict[str, Any] | None,
           records: Sequence[_Record]) -> Finding | None:
    """Whether lock ``key`` and the ``records`` read with it agree; the finding if not.

    ``records`` holds the lock's owner and every record known to require ``key`` (absent ones
    included, as ``exists=False``).
    """
    lock = _lock_info(table, lock_item_) if lock_item_ is not None else None
    evidence = Evidence(lock_item_, tuple(records))
    parsed = split_lock_key(key)
    name = parsed[0] if parsed is not None else ""
    requirers = [r for r in records if r.requires is not None and key in r.requires]
    ref = requirers[0].requires[key] if requirers and requirers[0].requires else None
    value = ref.value if ref is not None else (lock.value if lock is not None else None)
    hashed = ref.hashed if ref is not None else (lock.hashed if lock is not None else False)
    shown = f"{name} (hashed)" if hashed else f"{name} {value!r}"
    owner_key = _owner_key(table, lock)
    owner_label = lock.owner_label if lock is not None else "-"

    def finding(kind: str, detail: str, message: str, owner_state: str | None = None) -> Finding:
        return Finding(kind, table.name, key, name, None if hashed else value, hashed, lock,
                       tuple(r.ref for r in requirers), owner_state, detail, message, evidence)

    if lock is not None and name not in table.declared:
        return finding(UNKNOWN_CONSTRAINT, f"no loaded model declares {name}",
                       f"lock {shown} (owner {owner_label}) belongs to no constraint a loaded "
                       f"model declares on table {table.name!r}")
    if len(requirers) >= 2:
        holders = ", ".join(r.ref.label for r in requirers)
        held = f"the lock names {owner_label}" if lock is not None else "no lock"
        return finding(DUPLICATE, f"{len(requirers)} records hold it; {held}",
                       f"{shown} is held by {len(requirers)} records: {holders}; {held}")
    owner = None
    if owner_key is not None:
        owner = next((r for r in records if _key_id(r.ref.key) == _key_id(owner_key)), None)
    if owner_key is None:
        owner_state = "none"
    elif owner is None or not owner.exists:
        owner_state = "gone"
    elif owner.requires is None:
        owner_state = "unknown"
    else:
        owner_state = "changed"
    state = {
        "none": "the lock names no owner",
        "gone": "its owner does not exist",
        "unknown": "its owner is no record of the loaded models",
        "changed": f"its owner no longer holds it{_now_holds(owner, name)}",
    }[owner_state]
    if len(requirers) == 1:
        holder = requirers[0]
        if lock is None:
            return finding(MISSING, "no lock",
                           f"{holder.ref.label} holds {shown} but no lock protects it")
        if owner_key is not None and _key_id(owner_key) == _key_id(holder.ref.key):
            return None
        return finding(FOREIGN_OWNER, f"lock names {owner_label}: {state}",
                       f"{holder.ref.label} holds {shown} but its lock names {owner_label}: "
                       f"{state}", owner_state)
    if lock is None:
        return None
    return finding(ORPHAN, state, f"lock {shown} (owner {owner_label}) is an orphan: {state}",
                   owner_state)


def _now_holds(owner: _Record | None, name: str) -> str:
    if owner is None or owner.requires is None:
        return ""
    current = next((r for r in owner.requires.values() if r.constraint == name), None)
    if current is None:
        return f" (it has no {name} value now)"
    if current.hashed:
        return f" (it has another {name} value now)"
    return f" (its {name} is now {current.value!r})"


# --- consistent reads of one lock key ----------------------------------------------------------


def _read_key(table: _Table, key: str, record_keys: Iterable[TypedKey],
              meter: _Meter) -> tuple[dict[str, Any] | None, list[_Record]]:
    """Read lock ``key``, its owner and ``record_keys`` in one serializable TransactGetItems.

    When the lock names an owner that was not asked for (it changed since the scan), read again
    with that owner included, so the lock and its owner always come from one snapshot.
    """
    wanted: dict[Any, TypedKey] = {}
    for record_key in record_keys:
        wanted.setdefault(_key_id(record_key), record_key)
    keys = list(wanted.values())[:_MAX_RECORDS_PER_READ]
    for _ in range(4):
        response = _call(meter, table.client, "TransactGetItems", TransactItems=[
            {"Get": {"TableName": table.name, "Key": k}} for k in [table.lock_pk(key), *keys]
        ])
        answers = response.get("Responses", [])
        items = [a.get("Item") if isinstance(a, dict) else None for a in answers]
        items += [None] * (len(keys) + 1 - len(items))
        lock_item_ = items[0]
        owner = _owner_key(table, _lock_info(table, lock_item_)) if lock_item_ else None
        if (owner is not None and _key_id(owner) not in {_key_id(k) for k in keys}
                and len(keys) < _MAX_RECORDS_PER_READ):
            keys.append(owner)
            continue
        records = [_interpret(table, k, item, keep_item=True)
                   for k, item in zip(keys, items[1:], strict=True)]
        return lock_item_, records
    raise AuditError(f"lock {key!r} kept changing owner while it was being read; try again")


def _recheck(table: _Table, key: str, record_keys: Iterable[TypedKey],
             meter: _Meter) -> Finding | None:
    lock_item_, records = _read_key(table, key, record_keys, meter)
    return _judge(table, key, lock_item_, records)


def _involved(finding: Finding) -> list[TypedKey]:
    keys = [h.key for h in finding.holders] + [r.ref.key for r in finding.evidence.records]
    if finding.lock is not None and finding.lock.owner is not None:
        keys.append(finding.lock.owner)
    return keys


# --- who holds / owner / list --------------------------------------------------------------------


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
    pool = [m for m in models if model is None or m.__name__ == model]
    if not pool:
        raise AuditError(f"no loaded model is named {model!r}; the models are "
                         f"{[m.__name__ for m in models]}")
    found: list[tuple[type[Model], BoundConstraint]] = []
    for candidate in pool:
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


def _lock_key_of(model: type[Model], bound: BoundConstraint, raw: Sequence[Any]) -> str | None:
    """The key a save of ``raw`` would lock, exactly as the model builds it (None: no lock)."""
    constraint = bound.constraint
    normalized = constraint.normalized(list(raw))
    if any(v is None for v in normalized):
        return None
    lockable = tuple(c(v) for c, v in zip(bound.to_lockable, normalized, strict=True))
    return lock_key(constraint.name, lockable,
                    secret=_info(model).secret() if constraint.hashed else None)


def who_holds(model: type[Model], field_or_constraint: str | None = None, value: Any = None,
              **values: Any) -> LockInfo | None:
    """The lock on a value, or None: exactly ONE strongly consistent GetItem.

    ``who_holds(Account, "email", "ADA@x.io")``, ``who_holds(Account, "TENANT_SLUG",
    ("acme", "home"))`` or ``who_holds(Account, tenant="acme", slug="home")``. The value is
    normalized (and hashed) as a save would; the lock's ``owner`` says who holds it. The lock is
    returned as stored, even if it is an orphan: :func:`check` tells those apart.
    """
    info = _info(model)
    bound, raw = model._du_resolve(info, field_or_constraint, value, values)
    key = _lock_key_of(model, bound, raw)
    if key is None:
        return None
    table = _tables([model])[0]
    item = _call(_Meter(), table.client, "GetItem", TableName=table.name,
                 Key=table.lock_pk(key), ConsistentRead=True).get("Item")
    return _lock_info(table, item) if item is not None else None


def owner_locks(models: Sequence[type[Model]], hash_key: Any, range_key: Any = None, *,
                model: str | None = None) -> OwnerLocks:
    """The locks record ``hash_key`` (/``range_key``) requires and whether DynamoDB holds them.

    A consistent GetItem of the record (one per table among the candidate models) and one
    consistent BatchGetItem of its expected locks: no scan. Without ``range_key`` a model whose
    range key has a default (``default="PROFILE"``) uses it.
    """
    meter = _Meter()
    pool = [m for m in models if model is None or m.__name__ == model]
    if not pool:
        raise AuditError(f"no loaded model is named {model!r}; the models are "
                         f"{[m.__name__ for m in models]}")
    tables = _tables(pool)
    for table in tables:
        candidate = table.models[0]
        info = _info(candidate)
        rng = range_key
        if rng is None and info.range_field is not None:
            default = candidate.get_attributes()[info.range_field].default
            rng = default() if callable(default) else default
            if rng is None:
                raise AuditError(f"{candidate.__name__} has a range key: give it too")
        hash_value, range_value = candidate._serialize_keys(hash_key, rng)
        key: TypedKey = {table.hash_attr: {"S": str(hash_value)}}
        if table.range_attr is not None:
            key[table.range_attr] = {"S": str(range_value)}
        item = _call(meter, table.client, "GetItem", TableName=table.name, Key=key,
                     ConsistentRead=True).get("Item")
        if item is None:
            continue
        record = _interpret(table, key, dict(item), keep_item=False)
        if record.requires is None:
            raise AuditError(f"{record.ref.label} exists in {table.name!r} but its locks cannot "
                             f"be computed: {record.problem or 'no loaded model fits it'}")
        expected = sorted(record.requires.values(), key=lambda r: r.constraint)
        stored = _batch_get_locks(table, [r.key for r in expected], meter)
        result = []
        for ref in expected:
            lock = stored.get(ref.key)
            if lock is None:
                status = "missing"
            elif lock.owner is not None and _key_id(lock.owner) == _key_id(key):
                status = "held"
            else:
                status = "foreign"
            result.append(ExpectedLock(ref, status, lock))
        return OwnerLocks(record.ref, tuple(result), meter.cost())
    return OwnerLocks(None, (), meter.cost())


def _batch_get_locks(table: _Table, keys: Sequence[str], meter: _Meter) -> dict[str, LockInfo]:
    found: dict[str, LockInfo] = {}
    pending = [table.lock_pk(k) for k in keys]
    attempt = 0
    while pending:
        chunk, pending = pending[:100], pending[100:]
        response = _call(meter, table.client, "BatchGetItem", RequestItems={
            table.name: {"Keys": chunk, "ConsistentRead": True}})
        for item in response.get("Responses", {}).get(table.name, []):
            lock = _lock_info(table, item)
            found[lock.key] = lock
        unprocessed = response.get("UnprocessedKeys", {}).get(table.name, {}).get("Keys", [])
        if unprocessed:
            attempt += 1
            time.sleep(_READ_POLICY.delay(attempt))
            pending = list(unprocessed) + pending
    return found


def _lock_name(models: Sequence[type[Model]], constraint: str,
               model: str | None) -> tuple[str, type[Model] | None]:
    """``email`` → (``EMAIL``, its model); a name no model declares stays as it is."""
    try:
        chosen = pick_model(models, constraint, model=model)
    except AuditError:
        return constraint, None
    return _bound(chosen, constraint).name, chosen


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
    pool = [m for m in models if model is None or m.__name__ == model]
    if not pool:
        raise AuditError(f"no loaded model is named {model!r}; the models are "
                         f"{[m.__name__ for m in models]}")
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


def list_locks(models: Sequence[type[Model]], *, model: str | None = None,
               constraint: str | None = None, value_prefix: Any = None) -> LockListing:
    """Every lock item of the models' tables that matches the filters: one scan per table.

    ``model`` keeps locks written by that model; ``constraint`` (a lock or field name, also one
    no model declares any more) keeps that constraint's locks; ``value_prefix`` keeps values
    starting with it — normalized as the constraint normalizes (a tuple gives a composite's
    leading fields). Without ``constraint`` the prefix is matched on the stored ``value``
    attribute (string values only). The filters run server side, but a scan reads (and bills)
    every item of the table; lock items cannot be queried by prefix. :func:`lock_page` reads
    the same listing one page at a time.
    """
    meter = _Meter()
    wanted = _lock_filter(models, model, constraint, value_prefix)
    locks: list[LockInfo] = []
    for table in wanted.tables:
        for item in _scan_pages(table, meter, **wanted.scan_params(table)):
            if _is_lock_item(table, item):
                locks.append(_lock_info(table, item))
    locks.sort(key=lambda lock: (lock.table, lock.key))
    return LockListing(tuple(locks), meter.cost())


def _encoded_prefix(model: type[Model] | None, constraint: str, value_prefix: Any) -> str:
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


def _scan_pages(table: _Table, meter: _Meter, *, segment: int | None = None,
                total_segments: int | None = None, on_page: Callable[[int], None] | None = None,
                **params: Any) -> Iterator[dict[str, Any]]:
    """Every item of one scan (or one segment of a parallel scan), following LastEvaluatedKey."""
    request: dict[str, Any] = {"TableName": table.name, **params}
    if segment is not None:
        request.update(Segment=segment, TotalSegments=total_segments)
    while True:
        response = _call(meter, table.client, "Scan", **request)
        if on_page is not None:
            on_page(int(response.get("ScannedCount", len(response.get("Items", ())))))
        yield from response.get("Items", ())
        last = response.get("LastEvaluatedKey")
        if not last:
            return
        request["ExclusiveStartKey"] = last


# --- paging, counting and reading single items (read-only inspectors such as ``dynaunique ui``) --

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
        response = _call(meter, table.client, "Scan", TableName=table.name, **params)
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


def _one_table(models: Sequence[type[Model]], table: str | None) -> _Table:
    tables = _tables(models)
    if table is not None:
        return _table_for(tables, table)
    if len(tables) != 1:
        raise AuditError(f"the models use {len(tables)} tables: say which")
    return tables[0]


def read_lock(models: Sequence[type[Model]], key: str, *,
              table: str | None = None) -> LockInfo | None:
    """The lock item with hash key ``key`` (``UNIQ#EMAIL#ada@x.io``): ONE consistent GetItem.

    ``table`` is needed only when the models use several tables. None when there is no such
    lock (or ``key`` names no lock).
    """
    chosen = _one_table(models, table)
    if split_lock_key(key) is None:
        return None
    item = _call(_Meter(), chosen.client, "GetItem", TableName=chosen.name,
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

    ``model`` of the result is the loaded model the item is a record of (the rule in this
    module's docstring), None when no model claims it.
    """
    chosen = _one_table(models, table)
    item = _call(_Meter(), chosen.client, "GetItem", TableName=chosen.name, Key=dict(key),
                 ConsistentRead=True).get("Item")
    if item is None:
        return None
    model, _ = _claim(chosen, item)
    hidden = hashed_attributes(chosen.models, chosen.name)
    shown = tuple(sorted((name, HIDDEN if name in hidden else untyped(value))
                         for name, value in item.items()))
    return StoredRecord(RecordRef(chosen.name, dict(key), model.__name__ if model else None),
                        shown, tuple(sorted(hidden & set(item))))


# --- check ---------------------------------------------------------------------------------------


@attrs.define
class _Snapshot:
    """What one scan (segment) saw: locks by key, records, counts."""

    locks: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    records: list[_Record] = attrs.field(factory=list)
    scanned: int = 0
    system: int = 0
    other: int = 0

    def merge(self, other: _Snapshot) -> None:
        self.locks.update(other.locks)
        self.records.extend(other.records)
        self.scanned += other.scanned
        self.system += other.system
        self.other += other.other


def _scan_segment(table: _Table, segment: int, total: int, meter: _Meter,
                  on_page: Callable[[int], None], page_size: int | None = None) -> _Snapshot:
    snapshot = _Snapshot()
    parallel = total > 1
    params = {"Limit": page_size} if page_size is not None else {}
    for item in _scan_pages(table, meter, segment=segment if parallel else None,
                            total_segments=total if parallel else None, on_page=on_page,
                            **params):
        snapshot.scanned += 1
        kind = _is_lock_item(table, item)
        if kind is None:
            snapshot.system += 1
        elif kind:
            snapshot.locks[item[table.hash_attr]["S"]] = item
        else:
            key = table.key_of(item)
            if key is None:
                snapshot.other += 1
                continue
            record = _interpret(table, key, item, keep_item=False)
            if record.requires is None and record.problem is None:
                snapshot.other += 1
            else:
                snapshot.records.append(record)
    return snapshot


def _suspects(table: _Table, snapshot: _Snapshot) -> dict[str, list[TypedKey]]:
    """Lock keys where the scan saw disagreement → the record keys to read with each."""
    requirers: dict[str, list[TypedKey]] = {}
    for record in snapshot.records:
        for key in record.requires or {}:
            requirers.setdefault(key, []).append(record.ref.key)
    suspects: dict[str, list[TypedKey]] = {}
    for key in sorted(set(snapshot.locks) | set(requirers)):
        holders = requirers.get(key, [])
        item = snapshot.locks.get(key)
        lock = _lock_info(table, item) if item is not None else None
        owner = _owner_key(table, lock)
        if (lock is not None and lock.constraint in table.declared and owner is not None
                and len(holders) == 1 and _key_id(holders[0]) == _key_id(owner)):
            continue
        suspects[key] = holders + ([owner] if owner is not None else [])
    return suspects


def check(models: Sequence[type[Model]], *, segments: int = 1,
          progress: Progress | None = None, page_size: int | None = None) -> AuditReport:
    """Audit every lock and record of the models' tables.

    Each table is scanned once (``segments`` > 1: a parallel scan, one thread per segment); every
    lock key where the scan saw disagreement is then confirmed with one TransactGetItems of the
    lock, its owner and the records requiring it — a serializable snapshot, so a save that raced
    with the scan is not reported. ``progress(scanned, estimated_total)`` is called after every
    page (the estimate is DescribeTable's ItemCount, read only when ``progress`` is given).
    ``page_size`` caps the items per Scan request (``Limit``), to spread the read load.
    """
    if segments < 1 or (page_size is not None and page_size < 1):
        raise AuditError("segments and page_size must be at least 1")
    tables = _tables(models)
    meter = _Meter()
    estimate: int | None = None
    if progress is not None:
        estimate = sum(int(_call(meter, t.client, "DescribeTable", TableName=t.name)
                           .get("Table", {}).get("ItemCount", 0)) for t in tables)
        progress(0, estimate)
    done = [0]
    guard = threading.Lock()

    def on_page(scanned: int) -> None:
        if progress is None:
            return
        with guard:
            done[0] += scanned
            progress(done[0], estimate)

    summaries: list[TableSummary] = []
    findings: list[Finding] = []
    with ThreadPoolExecutor(max_workers=segments) as pool:
        for table in tables:
            snapshot = _Snapshot()
            scan = functools.partial(_scan_segment, table, total=segments, meter=meter,
                                     on_page=on_page, page_size=page_size)
            for part in pool.map(scan, range(segments)):
                snapshot.merge(part)
            summaries.append(TableSummary(table.name, snapshot.scanned, len(snapshot.records),
                                          len(snapshot.locks), snapshot.system, snapshot.other))
            for record in snapshot.records:
                if record.requires is None:
                    findings.append(Finding(
                        UNREADABLE, table.name, "", "", None, False, None, (record.ref,), None,
                        str(record.problem), f"{record.ref.label} cannot be checked: "
                                             f"{record.problem}", Evidence(None, (record,))))
            suspects = _suspects(table, snapshot)
            confirm = functools.partial(_recheck, table, meter=meter)
            confirmed = pool.map(confirm, suspects, suspects.values())
            findings.extend(f for f in confirmed if f is not None)
    order = {kind: i for i, kind in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.kind], f.table, f.lock_key,
                                 [h.label for h in f.holders]))
    return AuditReport(tuple(summaries), tuple(findings), meter.cost(), tuple(models))


# --- repair --------------------------------------------------------------------------------------


def _unchanged(table: _Table, record: _Record) -> Expression:
    """A condition true while ``record`` is as read: absent, or its lock inputs unchanged.

    Lock inputs are the constrained attributes and the TTL (every attribute for a model with a
    conditional constraint), compared by value: records written around the library may not bump
    a version attribute, so the version alone would not prove the values unchanged.
    """
    names = {"#r0": table.hash_attr}
    if not record.exists:
        return Expression("attribute_not_exists(#r0)", names)
    model = table.model_named(record.ref.model)
    assert model is not None and record.item is not None
    guard = unchanged_guard(_info(model), record.item, use_version=False)
    parts = ["attribute_exists(#r0)"]
    values: dict[str, Any] = {}
    for i, (attr, expected) in enumerate(guard.expected, start=1):
        names[f"#r{i}"] = attr
        if expected is None:
            parts.append(f"attribute_not_exists(#r{i})")
        else:
            values[f":r{i}"] = expected
            parts.append(f"#r{i} = :r{i}")
    return Expression(" AND ".join(parts), names, values)


def _check_record(table: _Table, record: _Record, label: str) -> ConditionCheck:
    return ConditionCheck(table=table.name, model=record.ref.model or "", key=record.ref.key,
                          condition=_unchanged(table, record), label=label)


def _record(finding: Finding, key: TypedKey | None) -> _Record | None:
    if key is None:
        return None
    return next((r for r in finding.evidence.records if _key_id(r.ref.key) == _key_id(key)),
                None)


def _absent(table: _Table, key: TypedKey) -> _Record:
    return _Record(RecordRef(table.name, key, None), False, None, {})


def _delete_lock(table: _Table, finding: Finding, owner: TypedKey) -> LockDelete:
    lock = finding.lock
    assert lock is not None
    ref = LockRef(constraint=lock.constraint, fields=(), key=lock.key, value=lock.value,
                  hashed=lock.hashed)
    # HeldBy renders "absent, or owned by exactly this owner": a lock re-taken meanwhile by
    # anyone else is left alone, and an already deleted one is no error.
    return LockDelete(table=table.name, model=lock.model or "", lock=ref,
                      key=table.lock_pk(lock.key), guard=HeldBy((owner,)))


def _put_lock(table: _Table, holder: _Record, lock_key_: str, allowed: TypedKey) -> LockPut:
    model = table.model_named(holder.ref.model)
    assert model is not None and holder.requires is not None and holder.item is not None
    info = _info(model)
    ref = holder.requires[lock_key_]
    ttl = None
    if info.ttl_attr is not None and info.ttl_attr in holder.item:
        ttl = (info.ttl_attr, int(Decimal(holder.item[info.ttl_attr]["N"])))
    item = lock_item(key_attributes=info.key_attributes, lock_key_value=ref.key,
                     owner=holder.ref.key, model=info.name, constraint=ref.constraint,
                     value=ref.value, hashed=ref.hashed,
                     created=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                     ttl=ttl)
    # "Absent, or owned by `allowed`": the holder itself (a retry, or a save that rewrote it
    # meanwhile) for a missing lock; the previous owner for a hand-over. Never anyone else.
    return LockPut(table=table.name, model=info.name, lock=ref, owner=holder.ref.key, item=item,
                   guard=HeldBy((allowed,)), key=table.lock_pk(ref.key))


def _action(table: _Table, finding: Finding, drop_unknown: Collection[str]) -> RepairAction | None:
    """The guarded writes that fix ``finding`` as read, or None when no repair may fix it."""
    lock = finding.lock
    owner_key = _owner_key(table, lock)
    if finding.kind == UNKNOWN_CONSTRAINT:
        if finding.constraint not in drop_unknown or owner_key is None:
            return None
        return RepairAction("drop_unknown", finding,
                            Plan((_delete_lock(table, finding, owner_key),)))
    if not finding.repairable:
        return None
    owner = None
    if owner_key is not None:
        owner = _record(finding, owner_key) or _absent(table, owner_key)
    if finding.kind == ORPHAN:
        assert owner_key is not None and owner is not None
        return RepairAction("delete_orphan", finding, Plan((
            _delete_lock(table, finding, owner_key),
            _check_record(table, owner, f"owner {owner.ref.label} still does not hold "
                                        f"{finding.constraint} {finding.shown_value!r}"),
        )))
    holder = _record(finding, finding.holders[0].key)
    assert holder is not None
    holder_check = _check_record(table, holder, f"{holder.ref.label} still holds "
                                                f"{finding.constraint} {finding.shown_value!r}")
    if finding.kind == MISSING:
        return RepairAction("put_missing", finding, Plan((
            _put_lock(table, holder, finding.lock_key, holder.ref.key), holder_check)))
    assert owner_key is not None and owner is not None
    return RepairAction("transfer", finding, Plan((
        _put_lock(table, holder, finding.lock_key, owner_key),
        _check_record(table, owner, f"previous owner {owner.ref.label} still does not hold "
                                    f"{finding.constraint} {finding.shown_value!r}"),
        holder_check,
    )))


def plan_repair(report: AuditReport, *, drop_unknown: Collection[str] = ()) -> RepairPlan:
    """The guarded writes that fix a report's findings. Pure: nothing is read or sent.

    Orphans are deleted, missing locks written, locks handed from a record that no longer holds
    the value to the one that does. Duplicates, unreadable records and orphans whose owner no
    loaded model reads are left for a person (``unfixable``). Locks of constraints no model
    declares are deleted only for the lock names listed in ``drop_unknown``.
    """
    tables = _tables(report.models)
    actions = []
    unfixable = []
    for finding in report.findings:
        action = _action(_table_for(tables, finding.table), finding, drop_unknown)
        if action is None:
            unfixable.append(finding)
        else:
            actions.append(action)
    return RepairPlan(tuple(actions), tuple(unfixable), report.models)


def _apply_one(table: _Table, action: RepairAction, drop_unknown: Collection[str],
               meter: _Meter) -> RepairOutcome:
    current: RepairAction | None = action
    sent = 0
    for attempt in range(_REPAIR_ATTEMPTS):
        if attempt > 0:
            # The guard failed: something changed. Read the key again and decide afresh.
            finding = _recheck(table, action.finding.lock_key, _involved(action.finding), meter)
            if finding is None:
                return RepairOutcome(action, ALREADY_FIXED,
                                     "already consistent when re-read (fixed meanwhile)", sent)
            current = _action(table, finding, drop_unknown)
            if current is None:
                return RepairOutcome(action, NOT_FIXED, f"now {finding.kind}: {finding.message}",
                                     sent)
        assert current is not None
        try:
            sent += 1
            meter.add("TransactWriteItems")
            execute(current.plan, table.client)
        except WriteConflict:
            continue
        except DynauniqueError as exc:
            return RepairOutcome(action, FAILED, str(exc), sent)
        return RepairOutcome(action, FIXED, f"{sent} TransactWriteItems", sent)
    return RepairOutcome(action, SKIPPED, f"the records kept changing ({_REPAIR_ATTEMPTS} tries); "
                                          "run check again", sent)


def apply_repair(plan: RepairPlan, *, drop_unknown: Collection[str] = (),
                 progress: Callable[[RepairOutcome], None] | None = None) -> RepairResult:
    """Send a repair plan, one guarded TransactWriteItems per action; never touches a record.

    A guard that fails (the lock or a record changed since it was read) is not an error: the key
    is read again consistently and the action re-planned from that state, up to four times;
    ``already_fixed`` when the state became consistent meanwhile, ``not_fixed`` when it became
    something repair must not fix (e.g. a duplicate: a missing lock's value taken by another
    record). ``drop_unknown`` must repeat the names given to :func:`plan_repair` for retries.
    """
    tables = _tables(plan.models)
    meter = _Meter()
    drops = set(drop_unknown) | {a.finding.constraint for a in plan.actions
                                 if a.kind == "drop_unknown"}
    outcomes = []
    for action in plan.actions:
        outcome = _apply_one(_table_for(tables, action.finding.table), action, drops, meter)
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)
    return RepairResult(tuple(outcomes), plan.unfixable, meter.cost())


__all__ = [
    "ALREADY_FIXED",
    "DUPLICATE",
    "FAILED",
    "FIXED",
    "FOREIGN_OWNER",
    "HIDDEN",
    "KINDS",
    "KIND_LABELS",
    "MISSING",
    "NOT_FIXED",
    "ORPHAN",
    "SKIPPED",
    "UNKNOWN_CONSTRAINT",
    "UNREADABLE",
    "AuditReport",
    "Cost",
    "Evidence",
    "ExpectedLock",
    "Finding",
    "LockCounts",
    "LockInfo",
    "LockListing",
    "LockPage",
    "OwnerLocks",
    "RecordRef",
    "RepairAction",
    "RepairOutcome",
    "RepairPlan",
    "RepairResult",
    "StoredRecord",
    "TableSummary",
    "apply_repair",
    "check",
    "count_locks",
    "hashed_attributes",
    "list_locks",
    "lock_page",
    "owner_locks",
    "parse_value",
    "pick_model",
    "plan_repair",
    "read_lock",
    "read_record",
    "remedy",
    "who_holds",
]
