"""A capacity budget shared by every worker of a migration: one token bucket item in the ledger
(``UNIQ#~BUDGET#<app>#WCU``, ``#RCU``), taken from with conditional updates.

The item holds ``tokens``, the epoch time ``at`` they were counted and a ``version``. A
worker that needs units reads it (strongly consistent), refills it for the time passed
(``rate`` per second, at most one second's worth), and takes a *chunk* — a twentieth of a
second's worth, at least 10 units (or what it needs) — with an update conditioned on the
``version`` it read (optimistic concurrency: a worker that lost the race reads again). When
the bucket holds less than it needs, it sleeps until the refill covers it: bounded, no busy
loop. The take itself is a write and pays one unit out of the chunk.

Whatever the number of workers, they take at most ``rate`` units per second on average (after a
burst of one second's worth) — about 20 takes per second of the item, far below what one item
serves. A worker that dies holds no share: what it took and did not spend (at most a chunk) is
simply not spent, and no one waits for it. The item is deleted when the last worker leaves
(:meth:`dynaunique.migrations._lease.Lease.release`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from dynaunique._lock.locks import untyped
from dynaunique.errors import MigrationError
from dynaunique.migrations._dynamo import (
    LEDGER_ATTR,
    ConditionFailed,
    TableKeys,
    batch_delete,
    call,
)
from dynaunique.migrations._kinds import LedgerKind
from dynaunique.migrations._ledger import BUDGET_PREFIX, ledger_key
from dynaunique.migrations.ratelimit import Limiter

#: The budgets a migration may share: write units (``--max-wcu``), read units (``--max-rcu``).
BUDGETS = ("WCU", "RCU")

#: How many times in a row a take may lose the race to other workers before it gives up.
MAX_RACES = 50

#: How far ahead of this worker's clock the bucket's date may be (another worker's clock
#: running ahead) and still be trusted: one second, the bucket's refill period. A date further
#: ahead counts as this far ahead and is set back, so a worker waits at most about this long for
#: a refill, never until its own clock catches up. As a lease expires by each worker's clock,
#: skew below this costs a little waiting, never the cap exceeded; beyond it a worker ahead may
#: refill up to a second's worth early each time a worker behind takes in between.
MAX_SKEW_SECONDS = 1.0


def budget_key(keys: TableKeys, app: str, name: str) -> dict[str, Any]:
    """The key of ``app``'s shared budget item ``name`` (``WCU`` or ``RCU``)."""
    return ledger_key(keys, app, BUDGET_PREFIX, name)


