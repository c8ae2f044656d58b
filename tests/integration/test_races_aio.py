"""Concurrent asyncio tasks claiming one value over real HTTP: one winner per round, nothing
half-done. The async twin of tests/integration/test_races.py, on the same model and table checks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest
from support.tables import raw_tables

from dynaunique import aio
from dynaunique._transport import clients

from .test_races import ROUNDS, THREADS, Member, one_mover, one_winner, table_state

pytestmark = pytest.mark.anyio

TASKS = THREADS


@pytest.fixture
def raw(dynaunique_aio_db: str) -> Any:
    return raw_tables(dynaunique_aio_db, Member)


async def together(calls: list[Awaitable[object]]) -> list[BaseException | None]:
    """Run ``calls`` as concurrent tasks; return each one's exception (or None)."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    return [o if isinstance(o, BaseException) else None for o in outcomes]


async def test_concurrent_async_signups_on_one_email_have_exactly_one_winner_per_round(
        raw: Any) -> None:
    expected_records: dict[str, str] = {}
    expected_locks: dict[str, str] = {}
    for round_ in range(ROUNDS):
        email = f"race{round_}@x.io"
        members = [Member(pk=f"ACCT#{round_}-{i}", email=email.upper() if i % 2 else email)
                   for i in range(TASKS)]
        outcomes = await together([member.asave() for member in members])
        one_winner(round_, email, members, list(outcomes), expected_records, expected_locks)
        assert table_state(raw) == (expected_records, expected_locks)


async def test_concurrent_async_moves_of_different_accounts_to_one_email(raw: Any) -> None:
    for i in range(TASKS):
        await Member(pk=f"ACCT#{i}", email=f"old{i}@x.io").asave()
    current = {f"ACCT#{i}": f"old{i}@x.io" for i in range(TASKS)}
    for round_ in range(5):
        target = f"target{round_}@x.io"
        loaded = [await Member.aget(f"ACCT#{i}", "PROFILE", consistent_read=True)
                  for i in range(TASKS)]

        async def move(member: Member, email: str = target) -> None:
            member.email = email
            await member.asave()

        outcomes = await together([move(member) for member in loaded])
        one_mover(round_, target, loaded, outcomes, current)
        assert table_state(raw) == (
            current, {f"UNIQ#EMAIL#{email}": pk for pk, email in current.items()})


async def test_the_tasks_really_overlap_a_naive_check_then_write_gets_duplicates(
        raw: Any) -> None:
    """Without this, the tests above could pass merely because the tasks ran one by one."""
    conn = clients.connection_for(Member)
    winners_per_round = []
    for round_ in range(5):
        winners: list[int] = []
        key = {"PK": {"S": f"NAIVE#{round_}"}, "SK": {"S": "PROFILE"}}

        async def naive(index: int, key: dict[str, Any] = key,
                        winners: list[int] = winners) -> None:
            found = (await aio.dispatch(conn, "GetItem", {
                "TableName": "race_members", "Key": key, "ConsistentRead": True})).get("Item")
            if found is None:
                await aio.dispatch(conn, "PutItem", {"TableName": "race_members",
                                                     "Item": {**key, "email": {"S": f"w{index}"}}})
                winners.append(index)

        assert await together([naive(i) for i in range(TASKS)]) == [None] * TASKS
        winners_per_round.append(len(winners))
    assert max(winners_per_round) > 1, winners_per_round
