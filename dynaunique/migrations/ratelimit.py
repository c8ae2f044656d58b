"""The rates a backfill keeps to: a token bucket that caps the units spent per second
(``--max-wcu``, ``--max-rcu``), an adaptive rate that backs off on throttling and grows back
(:class:`AIMD`), and the :class:`Limiter` a runner pays through, which combines them with a
budget shared by all workers (kept in the ledger by :mod:`._budget`).

Pure apart from the injected clock and sleep; shared by every scan thread of one runner.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any


class TokenBucket:
    """At most ``rate`` units per second on average, bursts of up to ``capacity`` units.

    ``acquire(n)`` reserves ``n`` units and sleeps until they are earned, so waiting threads are
    served in the order they asked. ``charge(n)`` debits units already spent (e.g. when
    DynamoDB reports that a write cost more than estimated) without waiting; the next
    ``acquire`` pays for it.
    """

    def __init__(self, rate: float, capacity: float | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0:
            raise ValueError("the rate must be positive")
        self.rate = float(rate)
        self.capacity = float(capacity) if capacity is not None else max(self.rate, 1.0)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.capacity
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def acquire(self, units: float = 1.0) -> float:
        """Take ``units``, sleeping until they are available; returns the seconds slept."""
        with self._lock:
            self._refill()
            self._tokens -= units
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait

    def charge(self, units: float) -> None:
        """Debit ``units`` spent beyond what was acquired."""
        if units <= 0:
            return
        with self._lock:
            self._refill()
            self._tokens -= units

    def set_rate(self, rate: float) -> None:
        """Change the rate (and the burst, one second's worth) from now on."""
        if rate <= 0:
            raise ValueError("the rate must be positive")
        with self._lock:
            self._refill()
            self.rate = float(rate)
            self.capacity = max(self.rate, 1.0)
            self._tokens = min(self._tokens, self.capacity)


#: The error codes that say DynamoDB throttled a request (the adaptive rate slows down on them).
THROTTLING = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException",
                        "RequestLimitExceeded", "ThrottlingError",
                        "ProvisionedThroughputExceeded"})


