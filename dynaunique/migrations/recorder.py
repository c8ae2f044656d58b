"""The migrations ledger, kept in the table itself: applied migrations, scan progress, leases.

Having a ``UNIQ#~MIGRATION#<app>#<name>`` item in the table always means that migration is
applied. Next to those live the resumable state of running migrations and the lease that keeps a
second runner out. Every ledger item's hash key starts with ``UNIQ#~`` (dynaunique's system
prefix, so models never see them), its range key (if the table has one) is ``LOCK``, and all of
its data sits in one map attribute, ``ledger``, so the only attribute name a ledger item adds to
the table is that one:

============================================  ==================================================
hash key                                      ``ledger`` holds
============================================  ==================================================
``UNIQ#~MIGRATION#<app>#<migration>``         applied time, ``fake``
``UNIQ#~JOB#<app>#<job>``                     ``total``: the scan segments the job is split in
``UNIQ#~PROGRESS#<app>#<job>#<total>#<i>``    segment *i*'s ``last_key`` (LastEvaluatedKey),
                                              ``done``, counters, unresolved ``conflicts``
``UNIQ#~LEASE#<app>``                         ``holder``, ``expires``, ``mode`` (exclusive or
                                              workers), ``workers`` (worker id → expiry)
``UNIQ#~LEASE#<app>#<total>#<i>``             the holder of segment *i* in multi-worker mode
============================================  ==================================================

A *job* is one phase of one operation of one migration in one direction:
``<migration>#<operation index>#<F|B>#<phase index>``.

This module is one of the two places (with the executor) where migrations talk to DynamoDB;
:func:`call` is where botocore errors become :class:`~dynaunique.errors.MigrationError`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import attrs

from dynaunique.connection import Refused, RetryPolicy, send
from dynaunique.errors import DynauniqueError, MigrationError
from dynaunique.locks import LOCK_SORT_KEY, SYSTEM_PREFIX, typed, untyped

LEDGER_ATTR = "ledger"
MIGRATION_PREFIX = f"{SYSTEM_PREFIX}MIGRATION#"
JOB_PREFIX = f"{SYSTEM_PREFIX}JOB#"
PROGRESS_PREFIX = f"{SYSTEM_PREFIX}PROGRESS#"
LEASE_PREFIX = f"{SYSTEM_PREFIX}LEASE#"

#: Bulk work tolerates longer waits than a user's save: throttling is expected under a cap.
BULK_POLICY = RetryPolicy(max_conflict_retries=12, max_network_retries=6, base_delay=0.05,
                          max_delay=5.0)

def now_iso() -> str:
    """The current UTC time, ISO-8601 with microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class ConditionFailed(Exception):
    """A conditional write's condition did not hold; ``item`` is the item as it is (or None).

    Internal: callers always catch it and decide what the failure means.
    """

    def __init__(self, item: Mapping[str, Any] | None) -> None:
        super().__init__("condition failed")
        self.item = dict(item) if item is not None else None


def call(connection: Any, operation: str, *, policy: RetryPolicy = BULK_POLICY,
         sleep: Any = time.sleep, **params: Any) -> dict[str, Any]:
    """Send ``operation`` (``"put_item"``…) through dynaunique's one boundary and retry loop.

    Every write migrations send is idempotent (guarded by ownership, or a plain overwrite of a
    ledger item), so resending after an ambiguous failure is safe.

    :raises ConditionFailed: the request's condition did not hold.
    :raises MigrationError: any other refusal, or the retries ran out.
    """
    name = "".join(part.title() for part in operation.split("_"))
    try:
        return send(connection, name, params, policy=policy, sleep=sleep)
    except Refused as refused:
        if refused.code == "ConditionalCheckFailedException":
            raise ConditionFailed(refused.response.get("Item")) from None
        if refused.code == "ResourceNotFoundException":
            raise MigrationError(
                f"table {params.get('TableName')!r} does not exist (or the endpoint is "
                "wrong): create it before migrating"
            ) from refused.error
        raise MigrationError(
            f"DynamoDB refused {operation} on {params.get('TableName')!r}: {refused.code}: "
            f"{refused.message}"
        ) from refused.error
    except MigrationError:
        raise
    except DynauniqueError as exc:
        raise MigrationError(f"{operation} on {params.get('TableName')!r}: {exc}") from exc


