"""Check dynaunique's invariant on a raw table: each record holds exactly the locks it requires.

This is the test suite's own checker, deliberately independent of ``dynaunique.audit``: it scans
the raw table with boto3 (every page, strongly consistent), asks
``dynaunique._write.plan.locks_of`` which lock keys each stored record requires, and compares
that with the lock items that exist. It reports, precisely:

* **orphans** — lock items no record requires (no owner attribute, owner record missing, or the
  owner no longer holds that value);
* **missing** — a record requires a lock that does not exist;
* **wrong owners** — a lock that a record requires, but whose ``owner`` map names another record
  (or nobody);
* **duplicates** — two records that require the same lock key (two holders of one value);
* **bad locks** — lock items whose range key, ``model``, ``constraint`` or ``value`` attribute
  disagree with the record that requires them, or whose ``secret_id`` is not the fingerprint of
  the secret that made a hashed key (a plain lock carries none).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import boto3

from dynaunique import Model
from dynaunique._lock.items import ModelInfo, claim, locks_of
from dynaunique._lock.locks import (
    CONSTRAINT_ATTR,
    LOCK_SORT_KEY,
    MODEL_ATTR,
    OWNER_ATTR,
    RESERVED_PREFIX,
    SYSTEM_PREFIX,
    VALUE_ATTR,
    LockRef,
    split_lock_key,
    typed,
)

Raw = dict[str, Any]
#: A record's typed primary key, as lock items store it in ``owner``.
TypedKey = dict[str, Any]
#: Picks the model class of a raw record item (None: not a record of any model checked).
ModelOf = Callable[[Raw], "type[Model] | None"]


def _plain(key: Mapping[str, Any] | None) -> str:
    if key is None:
        return "<none>"
    return "/".join(str(next(iter(v.values()))) for v in key.values())


@attrs.frozen
class OrphanLock:
    """A lock item that no record requires."""

    key: str
    owner: TypedKey | None
    reason: str

    def __str__(self) -> str:
        return f"orphan lock {self.key!r} (owner {_plain(self.owner)}): {self.reason}"


@attrs.frozen
class MissingLock:
    """A lock a record requires that does not exist."""

    key: str
    record: TypedKey
    model: str
    constraint: str

    def __str__(self) -> str:
        return (f"missing lock {self.key!r}: {self.model} {_plain(self.record)} requires it "
                f"({self.constraint})")


@attrs.frozen
class WrongOwner:
    """A lock a record requires whose ``owner`` names another record (or nobody)."""

    key: str
    owner: TypedKey | None
    required_by: TypedKey

    def __str__(self) -> str:
        return (f"lock {self.key!r} is owned by {_plain(self.owner)} but required by "
                f"{_plain(self.required_by)}")


@attrs.frozen
class Duplicate:
    """Two or more records require the same lock key: a value held twice."""

    key: str
    records: tuple[str, ...]

    def __str__(self) -> str:
        return f"duplicate: {', '.join(self.records)} all require {self.key!r}"


@attrs.frozen
class BadLock:
    """A lock item whose shape disagrees with the record that requires it."""

    key: str
    problem: str

    def __str__(self) -> str:
        return f"bad lock {self.key!r}: {self.problem}"


@attrs.frozen
class Report:
    """The outcome of one :func:`check`: counts plus every violation found."""

    records: int
    locks: int
    orphans: tuple[OrphanLock, ...] = ()
    missing: tuple[MissingLock, ...] = ()
    wrong_owners: tuple[WrongOwner, ...] = ()
    duplicates: tuple[Duplicate, ...] = ()
    bad_locks: tuple[BadLock, ...] = ()
    #: Items outside dynaunique's namespace that no checked model claims.
    unclassified: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        """True when the invariant holds: nothing orphaned, missing, foreign or duplicated."""
        return not (self.orphans or self.missing or self.wrong_owners or self.duplicates
                    or self.bad_locks)

    def problems(self) -> list[str]:
        """Every violation as one line."""
        groups: Iterable[Iterable[object]] = (self.orphans, self.missing, self.wrong_owners,
                                              self.duplicates, self.bad_locks)
        return [str(p) for group in groups for p in group]

    def __str__(self) -> str:
        head = f"{self.records} records, {self.locks} locks"
        problems = self.problems()
        if not problems:
            return head + ": clean"
        return head + f": {len(problems)} problems\n  " + "\n  ".join(problems)


@functools.lru_cache(maxsize=8)
def raw_client(endpoint: str, region: str = "us-east-1") -> Any:
    """A plain boto3 DynamoDB client on ``endpoint`` (fake credentials are fine locally), signed
    for ``region`` (the local server serves each region's replica of a global table).

    Cached: building a client parses botocore's service model, which costs more than the
    requests a test makes; clients are thread-safe.
    """
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=region,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def scan_table(endpoint: str, table: str, region: str = "us-east-1") -> list[Raw]:
    """Every item of ``table``, raw, read strongly consistently across all pages."""
    paginator = raw_client(endpoint, region).get_paginator("scan")
    items: list[Raw] = []
    for page in paginator.paginate(TableName=table, ConsistentRead=True):
        items.extend(page.get("Items", []))
    return items


def _info(model: type[Model]) -> ModelInfo:
    info = model._du_info
    if info is None:
        raise ValueError(f"{model.__name__} has no table")
    return info


def _record_key(info: ModelInfo, raw: Raw) -> TypedKey:
    key = {info.hash_attr: raw[info.hash_attr]}
    if info.range_attr is not None:
        key[info.range_attr] = raw[info.range_attr]
    return key


def _default_model_of(models: Sequence[type[Model]]) -> ModelOf:
    if len(models) == 1:
        only = models[0]

        def model_of(raw: Raw) -> type[Model] | None:
            return only

        return model_of

    def claimed(raw: Raw) -> type[Model] | None:
        # Several models on one table: the audit's rule (``_items.claim``) says whose record an
        # item is; an item several models fit with different locks is a test's mistake.
        model, problem = claim(models, raw)
        if problem is not None:
            key = {k: raw[k] for k in _info(models[0]).key_attributes if k}
            raise ValueError(f"{_plain(key)}: {problem}; pass model_of= to tell them apart")
        return model

    return claimed


def _by_table(models: Iterable[type[Model]]) -> Iterator[tuple[str, list[type[Model]]]]:
    tables: dict[str, list[type[Model]]] = {}
    for model in models:
        tables.setdefault(_info(model).table, []).append(model)
    yield from tables.items()


def check(models: Sequence[type[Model]], endpoint: str, *,
          model_of: ModelOf | None = None, region: str = "us-east-1") -> Report:
    """Scan the tables of ``models`` on ``endpoint`` and report every invariant violation.

    ``model_of`` maps a raw record item to its model class; it is needed when several models
    share a table (one model per table needs none). ``region``: which replica of a global table.
    """
    totals = {"records": 0, "locks": 0}
    orphans: list[OrphanLock] = []
    missing: list[MissingLock] = []
    wrong: list[WrongOwner] = []
    duplicates: list[Duplicate] = []
    bad: list[BadLock] = []
    unclassified: list[str] = []
    for table, table_models in _by_table(models):
        pick = model_of if model_of is not None else _default_model_of(table_models)
        first = _info(table_models[0])
        hash_attr, range_attr = first.key_attributes
        locks: dict[str, Raw] = {}
        infos: dict[str, ModelInfo] = {}
        # lock key → [(record key, model name, the LockRef it requires)]
        required: dict[str, list[tuple[TypedKey, str, LockRef]]] = {}
        for raw in scan_table(endpoint, table, region):
            hash_value = raw[hash_attr].get("S")
            if isinstance(hash_value, str) and hash_value.startswith(RESERVED_PREFIX):
                if hash_value.startswith(SYSTEM_PREFIX):
                    continue
                locks[hash_value] = raw
                continue
            model = pick(raw)
            if model is None:
                unclassified.append(_plain({hash_attr: raw[hash_attr]}))
                continue
            info = _info(model)
            infos[info.name] = info
            totals["records"] += 1
            record = model.from_raw_data(copy.deepcopy(raw))
            key = _record_key(info, raw)
            for ref in locks_of(info, record).values():
                required.setdefault(ref.key, []).append((key, info.name, ref))
        totals["locks"] += len(locks)

        for lock_key_value, holders in sorted(required.items()):
            if len(holders) > 1:
                duplicates.append(Duplicate(lock_key_value,
                                            tuple(_plain(k) for k, _, _ in holders)))
            lock = locks.get(lock_key_value)
            if lock is None:
                for record_key, model_name, ref in holders:
                    missing.append(MissingLock(lock_key_value, record_key, model_name,
                                               ref.constraint))
                continue
            owner = lock.get(OWNER_ATTR, {}).get("M")
            owning = [h for h in holders if h[0] == owner]
            if not owning:
                for record_key, _, _ in holders:
                    wrong.append(WrongOwner(lock_key_value, owner, record_key))
                continue
            _, model_name, ref = owning[0]
            bad.extend(_shape_problems(lock_key_value, lock, range_attr, model_name, ref,
                                       infos[model_name]))

        for lock_key_value, lock in sorted(locks.items()):
            if lock_key_value in required:
                continue
            owner = lock.get(OWNER_ATTR, {}).get("M")
            if split_lock_key(lock_key_value) is None:
                reason = "the key is not a lock key"
            elif owner is None:
                reason = "it has no owner attribute"
            elif not _record_exists(endpoint, table, owner, region):
                reason = "its owner record does not exist"
            else:
                reason = "its owner record does not require this value"
            orphans.append(OrphanLock(lock_key_value, owner, reason))
    return Report(
        records=totals["records"],
        locks=totals["locks"],
        orphans=tuple(orphans),
        missing=tuple(missing),
        wrong_owners=tuple(wrong),
        duplicates=tuple(duplicates),
        bad_locks=tuple(bad),
        unclassified=tuple(unclassified),
    )


def _record_exists(endpoint: str, table: str, owner: TypedKey, region: str) -> bool:
    # Only reached for orphans, so one read per orphan is cheap.
    try:
        return raw_item(endpoint, table, owner, region) is not None
    except Exception:  # an owner map that is not a valid key cannot name a record
        return False


def _fingerprint(secret: bytes) -> str:
    """The secret fingerprint a hashed lock must carry, computed here as docs/decisions.md
    states it (not with dynaunique's function): 8 bytes of HMAC-SHA256 of a fixed message."""
    return hmac.new(secret, b"\\sdynaunique-secret-id", hashlib.sha256).digest()[:8].hex()


def _shape_problems(key: str, lock: Raw, range_attr: str | None, model_name: str,
                    ref: LockRef, info: ModelInfo) -> list[BadLock]:
    problems: list[BadLock] = []
    if range_attr is not None and lock.get(range_attr) != {"S": LOCK_SORT_KEY}:
        problems.append(BadLock(key, f"range key {lock.get(range_attr)!r}, not 'LOCK'"))
    if lock.get(CONSTRAINT_ATTR) != {"S": ref.constraint}:
        problems.append(BadLock(key, f"constraint {lock.get(CONSTRAINT_ATTR)!r}, expected "
                                     f"{ref.constraint!r}"))
    if lock.get(MODEL_ATTR) != {"S": model_name}:
        problems.append(BadLock(key, f"model {lock.get(MODEL_ATTR)!r}, expected {model_name!r}"))
    if ref.hashed:
        if VALUE_ATTR in lock:
            problems.append(BadLock(key, "a hashed lock carries its plaintext value"))
        if lock.get("secret_id") != {"S": _fingerprint(info.secret())}:
            problems.append(BadLock(key, f"secret_id {lock.get('secret_id')!r}, not the "
                                         "fingerprint of the secret that made the key"))
    elif "secret_id" in lock:
        problems.append(BadLock(key, "a plain lock carries a secret fingerprint"))
    if not ref.hashed and lock.get(VALUE_ATTR) != typed(ref.value):
        problems.append(BadLock(key, f"value {lock.get(VALUE_ATTR)!r}, expected "
                                     f"{typed(ref.value)!r}"))
    return problems


def assert_clean(models: Sequence[type[Model]], endpoint: str, *,
                 model_of: ModelOf | None = None) -> Report:
    """:func:`check`, failing the test with every problem listed unless the report is clean."""
    report = check(models, endpoint, model_of=model_of)
    assert report.clean, str(report)
    return report


def raw_item(endpoint: str, table: str, key: Mapping[str, Any],
             region: str = "us-east-1") -> Raw | None:
    """One raw item, read strongly consistently (None when absent)."""
    item = raw_client(endpoint, region).get_item(TableName=table, Key=dict(key),
                                                 ConsistentRead=True).get("Item")
    return dict(item) if item is not None else None


def probe_held_values(models: Sequence[type[Model]], endpoint: str, *,
                      model_of: ModelOf | None = None) -> list[str]:
    """Try to take every value a live record holds with a fresh record: each try must raise
    ``UniqueViolation``. Returns one line per value a fresh record could take (a duplicate
    now exists: the probe record is left in place so that :func:`check` reports it too) or that
    failed otherwise.

    :func:`check` proves that each held value has a lock owned by its holder; this proves the
    lock actually stops a writer, through the library's own write path. A probe record has a
    fresh hash key (``PROBE#<n>``), the holder's range key, and only the constraint's fields.
    """
    from dynaunique import UniqueViolation

    problems: list[str] = []
    probes = 0
    for table, table_models in _by_table(models):
        pick = model_of if model_of is not None else _default_model_of(table_models)
        hash_attr, _ = _info(table_models[0]).key_attributes
        for raw in scan_table(endpoint, table):
            hash_value = raw[hash_attr].get("S")
            if isinstance(hash_value, str) and hash_value.startswith(RESERVED_PREFIX):
                continue
            model = pick(raw)
            if model is None:
                continue
            info = _info(model)
            record = model.from_raw_data(copy.deepcopy(raw))
            for bound in info.constraints:
                fields = bound.constraint.fields
                values = {f: getattr(record, f) for f in fields}
                if any(v is None for v in values.values()):
                    continue  # None is never locked
                probes += 1
                keys: dict[str, Any] = {info.hash_field: f"PROBE#{probes}"}
                if info.range_field is not None:
                    keys[info.range_field] = getattr(record, info.range_field)
                fresh = model(**keys, **values)
                try:
                    fresh.save()
                except UniqueViolation:
                    continue
                except Exception as exc:
                    problems.append(f"taking {values} (held by {_plain(_record_key(info, raw))}) "
                                    f"raised {type(exc).__name__}: {exc}, not UniqueViolation")
                    continue
                problems.append(f"a fresh record took {values}, held by "
                                f"{_plain(_record_key(info, raw))}: a duplicate")
    return problems


def assert_sound(models: Sequence[type[Model]], endpoint: str, *,
                 model_of: ModelOf | None = None) -> Report:
    """:func:`assert_clean`, then :func:`probe_held_values`: every held value has exactly one
    lock owned by its holder, no lock lacks a holder, and a fresh record cannot take any held
    value."""
    report = assert_clean(models, endpoint, model_of=model_of)
    problems = probe_held_values(models, endpoint, model_of=model_of)
    assert not problems, "\n".join(problems) + "\n" + str(check(models, endpoint,
                                                                 model_of=model_of))
    return report
