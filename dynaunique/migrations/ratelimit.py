"""A token bucket that caps the write units a backfill spends per second (``--max-wcu``).

Pure apart from the injected clock and sleep; shared by every scan thread of one runner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
