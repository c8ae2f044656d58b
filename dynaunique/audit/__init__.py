"""Inspect, check and repair lock items: find where locks and records disagree, and fix it safely.

Four questions, four entry points, each returning a frozen report object (the CLI only prints
them):

* :func:`who_holds` — "who holds email X?": ONE strongly consistent GetItem of the lock, its key
  built exactly as a save builds it (same normalizer, encoding, hashing).
* :func:`owner_locks` — the locks one record should hold and whether it holds them: a GetItem of
  the record and one BatchGetItem of its expected locks, no scan.
* :func:`list_locks` — every lock item matching a filter: a scan (lock items have one item per
  partition, so no query can list several).
* :func:`check` — a full audit: one scan of each table (parallel segments when asked), every
  suspicious lock key confirmed by a TransactGetItems (a serializable snapshot of the lock, its
  owner and the records that require it), so writes racing with the scan are never reported.
  :func:`check_export` finds the same from a DynamoDB export to S3 instead of a scan (no read
  capacity for the table's items, memory flat), each suspect confirmed on the live table.

:func:`plan_repair` turns an :class:`AuditReport` into guarded writes (pure), and
:func:`apply_repair` sends them. Hashed locks carry a fingerprint of the secret that made their
key: one another secret made is never deleted as an orphan (``foreign_secret``), and a report
warns (:class:`SecretWarning`) when no lock of a hashed constraint was made with the current
secret; repair refuses to touch those unless told ``accept_other_secret``.

Repair never modifies a record: it deletes orphan locks, writes missing ones and hands a lock
over from a record that no longer needs it to the one that does — each as one TransactWriteItems
that also carries ConditionChecks on the records involved, so a record that changed since it was
read cancels the write instead of leaving a missing lock or an orphan behind.
docs/operating-locks.md explains why each guard is there.

How items are told apart: an item whose hash key starts with ``UNIQ#`` is a lock (``UNIQ#~``
items are dynaunique's system items and are skipped); every other item is a record of one of the
loaded models of its table — the one whose ``Meta.is_record(raw)`` hook claims it (an item every
hook turns away is no record); else the only one, when one model uses the table; else the one a
PynamoDB discriminator names; else the best fit: a model for which the item has every non-nullable
attribute beats one for which it has not, then the model declaring more of the item's attributes
wins. A tie between models that would require different locks makes the record *unreadable*
(reported, never repaired). So load every model that writes to a table.

On a multi-Region strong consistency (MRSC) table, where writes are single-item requests that
put each lock as a pending intent first (docs/global-tables.md), a lock still marked pending is
judged by the protocol's own rule: ``pending`` (a write in flight, within its grace period: not
an orphan, never repaired), ``confirmable`` (its owner holds the value: repair clears the mark,
conditioned on its token) or, past its grace period with its owner not holding the value, an
orphan — which repair deletes conditioned on the exact lock read, with no transaction.

The kinds (of findings, lock statuses, repair actions and outcomes) are ``str`` enums: each
compares equal to, prints as and serializes to its value (``ORPHAN == "orphan"``).
"""

from __future__ import annotations

# AuditError is documented in dynaunique.errors; the audit raises it, so it is reachable here
# too. The `_`-names re-exported below are internals that tests and benchmarks pin down.
from dynaunique.errors import AuditError as AuditError

from . import _kinds, _pages
from ._check import AuditReport, SecretWarning, TableSummary, check
from ._export_check import ExportReport, ExportSummary, check_export
from ._intents import TIMING as _TIMING
from ._judge import Evidence, Finding
from ._kinds import (
    ActionKind,
    FindingKind,
    LockStatus,
    OwnerState,
    RepairStatus,
)
from ._lookup import ExpectedLock, LockListing, OwnerLocks, list_locks, owner_locks, who_holds
from ._names import parse_value, pick_model
from ._pages import (
    LockCounts,
    LockPage,
    StoredRecord,
    count_locks,
    hashed_attributes,
    lock_page,
    read_lock,
    read_record,
)
from ._pages import _decode_cursor as _decode_cursor
from ._plan import RepairAction, RepairPlan, plan_repair, remedy
from ._reads import _scan_pages as _scan_pages
from ._repair import RepairOutcome, RepairResult, apply_repair
from ._replicas import RegionDifference, RegionReport, compare_regions, global_modes
from ._stored import Intent, LockInfo, RecordRef
from ._tables import Cost
from ._tables import _Meter as _Meter
from ._tables import _tables as _tables

