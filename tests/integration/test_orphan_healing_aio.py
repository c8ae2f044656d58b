"""Orphan locks heal on contact under asyncio: the async twin of test_orphan_healing.py (the
same flush, driven by ``dynaunique.aio``), on the same models and table checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.invariants import assert_clean
from support.tables import raw_tables

from dynaunique import UniqueViolation

from .test_orphan_healing import Account, Patient, _delete_around, _locks

pytestmark = pytest.mark.anyio


@pytest.fixture
def raw(dynaunique_aio_db: str) -> Any:
    return raw_tables(dynaunique_aio_db, Account, Patient)


async def test_an_orphan_of_a_deleted_record_does_not_block_an_async_save(
        raw: Any, dynaunique_aio_db: str) -> None:
    await Account(pk="ACCT#1", email="ada@x.io").asave()
    _delete_around(raw, "heal_accounts", "ACCT#1", "PROFILE")
    await Account(pk="ACCT#2", email="ada@x.io").asave()
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#ada@x.io": "ACCT#2"}
    assert_clean([Account], dynaunique_aio_db)


async def test_an_orphan_of_a_changed_record_does_not_block_an_async_save(
        raw: Any, dynaunique_aio_db: str) -> None:
    await Account(pk="ACCT#1", email="ada@x.io").asave()
    raw.update_item(TableName="heal_accounts",
                    Key={"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}},
                    UpdateExpression="SET email = :e",
                    ExpressionAttributeValues={":e": {"S": "grace@x.io"}})
    await Account(pk="ACCT#2", email="ada@x.io").asave()
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#ada@x.io": "ACCT#2"}


async def test_a_hashed_orphan_heals_and_a_genuine_holder_refuses_async(
        raw: Any, dynaunique_aio_db: str) -> None:
    await Patient(pk="P#1", ssn="123-45-6789").asave()
    _delete_around(raw, "heal_patients", "P#1", "PROFILE")
    await Patient(pk="P#2", ssn="123-45-6789").asave()
    with pytest.raises(UniqueViolation) as caught:
        await Patient(pk="P#3", ssn="123-45-6789").asave()
    assert caught.value.owner == {"PK": "P#2", "SK": "PROFILE"}
    assert_clean([Patient], dynaunique_aio_db)


async def test_four_tasks_racing_for_one_orphan_have_exactly_one_winner(
        raw: Any, dynaunique_aio_db: str) -> None:
    await Account(pk="ACCT#0", email="race@x.io").asave()
    _delete_around(raw, "heal_accounts", "ACCT#0", "PROFILE")
    outcomes = await asyncio.gather(
        *(Account(pk=f"ACCT#{i}", email="race@x.io").asave() for i in range(1, 5)),
        return_exceptions=True)
    winners = [i + 1 for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
    assert len(winners) == 1, outcomes
    holder = {"PK": f"ACCT#{winners[0]}", "SK": "PROFILE"}
    assert all(isinstance(o, UniqueViolation) and o.owner == holder
               for o in outcomes if isinstance(o, BaseException)), outcomes
    assert _locks(raw, "heal_accounts") == {"UNIQ#EMAIL#race@x.io": holder["PK"]}
    assert_clean([Account], dynaunique_aio_db)
