"""Look locks up without a full audit: who holds a value, one record's locks, a filtered listing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id, lock_of
from dynaunique._lock.locks import LockRef
from dynaunique.errors import AuditError
from dynaunique.model import Model

from ._kinds import LockStatus
from ._names import _lock_filter, _pool
from ._reads import _batch_get_locks, _scan_pages
from ._stored import LockInfo, RecordRef, _interpret, _is_lock_item, _json_value, _lock_info
from ._tables import Cost, _call, _info, _Meter, _tables


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
    #: ``held`` (the lock names this record), ``pending`` (it names this record and is still an
    #: MRSC pending intent, :attr:`LockInfo.intent`), ``missing`` or ``foreign`` (names another
    #: owner).
    status: LockStatus
    #: The stored lock item, when there is one.
    stored: LockInfo | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"constraint": self.lock.constraint, "key": self.lock.key,
                "value": None if self.lock.hashed else _json_value(self.lock.value),
                "hashed": self.lock.hashed, "status": self.status.value,
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
    lock = lock_of(info, bound, list(raw))
    if lock is None:
        return None
    table = _tables([model])[0]
    item = _call(_Meter(), table.connection, "GetItem", TableName=table.name,
                 Key=table.lock_pk(lock.key), ConsistentRead=True).get("Item")
    return _lock_info(table, item) if item is not None else None


def owner_locks(models: Sequence[type[Model]], hash_key: Any, range_key: Any = None, *,
                model: str | None = None) -> OwnerLocks:
    """The locks record ``hash_key`` (/``range_key``) requires and whether DynamoDB holds them.

    A consistent GetItem of the record (one per table among the candidate models) and one
    consistent BatchGetItem of its expected locks: no scan. Without ``range_key`` a model whose
    range key has a default (``default="PROFILE"``) uses it.
    """
    meter = _Meter()
    for table in _tables(_pool(models, model)):
        candidate = table.models[0]
        info = _info(candidate)
        rng = range_key
        if rng is None and info.range_field is not None:
            default = candidate.get_attributes()[info.range_field].default
            rng = default() if callable(default) else default
            if rng is None:
                raise AuditError(f"{candidate.__name__} has a range key: give it too")
        key = info.typed_key(*candidate._serialize_keys(hash_key, rng))
        item = _call(meter, table.connection, "GetItem", TableName=table.name, Key=key,
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
                status = LockStatus.MISSING
            elif lock.owner is not None and key_id(lock.owner) == key_id(key):
                pending = lock.intent is not None and lock.intent.pending
                status = LockStatus.PENDING if pending else LockStatus.HELD
            else:
                status = LockStatus.FOREIGN
            result.append(ExpectedLock(ref, status, lock))
        return OwnerLocks(record.ref, tuple(result), meter.cost())
    return OwnerLocks(None, (), meter.cost())


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
