"""The leases: one runner at a time per app (or the workers of one split backfill), and one
worker at a time per segment of a phase — each renewed while it is held, expiring when its
holder dies.

The lease items (``UNIQ#~LEASE#<app>`` and, per segment of a job,
``UNIQ#~LEASE#<app>#<job>#<total>#<i>``) are ledger items: see
:mod:`dynaunique.migrations.recorder`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from dynaunique._lock.locks import untyped
from dynaunique._write.writes import now
from dynaunique.errors import MigrationError
from dynaunique.migrations._budget import clear_budgets
from dynaunique.migrations._dynamo import LEDGER_ATTR, ConditionFailed, TableKeys, call
from dynaunique.migrations._kinds import LeaseMode, LedgerKind
from dynaunique.migrations._ledger import LEASE_PREFIX, ledger_key


class SegmentLost(MigrationError):
    """The lease of the segment being worked on could not be renewed in time."""


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """One runner at a time per app: a lease item with an expiry, renewed while running.

    An exclusive runner (``migrate``) takes ``UNIQ#~LEASE#<app>`` when it is absent, expired or
    already its own. Workers of a split backfill (``--segment I --total-segments N``) share it in
    ``workers`` mode (all with the same N); a worker then takes one segment of a phase at a time
    with :meth:`take` — a conditional put on the segment's lease item, which must be absent,
    expired or already the worker's, like a Kinesis Client Library shard lease — and gives it
    back with :meth:`drop`. One thread renews every lease held, every third of ``seconds``. A
    runner that fails to renew before the expiry stops at its next checkpoint (a segment whose
    lease was lost is left to whoever took it). Every write a migration sends is guarded and
    verified, and checkpoints are fenced (:meth:`~dynaunique.migrations.recorder
    .MigrationRecorder.save_progress`), so even two runners overlapping after a lost lease
    cannot corrupt locks; the lease keeps the work from being done twice.
    """

    def __init__(self, connection: Any, keys: TableKeys, app: str, *, seconds: float,
                 worker: tuple[int, int] | None = None) -> None:
        self.connection = connection
        self.keys = keys
        self.app = app
        self.seconds = seconds
        self.worker = worker
        self.holder = _holder_id()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = ledger_key(keys, app, LEASE_PREFIX)
        #: The segment leases held now: ident → key; and those that could not be renewed.
        self._held: dict[str, dict[str, Any]] = {}
        self._lost: set[str] = set()
        self._guard = threading.Lock()

    # --- expressions

    def _names(self, **extra: str) -> dict[str, str]:
        return {"#h": self.keys.hash_attr, "#l": LEDGER_ATTR, "#e": "expires",
                "#o": "holder", **extra}

    def _expiry(self) -> float:
        return time.time() + self.seconds

    def _describe(self, item: Mapping[str, Any] | None) -> str:
        if item is None or LEDGER_ATTR not in item:
            return "another runner"
        data = untyped(item[LEDGER_ATTR])
        left = max(0.0, float(data.get("expires", 0)) - time.time())
        if data.get("mode") == LeaseMode.WORKERS:
            return (f"{len(data.get('workers', {}))} backfill worker(s) split in "
                    f"{data.get('total')} segments (lease expires in {left:.0f} s)")
        return f"{data.get('holder', 'another runner')} (lease expires in {left:.0f} s)"

    def _refuse(self, item: Mapping[str, Any] | None) -> MigrationError:
        return MigrationError(
            f"another `dynaunique migrate` of {self.app!r} is running: "
            f"{self._describe(item)}. Wait for it to finish; if it crashed, rerun after its "
            "lease expires (the rerun resumes from the ledger)."
        )

    def _put_exclusive(self, key: Mapping[str, Any]) -> None:
        try:
            self._put_held(key)
        except ConditionFailed as exc:
            raise self._refuse(exc.item) from None

    def _put_held(self, key: Mapping[str, Any]) -> None:
        """Take lease item ``key`` if it is absent, expired or already ours.

        :raises ConditionFailed: another holder's lease is still running.
        """
        call(self.connection, "put_item", TableName=self.keys.table,
             Item={**key, LEDGER_ATTR: {"M": {
                 "kind": {"S": LedgerKind.LEASE.value},
                 "mode": {"S": LeaseMode.EXCLUSIVE.value},
                 "holder": {"S": self.holder}, "expires": {"N": repr(self._expiry())},
                 "acquired": {"S": now()}}}},
             ConditionExpression="attribute_not_exists(#h) OR #l.#e < :now OR #l.#o = :me",
             ExpressionAttributeNames=self._names(),
             ExpressionAttributeValues={":now": {"N": repr(time.time())},
                                        ":me": {"S": self.holder}},
             ReturnValuesOnConditionCheckFailure="ALL_OLD")

    def _join_workers(self) -> None:
        """Create the workers' lease, or add this worker to it. The last worker to leave
        deletes it: a join that finds it gone between the two writes tries again."""
        item: dict[str, Any] | None = None
        for _ in range(5):
            if self._create_workers():
                return
            try:
                self._add_worker()
                return
            except ConditionFailed as exc:
                item = exc.item
                if item is not None:
                    break  # an exclusive runner, or workers with another split
        raise self._refuse(item)

    def _create_workers(self) -> bool:
        assert self.worker is not None
        try:
            call(self.connection, "put_item", TableName=self.keys.table, Item={
                     **self._main, LEDGER_ATTR: {"M": {
                         "kind": {"S": LedgerKind.LEASE.value},
                         "mode": {"S": LeaseMode.WORKERS.value},
                         "total": {"N": str(self.worker[1])},
                         "holder": {"S": LeaseMode.WORKERS.value},
                         "expires": {"N": repr(self._expiry())},
                         "workers": {"M": {self.holder: {"N": repr(self._expiry())}}},
                         "acquired": {"S": now()}}}},
                 ConditionExpression="attribute_not_exists(#h) OR #l.#e < :now",
                 ExpressionAttributeNames={"#h": self.keys.hash_attr, "#l": LEDGER_ATTR,
                                           "#e": "expires"},
                 ExpressionAttributeValues={":now": {"N": repr(time.time())}})
            return True
        except ConditionFailed:
            return False

    def _add_worker(self) -> None:
        assert self.worker is not None
        call(self.connection, "update_item", TableName=self.keys.table, Key=self._main,
             UpdateExpression="SET #l.#w.#me = :exp, #l.#e = :exp",
             ConditionExpression="#l.#m = :workers AND #l.#t = :total",
             ExpressionAttributeNames={"#l": LEDGER_ATTR, "#w": "workers", "#me": self.holder,
                                       "#e": "expires", "#m": "mode", "#t": "total"},
             ExpressionAttributeValues={":exp": {"N": repr(self._expiry())},
                                        ":workers": {"S": LeaseMode.WORKERS.value},
                                        ":total": {"N": str(self.worker[1])}},
             ReturnValuesOnConditionCheckFailure="ALL_OLD")

    # --- lifecycle

    def acquire(self) -> None:
        """Take the lease (for a worker: join the workers') and start the renewal thread."""
        if self.worker is None:
            self._put_exclusive(self._main)
        else:
            self._join_workers()
        self._thread = threading.Thread(target=self._renew_loop, name="dynaunique-lease",
                                        daemon=True)
        self._thread.start()

    def renew(self) -> None:
        """Push the expiry forward; sets ``lost`` if the lease is no longer ours."""
        try:
            if self.worker is None:
                self._renew_exclusive(self._main)
            else:
                self._join_workers()
        except (ConditionFailed, MigrationError):
            self.lost.set()
        with self._guard:
            held = dict(self._held)
        for ident, key in held.items():
            try:
                self._renew_exclusive(key)
            except (ConditionFailed, MigrationError):
                with self._guard:
                    self._lost.add(ident)

    def _renew_exclusive(self, key: Mapping[str, Any]) -> None:
        call(self.connection, "update_item", TableName=self.keys.table, Key=dict(key),
             UpdateExpression="SET #l.#e = :exp",
             ConditionExpression="#l.#o = :me",
             ExpressionAttributeNames={"#l": LEDGER_ATTR, "#e": "expires", "#o": "holder"},
             ExpressionAttributeValues={":exp": {"N": repr(self._expiry())},
                                        ":me": {"S": self.holder}})

    def _renew_loop(self) -> None:
        interval = max(self.seconds / 3, 0.05)
        while not self._stop.wait(interval):
            self.renew()

    def check(self, segment: str | None = None) -> None:
        """Raise if the lease (or the lease of ``segment``, an ident :meth:`take` returned)
        was lost: another runner may have taken over."""
        if self.lost.is_set():
            raise MigrationError(
                f"lost the migrations lease of {self.app!r} (it could not be renewed in "
                "time); stopped at the last checkpoint: rerun to resume"
            )
        if segment is not None and segment in self._lost:
            raise SegmentLost(f"lost the lease of segment {segment} (it could not be renewed "
                              "in time): another worker may have taken it over")

    # --- segment leases (workers)

    def take(self, job: str, total: int, segment: int) -> str | None:
        """Take the lease of ``segment`` of ``job`` (absent, expired or already ours); its ident,
        or None when a live worker holds it."""
        ident = f"{job}#{total}#{segment}"
        key = ledger_key(self.keys, self.app, LEASE_PREFIX, job, total, segment)
        try:
            self._put_held(key)
        except ConditionFailed:
            return None  # any other refusal (access denied, retries run out) is raised
        with self._guard:
            self._held[ident] = key
            self._lost.discard(ident)
        return ident

    def drop(self, ident: str) -> None:
        """Give the lease of a segment back (best effort: it expires anyway)."""
        with self._guard:
            key = self._held.pop(ident, None)
            self._lost.discard(ident)
        if key is not None:
            self._delete_own(key)

    def _delete_own(self, key: Mapping[str, Any]) -> None:
        with contextlib.suppress(ConditionFailed, MigrationError):
            call(self.connection, "delete_item", TableName=self.keys.table, Key=dict(key),
                 ConditionExpression="#l.#o = :me",
                 ExpressionAttributeNames={"#l": LEDGER_ATTR, "#o": "holder"},
                 ExpressionAttributeValues={":me": {"S": self.holder}})

    def _leave_workers(self) -> None:
        connection, table = self.connection, self.keys.table
        item = call(connection, "get_item", TableName=table, Key=self._main,
                    ConsistentRead=True).get("Item")
        if item is None:
            return
        data = untyped(item[LEDGER_ATTR])
        if data.get("mode") != LeaseMode.WORKERS:
            return
        epoch = time.time()
        leaving = [w for w, expiry in data.get("workers", {}).items()
                   if w == self.holder or float(expiry) < epoch]
        names = {"#l": LEDGER_ATTR, "#w": "workers", "#m": "mode"}
        if leaving:
            removes = {f"#x{i}": worker for i, worker in enumerate(leaving)}
            try:
                call(connection, "update_item", TableName=table, Key=self._main,
                     UpdateExpression="REMOVE " + ", ".join(f"#l.#w.{p}" for p in removes),
                     ConditionExpression="#l.#m = :workers",
                     ExpressionAttributeNames={**names, **removes},
                     ExpressionAttributeValues={":workers": {"S": LeaseMode.WORKERS.value}})
            except ConditionFailed:
                return
        with contextlib.suppress(ConditionFailed):  # other workers are still on it
            call(connection, "delete_item", TableName=table, Key=self._main,
                 ConditionExpression="#l.#m = :workers AND size(#l.#w) = :zero",
                 ExpressionAttributeNames=names,
                 ExpressionAttributeValues={":workers": {"S": LeaseMode.WORKERS.value},
                                            ":zero": {"N": "0"}})
            clear_budgets(connection, self.keys, self.app)  # the last worker out: budgets too

    def release(self) -> None:
        """Stop renewing and give the lease back (best effort: it expires anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for ident in list(self._held):
            self.drop(ident)
        if self.worker is None:
            self._delete_own(self._main)
        else:
            with contextlib.suppress(MigrationError):
                self._leave_workers()