def batch_get(client: Any, table: str, keys: Sequence[Mapping[str, Any]], *,
              consistent: bool = True) -> list[dict[str, Any]]:
    """Strongly consistent BatchGetItem of any number of keys (chunks of 100, retries the
    unprocessed ones); the items found, in no particular order."""
    found: list[dict[str, Any]] = []
    unique: dict[str, Mapping[str, Any]] = {repr(sorted(k.items())): k for k in keys}
    pending = list(unique.values())
    attempts = 0
    while pending:
        chunk, pending = pending[:100], pending[100:]
        response = call(client, "batch_get_item", RequestItems={
            table: {"Keys": [dict(k) for k in chunk], "ConsistentRead": consistent}
        })
        found.extend(response.get("Responses", {}).get(table, []))
        unprocessed = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        if unprocessed:
            attempts += 1
            if attempts > BULK_POLICY.max_conflict_retries:
                raise MigrationError("DynamoDB kept leaving BatchGetItem keys unprocessed")
            time.sleep(BULK_POLICY.delay(attempts))
            pending = list(unprocessed) + pending
    return found


def batch_delete(client: Any, table: str, keys: Sequence[Mapping[str, Any]]) -> None:
    """Unconditional BatchWriteItem deletes (chunks of 25), for ledger items only."""
    pending = [dict(k) for k in keys]
    attempts = 0
    while pending:
        chunk, pending = pending[:25], pending[25:]
        response = call(client, "batch_write_item", RequestItems={
            table: [{"DeleteRequest": {"Key": k}} for k in chunk]
        })
        unprocessed = response.get("UnprocessedItems", {}).get(table, [])
        if unprocessed:
            attempts += 1
            if attempts > BULK_POLICY.max_conflict_retries:
                raise MigrationError("DynamoDB kept leaving BatchWriteItem requests unprocessed")
            time.sleep(BULK_POLICY.delay(attempts))
            pending = [r["DeleteRequest"]["Key"] for r in unprocessed] + pending


@attrs.frozen
class TableKeys:
    """A table's key schema as DescribeTable reports it, for building ledger and lock keys."""

    table: str
    hash_attr: str
    range_attr: str | None
    #: Key attributes of the table's indexes: no ledger or lock attribute may be one of them.
    index_attrs: frozenset[str] = frozenset()
    #: DescribeTable's approximate item count (refreshed every ~6 hours by DynamoDB).
    item_count: int = 0

    @property
    def key_attributes(self) -> tuple[str, str | None]:
        """Hash and range key attribute names."""
        return self.hash_attr, self.range_attr

    def key(self, hash_value: str) -> dict[str, Any]:
        """The typed primary key of a dynaunique item with this hash key value."""
        key: dict[str, Any] = {self.hash_attr: {"S": hash_value}}
        if self.range_attr is not None:
            key[self.range_attr] = {"S": LOCK_SORT_KEY}
        return key


def describe_table(client: Any, table: str) -> TableKeys:
    """Read ``table``'s key schema; it must have string keys (as lock items need)."""
    description = call(client, "describe_table", TableName=table)["Table"]
    types = {a["AttributeName"]: a["AttributeType"]
             for a in description.get("AttributeDefinitions", [])}
    hash_attr = range_attr = None
    for element in description["KeySchema"]:
        if element["KeyType"] == "HASH":
            hash_attr = element["AttributeName"]
        else:
            range_attr = element["AttributeName"]
    assert hash_attr is not None
    for attr in (hash_attr, range_attr):
        if attr is not None and types.get(attr) != "S":
            raise MigrationError(f"table {table!r} has a non-string key attribute {attr!r}; "
                                 "dynaunique's lock and ledger items need string keys")
    index_attrs = set()
    for index in (description.get("GlobalSecondaryIndexes", [])
                  + description.get("LocalSecondaryIndexes", [])):
        for element in index.get("KeySchema", []):
            index_attrs.add(element["AttributeName"])
    if LEDGER_ATTR in index_attrs:
        raise MigrationError(f"an index of table {table!r} is keyed on {LEDGER_ATTR!r}, the "
                             "attribute dynaunique's ledger items use; rename that attribute")
    return TableKeys(table, hash_attr, range_attr, frozenset(index_attrs),
                     int(description.get("ItemCount", 0) or 0))


