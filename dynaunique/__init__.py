"""dynaunique: declarative unique constraints for Amazon DynamoDB, enforced by lock items.

The public API, re-exported; nothing else lives here. The errors are imported at once (they are
cheap); every other name on first use (PEP 562's module ``__getattr__``), so that a process that
needs only a part (``dynaunique --help``, ``python -m dynaunique.testing``) does not pay for
PynamoDB's connection and botocore's client (about 0.5 CPU-s).
"""

from __future__ import annotations

import importlib
import logging as _logging
from importlib import metadata as _metadata
from typing import TYPE_CHECKING

from dynaunique.errors import (
    AuditError,
    ConcurrentModificationError,
    ConditionCheckFailedError,
    ConfigurationError,
    DynauniqueError,
    ForeignLockError,
    GlobalTableError,
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

# The package logger has a NullHandler from the first import (the library is silent unless the
# application configures logging), not only once dynaunique.observe is imported on first use.
_logging.getLogger("dynaunique").addHandler(_logging.NullHandler())

if TYPE_CHECKING:
    from dynaunique import normalizers
    from dynaunique._write.atomic import Atomic, atomic
    from dynaunique._write.render import to_json
    from dynaunique.constraints import UniqueConstraint
    from dynaunique.model import Model

#: The names imported on first use, and where each lives (``normalizers`` is the module itself).
_LAZY = {
    "Atomic": "dynaunique._write.atomic",
    "atomic": "dynaunique._write.atomic",
    "to_json": "dynaunique._write.render",
    "UniqueConstraint": "dynaunique.constraints",
    "Model": "dynaunique.model",
    "normalizers": "dynaunique.normalizers",
}

if not TYPE_CHECKING:  # mypy reads the imports above; a typo stays an error for it

    def __getattr__(name: str) -> object:
        """Import a public name on first use, then keep it as a module global."""
        where = _LAZY.get(name)
        if where is None:
            raise AttributeError(f"module 'dynaunique' has no attribute {name!r}")
        module = importlib.import_module(where)
        value = module if name == "normalizers" else getattr(module, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """The module's names, the ones not imported yet included."""
        return sorted({*globals(), *_LAZY})


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
    "GlobalTableError",
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
