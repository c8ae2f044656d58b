"""Connections without a server: the retry policy comes from the model's settings."""

from __future__ import annotations

from dynaunique._connection import RetryPolicy, policy_for


def test_the_retry_policy_comes_from_the_model_settings() -> None:
    class Meta:
        max_retry_attempts = 5
        base_backoff_ms = 40

    assert policy_for(Meta) == RetryPolicy(max_conflict_retries=8, max_network_retries=5,
                                           base_delay=0.04)

    class Defaults:
        pass

    # PynamoDB's defaults: 3 retries, 25 ms.
    assert policy_for(Defaults) == RetryPolicy(max_conflict_retries=8, max_network_retries=3,
                                               base_delay=0.025)
