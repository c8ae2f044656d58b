"""The demo's scenario: the story of docs/why.md told with real requests, returned as reports.

The story: ada signs up (the TransactWriteItems request captured on the wire, compared with
``save(dry_run=True)``), a second signup with her email in other case fails naming her, N
threads race to sign up with one email through dynaunique and through the naive
read-then-put pattern on the same server, ada changes her email (the old one is free again and
another account takes it), ada is deleted (no lock left), and the lock items are listed.

Both demo tables get fresh names and are deleted at the end, so the demo can point at any
DynamoDB, real AWS included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from dynaunique._lock.locks import CONSTRAINT_ATTR, MODEL_ATTR, OWNER_ATTR, VALUE_ATTR, untyped
from dynaunique._transport.endpoint import Target
from dynaunique.cli._demo.cast import (
    ADA_EMAIL,
    ADA_KEY,
    ADA_NEW_EMAIL,
    GRACE_KEY,
    IMPOSTOR_EMAIL,
    IMPOSTOR_KEY,
)
from dynaunique.cli._demo.race import RaceReport, run_race
from dynaunique.cli._demo.reports import (
    ChangeReport,
    DeleteReport,
    LockRow,
    LockTable,
    Report,
    SignupReport,
    ViolationReport,
)
from dynaunique.cli._demo.tables import DemoTables
from dynaunique.cli._demo.target import describe
from dynaunique.cli._demo.wire import WireRecorder
from dynaunique.errors import UniqueViolation

if TYPE_CHECKING:
    from dynaunique.cli._demo.cast import DemoAccount

#: How many threads race per round, and how many rounds, unless told otherwise.
DEFAULT_RACERS = 12
DEFAULT_ROUNDS = 3


class Demo:
    """The seed story against one target; each step method returns its report.

    Use :func:`dynaunique.cli._demo.open_demo`, which creates the two tables and always deletes
    them again.
    """

    def __init__(self, target: Target, *, embedded: bool = False,
                 racers: int = DEFAULT_RACERS, rounds: int = DEFAULT_ROUNDS) -> None:
        if racers < 2:
            raise ValueError("a race needs at least two racers")
        if rounds < 1:
            raise ValueError("the race needs at least one round")
        self.target = target
        #: Whether ``target`` is the embedded local server the demo started itself.
        self.embedded = embedded
        self.racers = racers
        self.rounds = rounds
        self.tables = DemoTables(target, racers=racers)
        #: The dynaunique table (records and locks) and the naive pattern's table.
        self.table = self.tables.table
        self.naive_table = self.tables.naive_table
        self.recorder = WireRecorder(self.tables.client)
        self._ada: DemoAccount | None = None

    @property
    def description(self) -> str:
        """One line naming where the demo runs."""
        return describe(self.target, embedded=self.embedded)

    @property
    def cleanup_errors(self) -> list[str]:
        """Why a table could not be deleted at the end (empty when both were)."""
        return self.tables.cleanup_errors

    def story(self) -> Iterator[Report]:
        """Run the steps in order, yielding each one's report as soon as it is measured."""
        yield self.sign_up()
        yield self.duplicate_signup()
        yield self.race()
        yield self.change_email()
        yield self.delete()
        yield self.lock_items()

    def sign_up(self) -> SignupReport:
        """ada signs up: her record and her three locks in one TransactWriteItems."""
        ada = self.tables.Account(pk=ADA_KEY, email=ADA_EMAIL, username="ada", tenant="t1",
                                  slug="home")
        dry_run = ada.save(dry_run=True)
        with self.recorder.capture() as sent:
            ada.save()
        self._ada = ada
        return SignupReport(key=ADA_KEY, email=ADA_EMAIL, dry_run=dry_run, sent=tuple(sent),
                            locks=self.tables.lock_keys(ada), items=self.tables.items(sent))

    def duplicate_signup(self) -> ViolationReport:
        """Another account signs up with ada's email in other case: refused, nothing written."""
        tables = self.tables
        other = tables.Account(pk=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, username="countess",
                               tenant="t1", slug="countess")
        wanted = tables.lock_keys(other)
        try:
            other.save()
        except UniqueViolation as exc:
            return ViolationReport(
                key=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, message=str(exc), fields=exc.fields,
                constraint=exc.constraint, value=exc.value, owner=exc.owner,
                record_written=tables.record_exists(IMPOSTOR_KEY),
                locks_written=sum(1 for k in wanted if tables.owns_lock(k, IMPOSTOR_KEY)),
            )
        return ViolationReport(key=IMPOSTOR_KEY, email=IMPOSTOR_EMAIL, message="", fields=(),
                               constraint="", value=None, owner=None, record_written=True,
                               locks_written=len(wanted))

    def race(self) -> RaceReport:
        """``racers`` threads sign up with one fresh email per round, on each side."""
        return run_race(self.tables, self.racers, self.rounds)

    def change_email(self) -> ChangeReport:
        """ada changes her email; grace then signs up with ada's old one."""
        tables = self.tables
        ada = self._loaded_ada()
        ada.email = ADA_NEW_EMAIL
        with self.recorder.capture() as sent:
            ada.save()
        grace = tables.Account(pk=GRACE_KEY, email=ADA_EMAIL, username="grace", tenant="t1",
                               slug="grace")
        grace.save()
        return ChangeReport(
            old_email=ADA_EMAIL, new_email=ADA_NEW_EMAIL, sent=tuple(sent),
            items=tables.items(sent), taker=GRACE_KEY,
            old_email_holder=tables.holder(ADA_EMAIL.upper()),
            new_email_holder=tables.holder(ADA_NEW_EMAIL),
        )

    def delete(self) -> DeleteReport:
        """ada is deleted: her record and every lock she held, in one transaction."""
        tables = self.tables
        ada = self._loaded_ada()
        held = tables.lock_keys(ada)
        with self.recorder.capture() as sent:
            ada.delete()
        return DeleteReport(
            key=ADA_KEY, sent=tuple(sent), items=tables.items(sent), held=held,
            locks_left=tuple(k for k in held if tables.lock(k) is not None),
            record_left=tables.record_exists(ADA_KEY),
        )

    def _loaded_ada(self) -> DemoAccount:
        if self._ada is None:
            self._ada = self.tables.load(ADA_KEY)
        return self._ada

    def lock_items(self) -> LockTable:
        """Every lock item on the demo table, each checked against the record it names."""
        tables = self.tables
        rows = []
        for item in tables.lock_items():
            key = str(untyped(item["PK"]))
            owner = untyped(item[OWNER_ATTR])
            record = tables.get(item[OWNER_ATTR]["M"])
            holds = False
            if record is not None:
                holds = key in tables.lock_keys(tables.Account.from_raw_data(record))
            rows.append(LockRow(
                key=key,
                constraint=str(untyped(item[CONSTRAINT_ATTR])),
                value=untyped(item[VALUE_ATTR]) if VALUE_ATTR in item else None,
                owner=str(owner.get("PK")),
                model=str(untyped(item[MODEL_ATTR])),
                owner_holds_it=holds,
            ))
        rows.sort(key=lambda r: (r.constraint, r.key))
        return LockTable(self.table, tuple(rows))
