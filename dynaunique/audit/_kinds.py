"""The audit's kinds as enums: what a finding is, what a repair does, and how it ended.

Every kind is a :class:`dynaunique._lock.kinds.Kind`: a ``str`` enum that compares equal to its
value (``FindingKind.ORPHAN == "orphan"``) and prints, formats and serializes to JSON as that value,
so reports read as they did when the kinds were bare strings.
"""

from __future__ import annotations

from dynaunique._lock.kinds import Kind


class FindingKind(Kind):
    """What kind of disagreement between lock items and records a :class:`Finding` is."""

    #: Several records hold the same normalized value under one constraint.
    DUPLICATE = "duplicate"
    #: A record holds a value that no lock protects.
    MISSING = "missing"
    #: The one record that holds a value is not the lock's owner (the owner is gone or moved on).
    FOREIGN_OWNER = "foreign_owner"
    #: A lock whose owner record is gone, or no longer holds the value the lock protects.
    ORPHAN = "orphan"
    #: A hashed lock no record requires, made under another secret than the current one (or
    #: before locks carried the fingerprint of theirs): never deleted as an orphan unless asked.
    FOREIGN_SECRET = "foreign_secret"
    #: A lock of a constraint name no loaded model declares on that table.
    UNKNOWN_CONSTRAINT = "unknown_constraint"
    #: A record whose locks cannot be computed (ambiguous model, invalid value).
    UNREADABLE = "unreadable"
    #: An MRSC table's pending intent within its grace period, its owner not (yet) holding the
    #: value: a write in flight (docs/global-tables.md). Not an orphan; never repaired.
    PENDING = "pending"
    #: A pending intent whose owner holds the value (its writer stopped, or has not yet come
    #: to, clearing the mark): repair clears the mark, conditioned on the intent's token.
    CONFIRMABLE = "confirmable"


class OwnerState(Kind):
    """Where an orphan's (or a foreign owner's) lock owner stands, as the consistent read saw."""

    #: The owner record does not exist.
    GONE = "gone"
    #: The owner exists but no longer holds the value.
    CHANGED = "changed"
    #: The owner exists but no loaded model reads it.
    UNKNOWN = "unknown"
    #: The lock names no owner.
    NONE = "none"


class LockStatus(Kind):
    """Whether DynamoDB holds a lock a record's values require (:class:`ExpectedLock`)."""

    #: The lock exists and names this record.
    HELD = "held"
    #: No lock item has that key.
    MISSING = "missing"
    #: The lock exists but names another owner.
    FOREIGN = "foreign"
    #: The lock names this record and is still an MRSC pending intent: its writer has not
    #: cleared the mark (a write in flight, or one whose writer stopped before clearing it).
    PENDING = "pending"


class ActionKind(Kind):
    """What a :class:`RepairAction` writes — always lock items, never a record — in its one
    guarded TransactWriteItems."""

    #: Delete an orphan lock (its owner is gone or no longer holds the value).
    DELETE_ORPHAN = "delete_orphan"
    #: Write the lock a record holds but no lock protects.
    PUT_MISSING = "put_missing"
    #: Hand a lock over from a record that no longer holds the value to the one that does.
    TRANSFER = "transfer"
    #: Delete a lock of a constraint no loaded model declares (only when asked by name).
    DROP_UNKNOWN = "drop_unknown"
    #: Clear a confirmable intent's pending mark (one UpdateItem conditioned on its token).
    CONFIRM_INTENT = "confirm_intent"


class RepairStatus(Kind):
    """What a repair did with one action (:attr:`RepairOutcome.status`)."""

    #: The action's write was applied.
    FIXED = "fixed"
    #: A re-check found the drift already gone; nothing was written.
    ALREADY_FIXED = "already_fixed"
    #: A re-check found the key drifted into something no repair fixes (e.g. a duplicate).
    NOT_FIXED = "not_fixed"
    #: The records kept changing under the action's guards; given up, nothing was written.
    SKIPPED = "skipped"
    #: The write raised a dynaunique error other than a conflict; the outcome's detail carries it.
    FAILED = "failed"


#: Every finding kind, in the order reports list them.
KINDS = tuple(FindingKind)
#: The kinds only the MRSC protocol's locks give (``counts()`` names them only when found, so
#: the reports of other tables read as before).
INTENT_KINDS = (FindingKind.PENDING, FindingKind.CONFIRMABLE)
#: How each kind reads in a table (the ``check`` command's and the ``ui`` page's words).
KIND_LABELS: dict[str, str] = {
    FindingKind.DUPLICATE: "duplicate",
    FindingKind.MISSING: "missing lock",
    FindingKind.FOREIGN_OWNER: "foreign owner",
    FindingKind.ORPHAN: "orphan lock",
    FindingKind.FOREIGN_SECRET: "other secret",
    FindingKind.UNKNOWN_CONSTRAINT: "unknown constraint",
    FindingKind.UNREADABLE: "unreadable record",
    FindingKind.PENDING: "pending intent",
    FindingKind.CONFIRMABLE: "confirmable intent",
}
