"""The boundary's vocabulary (``dynaunique._transport.answers``): every botocore and PynamoDB
failure the library sees read as one value, every failure mapped to one error — exact values
throughout."""

from __future__ import annotations

import asyncio
from typing import Any

import botocore.exceptions
import pytest
from pynamodb.exceptions import GetError, PutError, VerboseClientError

from dynaunique._transport.answers import (
    Ambiguous,
    Ok,
    Refused,
    Unreachable,
    answer_of,
    error_for,
    retryable,
)
from dynaunique._transport.connection import (
    Request,
    RetryPolicy,
    Sleep,
    _received,
    exchange_steps,
    run,
    send_steps,
)
from dynaunique.errors import (
    AuditError,
    DynauniqueError,
    MigrationError,
    OutcomeUnknownError,
    UnreachableError,
)
from dynaunique.migrations._dynamo import MissingTableError

URL = "http://127.0.0.1:1/"


def _client_error(code: str, message: str = "no", *, status: int = 400,
                  operation: str = "PutItem", **extra: Any) -> botocore.exceptions.ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message},
                                "ResponseMetadata": {"HTTPStatusCode": status}, **extra}
    return botocore.exceptions.ClientError(response, operation)  # type: ignore[arg-type]


def _refused(exc: botocore.exceptions.ClientError, reasons: tuple[Any, ...] = ()) -> Refused:
    return Refused(exc.response["Error"]["Code"], exc.response["Error"]["Message"], reasons,
                   dict(exc.response), exc.response["ResponseMetadata"]["HTTPStatusCode"],
                   cause=exc)


# --- answer_of: every shape ----------------------------------------------------------------------


def test_a_failed_condition_is_refused_with_the_item_it_found() -> None:
    exc = _client_error("ConditionalCheckFailedException", "The conditional request failed",
                        Item={"pk": {"S": "A"}})
    got = answer_of(exc)
    assert got == Refused("ConditionalCheckFailedException", "The conditional request failed",
                          (), {"Error": {"Code": "ConditionalCheckFailedException",
                                         "Message": "The conditional request failed"},
                               "ResponseMetadata": {"HTTPStatusCode": 400},
                               "Item": {"pk": {"S": "A"}}}, 400)
    assert isinstance(got, Refused) and got.cause is exc and not retryable(got)


def test_a_cancelled_transaction_is_refused_with_its_reasons_in_item_order() -> None:
    reasons = [{"Code": "None"},
               {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
                "Item": {"pk": {"S": "UNIQ#EMAIL#a"}}}]
    exc = _client_error("TransactionCanceledException", "Transaction cancelled",
                        operation="TransactWriteItems", CancellationReasons=reasons)
    got = answer_of(exc)
    assert got == _refused(exc, tuple(reasons))
    assert isinstance(got, Refused) and not retryable(got)
    assert str(error_for(got, "TransactWriteItems")) == (
        "DynamoDB cancelled the transaction: item 1: ConditionalCheckFailed The conditional "
        "request failed")


@pytest.mark.parametrize(("code", "is_retryable"), [
    ("ProvisionedThroughputExceededException", True),
    ("ThrottlingException", True),
    ("RequestLimitExceeded", True),
    ("TransactionConflictException", True),
    ("ReplicatedWriteConflictException", True),   # MRSC: another region wrote the item
    ("ResourceNotFoundException", False),
    ("ValidationException", False),
    ("ConditionalCheckFailedException", False),
])
def test_client_errors_are_refused_and_only_throttling_and_conflicts_are_retried(
        code: str, is_retryable: bool) -> None:
    exc = _client_error(code)
    got = answer_of(exc)
    assert got == _refused(exc)
    assert isinstance(got, Refused) and retryable(got) is is_retryable


def test_a_transaction_cancelled_by_a_conflict_is_retried_unless_a_condition_also_failed() -> None:
    conflict = answer_of(_client_error(
        "TransactionCanceledException", CancellationReasons=[
            {"Code": "None"}, {"Code": "TransactionConflict"}]))
    both = answer_of(_client_error(
        "TransactionCanceledException", CancellationReasons=[
            {"Code": "ConditionalCheckFailed"}, {"Code": "TransactionConflict"}]))
    assert isinstance(conflict, Refused) and retryable(conflict)
    assert isinstance(both, Refused) and not retryable(both)


