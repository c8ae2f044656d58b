"""A clock a test moves by hand: ``clock()`` reads ``clock.now``; ``clock.sleep(s)`` records the
wait and moves the time on, so code given ``clock=`` and ``sleep=`` (the migrations' token
bucket, the adaptive rate, the limiter) runs with exact, instant time."""

from __future__ import annotations


class FakeClock:
    """``now`` starts at ``start``; ``slept`` lists every ``sleep`` asked for."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
