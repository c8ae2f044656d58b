"""dynaunique: declarative unique constraints for Amazon DynamoDB, enforced by lock items.

The public API, re-exported; nothing else lives here.
"""

from __future__ import annotations

from dynaunique import normalizers
from dynaunique.atomic import Atomic, atomic
from dynaunique.constraints import UniqueConstraint
from dynaunique.errors import (
    AuditError,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    ConfigurationError,
    DynauniqueError,
    InvalidValueError,
    MigrationError,
    OutcomeUnknownError,
    TransactionTooLargeError,
    UniqueViolation,
    UnsupportedOperationError,
    WriteConflict,
)
from dynaunique.model import Model

__version__ = "0.1.0"

__all__ = [
    "Atomic",
    "AuditError",
    "ConcurrentModificationError",
    "ConditionCheckFailedError",
    "ConfigurationError",
    "DynauniqueError",
    "InvalidValueError",
    "MigrationError",
    "Model",
    "OutcomeUnknownError",
    "TransactionTooLargeError",
    "UniqueConstraint",
    "UniqueViolation",
    "UnsupportedOperationError",
    "WriteConflict",
    "atomic",
    "normalizers",
]