@pytest.mark.parametrize(("code", "status"), [
    ("InternalServerError", 500), ("ServiceUnavailable", 503), ("InternalFailure", 400),
    ("SomethingNew", 502),
])
def test_a_5xx_or_an_internal_error_is_ambiguous(code: str, status: int) -> None:
    exc = _client_error(code, status=status)
    assert answer_of(exc) == Ambiguous(exc)


def test_network_failures_before_sending_are_unreachable_and_after_are_ambiguous() -> None:
    refused = botocore.exceptions.EndpointConnectionError(endpoint_url=URL)
    connect = botocore.exceptions.ConnectTimeoutError(endpoint_url=URL)
    read = botocore.exceptions.ReadTimeoutError(endpoint_url=URL)
    closed = botocore.exceptions.ConnectionClosedError(endpoint_url=URL)
    http = botocore.exceptions.HTTPClientError(error="broken pipe")
    assert answer_of(refused) == Unreachable(refused)
    assert answer_of(connect) == Unreachable(connect)
    assert answer_of(read) == Ambiguous(read)
    assert answer_of(closed) == Ambiguous(closed)
    assert answer_of(http) == Ambiguous(http)


def test_missing_credentials_are_unreachable_for_good() -> None:
    none = botocore.exceptions.NoCredentialsError()
    partial = botocore.exceptions.PartialCredentialsError(provider="env", cred_var="secret")
    assert answer_of(none) == Unreachable(none, lasting=True)
    assert answer_of(partial) == Unreachable(partial, lasting=True)


def test_pynamodbs_verbose_client_error_is_read_from_the_whole_response_it_wraps() -> None:
    original = _client_error("TransactionCanceledException", "cancelled",
                             operation="TransactWriteItems",
                             CancellationReasons=[{"Code": "ConditionalCheckFailed",
                                                   "Item": {"pk": {"S": "A"}}}])
    try:
        try:
            raise original
        except botocore.exceptions.ClientError as e:
            raise VerboseClientError({"Error": e.response["Error"]}, "TransactWriteItems",
                                     {"request_id": "r", "table_name": "t"}) from e
    except VerboseClientError as verbose:
        got = answer_of(verbose)
    assert got == _refused(original, ({"Code": "ConditionalCheckFailed",
                                       "Item": {"pk": {"S": "A"}}},))
    assert isinstance(got, Refused) and got.cause is original


def test_pynamodbs_wrapped_errors_are_read_through_their_cause() -> None:
    throttled = _client_error("ProvisionedThroughputExceededException", operation="GetItem")
    unreachable = botocore.exceptions.EndpointConnectionError(endpoint_url=URL)
    assert answer_of(PutError("Failed to put item", throttled)) == _refused(throttled)
    assert answer_of(GetError("Failed to get item", unreachable)) == Unreachable(unreachable)
    assert answer_of(GetError("Failed to get item")) is None


def test_an_exception_that_is_no_failure_of_a_request_is_no_answer() -> None:
    assert answer_of(KeyError("x")) is None
    assert answer_of(botocore.exceptions.ParamValidationError(report="bad")) is None
    assert answer_of(DynauniqueError("mine")) is None


def test_a_response_dict_sent_by_hand_is_ok() -> None:
    assert _received({"Item": {}}) == Ok({"Item": {}})
    assert _received(Ok({"x": 1})) == Ok({"x": 1})


# --- error_for: one mapping, each family's words -------------------------------------------------


def test_a_refusal_in_the_words_of_each_part_of_the_library() -> None:
    missing = answer_of(_client_error("ResourceNotFoundException", "Requested resource not found"))
    assert isinstance(missing, Refused)
    params = {"TableName": "accounts"}
    library = error_for(missing, "GetItem", params)
    assert type(library) is DynauniqueError
    assert str(library) == ("table 'accounts' does not exist (or the endpoint or region is "
                            "wrong): DynamoDB refused GetItem: ResourceNotFoundException: "
                            "Requested resource not found")
    assert library.__cause__ is missing.cause
    audit = error_for(missing, "Scan", params, error=AuditError)
    assert type(audit) is AuditError
    assert str(audit) == "Scan on accounts failed: ResourceNotFoundException: Requested resource " \
                         "not found"
    assert str(error_for(missing, "TransactGetItems", {}, error=AuditError)) == (
        "TransactGetItems on the table failed: ResourceNotFoundException: Requested resource not "
        "found")
    migration = error_for(missing, "PutItem", params, error=MigrationError,
                          missing=MissingTableError)
    assert type(migration) is MissingTableError and migration.exit_code == 2
    assert str(migration) == ("table 'accounts' does not exist (or the endpoint is wrong): "
                              "create it before migrating")
    invalid = answer_of(_client_error("ValidationException", "bad key"))
    assert isinstance(invalid, Refused)
    assert str(error_for(invalid, "BatchGetItem", {}, error=MigrationError,
                         missing=MissingTableError)) == (
        "DynamoDB refused batch_get_item on None: ValidationException: bad key")

    class StreamsError(DynauniqueError):
        pass

    streams = error_for(invalid, "GetShardIterator", {}, error=StreamsError)
    assert type(streams) is StreamsError
    assert str(streams) == "DynamoDB Streams refused GetShardIterator: ValidationException: bad key"


