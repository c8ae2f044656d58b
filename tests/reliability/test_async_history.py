"""A history of random async writes, many tasks on the same records at once, then the verdict.

Tasks on one event loop run random create / change / clear / delete operations over a few
records and a few values — several tasks on one record at the same time, each through its own
objects (a never-loaded object, or a copy it loaded with ``aget``). Every outcome is recorded;
the only failures a call may end with are the library's answers to a race (the value is taken,
the record changed or vanished under a loaded copy, conflicts kept on). At the end the invariant
checker (``tests/support/invariants.py``) must find the locks equal to the live values exactly —
no value held by two records, no lock without its holder, none missing — and a fresh record can
take no held value. Each case runs 150 operations by default (half the soak's count, at least
150: every case of 12 runs at 150 saw 8 or more stale copies and 29 or more taken values, and
the test asserts both); ``--soak`` runs 1,250, ``--soak-ops N`` runs N / 2 (at least 150).
"""

from __future__ import annotations

import asyncio
import collections
import random
from typing import TYPE_CHECKING, Any

import pytest
from pynamodb.exceptions import DoesNotExist
from support.declare import declare, pk_attr
from support.invariants import assert_clean

from dynaunique import (
    ConcurrentModificationError,
    DynauniqueError,
    Model,
    UniqueViolation,
)
from dynaunique.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute

from . import fresh_tables, point

if TYPE_CHECKING:
    from .conftest import Summary

pytestmark = pytest.mark.anyio

TASKS = 16
KEYS = [f"K{i}" for i in range(10)]
VALUES = [f"v{i}@x.io" for i in range(5)]


HistoryVersioned = declare("HistoryVersioned", "rel_async_history_versioned", pk=pk_attr(),
                           email=UnicodeAttribute(unique=True, null=True),
                           handle=UnicodeAttribute(unique=True, null=True),
                           visits=NumberAttribute(default=0), version=VersionAttribute())

HistoryPlain = declare("HistoryPlain", "rel_async_history_plain", pk=pk_attr(),
                       email=UnicodeAttribute(unique=True, null=True),
                       handle=UnicodeAttribute(unique=True, null=True),
                       visits=NumberAttribute(default=0))


#: The answers a call may give to a race; anything else fails the test.
RACE_ANSWERS = (UniqueViolation, ConcurrentModificationError, DoesNotExist)


async def _operation(model: type[Model], rng: random.Random) -> str:
    """One random operation; returns its kind (the outcome is the caller's)."""
    key = rng.choice(KEYS)
    # Weighted so that most records stay alive and their values are contested.
    kind = rng.choices(["create", "change", "clear", "delete", "delete never loaded",
                        "save never loaded", "update"], weights=[3, 4, 1, 1, 1, 2, 1])[0]
    value = rng.choice(VALUES)
    handle = rng.choice([None, *VALUES])
    if kind == "create":
        await model(pk=key, email=value, handle=handle).asave()
    elif kind == "save never loaded":
        await model(pk=key, email=value).asave()
    elif kind == "delete never loaded":
        await model(pk=key).adelete()
    else:
        loaded: Any = await model.aget(key, consistent_read=rng.random() < 0.5)
        await asyncio.sleep(rng.random() * 0.005)  # let others act on the copy's record
        if kind == "change":
            loaded.email, loaded.handle = value, handle
            await loaded.asave()
        elif kind == "clear":
            loaded.email = None
            await loaded.asave()
        elif kind == "update":
            await loaded.aupdate([model.handle.set(value), model.visits.add(1)])  # type: ignore[attr-defined]
        else:
            await loaded.adelete()
    return kind


@pytest.mark.parametrize("model", (HistoryVersioned, HistoryPlain), ids=lambda m: m.__name__)
@pytest.mark.parametrize("seed", [1, 2])
async def test_a_random_async_history_leaves_locks_equal_to_live_values(
        dynaunique_aio_db: str, soak_ops: int, summary: Summary, model: type[Model],
        seed: int) -> None:
    point(dynaunique_aio_db, model)
    fresh_tables(dynaunique_aio_db, model)
    operations = max(soak_ops // 2, 150)
    outcomes: collections.Counter[str] = collections.Counter()
    unexpected: list[BaseException] = []
    remaining = iter(range(operations))

    async def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        for _ in remaining:
            try:
                kind = await _operation(model, rng)
            except RACE_ANSWERS as exc:
                outcomes[type(exc).__name__] += 1
            except DynauniqueError as exc:
                if "kept conflicting" not in str(exc):
                    unexpected.append(exc)
                outcomes["gave up after conflicts"] += 1
            except Exception as exc:  # anything else is a defect
                unexpected.append(exc)
            else:
                outcomes[kind] += 1

    await asyncio.gather(*(worker(i) for i in range(TASKS)))
    assert unexpected == [], unexpected[:5]
    assert sum(outcomes.values()) == operations
    # The history really raced: copies went stale and values were contested.
    assert outcomes["ConcurrentModificationError"] > 0, outcomes
    assert outcomes["UniqueViolation"] > 0, outcomes
    report = assert_clean([model], dynaunique_aio_db)
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(outcomes.items()))
    summary.add(f"async history {model.__name__} seed {seed}: {operations} operations, "
                f"{TASKS} tasks", [counts, f"final check: {report.records} records, "
                                           f"{report.locks} locks, clean"])
    live = list(model.scan())
    for field in ("email", "handle"):
        held = [getattr(r, field) for r in live if getattr(r, field) is not None]
        assert len(held) == len(set(held)), f"a {field} held twice: {held}"
        for value in set(held):
            with pytest.raises(UniqueViolation):
                await model(pk="FRESH", **{field: value}).asave()
