"""The kinds migrations name with a word, as enums whose values are exactly those words.

Each is a :class:`dynaunique._lock.kinds.Kind` (a ``str`` enum): a member equals its old string
(``PhaseKind.FILL == "fill"``), and ``str()``, f-strings and ``json.dumps`` give the bare
value, so the ledger items, JSON and the CLI's output are the same bytes as when these were
plain strings — and a ledger written before keeps being read.
"""

from __future__ import annotations

from dynaunique._lock.kinds import Kind


class PhaseKind(Kind):
    """What a phase does to the table: ``fill`` writes the locks a declaration requires,
    ``sweep`` deletes the locks their owners no longer require, ``remove`` deletes every lock
    of a constraint, ``run`` calls a RunPython function."""

    FILL = "fill"
    SWEEP = "sweep"
    REMOVE = "remove"
    RUN = "run"


class PutOutcome(Kind):
    """What a lock put guarded "missing, or owned by this record" found: the lock was written
    (``new``), it was already this record's (``present``), or another record holds it
    (``taken``)."""

    NEW = "new"
    PRESENT = "present"
    TAKEN = "taken"


class DeleteOutcome(Kind):
    """What a lock delete guarded "missing, or owned by this record" found: ``deleted``,
    already gone (``absent``), or another record holds it (``foreign``, left alone)."""

    DELETED = "deleted"
    ABSENT = "absent"
    FOREIGN = "foreign"


class LedgerKind(Kind):
    """The ``kind`` field of a ledger item."""

    MIGRATION = "migration"
    JOB = "job"
    PROGRESS = "progress"
    LEASE = "lease"
    #: A stream consumer's position in one shard (``dynaunique.streams``).
    STREAM = "stream"
    #: The shared token bucket of ``--max-wcu`` / ``--max-rcu`` (``migrations._budget``).
    BUDGET = "budget"


class LeaseMode(Kind):
    """Who shares the lease: one runner, or the workers of a split backfill."""

    EXCLUSIVE = "exclusive"
    WORKERS = "workers"


class ProgressState(Kind):
    """The ``state`` of a ``migration_progress`` event (started, running, finished) and of a
    :class:`~dynaunique.migrations.ProgressEvent` (those, and ``record``, ``note``)."""

    STARTED = "started"
    RUNNING = "running"
    FINISHED = "finished"
    #: One record (or lock) of a page processed, before the page's checkpoint.
    RECORD = "record"
    #: A line worth printing.
    NOTE = "note"


class RunState(Kind):
    """How a run of ``migrate`` ended: ``done`` (everything up to the target is applied),
    ``more`` (it stopped at a checkpoint at its time bound, or its segment is still leased:
    run it again), ``idle`` (a worker found nothing left for it: the rest of the current phase
    is leased by running workers, which finish the migration)."""

    DONE = "done"
    MORE = "more"
    IDLE = "idle"