def test_a_resend_refused_for_its_token_says_nothing_was_applied() -> None:
    mismatch = answer_of(_client_error("IdempotentParameterMismatchException", "token reused"))
    assert isinstance(mismatch, Refused)
    assert str(error_for(mismatch, "TransactWriteItems")) == (
        "DynamoDB refused a resend: its ClientRequestToken was used within the last 10 minutes "
        "for a different request (token reused); nothing of this call was applied")


def test_why_the_retry_loop_stopped() -> None:
    refused = botocore.exceptions.EndpointConnectionError(endpoint_url=URL)
    cut = botocore.exceptions.ReadTimeoutError(endpoint_url=URL)
    unreachable = error_for(Unreachable(refused), "Scan", attempts=4)
    assert type(unreachable) is UnreachableError and unreachable.__cause__ is refused
    assert str(unreachable) == (
        'DynamoDB could not be reached after 4 attempts (Could not connect to the endpoint URL: '
        '"http://127.0.0.1:1/"); nothing was sent, so nothing was applied')
    unknown = error_for(Ambiguous(cut), "PutItem", attempts=4, ambiguous=True)
    assert type(unknown) is OutcomeUnknownError
    assert str(unknown) == (
        'DynamoDB did not answer after 4 attempts (Read timeout on endpoint URL: '
        '"http://127.0.0.1:1/"); the write may or may not have been applied: repeating the same '
        'call is safe')
    unsafe = error_for(Ambiguous(cut), "UpdateItem", ambiguous=True, resend_safe=False)
    assert type(unsafe) is OutcomeUnknownError
    assert str(unsafe).startswith('DynamoDB did not answer UpdateItem (Read timeout on endpoint')
    server = _client_error("InternalServerError", status=500)
    assert str(error_for(Ambiguous(server), "PutItem", attempts=2, ambiguous=True)) == (
        "DynamoDB did not answer after 2 attempts (InternalServerError); the write may or may not "
        "have been applied: repeating the same call is safe")
    credentials = botocore.exceptions.NoCredentialsError()
    assert str(error_for(Unreachable(credentials, lasting=True), "GetItem")) == (
        "DynamoDB could not be reached (Unable to locate credentials); nothing was sent, so "
        "nothing was applied")
    cancelled = error_for(Ambiguous(asyncio.CancelledError(), lasting=True), "PutItem",
                          ambiguous=True)
    assert type(cancelled) is OutcomeUnknownError
    assert str(cancelled) == "the task was cancelled while PutItem was in flight"
    throttled = answer_of(_client_error("ThrottlingException"))
    assert isinstance(throttled, Refused)
    kept = error_for(throttled, "PutItem", attempts=9)
    assert type(kept) is DynauniqueError
    assert str(kept) == ("DynamoDB kept refusing PutItem: ThrottlingException (9 tries); try "
                         "again later")
    conflict = answer_of(_client_error("TransactionCanceledException",
                                       CancellationReasons=[{"Code": "TransactionConflict"}]))
    assert isinstance(conflict, Refused)
    assert str(error_for(conflict, "TransactWriteItems", attempts=9)) == (
        "the transaction kept conflicting with others (9 tries); try again later")


def test_a_family_wraps_the_loops_error_so_its_cause_stays_reachable() -> None:
    refused = botocore.exceptions.EndpointConnectionError(endpoint_url=URL)
    audit = error_for(Unreachable(refused), "Scan", {"TableName": "t"}, error=AuditError,
                      attempts=4)
    assert type(audit) is AuditError
    assert str(audit).startswith("Scan: DynamoDB could not be reached after 4 attempts")
    assert type(audit.__cause__) is UnreachableError and audit.__cause__.__cause__ is refused
    migration = error_for(Unreachable(refused), "DescribeTable", {"TableName": "t"},
                          error=MigrationError, attempts=4)
    assert type(migration) is MigrationError
    assert str(migration).startswith("describe_table on 't': DynamoDB could not be reached")
    assert type(migration.__cause__) is UnreachableError


