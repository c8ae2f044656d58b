"""Every error dynaunique raises: one root, structured fields, messages that say what to do.

The tree::

    DynauniqueError
    ├── ConfigurationError          a model or constraint is declared wrongly (raised at class
    │   │                           definition), or a setting such as the lock secret is missing
    │   └── GlobalTableError        a write to a global table: no home region, or a tool's
    │                               transaction on a strong consistency one (docs/global-tables.md)
    ├── InvalidValueError           a value cannot be protected: NaN, a reserved key, a bad type
    ├── UnsupportedOperationError   an API that would bypass the locks (batch_write, an update
    │                               action whose result cannot be known before sending)
    ├── TransactionTooLargeError    more than 100 items or 4 MB, refused before sending
    ├── WriteConflict               DynamoDB refused a write: nothing of it was applied
    │   ├── UniqueViolation         a lock is held by another record
    │   ├── ConcurrentModificationError
    │   │   │                       the record changed (or vanished) since it was loaded
    │   │   └── ForeignLockError    a lock its values imply is another record's (drift)
    │   ├── OtherModelRecordError   the item is a record of another model holding locks this
    │   │                           write does not carry (a table several models share)
    │   └── ConditionCheckFailedError
    │                               a ``condition_check`` of an ``atomic()`` block failed
    ├── OutcomeUnknownError         the network failed on every resend: the write may or may not
    │                               have been applied (it is idempotent: retry the same call)
    ├── UnreachableError            DynamoDB could not be reached at all: nothing was applied
    └── MigrationError, AuditError  (raised by the migrations and audit tools)

Botocore errors are read at exactly one boundary, ``dynaunique._transport.answers`` (``answer_of``),
and mapped to these by one function (``error_for``; a write's failed conditions by
``dynaunique._write.transaction``), chained so the original stays reachable as ``__cause__``.

What ``save()``, ``delete()`` and ``update()`` raise because the write was not done as asked (a
condition failed, DynamoDB refused it, the network failed) is also PynamoDB's ``PutError``,
``DeleteError`` or ``UpdateError`` (and ``atomic()``'s is ``TransactWriteError``), so existing
``except PutError:`` code keeps working: :func:`for_operation` re-classes the error to a subclass
of both. Errors that say the call itself is wrong (``ConfigurationError``, ``InvalidValueError``,
``UnsupportedOperationError``) are raised as they are, as PynamoDB raises its ``ValueError`` and
``TypeError`` unwrapped.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import botocore.exceptions
from pynamodb.exceptions import (
    CancellationReason,
    DeleteError,
    PutError,
    PynamoDBException,
    TransactWriteError,
    UpdateError,
    VerboseClientError,
)


class DynauniqueError(Exception):
    """Root of every error dynaunique raises."""

    #: Exit status the CLI uses when this error ends a command.
    exit_code: int = 1


class ConfigurationError(DynauniqueError):
    """A model, attribute or constraint is declared wrongly, or a required setting is missing."""

    exit_code = 2


class GlobalTableError(ConfigurationError):
    """A write to a DynamoDB global table that dynaunique cannot keep unique as configured: an
    eventually consistent one with no home region (``Meta.home_region``,
    ``DYNAUNIQUE_HOME_REGION`` or ``[tool.dynaunique] home_region``), or a tool's transaction
    (``migrate``) on a multi-Region strong consistency one, which refuses transactions (a
    model's writes go there by a protocol without them, and ``repair`` settles it in place).
    Raised before anything is sent."""

    def __init__(self, message: str, *, table: str = "", mode: str | None = None,
                 regions: Sequence[str] = ()) -> None:
        #: The table, its ``MultiRegionConsistency`` and every region holding it.
        self.table = table
        self.mode = mode
        self.regions = tuple(regions)
        super().__init__(message)


class InvalidValueError(DynauniqueError, ValueError):
    """A value cannot be protected by a lock (NaN, a reserved key prefix, an unsupported type)."""


class UnsupportedOperationError(DynauniqueError):
    """The call would bypass the lock items; the message says which API to use instead."""


class TransactionTooLargeError(DynauniqueError):
    """The unit of work exceeds DynamoDB's transaction limits; nothing was sent.

    Splitting it would break atomicity, so dynaunique refuses instead.
    """

    def __init__(self, items: int, size_bytes: int, max_items: int, max_bytes: int) -> None:
        self.items = items
        self.size_bytes = size_bytes
        self.max_items = max_items
        self.max_bytes = max_bytes
        super().__init__(
            f"the transaction would have {items} items and {size_bytes} bytes of items; DynamoDB "
            f"allows at most {max_items} items and {max_bytes} bytes. Nothing was sent: split the "
            "work into smaller atomic() blocks yourself if they need not be all-or-nothing."
        )


class WriteConflict(DynauniqueError):
    """DynamoDB refused the write because a condition did not hold; nothing was applied."""


#: What a value of a ``hashed=True`` constraint is shown as, wherever a value would be shown.
HASHED = "<hashed>"


def format_value(value: Any, *, hashed: bool) -> str:
    """A protected value as people see it — in messages, log events and spans: its ``repr``,
    or :data:`HASHED` for a value of a ``hashed=True`` constraint (as given or normalized).

    The one renderer of a value: every message that shows a value builds it here, so a hashed
    constraint's value cannot appear in one.
    """
    return HASHED if hashed else repr(value)


def format_key(key: Mapping[str, Any] | None) -> str:
    """Render a record's primary key the way messages show it: its hash key value.

    (The full key, range key included, is in the error's ``owner``/``key`` attribute.)
    """
    if not key:
        return "<unknown>"
    return str(next(iter(key.values())))


class UniqueViolation(WriteConflict):
    """A unique value is already held by another record.

    ``fields`` are the constrained fields, ``constraint`` the lock name, ``value`` the value
    (a tuple for composite constraints, after normalization; None for a ``hashed``
    constraint, whose value the error does not keep), ``owner`` the holder's primary key
    (``{"PK": "ACCT#a1f9c3", ...}``) when DynamoDB returned it, ``model`` the model class name.
    ``violations`` lists every violation of the same write (itself included) when several
    constraints failed together.
    """

    def __init__(
        self,
        *,
        model: str,
        fields: Sequence[str],
        constraint: str,
        value: Any,
        owner: Mapping[str, Any] | None,
        hashed: bool = False,
        violations: Sequence[UniqueViolation] = (),
    ) -> None:
        self.model = model
        self.fields = tuple(fields)
        self.constraint = constraint
        # A hashed constraint's value is kept nowhere: not in the message, not in a field that
        # a pickle, an error tracker or a ``vars()`` would carry.
        self.value = None if hashed else value
        self.owner = dict(owner) if owner is not None else None
        self.hashed = hashed
        self.violations: tuple[UniqueViolation, ...] = tuple(violations) or (self,)
        super().__init__(self._message())

    def _message(self) -> str:
        what = ", ".join(self.fields)
        shown = "" if self.hashed else f" {format_value(self.value, hashed=False)}"
        held = f" (held by {format_key(self.owner)})" if self.owner else ""
        head = f"{what}{shown} is already taken{held}"
        others = [v for v in self.violations
                  if v is not self and (v.constraint, v.value) != (self.constraint, self.value)]
        if others:
            head += "; also: " + "; ".join(v._message_single() for v in others)
        return head

    def _message_single(self) -> str:
        shown = "" if self.hashed else f" {format_value(self.value, hashed=False)}"
        held = f" (held by {format_key(self.owner)})" if self.owner else ""
        return f"{', '.join(self.fields)}{shown} is already taken{held}"

    def with_violations(self, violations: Sequence[UniqueViolation]) -> UniqueViolation:
        """Return a copy of this violation that lists ``violations`` as the full set."""
        return UniqueViolation(
            model=self.model,
            fields=self.fields,
            constraint=self.constraint,
            value=self.value,
            owner=self.owner,
            hashed=self.hashed,
            violations=violations,
        )


class ConcurrentModificationError(WriteConflict):
    """The record changed or vanished since this copy was loaded (or exists, for a create).

    Reload it (``refresh()`` or ``get()``), reapply the change and save again.
    """

    def __init__(self, message: str, *, model: str = "", key: Mapping[str, Any] | None = None,
                 current: Mapping[str, Any] | None = None, write: Any = None) -> None:
        self.model = model
        #: The planned write whose condition failed (a ``dynaunique._write.plan`` value).
        self.write = write
        self.key = dict(key) if key is not None else None
        #: The item as DynamoDB holds it now (raw attribute values), when it was returned.
        self.current = dict(current) if current is not None else None
        super().__init__(message)


class ForeignLockError(ConcurrentModificationError):
    """A lock this record's loaded values imply is held by another record.

    Only possible after drift (a duplicate from before the constraint was migrated, or a write
    that bypassed the library). ``save()``/``delete()`` handle it themselves: the lock is not
    this record's, so they leave it alone and resend without deleting it.
    """

    def __init__(self, message: str, *, model: str, lock_keys: Sequence[str]) -> None:
        #: Hash keys of the locks another record holds.
        self.lock_keys = tuple(lock_keys)
        super().__init__(message, model=model)


class OtherModelRecordError(WriteConflict):
    """The item a write would replace or delete is a record of another model that holds locks
    this write does not carry: writing it would leave those locks orphaned.

    ``model`` is the model writing, ``other_model`` the model the stored item is a record of
    (the audit's rule, ``dynaunique._lock.items.claim``), ``locks`` the names of the locks that
    model requires of it (held, or not yet written for a record from before its constraint).
    Delete the record as ``other_model`` first (or both in one ``atomic()`` block).
    """

    def __init__(self, message: str, *, model: str, other_model: str,
                 key: Mapping[str, Any] | None, locks: Sequence[str] = ()) -> None:
        self.model = model
        self.other_model = other_model
        self.key = dict(key) if key is not None else None
        self.locks = tuple(locks)
        super().__init__(message)


class ConditionCheckFailedError(WriteConflict):
    """A ``tx.condition_check(...)`` of an ``atomic()`` block did not hold."""

    def __init__(self, message: str, *, model: str, key: Mapping[str, Any]) -> None:
        self.model = model
        self.key = dict(key)
        super().__init__(message)


class OutcomeUnknownError(DynauniqueError):
    """Every resend failed at the network level: the write may or may not have been applied.

    The same call is idempotent: repeating ``save()``/``delete()`` is safe.
    """


class UnreachableError(DynauniqueError):
    """Every attempt failed to connect: nothing was sent, so nothing was applied."""


class MigrationError(DynauniqueError):
    """A migration could not be planned, loaded or applied."""


class AuditError(DynauniqueError):
    """An audit or repair could not run."""


# --- PynamoDB's errors ---------------------------------------------------------------------------

#: What each write operation raises in PynamoDB.
Operation = Literal["save", "delete", "update", "transact_write"]
PYNAMODB_ERRORS: dict[str, type[PynamoDBException]] = {
    "save": PutError,
    "delete": DeleteError,
    "update": UpdateError,
    "transact_write": TransactWriteError,
}

# The call was wrong, not the write: PynamoDB raises the like of these (ValueError, TypeError)
# unwrapped, so they stay only dynaunique's.
_NOT_WRAPPED: tuple[type[DynauniqueError], ...] = (
    ConfigurationError, InvalidValueError, UnsupportedOperationError)

# (dynaunique class, PynamoDB class) -> their combination; made once each, so ``type(a) is
# type(b)`` holds for two errors of the same kind and operation.
_combined: dict[tuple[type[DynauniqueError], type[PynamoDBException]], type[DynauniqueError]] = {}
_combined_guard = threading.Lock()


class _AsPynamoDBError:
    """Mixed into each combination: PynamoDB's fields, computed from the botocore error."""

    #: The dynaunique class this combination extends (its ``type(exc)`` before re-classing).
    _du_base: type[DynauniqueError]
    #: The botocore error DynamoDB's answer raised (PynamoDB's ``cause``), or None.
    cause: Exception | None
    #: The message, as PynamoDB's errors carry it.
    msg: str
    args: tuple[Any, ...]

    @property
    def cancellation_reasons(self) -> list[CancellationReason | None]:
        """DynamoDB's reasons for cancelling the transaction, one per item (None: not a
        reason), as ``TransactWriteError.cancellation_reasons``; ``[]`` without a cancelled
        transaction."""
        return cancellation_reasons(self.cause)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by its parts: the combination is made on demand, never found by name.
        operation = next(op for op, error in PYNAMODB_ERRORS.items() if isinstance(self, error))
        return (_rebuild, (self._du_base, operation, self.args), dict(self.__dict__))


def _rebuild(base: type[DynauniqueError], operation: Operation,
             args: tuple[Any, ...]) -> DynauniqueError:
    exc = base.__new__(combined_class(base, PYNAMODB_ERRORS[operation]))
    exc.args = args
    return exc


def combined_class(base: type[DynauniqueError],
                   pynamodb_error: type[PynamoDBException]) -> type[DynauniqueError]:
    """The one subclass of ``base`` and ``pynamodb_error``; it keeps ``base``'s name."""
    key = (base, pynamodb_error)
    with _combined_guard:
        found = _combined.get(key)
        if found is None:
            # Same name and module as ``base``: tracebacks, logs and metrics keyed on the class
            # name read as before.
            found = type(base.__name__, (_AsPynamoDBError, base, pynamodb_error),
                         {"__module__": base.__module__, "__qualname__": base.__qualname__,
                          "__doc__": base.__doc__, "_du_base": base})
            _combined[key] = found
        return found


_BOTOCORE_ERRORS: tuple[type[Exception], ...] = (
    botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError)


def botocore_cause(exc: BaseException) -> Exception | None:
    """The botocore error behind ``exc``: the nearest one along its ``__cause__`` chain."""
    seen: set[int] = set()
    current = exc.__cause__
    while current is not None and id(current) not in seen:
        if isinstance(current, _BOTOCORE_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


def cancellation_reasons(cause: BaseException | None) -> list[CancellationReason | None]:
    """The cancellation reasons of a ``TransactionCanceledException``, as PynamoDB lists them.

    PynamoDB's own ``VerboseClientError`` carries them parsed; a plain botocore ``ClientError``
    carries them in its response, parsed here the same way (``Code`` ``"None"`` is None).
    """
    if isinstance(cause, VerboseClientError):
        return list(cause.cancellation_reasons)
    if not isinstance(cause, botocore.exceptions.ClientError):
        return []
    reasons = cause.response.get("CancellationReasons") or []
    return [
        CancellationReason(code=r["Code"], message=r.get("Message"), raw_item=r.get("Item"))
        if r.get("Code") != "None" else None
        for r in reasons
    ]


def for_operation(exc: DynauniqueError, operation: Operation) -> DynauniqueError:
    """``exc``, re-classed so that it is also what PynamoDB raises for ``operation``.

    ``save`` -> ``PutError``, ``delete`` -> ``DeleteError``, ``update`` -> ``UpdateError``,
    ``transact_write`` (``atomic()``) -> ``TransactWriteError``. The same object is returned: its
    message, attributes, ``__cause__`` and traceback are untouched; PynamoDB's ``cause`` is set
    to the botocore error along ``__cause__`` (so ``cause_response_code`` and
    ``cause_response_message`` answer as PynamoDB's would) and ``msg`` to the message.
    ``ConfigurationError``, ``InvalidValueError`` and ``UnsupportedOperationError`` are returned
    unchanged: they say the call is wrong, not that the write failed.

    Use it where the error leaves the operation: ``raise for_operation(exc, "save")``.
    """
    pynamodb_error = PYNAMODB_ERRORS[operation]
    if isinstance(exc, (*_NOT_WRAPPED, pynamodb_error)):
        return exc
    base = exc._du_base if isinstance(exc, _AsPynamoDBError) else type(exc)
    exc.__class__ = combined_class(base, pynamodb_error)
    wrapped: Any = exc
    wrapped.cause = botocore_cause(exc)
    wrapped.msg = str(exc)
    return exc