class SharedBudget:
    """``rate`` units per second over every worker of ``app``, held in the ledger.

    ``acquire(units)`` takes ``units`` from this worker's balance, topping it up from the
    ledger item first (sleeping while the item holds too little); ``charge(units)`` debits units
    spent beyond what was acquired. Thread-safe: the threads of one worker take in turn.
    """

    def __init__(self, connection: Any, keys: TableKeys, app: str, name: str, rate: float, *,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0:
            raise ValueError("the rate must be positive")
        self.connection = connection
        self.keys = keys
        self.name = name
        self.rate = float(rate)
        # One second's worth; at least two units, so that a take from a full bucket always
        # gets one besides its own.
        self.capacity = max(self.rate, 2.0)
        # A take costs a read and a write: take enough at a time that they stay a small part
        # (at most a tenth), and about 20 takes per second of the item at most.
        self.chunk = max(self.rate / 20, min(10.0, self.capacity - 1.0))
        self.key = budget_key(keys, app, name)
        self._clock = clock
        self._sleep = sleep
        self._balance = 0.0
        self._lock = threading.Lock()
        #: Takes from the ledger item, and the seconds slept waiting for the refill.
        self.takes = 0
        self.slept = 0.0

    def acquire(self, units: float = 1.0) -> float:
        """Take ``units``; returns the seconds slept waiting for the shared bucket."""
        slept = 0.0
        with self._lock:
            races = 0
            while self._balance < units:
                outcome = self._take(units - self._balance)
                if outcome is None:
                    races += 1
                    if races > MAX_RACES:
                        raise MigrationError(
                            f"could not take {self.name} from the shared budget: {races} "
                            "takes in a row lost the race to other workers; rerun to resume")
                    self._sleep(random.uniform(0, 0.01 * min(races, 10)))
                elif outcome > 0:
                    self._sleep(outcome)
                    slept += outcome
            self._balance -= units
            self.slept += slept
        return slept

    def charge(self, units: float) -> None:
        """Debit ``units`` spent beyond what was acquired (the next acquire pays for them)."""
        if units > 0:
            with self._lock:
                self._balance -= units

    def _take(self, needed: float) -> float | None:
        """One take: add a chunk (at least ``needed``) to the balance and return 0; or the
        seconds to wait for the refill; or None when another worker won the race."""
        item = call(self.connection, "get_item", TableName=self.keys.table, Key=self.key,
                    ConsistentRead=True).get("Item")
        now = self._clock()
        if item is None:
            tokens, at, version, stored = self.capacity, now, 0, now
        else:
            data = untyped(item[LEDGER_ATTR])
            stored, version = float(data["at"]), int(data["version"])
            # Another worker's clock ahead of this one: trusted up to MAX_SKEW_SECONDS, and
            # beyond it counted as that far ahead (else its date holds the refill back).
            at = min(stored, now + MAX_SKEW_SECONDS)
            tokens = min(self.capacity, float(data["tokens"]) + max(0.0, now - at) * self.rate)
        # The take is a write: it pays its own unit. More than a full bucket holds is taken
        # in several takes.
        cost = min(needed + 1.0, self.capacity)
        if tokens < cost:
            # Until the refill covers it; a date beyond the skew is set back first, so that
            # the next read refills from it.
            if at < stored and not self._write(item, version, tokens, at):
                return None
            return max(0.0, at - now) + (cost - tokens) / self.rate
        got = min(tokens - 1.0, max(needed, self.chunk))
        if not self._write(item, version, tokens - got - 1.0, max(now, at)):
            return None
        self.takes += 1
        self._balance += got
        return 0.0

    def _write(self, item: Any, version: int, tokens: float, at: float) -> bool:
        """Store the bucket (``version`` + 1), unless another worker wrote it since the read
        (``item``, None when absent)."""
        data_item = {"M": {
            "kind": {"S": LedgerKind.BUDGET.value}, "name": {"S": self.name},
            "rate": {"N": repr(self.rate)}, "tokens": {"N": repr(tokens)},
            "at": {"N": repr(at)}, "version": {"N": str(version + 1)}}}
        try:
            if item is None:
                call(self.connection, "put_item", TableName=self.keys.table,
                     Item={**self.key, LEDGER_ATTR: data_item},
                     ConditionExpression="attribute_not_exists(#h)",
                     ExpressionAttributeNames={"#h": self.keys.hash_attr})
            else:
                call(self.connection, "update_item", TableName=self.keys.table, Key=self.key,
                     UpdateExpression="SET #l = :data",
                     ConditionExpression="#l.#v = :v",
                     ExpressionAttributeNames={"#l": LEDGER_ATTR, "#v": "version"},
                     ExpressionAttributeValues={":data": data_item,
                                                ":v": {"N": str(version)}})
        except ConditionFailed:
            return False
        return True


def clear_budgets(connection: Any, keys: TableKeys, app: str) -> None:
    """Delete ``app``'s budget items (the last worker leaving; one joining meanwhile makes
    them again and deletes them when it leaves)."""
    batch_delete(connection, keys.table, [budget_key(keys, app, name) for name in BUDGETS])


def limiter(connection: Any, keys: TableKeys, app: str, name: str, cap: float | None, *,
            worker: tuple[int, int] | None) -> Limiter:
    """What a runner's writes (``name`` ``WCU``) or scan reads (``RCU``) pay through: the
    adaptive rate, under ``cap`` units per second — for a worker, a cap shared by all workers
    through the ledger (:class:`SharedBudget`); for a single runner, a local token bucket
    shared by its segment threads."""
    if cap is None:
        return Limiter(None)
    if worker is None:
        return Limiter(cap)
    return Limiter(cap, shared=SharedBudget(connection, keys, app, name, cap))


def limiters(recorder: Any, worker: tuple[int, int] | None, max_wcu: float | None,
             max_rcu: float | None) -> tuple[Limiter, Limiter]:
    """The writes' and the scan's limiters of a runner whose ledger is ``recorder``'s."""
    return tuple(  # type: ignore[return-value]
        limiter(recorder.connection, recorder.keys, recorder.app, name, cap, worker=worker)
        for name, cap in (("WCU", max_wcu), ("RCU", max_rcu)))
