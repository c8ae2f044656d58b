"""dynaunique.errors: the tree, the structured fields, the messages and the exit codes."""

from __future__ import annotations

import inspect

import pytest

import dynaunique
from dynaunique import errors
from dynaunique.errors import (
    AuditError,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    ConfigurationError,
    DynauniqueError,
    ForeignLockError,
    InvalidValueError,
    MigrationError,
    OutcomeUnknownError,
    TransactionTooLargeError,
    UniqueViolation,
    UnreachableError,
    UnsupportedOperationError,
    WriteConflict,
    format_key,
)

EXCEPTIONS = [
    obj for _, obj in inspect.getmembers(errors, inspect.isclass)
    if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]
ALL_ERRORS: list[type[DynauniqueError]] = [e for e in EXCEPTIONS if issubclass(e, DynauniqueError)]


def test_the_module_defines_exactly_the_documented_errors() -> None:
    assert {e.__name__ for e in EXCEPTIONS} == {
        "DynauniqueError", "ConfigurationError", "InvalidValueError",
        "UnsupportedOperationError", "TransactionTooLargeError", "WriteConflict",
        "UniqueViolation", "ConcurrentModificationError", "ForeignLockError",
        "ConditionCheckFailedError",
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
    assert str(error) == "email 'ada@lovelace.io' is already taken (held by ACCT#a1f9c3)"
    assert error.model == "Account"
    assert error.fields == ("email",)
    assert error.constraint == "EMAIL"
    assert error.value == "ada@lovelace.io"
    assert error.owner == {"PK": "ACCT#a1f9c3", "SK": "PROFILE"}
    assert error.hashed is False
    assert error.violations == (error,)


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
        "the transaction would have 101 items and about 2048 bytes; DynamoDB allows at most "
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