# --- progress --------------------------------------------------------------------------------


@attrs.define
class Counters:
    """What a phase did so far (summed over segments for display)."""

    scanned: int = 0
    records: int = 0
    skipped: int = 0
    written: int = 0
    present: int = 0
    deleted: int = 0
    duplicates: int = 0
    write_units: float = 0.0

    def add(self, other: Counters) -> None:
        """Add ``other`` into this one."""
        for field in attrs.fields(Counters):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def to_typed(self) -> dict[str, Any]:
        """As DynamoDB attribute values."""
        return {f.name: {"N": str(getattr(self, f.name))} for f in attrs.fields(Counters)}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Counters:
        """From DynamoDB attribute values."""
        values: dict[str, Any] = {}
        for field in attrs.fields(Counters):
            if field.name in data:
                raw = data[field.name]["N"]
                values[field.name] = float(raw) if field.name == "write_units" else int(raw)
        return cls(**values)


@attrs.frozen
class Conflict:
    """A record whose lock is held by another record: a duplicate value (or an unexplained
    holder). ``holder`` is the lock's owner (typed key), ``record`` the one that could not get
    it; ``value`` is None for hashed constraints."""

    model: str
    constraint: str
    lock: str
    record: dict[str, Any]
    holder: dict[str, Any] | None
    holder_model: str | None = None
    value: Any = None
    hashed: bool = False

    def to_typed(self) -> dict[str, Any]:
        """As a DynamoDB map."""
        data: dict[str, Any] = {
            "model": {"S": self.model},
            "constraint": {"S": self.constraint},
            "lock": {"S": self.lock},
            "record": {"M": self.record},
            "holder": {"M": self.holder} if self.holder is not None else {"NULL": True},
            "hashed": {"BOOL": self.hashed},
        }
        if self.holder_model is not None:
            data["holder_model"] = {"S": self.holder_model}
        if self.value is not None and not self.hashed:
            data["value"] = typed(self.value)
        return {"M": data}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Conflict:
        """From a DynamoDB map."""
        fields = data["M"]
        holder = fields.get("holder", {})
        return cls(
            model=fields["model"]["S"],
            constraint=fields["constraint"]["S"],
            lock=fields["lock"]["S"],
            record=fields["record"]["M"],
            holder=holder.get("M") if "M" in holder else None,
            holder_model=fields["holder_model"]["S"] if "holder_model" in fields else None,
            value=untyped(fields["value"]) if "value" in fields else None,
            hashed=bool(fields.get("hashed", {}).get("BOOL", False)),
        )


@attrs.frozen(eq=False)
class Pending:
    """A lock write about to be sent from a read that may be stale (write-ahead intent).

    If the runner dies before it re-read the record, the next run reconciles ``lock`` with the
    record that ``owner`` names (or, without ``owner``, the record the lock item names).
    """

    lock: str
    owner: dict[str, Any] | None = None

    @property
    def ident(self) -> tuple[str, str]:
        """What makes two entries the same: the lock key and the owner's key."""
        owner = repr(sorted((k, sorted(v.items())) for k, v in (self.owner or {}).items()))
        return self.lock, owner

    def to_typed(self) -> dict[str, Any]:
        """As a DynamoDB map."""
        data: dict[str, Any] = {"lock": {"S": self.lock}}
        if self.owner is not None:
            data["owner"] = {"M": self.owner}
        return {"M": data}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Pending:
        """From a DynamoDB map."""
        fields = data["M"]
        return cls(fields["lock"]["S"], fields["owner"]["M"] if "owner" in fields else None)