# --- the drivers answer with values --------------------------------------------------------------


class _Connection:
    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)

    def dispatch(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return dict(outcome)


def _answers(connection: Any, n: int) -> Any:
    got = []
    for _ in range(n):
        got.append((yield Request(connection, "GetItem", {"TableName": "t"})))
    return got


def test_run_sends_each_answer_as_a_value_and_throws_in_what_is_no_answer() -> None:
    cut = botocore.exceptions.ConnectionClosedError(endpoint_url=URL)
    throttled = _client_error("ThrottlingException")
    assert run(_answers(_Connection({"Item": {}}, cut, throttled), 3)) == [
        Ok({"Item": {}}), Ambiguous(cut), _refused(throttled)]
    with pytest.raises(KeyError):
        run(_answers(_Connection(KeyError("bug")), 1))


def test_arun_sends_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("httpx")
    from dynaunique import aio

    cut = botocore.exceptions.ReadTimeoutError(endpoint_url=URL)
    throttled = _client_error("ThrottlingException")
    outcomes: list[Any] = [{"Item": {}}, cut, throttled]

    async def dispatch(connection: Any, operation: str, params: Any) -> dict[str, Any]:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return dict(outcome)

    monkeypatch.setattr(aio, "dispatch", dispatch)
    assert asyncio.run(aio.arun(_answers(object(), 3))) == [
        Ok({"Item": {}}), Ambiguous(cut), _refused(throttled)]


def test_the_loop_hands_back_a_refusal_it_does_not_retry_marked_ambiguous_after_a_resend(
) -> None:
    policy = RetryPolicy(max_network_retries=2, base_delay=0.0)
    steps = exchange_steps(object(), "PutItem", {"TableName": "t"},  # type: ignore[arg-type]
                           policy=policy)
    next(steps)
    cut = botocore.exceptions.ConnectionClosedError(endpoint_url=URL)
    assert isinstance(steps.send(Ambiguous(cut)), Sleep)
    assert isinstance(steps.send(None), Request)
    failed = answer_of(_client_error("ConditionalCheckFailedException"))
    assert isinstance(failed, Refused)
    with pytest.raises(StopIteration) as done:
        steps.send(failed)
    assert done.value.value == Refused(failed.code, failed.message, (), failed.response, 400,
                                       ambiguous=True)


def test_send_steps_raises_the_mapped_error_in_the_callers_words() -> None:
    steps = send_steps(object(), "Scan", {"TableName": "t"},  # type: ignore[arg-type]
                       error=AuditError)
    next(steps)
    with pytest.raises(AuditError) as raised:
        steps.send(answer_of(_client_error("ResourceNotFoundException", "gone")))
    assert str(raised.value) == "Scan on t failed: ResourceNotFoundException: gone"


def test_no_credentials_stop_at_once_without_a_resend() -> None:
    steps = send_steps(object(), "GetItem", {"TableName": "t"})  # type: ignore[arg-type]
    next(steps)
    with pytest.raises(UnreachableError, match=r"could not be reached \(Unable to locate"):
        steps.send(Unreachable(botocore.exceptions.NoCredentialsError(), lasting=True))


# --- the one read: aget's refusal is the library's error -----------------------------------------


def test_agets_refused_read_is_a_dynaunique_error_quoting_dynamodb() -> None:
    """Before #26 the internal ``Refused`` escaped ``aget`` (not a DynauniqueError)."""
    from support.declare import declare

    from dynaunique.attributes import UnicodeAttribute

    read = declare("Read", "answers-read", meta={"host": "http://127.0.0.1:9",  # never reached
                                                 "region": "us-east-1"},
                   pk=UnicodeAttribute(hash_key=True),
                   email=UnicodeAttribute(unique=True, null=True))
    steps = read._du_get_steps("A", None, True)
    request = next(steps)
    assert isinstance(request, Request)
    assert request.params == {"TableName": "answers-read", "Key": {"pk": {"S": "A"}},
                              "ConsistentRead": True}
    with pytest.raises(DynauniqueError) as raised:
        steps.throw(_client_error("ValidationException", "bad key", operation="GetItem"))
    assert type(raised.value) is DynauniqueError
    assert str(raised.value) == "DynamoDB refused the request: ValidationException: bad key"
