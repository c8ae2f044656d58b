"""Connections without a server: the retry policy comes from the model's settings."""

from __future__ import annotations

import pytest

from dynaunique._transport.connection import RetryPolicy, in_batches, policy_for
from dynaunique.errors import AuditError


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


def test_a_batch_sends_chunks_and_puts_the_leftovers_back_in_front() -> None:
    sent: list[list[int]] = []
    slept: list[float] = []
    leave = {1: [2, 3]}  # the first request leaves two items unprocessed

    def send(chunk: list[int]) -> list[int]:
        sent.append(chunk)
        return leave.pop(len(sent), [])

    policy = RetryPolicy(max_conflict_retries=3, base_delay=0.5, max_delay=10.0)
    in_batches(range(1, 8), 3, send, policy=policy, what="keys", sleep=slept.append)
    assert sent == [[1, 2, 3], [2, 3, 4], [5, 6, 7]]
    assert len(slept) == 1 and 0 <= slept[0] <= 1.0  # one backoff: full jitter up to 0.5 * 2


def test_a_batch_that_keeps_leaving_items_unprocessed_stops_with_the_callers_error() -> None:
    sent: list[list[str]] = []
    policy = RetryPolicy(max_conflict_retries=2, base_delay=0.0, max_delay=0.0)
    with pytest.raises(AuditError, match=r"kept leaving BatchGetItem keys unprocessed \(3 tries\)"):
        in_batches(["a", "b"], 100, lambda chunk: sent.append(chunk) or chunk, policy=policy,
                   what="BatchGetItem keys", error=AuditError, sleep=lambda _: None)
    assert sent == [["a", "b"]] * 3


def test_a_request_with_no_model_setting_makes_as_many_attempts_as_a_save_and_says_so() -> None:
    import botocore.exceptions

    from dynaunique._transport.connection import DEFAULT_POLICY, Request, send_steps
    from dynaunique.errors import UnreachableError

    class Defaults:
        pass

    # The audit's reads (what `dynaunique check` sends) use the default policy, a save its
    # model's: both make PynamoDB's 1 + 3 attempts, and the message counts them.
    assert DEFAULT_POLICY.max_network_retries == policy_for(Defaults).max_network_retries == 3
    assert RetryPolicy().max_network_retries == 3
    steps = send_steps(object(), "Scan", {"TableName": "t"})  # type: ignore[arg-type]
    attempts = 1
    step = next(steps)
    refused = botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1/")
    with pytest.raises(UnreachableError) as raised:
        while True:
            step = steps.throw(refused) if isinstance(step, Request) else steps.send(None)
            attempts += isinstance(step, Request)
    assert attempts == 4
    assert "could not be reached after 4 attempts" in str(raised.value)


def test_a_models_connection_and_policy_are_kept_until_a_setting_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``sending_for``: what a write asks once — the model's own PynamoDB connection — made
    again after any change that matters."""
    import pynamodb.settings

    from dynaunique import Model
    from dynaunique._transport import clients as _clients
    from dynaunique._transport import connection as _connection
    from dynaunique.attributes import UnicodeAttribute

    made: list[object] = []
    real = _connection.connection_for
    monkeypatch.setattr(_connection, "connection_for",
                        lambda model: made.append(model) or real(model))

    class Kept(Model):
        class Meta:
            table_name = "kept"
            region = "us-east-1"
            host = "http://127.0.0.1:1"
            aws_access_key_id = "fake"
            aws_secret_access_key = "fake"
            extra_headers = {"X-Test": "1"}

        pk = UnicodeAttribute(hash_key=True)

    Meta = Kept.Meta
    first = _connection.sending_for(Kept)
    assert first[0] is Kept._get_connection().connection            # the model's own
    assert _connection.sending_for(Kept) is first and len(made) == 1   # kept, nothing rebuilt
    Meta.host = "http://127.0.0.1:2"                                   # as use_endpoint does
    second = _connection.sending_for(Kept)
    assert second[0] is not first[0] and second[0].host == "http://127.0.0.1:2"
    assert second[0] is Kept._get_connection().connection
    Meta.extra_headers["X-Test"] = "2"                                 # changed in place
    third = _connection.sending_for(Kept)
    assert third[0] is not second[0] and third[0]._extra_headers == {"X-Test": "2"}
    Meta.max_retry_attempts = 7                                        # PynamoDB's retries too
    fourth = _connection.sending_for(Kept)
    assert fourth[0] is not third[0] and fourth[1].max_network_retries == 7
    monkeypatch.setitem(pynamodb.settings.default_settings_dict, "connect_timeout_seconds", 3)
    fifth = _connection.sending_for(Kept)                              # PynamoDB's settings
    assert fifth[0] is not fourth[0]     # (PynamoDB's Meta took its timeout at class creation)
    Kept._connection = None                                            # PynamoDB's own reset
    sixth = _connection.sending_for(Kept)
    assert sixth[0] is not fifth[0] and _connection.sending_for(Kept) is sixth
    assert len(made) == 6
    # Re-pointed and reset (use_endpoint), its new client asked for (a hook registered on it)
    # before the next write: that write goes through that very client.
    Meta.host = "http://127.0.0.1:3"
    Kept._connection = None
    client = _clients.client_for(Kept)
    assert _connection.sending_for(Kept)[0].client is client