@attrs.define
class Progress:
    """One scan segment of one job: where it stopped, whether it is done, what it found."""

    job: str
    total: int
    segment: int
    last_key: dict[str, Any] | None = None
    done: bool = False
    counters: Counters = attrs.field(factory=Counters)
    conflicts: list[Conflict] = attrs.field(factory=list)
    #: Lock writes of the current page not yet verified (see :class:`Pending`).
    pending: list[Pending] = attrs.field(factory=list)
    #: The segment stopped early because it holds as many conflicts as it may store.
    blocked: bool = False
    #: Whether the item exists in the ledger (False: the segment never started).
    stored: bool = False


def job_id(migration: str, operation: int, backwards: bool, phase: int) -> str:
    """``0002_add_x#0#F#1``: phase 1 of operation 0 of migration 0002_add_x, forwards."""
    return f"{migration}#{operation}#{'B' if backwards else 'F'}#{phase}"


# --- the recorder ----------------------------------------------------------------------------


class MigrationRecorder:
    """Read and write one app's ledger items in one table (see the module docstring)."""

    def __init__(self, client: Any, keys: TableKeys, app: str) -> None:
        if "#" in app or not app:
            raise MigrationError(f"app label {app!r} may not be empty or contain '#'")
        self.client = client
        self.keys = keys
        self.app = app

    @property
    def table(self) -> str:
        """The ledger's table."""
        return self.keys.table

    def _key(self, prefix: str, *parts: object) -> dict[str, Any]:
        return self.keys.key(prefix + "#".join([self.app, *(str(p) for p in parts)]))

    def _get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item = call(self.client, "get_item", TableName=self.table, Key=dict(key),
                    ConsistentRead=True).get("Item")
        return dict(item) if item is not None else None

    def _put(self, key: Mapping[str, Any], ledger: Mapping[str, Any], **params: Any) -> None:
        call(self.client, "put_item", TableName=self.table,
             Item={**key, LEDGER_ATTR: {"M": dict(ledger)}}, **params)

    # applied migrations

    def applied(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Which of ``names`` are applied: name → its ledger map (plain values)."""
        keys = [self._key(MIGRATION_PREFIX, name) for name in names]
        out: dict[str, dict[str, Any]] = {}
        for item in batch_get(self.client, self.table, keys):
            data = untyped(item[LEDGER_ATTR])
            out[data["migration"]] = data
        return out

    def is_applied(self, name: str) -> bool:
        """Whether migration ``name`` is recorded as applied (strongly consistent)."""
        return self._get(self._key(MIGRATION_PREFIX, name)) is not None

    def record_applied(self, name: str, *, fake: bool = False) -> None:
        """Record ``name`` as applied (idempotent)."""
        self._put(self._key(MIGRATION_PREFIX, name), {
            "kind": {"S": "migration"}, "app": {"S": self.app}, "migration": {"S": name},
            "applied": {"S": now_iso()}, "fake": {"BOOL": fake},
        })

    def record_unapplied(self, name: str) -> None:
        """Remove ``name``'s applied record (idempotent)."""
        call(self.client, "delete_item", TableName=self.table,
             Key=self._key(MIGRATION_PREFIX, name))

    # jobs and progress

    def job_total(self, job: str) -> int | None:
        """The segment count a job was started with, or None if it never started."""
        item = self._get(self._key(JOB_PREFIX, job))
        return int(item[LEDGER_ATTR]["M"]["total"]["N"]) if item is not None else None

    def jobs_started(self, jobs: Iterable[str]) -> dict[str, int]:
        """job → total for each of ``jobs`` that has started."""
        keys = [self._key(JOB_PREFIX, job) for job in jobs]
        out = {}
        for item in batch_get(self.client, self.table, keys):
            data = item[LEDGER_ATTR]["M"]
            out[data["job"]["S"]] = int(data["total"]["N"])
        return out

    def start_job(self, job: str, total: int, label: str) -> int:
        """Create the job's header with ``total`` segments unless it exists; return its total.

        The first runner fixes the split: progress items are per segment of that split.
        """
        key = self._key(JOB_PREFIX, job)
        try:
            self._put(key, {"kind": {"S": "job"}, "job": {"S": job}, "total": {"N": str(total)},
                            "label": {"S": label}, "created": {"S": now_iso()}},
                      ConditionExpression="attribute_not_exists(#h)",
                      ExpressionAttributeNames={"#h": self.keys.hash_attr})
            return total
        except ConditionFailed:
            existing = self.job_total(job)
            assert existing is not None
            return existing

    def progress(self, job: str, total: int) -> list[Progress]:
        """Every segment's progress of a job (unstarted segments as fresh values)."""
        keys = [self._key(PROGRESS_PREFIX, job, total, i) for i in range(total)]
        found = {}
        for item in batch_get(self.client, self.table, keys):
            data = item[LEDGER_ATTR]["M"]
            found[int(data["segment"]["N"])] = data
        out = []
        for segment in range(total):
            data = found.get(segment)
            if data is None:
                out.append(Progress(job, total, segment))
                continue
            out.append(Progress(
                job=job, total=total, segment=segment,
                last_key=data["last_key"]["M"] if "last_key" in data else None,
                done=bool(data["done"]["BOOL"]),
                counters=Counters.from_typed(data["counters"]["M"]),
                conflicts=[Conflict.from_typed(c) for c in data["conflicts"]["L"]],
                pending=[Pending.from_typed(p) for p in data.get("pending", {}).get("L", [])],
                blocked=bool(data.get("blocked", {}).get("BOOL", False)),
                stored=True,
            ))
        return out

    def save_progress(self, progress: Progress, *, worker: str = "") -> None:
        """Overwrite one segment's progress item (the checkpoint)."""
        ledger: dict[str, Any] = {
            "kind": {"S": "progress"},
            "job": {"S": progress.job},
            "segment": {"N": str(progress.segment)},
            "total": {"N": str(progress.total)},
            "done": {"BOOL": progress.done},
            "counters": {"M": progress.counters.to_typed()},
            "conflicts": {"L": [c.to_typed() for c in progress.conflicts]},
            "pending": {"L": [p.to_typed() for p in progress.pending]},
            "blocked": {"BOOL": progress.blocked},
            "updated": {"S": now_iso()},
            "worker": {"S": worker},
        }
        if progress.last_key is not None:
            ledger["last_key"] = {"M": progress.last_key}
        self._put(self._key(PROGRESS_PREFIX, progress.job, progress.total, progress.segment),
                  ledger)
        progress.stored = True

    def clear_jobs(self, jobs: Iterable[str]) -> None:
        """Delete the headers and progress items of ``jobs`` (after a migration completed)."""
        jobs = list(jobs)
        totals = self.jobs_started(jobs)
        keys = []
        for job in jobs:
            keys.append(self._key(JOB_PREFIX, job))
            total = totals.get(job)
            if total is not None:
                keys.extend(self._key(PROGRESS_PREFIX, job, total, i) for i in range(total))
        batch_delete(self.client, self.table, keys)

    # leases

    def acquire(self, *, seconds: float, worker: tuple[int, int] | None = None) -> Lease:
        """Take the app's lease (see :class:`Lease`) and start renewing it.

        :raises MigrationError: another runner holds it.
        """
        lease = Lease(self, seconds=seconds, worker=worker)
        lease.acquire()
        return lease


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """One runner at a time per app: a lease item with an expiry, renewed while running.

    An exclusive runner (``migrate``) takes ``UNIQ#~LEASE#<app>`` when it is absent, expired or
    already its own. Workers of a split backfill (``--segment I --total-segments N``) share it in
    ``workers`` mode (all with the same N) and each also takes its segment's own lease. A runner
    that fails to renew before the expiry stops with an error at its next checkpoint. Every
    write a migration sends is guarded and verified, so even two runners overlapping after a
    lost lease cannot corrupt locks; the lease keeps the work from being done twice and makes
    the second runner's mistake visible.
    """

    def __init__(self, recorder: MigrationRecorder, *, seconds: float,
                 worker: tuple[int, int] | None = None) -> None:
        self.recorder = recorder
        self.seconds = seconds
        self.worker = worker
        self.holder = _holder_id()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = recorder._key(LEASE_PREFIX)
        self._segment = (recorder._key(LEASE_PREFIX, worker[1], worker[0])
                         if worker is not None else None)

    # --- expressions

    def _names(self, **extra: str) -> dict[str, str]:
        return {"#h": self.recorder.keys.hash_attr, "#l": LEDGER_ATTR, "#e": "expires",
                "#o": "holder", **extra}

    def _expiry(self) -> float:
        return time.time() + self.seconds

    def _describe(self, item: Mapping[str, Any] | None) -> str:
        if item is None or LEDGER_ATTR not in item:
            return "another runner"
        data = untyped(item[LEDGER_ATTR])
        left = max(0.0, float(data.get("expires", 0)) - time.time())
        if data.get("mode") == "workers":
            return (f"{len(data.get('workers', {}))} backfill worker(s) split in "
                    f"{data.get('total')} segments (lease expires in {left:.0f} s)")
        return f"{data.get('holder', 'another runner')} (lease expires in {left:.0f} s)"

    def _refuse(self, item: Mapping[str, Any] | None) -> MigrationError:
        return MigrationError(
            f"another `dynaunique migrate` of {self.recorder.app!r} is running: "
            f"{self._describe(item)}. Wait for it to finish; if it crashed, rerun after its "
            "lease expires (the rerun resumes from the ledger)."
        )

    def _put_exclusive(self, key: Mapping[str, Any]) -> None:
        now = time.time()
        try:
            call(self.recorder.client, "put_item", TableName=self.recorder.table,
                 Item={**key, LEDGER_ATTR: {"M": {
                     "kind": {"S": "lease"}, "mode": {"S": "exclusive"},
                     "holder": {"S": self.holder}, "expires": {"N": repr(self._expiry())},
                     "acquired": {"S": now_iso()}}}},
                 ConditionExpression="attribute_not_exists(#h) OR #l.#e < :now OR #l.#o = :me",
                 ExpressionAttributeNames=self._names(),
                 ExpressionAttributeValues={":now": {"N": repr(now)},
                                            ":me": {"S": self.holder}},
                 ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ConditionFailed as exc:
            raise self._refuse(exc.item) from None

    def _join_workers(self) -> None:
        assert self.worker is not None
        total = self.worker[1]
        client, table = self.recorder.client, self.recorder.table
        names = self._names(**{"#m": "mode", "#t": "total", "#w": "workers",
                               "#me": self.holder})
        try:
            call(client, "put_item", TableName=table, Item={**self._main, LEDGER_ATTR: {"M": {
                     "kind": {"S": "lease"}, "mode": {"S": "workers"}, "total": {"N": str(total)},
                     "holder": {"S": "workers"}, "expires": {"N": repr(self._expiry())},
                     "workers": {"M": {self.holder: {"N": repr(self._expiry())}}},
                     "acquired": {"S": now_iso()}}}},
                 ConditionExpression="attribute_not_exists(#h) OR #l.#e < :now",
                 ExpressionAttributeNames={k: names[k] for k in ("#h", "#l", "#e")},
                 ExpressionAttributeValues={":now": {"N": repr(time.time())}})
            return
        except ConditionFailed:
            pass
        try:
            call(client, "update_item", TableName=table, Key=self._main,
                 UpdateExpression="SET #l.#w.#me = :exp, #l.#e = :exp",
                 ConditionExpression="#l.#m = :workers AND #l.#t = :total",
                 ExpressionAttributeNames={k: names[k] for k in ("#l", "#w", "#me", "#e", "#m",
                                                                 "#t")},
                 ExpressionAttributeValues={":exp": {"N": repr(self._expiry())},
                                            ":workers": {"S": "workers"},
                                            ":total": {"N": str(total)}},
                 ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ConditionFailed as exc:
            raise self._refuse(exc.item) from None

    # --- lifecycle

    def acquire(self) -> None:
        """Take the lease (and the segment's, for a worker) and start the renewal thread."""
        if self.worker is None:
            self._put_exclusive(self._main)
        else:
            self._join_workers()
            assert self._segment is not None
            try:
                self._put_exclusive(self._segment)
            except MigrationError:
                self._leave_workers()
                raise MigrationError(
                    f"segment {self.worker[0]} of {self.worker[1]} of {self.recorder.app!r} is "
                    "already being run by another worker"
                ) from None
        self._thread = threading.Thread(target=self._renew_loop, name="dynaunique-lease",
                                        daemon=True)
        self._thread.start()

    def renew(self) -> None:
        """Push the expiry forward; sets ``lost`` if the lease is no longer ours."""
        try:
            if self.worker is None:
                self._renew_exclusive(self._main)
            else:
                assert self._segment is not None
                self._join_workers()
                self._renew_exclusive(self._segment)
        except (ConditionFailed, MigrationError):
            self.lost.set()

    def _renew_exclusive(self, key: Mapping[str, Any]) -> None:
        call(self.recorder.client, "update_item", TableName=self.recorder.table, Key=dict(key),
             UpdateExpression="SET #l.#e = :exp",
             ConditionExpression="#l.#o = :me",
             ExpressionAttributeNames={"#l": LEDGER_ATTR, "#e": "expires", "#o": "holder"},
             ExpressionAttributeValues={":exp": {"N": repr(self._expiry())},
                                        ":me": {"S": self.holder}})

    def _renew_loop(self) -> None:
        interval = max(self.seconds / 3, 0.05)
        while not self._stop.wait(interval):
            self.renew()

    def check(self) -> None:
        """Raise if the lease was lost (another runner may have taken over)."""
        if self.lost.is_set():
            raise MigrationError(
                f"lost the migrations lease of {self.recorder.app!r} (it could not be renewed in "
                "time); stopped at the last checkpoint: rerun to resume"
            )

    def _leave_workers(self) -> None:
        client, table = self.recorder.client, self.recorder.table
        item = call(client, "get_item", TableName=table, Key=self._main,
                    ConsistentRead=True).get("Item")
        if item is None:
            return
        data = untyped(item[LEDGER_ATTR])
        if data.get("mode") != "workers":
            return
        now = time.time()
        leaving = [w for w, expiry in data.get("workers", {}).items()
                   if w == self.holder or float(expiry) < now]
        names = {"#l": LEDGER_ATTR, "#w": "workers", "#m": "mode"}
        if leaving:
            removes = {f"#x{i}": worker for i, worker in enumerate(leaving)}
            try:
                call(client, "update_item", TableName=table, Key=self._main,
                     UpdateExpression="REMOVE " + ", ".join(f"#l.#w.{p}" for p in removes),
                     ConditionExpression="#l.#m = :workers",
                     ExpressionAttributeNames={**names, **removes},
                     ExpressionAttributeValues={":workers": {"S": "workers"}})
            except ConditionFailed:
                return
        with contextlib.suppress(ConditionFailed):  # other workers are still on it
            call(client, "delete_item", TableName=table, Key=self._main,
                 ConditionExpression="#l.#m = :workers AND size(#l.#w) = :zero",
                 ExpressionAttributeNames=names,
                 ExpressionAttributeValues={":workers": {"S": "workers"}, ":zero": {"N": "0"}})

    def release(self) -> None:
        """Stop renewing and give the lease back (best effort: it expires anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        client, table = self.recorder.client, self.recorder.table
        own = self._segment if self._segment is not None else self._main
        with contextlib.suppress(ConditionFailed, MigrationError):
            call(client, "delete_item", TableName=table, Key=dict(own),
                 ConditionExpression="#l.#o = :me",
                 ExpressionAttributeNames={"#l": LEDGER_ATTR, "#o": "holder"},
                 ExpressionAttributeValues={":me": {"S": self.holder}})
        if self.worker is not None:
            with contextlib.suppress(MigrationError):
                self._leave_workers()
