"""The stream guard: find drift as it happens, from the table's DynamoDB stream.

Writes that bypass dynaunique (raw boto3, another service, the console, a restore, a bulk
import) leave records without locks, locks without records and duplicates. ``dynaunique check``
finds them with a scan of the whole table; the stream guard finds them from the writes
themselves. For every INSERT, MODIFY and REMOVE of a record of a loaded model with constraints,
or of a lock item, it works out the lock values the change touches (from its old and new
images, as the audit computes a record's locks) and re-checks each with one consistent read of
the lock, its owner and the records that touched it — judged by the audit's own judge, so the
findings are the audit's kinds and fields. DynamoDB does not deliver a transaction's records
together or in order with other transactions', so a finding is never made from a stream record:
only from what is stored when the guard reads it.

The class that checks is :class:`Checker` (``Guard`` before issue 39: still importable from
here, with a :class:`DeprecationWarning`, until the release after next); "stream guard" stays
the feature's name. Two ways in: :mod:`dynaunique.streams.aws_lambda` (a Lambda handler for an
event source mapping, reporting batch item failures) and ``dynaunique watch MODULE``
(:class:`Reader`: reads the shards itself and checkpoints its position per shard in the table's
ledger).
docs/operating-locks.md ("Stream guard") says how to deploy it, what it reports and what it
costs.
"""

from __future__ import annotations

import warnings
from typing import Any

from ._across import DoubleGrant, RegionGrant
from ._changes import Change, StreamRecordError, change_of, suspects_of
from ._checker import BatchResult, Checker, finding_dict, streams_logger
from ._shards import STARTS, Checkpoints, Position, Reader, StreamsError, streams_connection

__all__ = [
    "STARTS",
    "BatchResult",
    "Change",
    "Checker",
    "Checkpoints",
    "DoubleGrant",
    "Position",
    "Reader",
    "RegionGrant",
    "StreamRecordError",
    "StreamsError",
    "change_of",
    "finding_dict",
    "streams_connection",
    "streams_logger",
    "suspects_of",
]


def __getattr__(name: str) -> Any:
    """``Guard``, the old name of :class:`Checker`: deprecated, removed in the release after
    next (a module ``__getattr__``, so that only code that still uses it is warned)."""
    if name == "Guard":
        warnings.warn("dynaunique.streams.Guard is deprecated: use dynaunique.streams.Checker "
                      "(the same class)", DeprecationWarning, stacklevel=2)
        return Checker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
