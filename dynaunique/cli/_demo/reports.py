"""The demo's reports: what each step of the story measured, and which promises it broke.

The race's reports live with the race (``race``); :data:`Report` names them all.

Every number a report holds is measured; nothing is hard-coded. A report's ``problems`` is empty
when the step kept all its promises; the command exits 1 when any is not.
"""

from __future__ import annotations

from typing import Any

import attrs

from dynaunique.cli._demo.cast import ADA_KEY
from dynaunique.cli._demo.race import RaceReport
from dynaunique.cli._demo.wire import ItemSummary, Sent, comparable


def _not_one_transaction(what: str, sent: tuple[Sent, ...]) -> list[str]:
    """The problem, if any, of a write that should have been one TransactWriteItems."""
    operations = [s.operation for s in sent]
    if operations == ["TransactWriteItems"]:
        return []
    return [f"{what} sent {operations}, not one TransactWriteItems"]


@attrs.frozen
class SignupReport:
    """Step 1: ada signs up — one TransactWriteItems with her record and three locks."""

    key: str
    email: str
    #: What ``save(dry_run=True)`` returned just before the real save.
    dry_run: dict[str, Any]
    #: Every request the save sent (there should be exactly one).
    sent: tuple[Sent, ...]
    #: The lock keys ada now holds.
    locks: tuple[str, ...]
    #: The items of the requests sent, one line each (the table the demo prints; the JSON
    #: with ``--verbose``).
    items: tuple[ItemSummary, ...] = ()

    @property
    def request(self) -> Sent | None:
        """The TransactWriteItems request that went over the wire."""
        return next((s for s in self.sent if s.operation == "TransactWriteItems"), None)

    @property
    def matches_dry_run(self) -> bool:
        """Whether the dry run is what was then sent (token and ``created`` aside)."""
        request = self.request
        return request is not None and comparable(request.body) == comparable(self.dry_run)

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if len(self.sent) != 1 or self.request is None:
            out.append(f"the signup sent {len(self.sent)} requests, not one TransactWriteItems")
        elif not self.matches_dry_run:
            out.append("the request sent differs from save(dry_run=True)")
        return tuple(out)


@attrs.frozen
class ViolationReport:
    """Step 2: a second signup with ada's email in other case is refused, naming her."""

    key: str
    email: str
    #: The UniqueViolation's message and fields.
    message: str
    fields: tuple[str, ...]
    constraint: str
    value: Any
    owner: dict[str, Any] | None
    #: Measured after the refusal: did any part of the refused signup land?
    record_written: bool
    locks_written: int

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        if not self.message:
            out.append("the second signup was not refused")
        if self.record_written or self.locks_written:
            out.append("the refused signup was partly written")
        return tuple(out)


@attrs.frozen
class ChangeReport:
    """Step 4: ada changes her email; the old one is free again and grace takes it."""

    old_email: str
    new_email: str
    #: Every request ada's save sent (one TransactWriteItems: record, new lock, old lock).
    sent: tuple[Sent, ...]
    #: The items of those requests, one line each.
    items: tuple[ItemSummary, ...]
    #: The account that signed up with the old email afterwards, and the result of looking the
    #: old and the new email up through their locks.
    taker: str
    old_email_holder: str | None
    new_email_holder: str | None

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = _not_one_transaction("the email change", self.sent)
        if self.old_email_holder != self.taker:
            out.append("the old email did not become free for another account")
        if self.new_email_holder != ADA_KEY:
            out.append("the new email does not lead back to ada")
        return tuple(out)


@attrs.frozen
class DeleteReport:
    """Step 5: ada is deleted — her record and every lock she held, in one transaction."""

    key: str
    sent: tuple[Sent, ...]
    #: The items of those requests, one line each.
    items: tuple[ItemSummary, ...]
    #: The lock keys ada held before the delete, and those still present after it.
    held: tuple[str, ...]
    locks_left: tuple[str, ...]
    record_left: bool

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = _not_one_transaction("the delete", self.sent)
        if self.record_left or self.locks_left:
            out.append(f"the delete left {list(self.locks_left)} behind")
        return tuple(out)


@attrs.frozen
class LockRow:
    """One lock item as stored."""

    key: str
    constraint: str
    value: Any
    owner: str
    model: str
    #: Whether the record the lock names exists and holds this very value.
    owner_holds_it: bool


@attrs.frozen
class LockTable:
    """Step 6: every lock item on the demo table."""

    table: str
    rows: tuple[LockRow, ...]

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        return tuple(f"orphan lock {r.key}" for r in self.rows if not r.owner_holds_it)


#: Any step's report, in the order the story tells them.
Report = SignupReport | ViolationReport | RaceReport | ChangeReport | DeleteReport | LockTable
