"""The race step: N threads sign up with one email at once, through dynaunique and naively.

The naive side is the textbook read-then-put (a strongly consistent scan for the email, then a
put if nobody has it) on its own table, with the same threads against the same server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

from dynaunique._lock.locks import OWNER_ATTR, untyped
from dynaunique.cli._demo.cast import PROFILE
from dynaunique.cli._demo.tables import DemoTables
from dynaunique.errors import DynauniqueError, UniqueViolation


@attrs.frozen
class RaceOutcome:
    """One side of one race round."""

    #: Signups that reported success.
    winners: int
    #: Signups refused because the email was taken (dynaunique) / found taken (naive).
    refused: int
    #: Anything else that went wrong, one message each.
    errors: tuple[str, ...]
    #: Records holding the email afterwards, counted by a consistent scan.
    records: int
    #: Lock items left behind by signups that lost (dynaunique only; must be 0).
    stray_locks: int = 0


@attrs.frozen
class RaceRound:
    """One round: the same number of threads race on one fresh email, on each side."""

    number: int
    email: str
    guarded: RaceOutcome
    naive: RaceOutcome


@attrs.frozen
class RaceReport:
    """Step 3: N threads race to sign up with one email, through dynaunique and naively."""

    racers: int
    rounds: tuple[RaceRound, ...]

    @property
    def guarded_exactly_one(self) -> bool:
        """Whether every dynaunique round had exactly one winner and one stored record."""
        return all(r.guarded.winners == 1 and r.guarded.records == 1
                   and r.guarded.stray_locks == 0 and not r.guarded.errors for r in self.rounds)

    @property
    def naive_duplicate_rounds(self) -> int:
        """Rounds in which the naive pattern stored the email more than once."""
        return sum(1 for r in self.rounds if r.naive.records > 1)

    @property
    def naive_duplicates(self) -> int:
        """Records beyond the first, over all naive rounds."""
        return sum(max(0, r.naive.records - 1) for r in self.rounds)

    @property
    def problems(self) -> tuple[str, ...]:
        """Promises this step broke (empty when all held)."""
        out = []
        for r in self.rounds:
            g = r.guarded
            if g.winners != 1 or g.records != 1:
                out.append(f"round {r.number}: dynaunique had {g.winners} winners and "
                           f"{g.records} records")
            if g.stray_locks:
                out.append(f"round {r.number}: {g.stray_locks} locks left by losing signups")
            out.extend(f"round {r.number}: {e}" for e in g.errors)
        return tuple(out)


#: One racer's attempt: ``attempt(i, barrier)`` returns "won", "refused" or "error: ...".
_Attempt = Callable[[int, threading.Barrier], str]


def run_race(tables: DemoTables, racers: int, rounds: int) -> RaceReport:
    """``racers`` threads sign up with one fresh email per round, on each side."""
    race = _Race(tables, racers)
    race.warm_up()
    out = []
    for number in range(1, rounds + 1):
        email = f"race-{number}@example.com"
        guarded = race.guarded(number, email)
        naive = race.naive(number, email)
        out.append(RaceRound(number, email, guarded, naive))
    return RaceReport(racers, tuple(out))


def _outcome(results: list[str], records: int, stray_locks: int = 0) -> RaceOutcome:
    return RaceOutcome(
        winners=results.count("won"),
        refused=results.count("refused"),
        errors=tuple(r for r in results if r.startswith("error")),
        records=records,
        stray_locks=stray_locks,
    )


class _Race:
    """The threads of one race, on the demo tables."""

    def __init__(self, tables: DemoTables, racers: int) -> None:
        self.tables = tables
        self.racers = racers

    def run_threads(self, attempt: _Attempt) -> list[str]:
        """Run ``attempt(i, barrier)`` in ``racers`` threads released together; their results."""
        barrier = threading.Barrier(self.racers)
        results = ["" for _ in range(self.racers)]

        def run(i: int) -> None:
            try:
                results[i] = attempt(i, barrier)
            except Exception as exc:  # a thread must report, never die silently
                results[i] = f"error: {type(exc).__name__}: {exc}"

        threads = [threading.Thread(target=run, args=(i,), name=f"dynaunique-demo-racer-{i}")
                   for i in range(self.racers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def warm_up(self) -> None:
        """Open ``racers`` connections and load botocore's operation models, as a running
        application has them.

        Without this the first round's threads queue behind connection setup and botocore's
        lazy loading, which spreads them out in time and hides the race in that round only.
        """
        tables = self.tables

        def touch(i: int, barrier: threading.Barrier) -> str:
            barrier.wait()
            tables.get(tables.info.typed_key("ACCT#warm-up", PROFILE))
            tables.with_email(tables.naive, tables.naive_table, "warm-up")
            return "ok"

        self.run_threads(touch)

    def guarded(self, number: int, email: str) -> RaceOutcome:
        """One round through dynaunique: ``account.save()`` (record and locks, one transaction)."""
        tables = self.tables

        def attempt(i: int, barrier: threading.Barrier) -> str:
            account = tables.Account(pk=f"ACCT#race{number}-{i:02d}", email=email,
                                     username=f"racer{number}-{i:02d}", tenant="race",
                                     slug=f"{number}-{i:02d}")
            barrier.wait()
            try:
                account.save()
            except UniqueViolation:
                return "refused"
            except DynauniqueError as exc:
                return f"error: {type(exc).__name__}: {exc}"
            return "won"

        results = self.run_threads(attempt)
        losers = {f"ACCT#race{number}-{i:02d}" for i, r in enumerate(results) if r != "won"}
        records = tables.with_email(tables.client, tables.table, email)
        stray = sum(1 for lock in tables.lock_items()
                    if untyped(lock[OWNER_ATTR]).get("PK") in losers)
        return _outcome(results, len(records), stray)

    def naive(self, number: int, email: str) -> RaceOutcome:
        """One round of the naive pattern: look for the email, then put the record."""
        tables = self.tables

        def attempt(i: int, barrier: threading.Barrier) -> str:
            barrier.wait()
            # The textbook pattern: look for the email (even strongly consistent), then write.
            if tables.with_email(tables.naive, tables.naive_table, email):
                return "refused"
            tables.naive.put_item(TableName=tables.naive_table, Item={
                "PK": {"S": f"ACCT#race{number}-{i:02d}"}, "email": {"S": email},
            })
            return "won"

        results = self.run_threads(attempt)
        return _outcome(results, len(tables.with_email(tables.naive, tables.naive_table, email)))