class AIMD:
    """An adaptive rate: additive increase, multiplicative decrease (TCP's congestion control).

    ``rate`` is the units per second allowed now, None for no limit. It starts at ``ceiling``
    (None: unlimited). A throttling refusal (:meth:`throttled`) multiplies it by ``decrease``,
    starting from what was actually spent over the last ``interval`` seconds when that is less
    (a limit nothing reached would decrease nothing), never below ``floor``; the throttles of
    one ``interval`` count once (the requests in flight when throttling begins all get it).
    Every full ``interval`` without a throttle adds ``increase`` units per second (default: a
    tenth of the ceiling, or without one of the rate the last decrease started from), up to
    ``ceiling`` — or, without a ceiling, until the rate is back where the decrease started,
    when the limit is lifted.

    Pure apart from the injected clock; thread-safe.
    """

    def __init__(self, ceiling: float | None = None, *, decrease: float = 0.5,
                 increase: float | None = None, floor: float = 1.0, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < decrease < 1:
            raise ValueError("decrease must be between 0 and 1")
        if ceiling is not None and ceiling <= 0:
            raise ValueError("the ceiling must be positive")
        self.ceiling = float(ceiling) if ceiling is not None else None
        self.decrease = decrease
        self._increase = increase
        self.floor = floor
        self.interval = interval
        self._clock = clock
        self._rate = self.ceiling
        self._step = 0.0
        #: When the rate last changed (increases are counted from it), and the rate a limit
        #: without a ceiling is lifted at.
        self._changed = clock()
        self._lift_at: float | None = None
        self._decreased: float | None = None
        self._spent: deque[tuple[float, float]] = deque()
        self._spent_sum = 0.0
        self._lock = threading.Lock()
        #: How many throttling refusals were seen, and how many decreased the rate.
        self.throttles = 0
        self.decreases = 0

    @property
    def rate(self) -> float | None:
        """Units per second allowed now (None: no limit)."""
        with self._lock:
            return self._grow(self._clock())

    def _grow(self, now: float) -> float | None:
        if self._rate is None:
            return None
        steps = int((now - self._changed) // self.interval)
        if steps > 0:
            self._changed += steps * self.interval
            self._rate += steps * self._step
            if self.ceiling is not None and self._rate >= self.ceiling:
                self._rate = self.ceiling
            elif self.ceiling is None and self._lift_at is not None and self._rate >= self._lift_at:
                self._rate = None
        return self._rate

    def _observed(self, now: float) -> float:
        horizon = now - self.interval
        while self._spent and self._spent[0][0] <= horizon:
            self._spent_sum -= self._spent.popleft()[1]
        if not self._spent:
            self._spent_sum = 0.0  # no float drift
        return max(0.0, self._spent_sum) / self.interval

    def spent(self, units: float) -> None:
        """``units`` were spent now (what the rate is measured by when it decreases)."""
        with self._lock:
            now = self._clock()
            self._spent.append((now, units))
            self._spent_sum += units
            self._observed(now)

    def throttled(self, code: str = "") -> float | None:
        """A request was throttled: decrease the rate (once per ``interval``); the new rate."""
        with self._lock:
            now = self._clock()
            self.throttles += 1
            current = self._grow(now)
            if self._decreased is not None and now - self._decreased < self.interval:
                return current
            observed = self._observed(now)
            start = observed if current is None else min(current, observed or current)
            start = max(start, self.floor)
            self._rate = max(self.floor, start * self.decrease)
            self._step = self._increase if self._increase is not None else (
                (self.ceiling or start) / 10)
            self._lift_at = start if self.ceiling is None else None
            self._changed = self._decreased = now
            self.decreases += 1
            return self._rate


class Limiter:
    """What a runner's writes (or reads) pay through: an adaptive rate (:class:`AIMD`) under an
    optional cap, and optionally a budget shared with other workers (``shared``, any object
    with ``acquire(units)`` and ``charge(units)``: the ledger's, :mod:`._budget`).

    ``acquire(units)`` waits until the local rate and the shared budget allow ``units``;
    ``charge(units)`` debits units spent beyond what was acquired (DynamoDB reported more);
    ``throttled(code)`` is the retry loop telling of a throttling refusal. Thread-safe: shared by
    every scan thread and every write in flight of one runner.
    """

    def __init__(self, cap: float | None = None, *, shared: Any = None,
                 aimd: AIMD | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cap = cap
        self.shared = shared
        # A shared budget caps the total itself: the local rate is only the adaptive one.
        self.aimd = aimd if aimd is not None else AIMD(cap if shared is None else None,
                                                       clock=clock)
        self._clock = clock
        self._sleep = sleep
        self._bucket: TokenBucket | None = None
        self._guard = threading.Lock()

    def _local(self) -> TokenBucket | None:
        rate = self.aimd.rate
        with self._guard:
            if rate is None:
                self._bucket = None
            elif self._bucket is None:
                self._bucket = TokenBucket(rate, clock=self._clock, sleep=self._sleep)
            elif self._bucket.rate != rate:
                self._bucket.set_rate(rate)
            return self._bucket

    def acquire(self, units: float = 1.0) -> float:
        """Take ``units``, waiting as the rate and the budget say; returns the seconds waited."""
        waited = 0.0
        bucket = self._local()
        if bucket is not None:
            waited += bucket.acquire(units)
        if self.shared is not None:
            waited += float(self.shared.acquire(units))
        self.aimd.spent(units)
        return waited

    def charge(self, units: float) -> None:
        """Debit ``units`` spent beyond what was acquired."""
        if units <= 0:
            return
        bucket = self._local()
        if bucket is not None:
            bucket.charge(units)
        if self.shared is not None:
            self.shared.charge(units)
        self.aimd.spent(units)

    def throttled(self, code: str = "") -> None:
        """DynamoDB throttled a request: slow down (see :class:`AIMD`)."""
        self.aimd.throttled(code)
