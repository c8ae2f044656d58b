"""dynaunique.errors: the tree, the structured fields, the messages and the exit codes."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from typing import Any

import botocore.exceptions
import pytest
from pynamodb.exceptions import (
    CancellationReason,
    DeleteError,
    PutError,
    PynamoDBException,
    TransactWriteError,
    UpdateError,
    VerboseClientError,
)
from support.violations import assert_ada_email_taken

import dynaunique
from dynaunique import errors
from dynaunique.errors import (
    PYNAMODB_ERRORS,
    AuditError,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    ConfigurationError,
    DynauniqueError,
    ForeignLockError,
    InvalidValueError,
    MigrationError,
    Operation,
    OutcomeUnknownError,
    TransactionTooLargeError,
    UniqueViolation,
    UnreachableError,
    UnsupportedOperationError,
    WriteConflict,
    cancellation_reasons,
    for_operation,
    format_key,
    format_value,
)

EXCEPTIONS = [
    obj for _, obj in inspect.getmembers(errors, inspect.isclass)
    if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]
ALL_ERRORS: list[type[DynauniqueError]] = [e for e in EXCEPTIONS if issubclass(e, DynauniqueError)]


def test_the_module_defines_exactly_the_documented_errors() -> None:
    assert {e.__name__ for e in EXCEPTIONS} == {
        "DynauniqueError", "ConfigurationError", "GlobalTableError", "InvalidValueError",
        "UnsupportedOperationError", "TransactionTooLargeError", "WriteConflict",
        "UniqueViolation", "ConcurrentModificationError", "ForeignLockError",
        "ConditionCheckFailedError", "OtherModelRecordError",
        "OutcomeUnknownError", "UnreachableError", "MigrationError", "AuditError",
    }


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: e.__name__)
def test_every_error_has_the_one_root(error: type[BaseException]) -> None:
    assert issubclass(error, DynauniqueError)


@pytest.mark.parametrize("error", ALL_ERRORS, ids=lambda e: e.__name__)
def test_every_error_is_reexported_from_the_package(error: type[Exception]) -> None:
    assert getattr(dynaunique, error.__name__, None) is error
    assert error.__name__ in dynaunique.__all__


def test_the_tree() -> None:
    parents = {
        ConfigurationError: DynauniqueError,
        InvalidValueError: DynauniqueError,
        UnsupportedOperationError: DynauniqueError,
        TransactionTooLargeError: DynauniqueError,
        WriteConflict: DynauniqueError,
        UniqueViolation: WriteConflict,
        ConcurrentModificationError: WriteConflict,
        ForeignLockError: ConcurrentModificationError,
        ConditionCheckFailedError: WriteConflict,
        OutcomeUnknownError: DynauniqueError,
        UnreachableError: DynauniqueError,
        MigrationError: DynauniqueError,
        AuditError: DynauniqueError,
    }
    for child, parent in parents.items():
        assert child.__mro__[1] is parent, child
    # An invalid value is also a ValueError, so callers validating input catch it naturally.
    assert issubclass(InvalidValueError, ValueError)
    # An unknown outcome is not a conflict: nothing says the write was refused.
    assert not issubclass(OutcomeUnknownError, WriteConflict)
    # "Never reached the server" is a certainty, unlike an unknown outcome.
    assert not issubclass(UnreachableError, OutcomeUnknownError)


def test_exit_codes() -> None:
    assert DynauniqueError.exit_code == 1
    assert ConfigurationError.exit_code == 2
    for error in ALL_ERRORS:
        expected = 2 if issubclass(error, ConfigurationError) else 1
        assert error.exit_code == expected, error


def test_the_tree_is_drawn_in_the_module_docstring() -> None:
    doc = errors.__doc__ or ""
    for error in ALL_ERRORS:
        assert error.__name__ in doc, error


def test_unique_violation_fields_and_message() -> None:
    error = UniqueViolation(model="Account", fields=["email"], constraint="EMAIL",
                            value="ada@lovelace.io", owner={"PK": "ACCT#a1f9c3", "SK": "PROFILE"})
    assert_ada_email_taken(error)
    assert error.hashed is False


def test_unique_violation_without_owner_and_composite() -> None:
    error = UniqueViolation(model="Page", fields=("tenant", "slug"), constraint="TENANT_SLUG",
                            value=("acme", "home"), owner=None)
    assert str(error) == "tenant, slug ('acme', 'home') is already taken"
    assert error.owner is None


def test_hashed_unique_violation_never_shows_the_value() -> None:
    error = UniqueViolation(model="User", fields=("ssn",), constraint="SSN", value="078-05-1120",
                            owner={"PK": "USER#1"}, hashed=True)
    assert str(error) == "ssn is already taken (held by USER#1)"
    assert "078" not in str(error)


def test_a_hashed_unique_violation_keeps_the_value_nowhere() -> None:
    """Not in a field either: a pickle, ``vars()`` or an error tracker would carry it."""
    error = UniqueViolation(model="User", fields=("ssn",), constraint="SSN", value="078-05-1120",
                            owner={"PK": "USER#1"}, hashed=True)
    other = UniqueViolation(model="User", fields=("email",), constraint="EMAIL",
                            value="ada@x.io", owner={"PK": "USER#1"}, hashed=True)
    both = error.with_violations([error, other])
    assert (error.value, both.value, other.value) == (None, None, None)
    assert str(both) == ("ssn is already taken (held by USER#1); also: email is already taken "
                         "(held by USER#1)")
    for shown in (repr(both), repr(vars(both)), repr(pickle.dumps(both)),
                  repr([vars(v) for v in both.violations])):
        assert "078" not in shown and "ada@x.io" not in shown


@pytest.mark.parametrize(("value", "hashed", "shown"), [
    ("ada@x.io", False, "'ada@x.io'"), (("t1", 2), False, "('t1', 2)"), (b"\x00", False,
                                                                          "b'\\x00'"),
    ("ada@x.io", True, "<hashed>"), (("t1", 2), True, "<hashed>"), (None, True, "<hashed>"),
])
def test_format_value_is_the_repr_or_the_hashed_marker(value: Any, hashed: bool,
                                                       shown: str) -> None:
    assert format_value(value, hashed=hashed) == shown
    assert errors.HASHED == "<hashed>"


def test_unique_violation_lists_every_violation() -> None:
    email = UniqueViolation(model="Account", fields=("email",), constraint="EMAIL",
                            value="ada@x.io", owner={"PK": "ACCT#1"})
    handle = UniqueViolation(model="Account", fields=("username",), constraint="HANDLE",
                             value="ada", owner={"PK": "ACCT#2"})
    both = email.with_violations([email, handle])
    assert both.violations == (email, handle)
    assert (both.fields, both.constraint, both.value, both.owner) == (
        ("email",), "EMAIL", "ada@x.io", {"PK": "ACCT#1"})


def test_unique_violation_message_names_each_violation_once() -> None:
    email = UniqueViolation(model="Account", fields=("email",), constraint="EMAIL",
                            value="ada@x.io", owner={"PK": "ACCT#1"})
    handle = UniqueViolation(model="Account", fields=("username",), constraint="HANDLE",
                             value="ada", owner={"PK": "ACCT#2"})
    both = email.with_violations([email, handle])
    assert str(both) == ("email 'ada@x.io' is already taken (held by ACCT#1); also: "
                         "username 'ada' is already taken (held by ACCT#2)")


def test_format_key_shows_the_hash_key_value() -> None:
    assert format_key({"PK": "ACCT#1", "SK": "PROFILE"}) == "ACCT#1"
    assert format_key({}) == "<unknown>"
    assert format_key(None) == "<unknown>"


def test_transaction_too_large_error_fields_and_message() -> None:
    error = TransactionTooLargeError(101, 2048, 100, 4194304)
    assert (error.items, error.size_bytes, error.max_items, error.max_bytes) == (
        101, 2048, 100, 4194304)
    assert str(error).startswith(
        "the transaction would have 101 items and 2048 bytes of items; DynamoDB allows at most "
        "100 items and 4194304 bytes. Nothing was sent")


def test_concurrent_modification_error_fields() -> None:
    error = ConcurrentModificationError("stale", model="Account", key={"PK": "ACCT#1"},
                                        current={"PK": {"S": "ACCT#1"}}, write="w")
    assert str(error) == "stale"
    assert (error.model, error.key, error.current, error.write) == (
        "Account", {"PK": "ACCT#1"}, {"PK": {"S": "ACCT#1"}}, "w")
    bare = ConcurrentModificationError("gone")
    assert (bare.model, bare.key, bare.current, bare.write) == ("", None, None, None)


def test_foreign_lock_error_fields() -> None:
    error = ForeignLockError("the lock on email 'a@x.io' is held by ACCT#9", model="Account",
                             lock_keys=["UNIQ#EMAIL#a@x.io"])
    assert str(error) == "the lock on email 'a@x.io' is held by ACCT#9"
    assert error.lock_keys == ("UNIQ#EMAIL#a@x.io",)
    assert error.model == "Account"
    assert (error.key, error.current, error.write) == (None, None, None)


def test_condition_check_failed_error_fields() -> None:
    error = ConditionCheckFailedError("condition check failed: x", model="Workspace",
                                      key={"PK": "WS#1"})
    assert str(error) == "condition check failed: x"
    assert (error.model, error.key) == ("Workspace", {"PK": "WS#1"})


# --- catchable as PynamoDB's errors (for_operation) ----------------------------------------------

CANCELLED = {
    "Error": {"Code": "TransactionCanceledException",
              "Message": "Transaction cancelled, please refer cancellation reasons for specific "
                         "reasons [None, ConditionalCheckFailed]"},
    "CancellationReasons": [
        {"Code": "None"},
        {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed",
         "Item": {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "owner": {"M": {"PK": {"S": "ACCT#1"}}}}},
    ],
    "ResponseMetadata": {"HTTPStatusCode": 400},
}
CANCELLED_REASONS = [
    None,
    CancellationReason(code="ConditionalCheckFailed", message="The conditional request failed",
                       raw_item={"PK": {"S": "UNIQ#EMAIL#ada@x.io"},
                                 "owner": {"M": {"PK": {"S": "ACCT#1"}}}}),
]


def _raised_from(error: DynauniqueError, cause: BaseException | None) -> DynauniqueError:
    """``error`` as really raised (``raise error from cause``): traceback and cause set."""
    try:
        raise error from cause
    except DynauniqueError as exc:
        return exc


def _violation() -> UniqueViolation:
    return UniqueViolation(model="Account", fields=["email"], constraint="EMAIL",
                           value="ada@x.io", owner={"PK": "ACCT#1"})


# Every kind of error a write can raise because the write was not done as asked.
WRAPPED: list[Callable[[], DynauniqueError]] = [
    lambda: DynauniqueError("DynamoDB refused the request: ValidationException: bad"),
    lambda: TransactionTooLargeError(101, 10, 100, 4_000_000),
    lambda: WriteConflict("refused"),
    _violation,
    lambda: ConcurrentModificationError("changed", model="Account", key={"PK": "ACCT#1"},
                                        current={"PK": {"S": "ACCT#1"}}),
    lambda: ForeignLockError("held by another", model="Account", lock_keys=["UNIQ#EMAIL#a"]),
    lambda: ConditionCheckFailedError("condition check failed: x", model="A", key={"PK": "1"}),
    lambda: OutcomeUnknownError("no answer"),
    lambda: UnreachableError("unreachable"),
    lambda: MigrationError("m"),
    lambda: AuditError("a"),
]
OPERATIONS: list[tuple[Operation, type[PynamoDBException]]] = [
    ("save", PutError), ("delete", DeleteError), ("update", UpdateError),
    ("transact_write", TransactWriteError)]


def test_each_operation_has_pynamodbs_error() -> None:
    assert {"save": PutError, "delete": DeleteError, "update": UpdateError,
                               "transact_write": TransactWriteError} == PYNAMODB_ERRORS


@pytest.mark.parametrize("make", WRAPPED, ids=lambda m: type(m()).__name__)
@pytest.mark.parametrize(("operation", "pynamodb_error"), OPERATIONS, ids=lambda o: str(o))
def test_a_write_error_becomes_pynamodbs_and_stays_itself(
        make: Callable[[], DynauniqueError], operation: Operation,
        pynamodb_error: type[PynamoDBException]) -> None:
    cause = botocore.exceptions.ClientError(CANCELLED, "TransactWriteItems")
    original = _raised_from(make(), cause)
    base = type(original)
    before = dict(vars(original))
    message, args, traceback = str(original), original.args, original.__traceback__

    result = for_operation(original, operation)

    assert result is original
    assert isinstance(result, base) and isinstance(result, pynamodb_error)
    assert isinstance(result, DynauniqueError) and isinstance(result, PynamoDBException)
    assert (type(result).__name__, type(result).__qualname__, type(result).__module__) == (
        base.__name__, base.__qualname__, base.__module__)
    assert (str(result), result.args, result.__traceback__) == (message, args, traceback)
    assert result.__cause__ is cause
    assert {k: v for k, v in vars(result).items() if k not in ("cause", "msg")} == before
    assert result.exit_code == base.exit_code
    pynamo: Any = result
    assert pynamo.cause is cause
    assert pynamo.msg == message
    assert pynamo.cause_response_code == "TransactionCanceledException"
    assert pynamo.cause_response_message == CANCELLED["Error"]["Message"]
    assert pynamo.cancellation_reasons == CANCELLED_REASONS


def test_the_combined_class_is_made_once_per_error_and_operation() -> None:
    first = for_operation(_violation(), "save")
    second = for_operation(_violation(), "save")
    assert type(first) is type(second)
    assert type(for_operation(_violation(), "delete")) is not type(first)
    assert type(first).__mro__[2:] == (UniqueViolation, WriteConflict, DynauniqueError, PutError,
                                       *PutError.__mro__[1:])


def test_for_operation_twice_is_a_no_op_and_another_operation_replaces_the_first() -> None:
    exc = for_operation(_violation(), "save")
    saved_type = type(exc)
    assert for_operation(exc, "save") is exc
    assert type(exc) is saved_type
    for_operation(exc, "delete")
    assert isinstance(exc, DeleteError) and not isinstance(exc, PutError)
    assert isinstance(exc, UniqueViolation)
    assert type(exc).__mro__[2] is UniqueViolation  # the base, not the save's combination


def test_a_violations_list_still_holds_the_raised_error_itself() -> None:
    exc = for_operation(_violation(), "save")
    assert isinstance(exc, UniqueViolation)
    assert exc.violations == (exc,) and exc.violations[0] is exc


@pytest.mark.parametrize("make", [
    lambda: ConfigurationError("bad model"),
    lambda: InvalidValueError("NaN cannot be locked"),
    lambda: UnsupportedOperationError("use atomic()"),
], ids=lambda m: type(m()).__name__)
@pytest.mark.parametrize(("operation", "pynamodb_error"), OPERATIONS, ids=lambda o: str(o))
def test_errors_that_say_the_call_is_wrong_are_not_wrapped(
        make: Callable[[], DynauniqueError], operation: Operation,
        pynamodb_error: type[PynamoDBException]) -> None:
    exc = make()
    base = type(exc)
    assert for_operation(exc, operation) is exc
    assert type(exc) is base
    assert not isinstance(exc, PynamoDBException)
    assert not hasattr(exc, "cause")


def test_without_a_botocore_cause_pynamodbs_fields_are_empty() -> None:
    exc: Any = for_operation(_raised_from(OutcomeUnknownError("gone"), ValueError("x")), "save")
    assert (exc.cause, exc.cause_response_code, exc.cause_response_message) == (None, None, None)
    assert exc.cancellation_reasons == []
    assert exc.msg == "gone"
    plain: Any = for_operation(ConcurrentModificationError("kept changing"), "delete")
    assert (plain.cause, plain.cause_response_code, plain.cancellation_reasons) == (None, None, [])


def test_the_cause_is_the_nearest_botocore_error_along_the_chain() -> None:
    boto = botocore.exceptions.ClientError(
        {"Error": {"Code": "ConditionalCheckFailedException", "Message": "The conditional "
                   "request failed"}}, "PutItem")
    inner = _raised_from(DynauniqueError("inner"), boto)
    outer: Any = for_operation(_raised_from(ConcurrentModificationError("outer"), inner), "save")
    assert outer.cause is boto
    assert outer.__cause__ is inner
    assert outer.cause_response_code == "ConditionalCheckFailedException"
    assert outer.cause_response_message == "The conditional request failed"
    assert outer.cancellation_reasons == []


def test_a_network_error_is_the_cause_without_a_response_code() -> None:
    boto = botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    exc: Any = for_operation(_raised_from(UnreachableError("down"), boto), "update")
    assert isinstance(exc, UpdateError)
    assert exc.cause is boto
    assert (exc.cause_response_code, exc.cause_response_message) == (None, None)


def test_cancellation_reasons_of_pynamodbs_verbose_client_error_are_taken_as_parsed() -> None:
    verbose = VerboseClientError(CANCELLED, "TransactWriteItems", {"table_name": "t"},
                                 cancellation_reasons=[None, CancellationReason(code="X")])
    exc: Any = for_operation(_raised_from(_violation(), verbose), "transact_write")
    assert exc.cancellation_reasons == [None, CancellationReason(code="X")]
    assert exc.cause_response_code == "TransactionCanceledException"


def test_cancellation_reasons_of_a_client_error_without_reasons_are_empty() -> None:
    boto = botocore.exceptions.ClientError({"Error": {"Code": "ValidationException"}}, "PutItem")
    assert cancellation_reasons(boto) == []
    assert cancellation_reasons(None) == []
    assert cancellation_reasons(ValueError("x")) == []


def test_pynamodb_except_clauses_catch_the_raised_error() -> None:
    cause = botocore.exceptions.ClientError(CANCELLED, "TransactWriteItems")
    for operation, pynamodb_error in OPERATIONS:
        with pytest.raises(pynamodb_error) as caught:
            raise for_operation(_raised_from(_violation(), cause), operation)
        assert isinstance(caught.value, UniqueViolation)
        assert caught.value.__cause__ is cause


def test_a_wrapped_error_pickles_with_its_classes_and_fields() -> None:
    cause = botocore.exceptions.ClientError(CANCELLED, "TransactWriteItems")
    exc = for_operation(_raised_from(OutcomeUnknownError("no answer"), cause), "save")
    copy: Any = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert (str(copy), copy.msg, copy.cause_response_code) == (
        "no answer", "no answer", "TransactionCanceledException")
    assert copy.cancellation_reasons == CANCELLED_REASONS


def test_combined_classes_are_not_module_members() -> None:
    for_operation(_violation(), "update")
    assert not [name for name, obj in inspect.getmembers(errors, inspect.isclass)
                if obj.__module__ == errors.__name__ and issubclass(obj, PynamoDBException)]


# --- against the local server: the botocore errors a real write raises ---------------------------


