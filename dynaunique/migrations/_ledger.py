"""The ledger's layout: its item keys and the resumable state of a phase it stores (counters,
conflicts, write-ahead intents, segment progress).

A *job* is one phase of one operation of one migration in one direction:
``<migration>#<operation index>#<F|B>#<phase index>`` (:func:`job_id`). The table of ledger
items is in :mod:`dynaunique.migrations.recorder`'s docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from dynaunique._lock.items import key_id
from dynaunique._lock.locks import SYSTEM_PREFIX, typed, untyped
from dynaunique.migrations._dynamo import TableKeys

MIGRATION_PREFIX = f"{SYSTEM_PREFIX}MIGRATION#"
JOB_PREFIX = f"{SYSTEM_PREFIX}JOB#"
PROGRESS_PREFIX = f"{SYSTEM_PREFIX}PROGRESS#"
LEASE_PREFIX = f"{SYSTEM_PREFIX}LEASE#"
#: A stream consumer's position in one shard (``dynaunique.streams``):
#: ``UNIQ#~STREAM#<consumer>#<stream label>#<shard id>``.
STREAM_PREFIX = f"{SYSTEM_PREFIX}STREAM#"
#: The token bucket workers share for ``--max-wcu``/``--max-rcu``: ``UNIQ#~BUDGET#<app>#WCU``.
BUDGET_PREFIX = f"{SYSTEM_PREFIX}BUDGET#"


def ledger_key(keys: TableKeys, app: str, prefix: str, *parts: object) -> dict[str, Any]:
    """The typed key of one of ``app``'s ledger items: ``<prefix><app>#<part>#<part>...``."""
    return keys.key(prefix + "#".join([app, *(str(p) for p in parts)]))


def job_id(migration: str, operation: int, backwards: bool, phase: int) -> str:
    """``0002_add_x#0#F#1``: phase 1 of operation 0 of migration 0002_add_x, forwards."""
    return f"{migration}#{operation}#{'B' if backwards else 'F'}#{phase}"


@attrs.define
class Counters:
    """What a phase did so far (summed over segments for display)."""

    scanned: int = 0
    records: int = 0
    skipped: int = 0
    written: int = 0
    present: int = 0
    deleted: int = 0
    duplicates: int = 0
    write_units: float = 0.0

    def add(self, other: Counters) -> None:
        """Add ``other`` into this one."""
        for field in attrs.fields(Counters):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def to_typed(self) -> dict[str, Any]:
        """As DynamoDB attribute values."""
        return {f.name: {"N": str(getattr(self, f.name))} for f in attrs.fields(Counters)}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Counters:
        """From DynamoDB attribute values."""
        values: dict[str, Any] = {}
        for field in attrs.fields(Counters):
            if field.name in data:
                raw = data[field.name]["N"]
                values[field.name] = float(raw) if field.name == "write_units" else int(raw)
        return cls(**values)


@attrs.frozen
class Conflict:
    """A record whose lock is held by another record: a duplicate value (or an unexplained
    holder). ``holder`` is the lock's owner (typed key), ``record`` the one that could not get
    it; ``value`` is None for hashed constraints."""

    model: str
    constraint: str
    lock: str
    record: dict[str, Any]
    holder: dict[str, Any] | None
    holder_model: str | None = None
    value: Any = None
    hashed: bool = False

    def to_typed(self) -> dict[str, Any]:
        """As a DynamoDB map."""
        data: dict[str, Any] = {
            "model": {"S": self.model},
            "constraint": {"S": self.constraint},
            "lock": {"S": self.lock},
            "record": {"M": self.record},
            "holder": {"M": self.holder} if self.holder is not None else {"NULL": True},
            "hashed": {"BOOL": self.hashed},
        }
        if self.holder_model is not None:
            data["holder_model"] = {"S": self.holder_model}
        if self.value is not None and not self.hashed:
            data["value"] = typed(self.value)
        return {"M": data}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Conflict:
        """From a DynamoDB map."""
        fields = data["M"]
        holder = fields.get("holder", {})
        return cls(
            model=fields["model"]["S"],
            constraint=fields["constraint"]["S"],
            lock=fields["lock"]["S"],
            record=fields["record"]["M"],
            holder=holder.get("M") if "M" in holder else None,
            holder_model=fields["holder_model"]["S"] if "holder_model" in fields else None,
            value=untyped(fields["value"]) if "value" in fields else None,
            hashed=bool(fields.get("hashed", {}).get("BOOL", False)),
        )


@attrs.frozen(eq=False)
class Pending:
    """A lock write about to be sent from a read that may be stale (write-ahead intent).

    If the runner dies before it re-read the record, the next run reconciles ``lock`` with the
    record that ``owner`` names (or, without ``owner``, the record the lock item names).
    """

    lock: str
    owner: dict[str, Any] | None = None

    @property
    def ident(self) -> tuple[str, Any]:
        """What makes two entries the same: the lock key and the owner's key."""
        return self.lock, key_id(self.owner or {})

    def to_typed(self) -> dict[str, Any]:
        """As a DynamoDB map."""
        data: dict[str, Any] = {"lock": {"S": self.lock}}
        if self.owner is not None:
            data["owner"] = {"M": self.owner}
        return {"M": data}

    @classmethod
    def from_typed(cls, data: Mapping[str, Any]) -> Pending:
        """From a DynamoDB map."""
        fields = data["M"]
        return cls(fields["lock"]["S"], fields["owner"]["M"] if "owner" in fields else None)


@attrs.define
class Progress:
    """One scan segment of one job: where it stopped, whether it is done, what it found."""

    job: str
    total: int
    segment: int
    last_key: dict[str, Any] | None = None
    done: bool = False
    counters: Counters = attrs.field(factory=Counters)
    conflicts: list[Conflict] = attrs.field(factory=list)
    #: Lock writes of the current page not yet verified (see :class:`Pending`).
    pending: list[Pending] = attrs.field(factory=list)
    #: The segment stopped early because it holds as many conflicts as it may store.
    blocked: bool = False
    #: Whether the item exists in the ledger (False: the segment never started).
    stored: bool = False
    #: The runner that wrote the item last (its lease holder id), as read: the fence a
    #: checkpoint is guarded by (see ``MigrationRecorder.save_progress``).
    holder: str | None = None

