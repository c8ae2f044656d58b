"""The migrations ledger, kept in the table itself: which migrations are applied, and where each
job stands (the lease it hands out lives in ``_lease``).

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
                                              ``done``, counters, unresolved ``conflicts``,
                                              the ``holder`` that wrote it (the fence)
``UNIQ#~LEASE#<app>``                         ``holder``, ``expires``, ``mode`` (exclusive or
                                              workers), ``workers`` (worker id → expiry)
``UNIQ#~LEASE#<app>#<job>#<total>#<i>``       the worker running segment *i* of the job:
                                              ``holder``, ``expires``
``UNIQ#~STREAM#<consumer>#<label>#<shard>``   a stream consumer's position in one shard
                                              (``dynaunique.streams``): ``sequence``, ``done``
============================================  ==================================================

A *job* is one phase of one operation of one migration in one direction:
``<migration>#<operation index>#<F|B>#<phase index>``.

The layout and the stored state are in :mod:`._ledger`, the lease in :mod:`._lease`, and the
calls to DynamoDB (where botocore errors become :class:`~dynaunique.errors.MigrationError`) in
:mod:`._dynamo`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from dynaunique._lock.locks import untyped
from dynaunique._write.writes import now
from dynaunique.errors import MigrationError
from dynaunique.migrations._dynamo import (
    BULK_POLICY,
    LEDGER_ATTR,
    ConditionFailed,
    TableKeys,
    batch_delete,
    batch_get,
    call,
    describe_table,
)
from dynaunique.migrations._kinds import LedgerKind
from dynaunique.migrations._lease import Lease, SegmentLost
from dynaunique.migrations._ledger import (
    JOB_PREFIX,
    LEASE_PREFIX,
    MIGRATION_PREFIX,
    PROGRESS_PREFIX,
    Conflict,
    Counters,
    Pending,
    Progress,
    job_id,
    ledger_key,
)

__all__ = [  # the names importable from here before the ledger was split by job
    "BULK_POLICY", "JOB_PREFIX", "LEASE_PREFIX", "LEDGER_ATTR", "MIGRATION_PREFIX",
    "PROGRESS_PREFIX", "ConditionFailed", "Conflict", "Counters", "Lease", "MigrationRecorder",
    "Pending", "Progress", "TableKeys", "batch_delete", "batch_get", "call", "describe_table",
    "job_id",
]


class MigrationRecorder:
    """Read and write one app's ledger items in one table (see the module docstring)."""

    def __init__(self, connection: Any, keys: TableKeys, app: str) -> None:
        if "#" in app or not app:
            raise MigrationError(f"app label {app!r} may not be empty or contain '#'")
        #: The PynamoDB connection to the ledger's table (its ``.client``: the botocore client).
        self.connection = connection
        self.keys = keys
        self.app = app
        #: job → total of the jobs this recorder started or joined (:meth:`start_job`).
        self._started: dict[str, int] = {}

    @property
    def client(self) -> Any:
        """Deprecated: :attr:`connection` (a PynamoDB connection, not a botocore client);
        removed in the release after next."""
        warnings.warn("MigrationRecorder.client is deprecated: use MigrationRecorder.connection "
                      "(a PynamoDB Connection; its .client is the botocore client)",
                      DeprecationWarning, stacklevel=2)
        return self.connection

    @property
    def table(self) -> str:
        """The ledger's table."""
        return self.keys.table

    def _key(self, prefix: str, *parts: object) -> dict[str, Any]:
        return ledger_key(self.keys, self.app, prefix, *parts)

    def _get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item = call(self.connection, "get_item", TableName=self.table, Key=dict(key),
                    ConsistentRead=True).get("Item")
        return dict(item) if item is not None else None

    def _put(self, key: Mapping[str, Any], ledger: Mapping[str, Any], **params: Any) -> None:
        call(self.connection, "put_item", TableName=self.table,
             Item={**key, LEDGER_ATTR: {"M": dict(ledger)}}, **params)

    # applied migrations

    def applied(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Which of ``names`` are applied: name → its ledger map (plain values)."""
        keys = [self._key(MIGRATION_PREFIX, name) for name in names]
        out: dict[str, dict[str, Any]] = {}
        for item in batch_get(self.connection, self.table, keys):
            data = untyped(item[LEDGER_ATTR])
            out[data["migration"]] = data
        return out

    def is_applied(self, name: str) -> bool:
        """Whether migration ``name`` is recorded as applied (strongly consistent)."""
        return self._get(self._key(MIGRATION_PREFIX, name)) is not None

    def record_applied(self, name: str, *, fake: bool = False) -> None:
        """Record ``name`` as applied (idempotent)."""
        self._put(self._key(MIGRATION_PREFIX, name), {
            "kind": {"S": LedgerKind.MIGRATION.value}, "app": {"S": self.app},
            "migration": {"S": name},
            "applied": {"S": now()}, "fake": {"BOOL": fake},
        })

    def record_unapplied(self, name: str) -> None:
        """Remove ``name``'s applied record (idempotent)."""
        call(self.connection, "delete_item", TableName=self.table,
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
        for item in batch_get(self.connection, self.table, keys):
            data = item[LEDGER_ATTR]["M"]
            out[data["job"]["S"]] = int(data["total"]["N"])
        return out

    def start_job(self, job: str, total: int, label: str) -> int:
        """Create the job's header with ``total`` segments unless it exists; return its total.

        The first runner fixes the split: progress items are per segment of that split.
        """
        key = self._key(JOB_PREFIX, job)
        try:
            self._put(key, {"kind": {"S": LedgerKind.JOB.value}, "job": {"S": job},
                            "total": {"N": str(total)}, "label": {"S": label},
                            "created": {"S": now()}},
                      ConditionExpression="attribute_not_exists(#h)",
                      ExpressionAttributeNames={"#h": self.keys.hash_attr})
        except ConditionFailed:
            existing = self.job_total(job)
            assert existing is not None
            total = existing
        self._started[job] = total
        return total

    def progress(self, job: str, total: int,
                 segments: Iterable[int] | None = None) -> list[Progress]:
        """Every segment's progress of a job (or of ``segments`` of it), strongly consistent;
        unstarted segments as fresh values."""
        wanted = list(range(total)) if segments is None else list(segments)
        keys = [self._key(PROGRESS_PREFIX, job, total, i) for i in wanted]
        found = {}
        for item in batch_get(self.connection, self.table, keys):
            data = item[LEDGER_ATTR]["M"]
            found[int(data["segment"]["N"])] = data
        out = []
        for segment in wanted:
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
                holder=data["holder"]["S"] if "holder" in data else None,
            ))
        return out

    def save_progress(self, progress: Progress, *, worker: str = "",
                      holder: str | None = None) -> None:
        """Overwrite one segment's progress item (the checkpoint).

        With ``holder`` (the runner's lease holder id) the write is fenced: it lands only if the
        item is absent, or was last written by ``holder`` or by the holder it had when it was
        read (``progress.holder``); absent only if it was absent when read (``progress.stored``
        False). A runner whose segment another runner took over (after its lease expired)
        therefore cannot overwrite the newer checkpoint — nor drop the intents it names — nor
        write one again once that runner finished the migration and cleared the ledger.

        :raises SegmentLost: another runner wrote the item since it was read.
        """
        ledger: dict[str, Any] = {
            "kind": {"S": LedgerKind.PROGRESS.value},
            "job": {"S": progress.job},
            "segment": {"N": str(progress.segment)},
            "total": {"N": str(progress.total)},
            "done": {"BOOL": progress.done},
            "counters": {"M": progress.counters.to_typed()},
            "conflicts": {"L": [c.to_typed() for c in progress.conflicts]},
            "pending": {"L": [p.to_typed() for p in progress.pending]},
            "blocked": {"BOOL": progress.blocked},
            "updated": {"S": now()},
            "worker": {"S": worker},
        }
        if progress.last_key is not None:
            ledger["last_key"] = {"M": progress.last_key}
        key = self._key(PROGRESS_PREFIX, progress.job, progress.total, progress.segment)
        if holder is None:
            self._put(key, ledger)
        else:
            ledger["holder"] = {"S": holder}
            allowed = {":me": {"S": holder}}
            condition = "attribute_not_exists(#l.#o) OR #l.#o = :me"
            if progress.holder is not None and progress.holder != holder:
                allowed[":read"] = {"S": progress.holder}
                condition += " OR #l.#o = :read"
            # An item read (or written) before must still be there: gone, another runner
            # finished the migration and cleared the ledger (a stalled runner's late
            # checkpoint would be left behind). Only a segment never stored starts absent.
            condition = (f"attribute_exists(#h) AND ({condition})" if progress.stored
                         else f"attribute_not_exists(#h) OR {condition}")
            try:
                self._put(key, ledger, ConditionExpression=condition,
                          ExpressionAttributeNames={"#h": self.keys.hash_attr,
                                                    "#l": LEDGER_ATTR, "#o": "holder"},
                          ExpressionAttributeValues=allowed)
            except ConditionFailed:
                raise SegmentLost(f"segment {progress.segment} of {progress.job} was taken "
                                  "over by another runner; its checkpoint is theirs") from None
            progress.holder = holder
        progress.stored = True

    def clear_jobs(self, jobs: Iterable[str]) -> None:
        """Delete the headers, progress items and segment leases of ``jobs`` (after a
        migration completed; a lease a crashed worker left behind goes too) — of the split in
        each header, and of the split this recorder started or joined a job with: a worker that
        finds the migration completed by another (who deleted the header) clears its own late
        checkpoint too."""
        jobs = list(jobs)
        splits = set(self.jobs_started(jobs).items())
        splits.update((job, self._started.pop(job)) for job in jobs if job in self._started)
        keys = [self._key(JOB_PREFIX, job) for job in jobs]
        for job, total in sorted(splits):
            keys.extend(self._key(PROGRESS_PREFIX, job, total, i) for i in range(total))
            keys.extend(self._key(LEASE_PREFIX, job, total, i) for i in range(total))
        batch_delete(self.connection, self.table, keys)

    # leases

    def acquire(self, *, seconds: float, worker: tuple[int, int] | None = None) -> Lease:
        """Take the app's lease (see :class:`Lease`) and start renewing it.

        :raises MigrationError: another runner holds it.
        """
        lease = Lease(self.connection, self.keys, self.app, seconds=seconds, worker=worker)
        lease.acquire()
        return lease