#: Every finding kind, in the order reports list them.
KINDS = _kinds.KINDS
#: How each kind reads in a table (the ``check`` command's and the ``ui`` page's words).
KIND_LABELS = _kinds.KIND_LABELS
#: The grace period (seconds) of an MRSC pending intent, the protocol's writers' own: within
#: it an intent whose owner does not hold the value is a write in flight, past it an orphan.
INTENT_GRACE = _TIMING.grace
#: How :class:`StoredRecord` shows the value of a field that a hashed constraint protects.
HIDDEN = _pages.HIDDEN

#: A lock whose owner record is gone, or no longer holds the value the lock protects.
ORPHAN = FindingKind.ORPHAN
#: A record holds a value that no lock protects.
MISSING = FindingKind.MISSING
#: The one record that holds a value is not the lock's owner (the owner is gone or moved on).
FOREIGN_OWNER = FindingKind.FOREIGN_OWNER
#: Several records hold the same normalized value under one constraint.
DUPLICATE = FindingKind.DUPLICATE
#: A hashed lock no record requires, made under another secret than the current one (or
#: before locks carried their secret's fingerprint): reported, never deleted unless asked.
FOREIGN_SECRET = FindingKind.FOREIGN_SECRET
#: A lock of a constraint name no loaded model declares on that table.
UNKNOWN_CONSTRAINT = FindingKind.UNKNOWN_CONSTRAINT
#: A record whose locks cannot be computed (ambiguous model, invalid value).
UNREADABLE = FindingKind.UNREADABLE
#: An MRSC table's pending intent within its grace period: a write in flight, never repaired.
PENDING = FindingKind.PENDING
#: An MRSC table's pending intent whose owner holds the value: repair clears its mark.
CONFIRMABLE = FindingKind.CONFIRMABLE

# What a repair did with one action (RepairOutcome.status):
#: The action's write was applied.
FIXED = RepairStatus.FIXED
#: A re-check found the drift already gone; nothing was written.
ALREADY_FIXED = RepairStatus.ALREADY_FIXED
#: A re-check found the key drifted into something no repair fixes (e.g. a duplicate).
NOT_FIXED = RepairStatus.NOT_FIXED
#: The records kept changing under the action's guards; given up, nothing was written.
SKIPPED = RepairStatus.SKIPPED
#: The write raised a dynaunique error other than a conflict; the outcome's detail carries it.
FAILED = RepairStatus.FAILED

__all__ = [
    "ALREADY_FIXED",
    "CONFIRMABLE",
    "DUPLICATE",
    "FAILED",
    "FIXED",
    "FOREIGN_OWNER",
    "FOREIGN_SECRET",
    "HIDDEN",
    "INTENT_GRACE",
    "KINDS",
    "KIND_LABELS",
    "MISSING",
    "NOT_FIXED",
    "ORPHAN",
    "PENDING",
    "SKIPPED",
    "UNKNOWN_CONSTRAINT",
    "UNREADABLE",
    "ActionKind",
    "AuditReport",
    "Cost",
    "Evidence",
    "ExpectedLock",
    "ExportReport",
    "ExportSummary",
    "Finding",
    "FindingKind",
    "Intent",
    "LockCounts",
    "LockInfo",
    "LockListing",
    "LockPage",
    "LockStatus",
    "OwnerLocks",
    "OwnerState",
    "RecordRef",
    "RegionDifference",
    "RegionReport",
    "RepairAction",
    "RepairOutcome",
    "RepairPlan",
    "RepairResult",
    "RepairStatus",
    "SecretWarning",
    "StoredRecord",
    "TableSummary",
    "apply_repair",
    "check",
    "check_export",
    "compare_regions",
    "count_locks",
    "global_modes",
    "hashed_attributes",
    "list_locks",
    "lock_page",
    "owner_locks",
    "parse_value",
    "pick_model",
    "plan_repair",
    "read_lock",
    "read_record",
    "remedy",
    "who_holds",
]
