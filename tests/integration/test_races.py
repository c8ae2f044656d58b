"""Concurrent writers over real HTTP against the local server: one winner, nothing half-done.

Real threads, released together by a barrier, each saving through its own model instance. Never
``mock_aws`` here: without I/O between calls the GIL would hide the race being tested.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.tables import raw_tables, scan_all

from dynaunique import UniqueViolation, normalizers
from dynaunique._lock.locks import RESERVED_PREFIX
from dynaunique._transport import clients
from dynaunique.attributes import UnicodeAttribute

THREADS = 12
ROUNDS = 20


Member = declare("Member", "race_members", pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(unique=True, normalize=normalizers.casefold))


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, Member)


def table_state(raw: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(record PK → stored email, lock key → owner PK) of the whole table."""
    record_emails: dict[str, str] = {}
    locks: dict[str, str] = {}
    for item in scan_all(raw, "race_members"):
        pk = item["PK"]["S"]
        if pk.startswith(RESERVED_PREFIX):
            assert item["SK"] == {"S": "LOCK"}
            assert item["owner"]["M"]["SK"] == {"S": "PROFILE"}
            locks[pk] = item["owner"]["M"]["PK"]["S"]
        else:
            record_emails[pk] = item["email"]["S"]
    return record_emails, locks


def run_together(jobs: list[Callable[[], object]]) -> list[BaseException | None]:
    """Run ``jobs`` in threads released at once; return each job's exception (or None)."""
    barrier = threading.Barrier(len(jobs))
    outcomes: list[BaseException | None] = [None] * len(jobs)

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            jobs[index]()
        except BaseException as exc:  # every outcome is inspected by the caller
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a writer hung"
    return outcomes


def one_winner(round_: int, email: str, members: list[Member], outcomes: list[Any],
               expected_records: dict[str, str], expected_locks: dict[str, str]) -> None:
    """One round's verdict: exactly one member won, every other got a UniqueViolation naming
    the winner; the winner's record and lock join the expected table state."""
    winners = [m for m, outcome in zip(members, outcomes, strict=True) if outcome is None]
    assert len(winners) == 1, f"round {round_}: {len(winners)} winners"
    winner = winners[0]
    for outcome in outcomes:
        if outcome is None:
            continue
        assert isinstance(outcome, UniqueViolation), repr(outcome)
        assert outcome.owner == {"PK": winner.pk, "SK": "PROFILE"}
        assert outcome.value == email
    expected_records[winner.pk] = winner.email
    expected_locks[f"UNIQ#EMAIL#{email}"] = winner.pk


def one_mover(round_: int, target: str, loaded: list[Member], outcomes: list[Any],
              current: dict[str, str]) -> None:
    """One round of moves' verdict: exactly one member moved to ``target``, every other got a
    UniqueViolation naming the winner; ``current`` (record PK → email) records the move."""
    winners = [m.pk for m, outcome in zip(loaded, outcomes, strict=True) if outcome is None]
    assert len(winners) == 1, f"round {round_}: winners {winners}"
    for outcome in outcomes:
        if outcome is not None:
            assert isinstance(outcome, UniqueViolation), repr(outcome)
            assert outcome.owner == {"PK": winners[0], "SK": "PROFILE"}
    current[winners[0]] = target


def test_concurrent_signups_on_one_email_have_exactly_one_winner_per_round(raw: Any) -> None:
    expected_records: dict[str, str] = {}
    expected_locks: dict[str, str] = {}
    for round_ in range(ROUNDS):
        email = f"race{round_}@x.io"
        # Same value, different spellings: normalization must not let two through.
        members = [Member(pk=f"ACCT#{round_}-{i}", email=email.upper() if i % 2 else email)
                   for i in range(THREADS)]
        outcomes = run_together([member.save for member in members])
        one_winner(round_, email, members, outcomes, expected_records, expected_locks)
        # Nothing half-written: one record and one lock per round, the lock owned by the winner.
        assert table_state(raw) == (expected_records, expected_locks)


def test_concurrent_moves_of_different_accounts_to_one_email(raw: Any) -> None:
    rounds = 5
    for i in range(THREADS):
        Member(pk=f"ACCT#{i}", email=f"old{i}@x.io").save()
    current = {f"ACCT#{i}": f"old{i}@x.io" for i in range(THREADS)}
    for round_ in range(rounds):
        target = f"target{round_}@x.io"
        loaded = [Member.get(f"ACCT#{i}", "PROFILE", consistent_read=True)
                  for i in range(THREADS)]

        def move(member: Member, email: str = target) -> Callable[[], object]:
            def job() -> None:
                member.email = email
                member.save()
            return job

        outcomes = run_together([move(member) for member in loaded])
        one_mover(round_, target, loaded, outcomes, current)
        # The winner's old value is free, every loser still holds its own, no orphan.
        assert table_state(raw) == (
            current, {f"UNIQ#EMAIL#{email}": pk for pk, email in current.items()})


def test_the_harness_really_races_a_naive_check_then_write_gets_duplicates(raw: Any) -> None:
    """Without this, the tests above could pass merely because the writers never overlapped."""
    client = clients.client_for(Member)
    winners_per_round = []
    lock = threading.Lock()
    for round_ in range(5):
        winners: list[int] = []

        def naive(index: int, key: str = f"NAIVE#{round_}",
                  winners: list[int] = winners) -> Callable[[], object]:
            def job() -> None:
                table_key = {"PK": {"S": key}, "SK": {"S": "PROFILE"}}
                found = client.get_item(TableName="race_members", Key=table_key,
                                        ConsistentRead=True).get("Item")
                if found is None:
                    client.put_item(TableName="race_members",
                                    Item={**table_key, "email": {"S": f"w{index}"}})
                    with lock:
                        winners.append(index)
            return job

        outcomes = run_together([naive(i) for i in range(THREADS)])
        assert outcomes == [None] * THREADS
        winners_per_round.append(len(winners))
    assert max(winners_per_round) > 1, winners_per_round
