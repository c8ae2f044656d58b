"""The adaptive rate of a backfill (issue 23): the pure AIMD controller with exact values, the
limiter combining it with a cap, and the retry loop telling it of throttling."""

from __future__ import annotations

from typing import Any

import botocore.exceptions
import pytest
from support.clock import FakeClock

from dynaunique._transport.connection import RetryPolicy, Sleep, send_steps
from dynaunique.migrations.ratelimit import AIMD, Limiter, TokenBucket


def test_a_throttle_halves_the_rate_from_what_was_spent_and_it_grows_back_to_the_ceiling(
) -> None:
    clock = FakeClock()
    aimd = AIMD(100, clock=clock)
    assert aimd.rate == 100
    clock.now = 0.5
    aimd.spent(60)  # 60 units over the last second: the cap of 100 was not reached
    assert aimd.throttled("ProvisionedThroughputExceededException") == 30  # 60 × 0.5
    clock.now = 0.9
    assert aimd.throttled("ThrottlingException") == 30  # the same interval: counted once
    assert (aimd.throttles, aimd.decreases) == (2, 1)
    clock.now = 1.4
    assert aimd.rate == 30  # less than one interval without a throttle
    clock.now = 1.5
    assert aimd.rate == 40  # + a tenth of the ceiling per interval
    clock.now = 3.5
    assert aimd.rate == 60
    clock.now = 6.5
    assert aimd.rate == 90
    clock.now = 7.5
    assert aimd.rate == 100  # back at the ceiling, never above
    clock.now = 20
    assert aimd.rate == 100


def test_without_a_ceiling_the_limit_is_lifted_once_the_rate_is_back() -> None:
    clock = FakeClock()
    aimd = AIMD(None, clock=clock)
    assert aimd.rate is None
    aimd.spent(50)
    clock.now = 0.2
    assert aimd.throttled() == 25
    clock.now = 4.2
    assert aimd.rate == 45
    clock.now = 5.2
    assert aimd.rate is None  # 50: where the decrease started


def test_a_throttle_before_anything_was_spent_falls_to_the_floor_and_repeated_ones_stay_there(
) -> None:
    clock = FakeClock()
    aimd = AIMD(None, floor=2, clock=clock)
    assert aimd.throttled() == 2
    clock.now = 1.0
    assert aimd.throttled() == 2  # max(floor, 2 × 0.5)
    assert aimd.decreases == 2


def test_a_decrease_below_the_ceiling_starts_from_the_rate_when_the_spending_was_higher() -> None:
    clock = FakeClock()
    aimd = AIMD(10, decrease=0.8, increase=1, clock=clock)
    aimd.spent(40)  # a burst above the rate (charged after the fact)
    assert aimd.throttled() == 8  # min(10, 40) × 0.8
    clock.now = 2.0
    assert aimd.rate == 10


def test_units_spent_longer_ago_than_an_interval_are_not_what_the_rate_decreases_from() -> None:
    clock = FakeClock()
    aimd = AIMD(None, clock=clock)
    aimd.spent(100)
    clock.now = 1.5
    aimd.spent(10)
    assert aimd.throttled() == 5


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        AIMD(100, decrease=1.0)
    with pytest.raises(ValueError):
        AIMD(0)
    with pytest.raises(ValueError):
        TokenBucket(10).set_rate(0)


def test_the_limiter_paces_at_the_cap_and_at_half_of_it_after_a_throttle() -> None:
    clock = FakeClock()
    limiter = Limiter(10, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        assert limiter.acquire() == 0.0  # a burst of one second's worth
    assert limiter.acquire() == pytest.approx(0.1)
    limiter.throttled("ProvisionedThroughputExceededException")
    assert limiter.aimd.rate == 5  # min(10, 11 spent over the last second) × 0.5
    assert limiter.acquire() == pytest.approx(0.2)  # one unit at 5 per second
    assert clock.now == pytest.approx(0.3)


def test_the_limiter_without_a_cap_never_waits_until_it_is_throttled() -> None:
    clock = FakeClock()
    limiter = Limiter(None, clock=clock, sleep=clock.sleep)
    for _ in range(1000):
        assert limiter.acquire() == 0.0
    limiter.throttled()
    assert limiter.aimd.rate == 500
    waits = [limiter.acquire() for _ in range(501)]
    assert waits[:500] == [0.0] * 500 and waits[500] == pytest.approx(1 / 500)


def test_the_limiter_pays_a_shared_budget_too() -> None:
    class Shared:
        def __init__(self) -> None:
            self.acquired: list[float] = []
            self.charged: list[float] = []

        def acquire(self, units: float) -> float:
            self.acquired.append(units)
            return 0.25

        def charge(self, units: float) -> None:
            self.charged.append(units)

    shared = Shared()
    limiter = Limiter(100, shared=shared)
    assert limiter.aimd.rate is None  # the shared budget caps the total; locally: adaptive only
    assert limiter.acquire(2) == 0.25
    limiter.charge(1.5)
    assert (shared.acquired, shared.charged) == ([2], [1.5])


def _throttle(code: str) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "slow down"}}, "PutItem")


def test_the_retry_loop_tells_of_each_throttling_refusal_and_of_no_conflict() -> None:
    seen: list[str] = []
    policy = RetryPolicy(max_conflict_retries=5, base_delay=0.01)
    connection: Any = object()
    steps = send_steps(connection, "PutItem", {"TableName": "t"}, policy=policy,
                       on_throttle=seen.append)
    next(steps)
    for code in ("ProvisionedThroughputExceededException", "ThrottlingException",
                 "RequestLimitExceeded", "TransactionConflict"):
        assert isinstance(steps.throw(_throttle(code)), Sleep)
        steps.send(None)
    assert seen == ["ProvisionedThroughputExceededException", "ThrottlingException",
                    "RequestLimitExceeded"]
