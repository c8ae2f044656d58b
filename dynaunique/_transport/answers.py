"""What DynamoDB answered, as values: the vocabulary of the one boundary, and the one mapping of
failures to the library's errors.

A driver (``dynaunique._transport.connection.run``, ``dynaunique.aio.arun``) answers each
:class:`~dynaunique._transport.connection.Request` of a sans-IO generator with one value —
:class:`Ok` (the response), :class:`Refused` (DynamoDB's error, with its reasons),
:class:`Ambiguous` (the request may have been applied; the answer never came), :class:`Unreachable`
(never sent) — read from botocore's and PynamoDB's exceptions by :func:`answer_of`, the one place
that knows them. The retry loop (``dynaunique._transport.connection.exchange_steps``) decides on the
value;
:func:`error_for` is the one place a failure becomes an error, worded for the part of the
library that sent the request (a model, the audit, the migrations, the stream guard).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import attrs
import botocore.exceptions
from pynamodb.exceptions import PynamoDBException

from dynaunique.errors import (
    AuditError,
    DynauniqueError,
    MigrationError,
    OutcomeUnknownError,
    UnreachableError,
)

#: Error codes that say "not now": retried after a backoff. ``TransactionConflict`` and the
#: throttling reasons also arrive as CancellationReasons of a cancelled transaction.
RETRYABLE = frozenset({
    "TransactionConflict", "TransactionConflictException", "TransactionInProgressException",
    "ThrottlingError", "ThrottlingException", "ProvisionedThroughputExceeded",
    "ProvisionedThroughputExceededException", "RequestLimitExceeded", "LimitExceededException",
    # A multi-Region strong consistency table: another region wrote the item at the same time.
    "ReplicatedWriteConflictException",
})
#: Error codes after which the request may or may not have been applied.
AMBIGUOUS = frozenset({"InternalServerError", "InternalFailure", "ServiceUnavailable",
                       "ServiceUnavailableException"})



@attrs.frozen
class Ok:
    """DynamoDB answered the request: ``data`` is its response."""

    data: dict[str, Any]


@attrs.frozen
class Refused:
    """DynamoDB answered with an error: its ``code`` and ``message``, the ``CancellationReasons``
    of a cancelled transaction (``reasons``, one per item, each with the ``Item`` of a failed
    condition when asked for), the whole error ``response``, the HTTP ``status``.

    ``ambiguous``: an earlier attempt of the same request may have been applied (the retry loop
    sets it on the refusal it hands back after a resend). ``cause``: botocore's error.
    """

    code: str
    message: str
    reasons: tuple[Mapping[str, Any], ...] = ()
    response: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    status: int = 400
    ambiguous: bool = False
    cause: BaseException | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Ambiguous:
    """The request may have been applied, the answer never came (a read timeout, a connection
    cut after sending, a 5xx answer). ``lasting``: a resend cannot help (the task was
    cancelled)."""

    cause: BaseException
    lasting: bool = False


@attrs.frozen
class Unreachable:
    """The request was never sent: nothing was applied (the connection was refused, no
    credentials). ``lasting``: a resend cannot help (no credentials to sign it with)."""

    cause: BaseException
    lasting: bool = False


#: How a request ended: what a driver sends back for each :class:`Request`.
Answer = Ok | Refused | Ambiguous | Unreachable
#: An answer that is not a response.
Failure = Refused | Ambiguous | Unreachable

_NEVER_SENT = (botocore.exceptions.EndpointConnectionError,
               botocore.exceptions.ConnectTimeoutError)
_NO_CREDENTIALS = (botocore.exceptions.NoCredentialsError,
                   botocore.exceptions.PartialCredentialsError)


def answer_of(exc: BaseException) -> Failure | None:
    """The one reading of an exception raised while sending a request: what it says about the
    request (None: it says nothing about it — a bug, a mock's own error —, raise it as it is).

    botocore's ``ClientError`` (and PynamoDB's ``VerboseClientError``, whose ``__cause__`` holds
    the whole response, and PynamoDB's ``PutError``… wrapping either) is :class:`Refused`, or
    :class:`Ambiguous` for a 5xx or an internal error; a connection refused or timed out while
    connecting, and missing credentials, are :class:`Unreachable`; any other connection or HTTP
    failure (a read timeout, a connection closed) is :class:`Ambiguous`, and so is an answer
    whose body does not match its ``x-amz-crc32`` (botocore's ``ChecksumError``).
    """
    if isinstance(exc, PynamoDBException) and not isinstance(exc, botocore.exceptions.ClientError):
        inner = exc.cause if exc.cause is not None else exc.__cause__
        return answer_of(inner) if inner is not None else None
    if isinstance(exc, botocore.exceptions.ClientError):
        cause = exc.__cause__
        error = cause if isinstance(cause, botocore.exceptions.ClientError) else exc
        response = error.response
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
        code = str(response.get("Error", {}).get("Code", ""))
        if code in AMBIGUOUS or (isinstance(status, int) and status >= 500):
            return Ambiguous(error)
        return Refused(code, str(response.get("Error", {}).get("Message", "")),
                       tuple(response.get("CancellationReasons") or ()), dict(response),
                       status if isinstance(status, int) else 400, cause=error)
    if isinstance(exc, _NEVER_SENT):
        return Unreachable(exc)
    if isinstance(exc, _NO_CREDENTIALS):
        return Unreachable(exc, lasting=True)
    if isinstance(exc, (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError,
                        botocore.exceptions.ChecksumError)):
        return Ambiguous(exc)  # a ChecksumError: an answer damaged on the way, as a 5xx
    return None


def retryable(refused: Refused) -> bool:
    if refused.code == "TransactionCanceledException":
        codes = {r.get("Code") for r in refused.reasons}
        return "ConditionalCheckFailed" not in codes and bool(codes & RETRYABLE)
    return refused.code in RETRYABLE


# --- the one mapping of failures to errors -------------------------------------------------------

_STREAMS_OPERATIONS = frozenset({"DescribeStream", "GetRecords", "GetShardIterator",
                                 "ListStreams"})


def _snake(operation: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


def _chained(error: DynauniqueError, cause: BaseException | None) -> DynauniqueError:
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


def _detail(cause: BaseException) -> str:
    """What a failure log and message quote: DynamoDB's code, or the network error's text."""
    if isinstance(cause, botocore.exceptions.ClientError):
        return str(cause.response.get("Error", {}).get("Code", ""))
    return str(cause)


def code_of(cause: BaseException) -> str:
    if isinstance(cause, botocore.exceptions.ClientError):
        return _detail(cause)
    return type(cause).__name__


def error_for(failure: Failure, operation: str, params: Mapping[str, Any] | None = None, *,
              error: type[DynauniqueError] = DynauniqueError,
              missing: type[DynauniqueError] | None = None, attempts: int = 1,
              ambiguous: bool = False, resend_safe: bool = True) -> DynauniqueError:
    """The library's error for a request that failed: the one mapping of failures to errors.

    ``error`` is the family of the part of the library that sent it, which words it:
    ``DynauniqueError`` (a model's reads and writes), :class:`~dynaunique.errors.AuditError`
    (the audit: ``"Scan on t failed: code: message"``, other failures ``"Scan: ..."``),
    :class:`~dynaunique.errors.MigrationError` (``"DynamoDB refused put_item on 't': ..."``; a
    missing table is ``missing``, the migrations' ``MissingTableError``), or any other class (the
    stream guard's) for ``"DynamoDB Streams refused GetRecords: code: message"``. The retry
    loop gives what it knows of the attempts: how many (``attempts``), whether one may have
    been applied (``ambiguous``), whether a resend is safe (``resend_safe``). The error's
    ``__cause__`` is botocore's (or, for a family, the library error it wraps).
    """
    params = params or {}
    table = params.get("TableName")
    if isinstance(failure, Refused) and not retryable(failure):
        return _chained(_refusal(failure, operation, params, error, missing), failure.cause)
    found = _loop_error(failure, operation, attempts, ambiguous, resend_safe)
    if issubclass(error, MigrationError) and not isinstance(found, MigrationError):
        return _chained(error(f"{_snake(operation)} on {table!r}: {found}"), found)
    if issubclass(error, AuditError):
        return _chained(error(f"{operation}: {found}"), found)
    return found


def _refusal(refused: Refused, operation: str, params: Mapping[str, Any],
             error: type[DynauniqueError],
             missing: type[DynauniqueError] | None) -> DynauniqueError:
    table = params.get("TableName")
    code, message = refused.code, refused.message
    if issubclass(error, MigrationError):
        if code == "ResourceNotFoundException" and missing is not None:
            return missing(f"table {table!r} does not exist (or the endpoint is "
                                     "wrong): create it before migrating")
        return error(f"DynamoDB refused {_snake(operation)} on {table!r}: {code}: {message}")
    if issubclass(error, AuditError):
        return error(f"{operation} on {table or 'the table'} failed: {code}: {message}")
    if operation in _STREAMS_OPERATIONS:
        return error(f"DynamoDB Streams refused {operation}: {code}: {message}")
    if code == "IdempotentParameterMismatchException":
        return error(
            "DynamoDB refused a resend: its ClientRequestToken was used within the last 10 "
            f"minutes for a different request ({message}); nothing of this call was applied"
        )
    if code == "TransactionCanceledException":
        detail = "; ".join(
            f"item {i}: {r.get('Code')} {r.get('Message', '')}".strip()
            for i, r in enumerate(refused.reasons) if r.get("Code") not in (None, "None")
        )
        return error(f"DynamoDB cancelled the transaction: {detail}")
    if code == "ResourceNotFoundException":
        # DynamoDB's message ("Requested resource not found") names no table: name them.
        return error(f"{_missing_tables(params)} (or the endpoint or region is wrong): "
                     f"DynamoDB refused {operation}: {code}: {message}")
    return error(f"DynamoDB refused the request: {code}: {message}")


def _missing_tables(params: Mapping[str, Any]) -> str:
    """What a ResourceNotFoundException says is missing: the request's table, or one of a
    transaction's (DynamoDB does not say which)."""
    tables = [params["TableName"]] if isinstance(params.get("TableName"), str) else []
    for item in params.get("TransactItems", ()):
        for action in item.values():
            if isinstance(action, Mapping) and isinstance(action.get("TableName"), str):
                tables.append(action["TableName"])
    named = list(dict.fromkeys(tables))
    if len(named) == 1:
        return f"table {named[0]!r} does not exist"
    if named:
        return f"one of the tables {', '.join(map(repr, named))} does not exist"
    return "the table does not exist"


def _loop_error(failure: Failure, operation: str, attempts: int, ambiguous: bool,
                resend_safe: bool) -> DynauniqueError:
    """Why the retry loop stopped: the retries ran out, or a resend is not possible."""
    if isinstance(failure, Refused):
        what = ("the transaction kept conflicting with others"
                if failure.code == "TransactionCanceledException"
                else f"DynamoDB kept refusing {operation}: {failure.code}")
        return _chained(DynauniqueError(f"{what} ({attempts} tries); try again later"),
                        failure.cause)
    cause = failure.cause
    detail = _detail(cause)
    if isinstance(cause, asyncio.CancelledError):
        found: DynauniqueError = OutcomeUnknownError(
            f"the task was cancelled while {operation} was in flight")
    elif failure.lasting and isinstance(failure, Unreachable):
        found = UnreachableError(f"DynamoDB could not be reached ({detail}); nothing was sent, "
                                 "so nothing was applied")
    elif ambiguous and not resend_safe:
        found = OutcomeUnknownError(
            f"DynamoDB did not answer {operation} ({detail}) and this update's result cannot be "
            "recognised, so it is not resent (it might apply twice); reload the record to see "
            "whether it was applied")
    elif not ambiguous:
        found = UnreachableError(
            f"DynamoDB could not be reached after {attempts} attempts ({detail}); nothing was "
            "sent, so nothing was applied")
    else:
        found = OutcomeUnknownError(
            f"DynamoDB did not answer after {attempts} attempts ({detail}); the write may or may "
            "not have been applied: repeating the same call is safe")
    return _chained(found, cause)


