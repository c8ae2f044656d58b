"""dynaunique: declarative unique constraints for Amazon DynamoDB, enforced by lock items.

The public API, re-exported; nothing else lives here.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from dynaunique import normalizers
from dynaunique._atomic import Atomic, atomic
from dynaunique._render import to_json
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import (
    AuditError,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    ConfigurationError,
    DynauniqueError,
    ForeignLockError,
    InvalidValueError,
    MigrationError,
    OtherModelRecordError,
    OutcomeUnknownError,
    TransactionTooLargeError,
    UniqueViolation,
    UnreachableError,
    UnsupportedOperationError,
    WriteConflict,
)
from dynaunique.model import Model

try:
    __version__ = _metadata.version("dynaunique")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Atomic",
    "AuditError",
    "ConcurrentModificationError",
    "ConditionCheckFailedError",
    "ConfigurationError",
    "DynauniqueError",
    "ForeignLockError",
    "InvalidValueError",
    "MigrationError",
    "Model",
    "OtherModelRecordError",
    "OutcomeUnknownError",
    "TransactionTooLargeError",
    "UniqueConstraint",
    "UniqueViolation",
    "UnreachableError",
    "UnsupportedOperationError",
    "WriteConflict",
    "atomic",
    "normalizers",
    "to_json",
]
