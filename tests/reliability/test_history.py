"""The history checker (``history.py``): its checks on hand-made histories, a demonstration that
it catches a broken writer, and the live runs against the library.

Quick by default (150 operations per model); ``--soak`` runs 10,000 per model (20,000 in all),
``--soak-ops N`` any number per model. Issue 11's done-when — 5 seeds × 4,000 operations, plain
and with a VersionAttribute, zero anomalies — is ``test_history_done_when`` (marked ``slow``:
``pytest tests/reliability/test_history.py -m slow``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from support.declare import declare
from support.invariants import check, raw_client, scan_table

from dynaunique import Model, UniqueViolation
from dynaunique.attributes import UnicodeAttribute, VersionAttribute

from . import fresh_tables, point
from .history import (
    AsyncLibraryWriter,
    Event,
    History,
    LibraryWriter,
    Writer,
    anomalies,
    certain_intervals,
    double_holders,
    implausible_violations,
    summary,
)

if TYPE_CHECKING:
    from .conftest import Summary

QUICK_OPS = 150
SOAK_OPS = 10_000


# No version: "unchanged since loaded" is the unique value.
HistPlain = declare("HistPlain", "rel_history", meta={"read_timeout_seconds": 30},
                    pk=UnicodeAttribute(hash_key=True),
                    email=UnicodeAttribute(unique=True, null=True))

# With a VersionAttribute.
HistVersioned = declare("HistVersioned", "rel_history_v", meta={"read_timeout_seconds": 30},
                        pk=UnicodeAttribute(hash_key=True),
                        email=UnicodeAttribute(unique=True, null=True), version=VersionAttribute())


MODELS: dict[str, type[Model]] = {"plain": HistPlain, "versioned": HistVersioned}


# --- the checker on hand-made histories --------------------------------------------------------


def ev(op: str, key: str, value: str | None, invoked: float, completed: float,
       outcome: str = "ok", holder: str | None = None) -> Event:
    return Event(0, op, key, value, invoked, completed, outcome, holder)


def test_two_records_certainly_holding_one_value_is_an_anomaly() -> None:
    events = [ev("create", "K1", "v", 0, 1), ev("create", "K2", "v", 2, 3),
              ev("delete", "K1", None, 5, 6)]
    found = double_holders(events)
    assert len(found) == 1 and "K1 and K2 both certainly held 'v' during [3.0000, 5.0000]" \
        in found[0], found


def test_a_concurrent_write_on_the_holder_makes_it_uncertain() -> None:
    """K1's delete overlaps K2's create: K1 may have let go first; nothing is certain."""
    events = [ev("create", "K1", "v", 0, 1), ev("delete", "K1", None, 2, 4),
              ev("create", "K2", "v", 3, 5)]
    assert double_holders(events) == []
    # K1 certainly held v during [1, 2): its delete may have landed from its invocation on.
    assert [(i.key, i.start, i.end) for i in certain_intervals(events)] == [
        ("K1", 1, 2), ("K2", 5, float("inf"))]


def test_a_refused_write_does_not_end_certainty() -> None:
    """A conflict or violation applied nothing: K1 still certainly holds v through it."""
    events = [ev("create", "K1", "v", 0, 1), ev("change", "K1", "w", 2, 3, "conflict"),
              ev("create", "K2", "v", 4, 5)]
    assert len(double_holders(events)) == 1


def test_an_unknown_outcome_ends_certainty() -> None:
    events = [ev("create", "K1", "v", 0, 1), ev("delete", "K1", None, 2, 3, "unknown"),
              ev("create", "K2", "v", 4, 5)]
    assert double_holders(events) == []


def test_a_violation_naming_a_plausible_holder_is_fine() -> None:
    events = [ev("create", "K1", "v", 0, 2), ev("create", "K2", "v", 1, 3, "unique", "K1")]
    assert implausible_violations(events) == []


def test_a_violation_naming_a_record_that_never_wrote_the_value_is_an_anomaly() -> None:
    events = [ev("create", "K1", "v", 0, 1), ev("create", "K3", "w", 0, 1),
              ev("create", "K2", "v", 2, 3, "unique", "K3")]
    found = implausible_violations(events)
    assert len(found) == 1 and "named holder K3, but no write of that value" in found[0], found


def test_a_violation_naming_a_holder_certainly_moved_off_is_an_anomaly() -> None:
    events = [ev("create", "K1", "v", 0, 1), ev("change", "K1", "w", 2, 3),
              ev("create", "K2", "v", 4, 5, "unique", "K1")]
    found = implausible_violations(events)
    assert len(found) == 1 and "certainly moved off" in found[0], found


def test_a_violation_naming_nobody_is_an_anomaly() -> None:
    events = [ev("create", "K1", "v", 0, 1), ev("create", "K2", "v", 2, 3, "unique", None)]
    assert implausible_violations(events) == [f"{events[1]}: the UniqueViolation named no holder"]


def test_a_crash_is_an_anomaly() -> None:
    events = [Event(0, "create", "K1", "v", 0, 1, "crash", None, "TypeError: boom")]
    assert anomalies(events) == [f"{events[0]}: TypeError: boom"]


# --- live runs -----------------------------------------------------------------------------------


def _seed() -> int:
    return int(os.environ.get("DYNAUNIQUE_SOAK_SEED") or random.randrange(10**6))


@pytest.fixture
def history_models(dynaunique_db: str) -> Iterator[str]:
    models = list(MODELS.values())
    point(dynaunique_db, *models)
    fresh_tables(dynaunique_db, *models)
    yield dynaunique_db


def _run(endpoint: str, model: type[Model], seed: int, ops: int,
         writer_for: Callable[[int], Writer] | None = None,
         **shape: float) -> tuple[History, float, list[str]]:
    """Run one history on ``model``; returns it, the seconds it took, and every anomaly
    (checks 1 and 2 on the history, check 3 on the final table)."""
    library: Callable[[int], Writer] = lambda _: LibraryWriter(model)  # noqa: E731
    history = History(writer_for or library, absent=model.DoesNotExist, seed=seed,
                      **shape)  # type: ignore[arg-type]
    seconds = history.run(ops)
    found = anomalies(history.events)
    report = check([model], endpoint)
    found += [f"final table: {p}" for p in report.problems()]
    return history, seconds, found


def _describe(name: str, history: History, seconds: float, ops: int, seed: int,
              found: list[str]) -> list[str]:
    return [f"{name}: {ops} ops in {seconds:.1f} s = {ops / seconds:.0f} ops/s, seed {seed}, "
            f"{len(found)} anomalies; outcomes: {summary(history.events)}"]


@pytest.fixture
def history_ops(request: pytest.FixtureRequest) -> int:
    """Operations per model: quick by default, ``--soak``: 10,000, ``--soak-ops N``: N."""
    explicit = (request.config.getoption("--soak-ops", None)
                or os.environ.get("DYNAUNIQUE_SOAK_OPS"))
    if explicit:
        return int(str(explicit))
    long_run = (bool(request.config.getoption("--soak", False))
                or os.environ.get("DYNAUNIQUE_SOAK") == "1")
    return SOAK_OPS if long_run else QUICK_OPS


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_history(history_models: str, model_name: str, history_ops: int,
                 summary: Summary) -> None:
    """8 threads of random create/change/clear/delete, several on one record at once: no
    anomaly, and the final locks equal the live values."""
    ops = history_ops
    seed = _seed()
    history, seconds, found = _run(history_models, MODELS[model_name], seed, ops)
    summary.add("history", _describe(model_name, history, seconds, ops, seed, found))
    assert not found, f"seed {seed}: {len(found)} anomalies:\n" + "\n".join(found[:30])
    # A run in which nothing collided tested nothing.
    outcomes = history.outcomes()
    assert outcomes["create:ok"] > 0 and sum(
        n for k, n in outcomes.items() if k.endswith(":unique")) > 0, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_history_done_when(history_models: str, model_name: str, seed: int,
                           summary: Summary) -> None:
    """Issue 11's done-when: 5 seeds × 4,000 operations, plain and versioned, zero anomalies."""
    history, seconds, found = _run(history_models, MODELS[model_name], seed, 4000)
    summary.add("history (done-when)", _describe(model_name, history, seconds, 4000, seed, found))
    assert not found, f"seed {seed}: {len(found)} anomalies:\n" + "\n".join(found[:30])


# --- the checker catches a broken writer ---------------------------------------------------------


class NaiveWriter:
    """Check-then-put, without locks: looks for a holder of the value with a consistent scan,
    and if there is none, writes the record with a plain PutItem. Two writers that both look
    before either writes both write: a duplicate."""

    def __init__(self, endpoint: str, table: str) -> None:
        self.endpoint = endpoint
        self.table = table
        self.client = raw_client(endpoint)

    def _holder(self, value: str, key: str) -> str | None:
        for item in scan_table(self.endpoint, self.table):
            pk = item["pk"]["S"]
            if pk != key and not pk.startswith("UNIQ#") and item.get("email") == {"S": value}:
                return str(pk)
        return None

    def create(self, key: str, value: str) -> None:
        self.change(key, value, 0.005, must_exist=False)

    def change(self, key: str, value: str | None, pause: float,
               must_exist: bool = True) -> None:
        if must_exist and "Item" not in self.client.get_item(
                TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True):
            raise HistPlain.DoesNotExist()
        if value is not None:
            holder = self._holder(value, key)
            if holder is not None:
                raise UniqueViolation(model="HistPlain", fields=("email",), constraint="EMAIL",
                                      value=value, owner={"pk": holder})
        time.sleep(pause + 0.03)  # the window between the check and the put
        item = {"pk": {"S": key}}
        if value is not None:
            item["email"] = {"S": value}
        self.client.put_item(TableName=self.table, Item=item)

    def delete(self, key: str, loaded: bool, pause: float) -> None:
        self.client.delete_item(TableName=self.table, Key={"pk": {"S": key}})


def test_the_checker_catches_a_check_then_put_writer(history_models: str) -> None:
    """A random history written by :class:`NaiveWriter`: the checker must find two records
    certainly holding one value, and the table check must find values without locks. Two values
    over ten keys, spread evenly (no hot keys), so that racing writers of one value are common
    and their records are not rewritten at once (which would leave nothing certain)."""
    writer = NaiveWriter(history_models, "rel_history")
    # A race the checker can *prove* needs both racers' records left alone for a moment; one
    # run of 300 operations shows it most times (measured: 2 to 8 proofs a run, rarely none),
    # so up to five runs.
    tried: list[str] = []
    for attempt in range(5):
        history, _, found = _run(history_models, HistPlain, seed=7 + attempt, ops=300,
                                 writer_for=lambda _: writer, values=2, hot=0.0)
        assert any(line.startswith("final table: missing lock") for line in found), found[:5]
        if double_holders(history.events):
            return
        tried.append(summary(history.events))
    pytest.fail(f"no double holder proved in {len(tried)} runs: {tried}")


# --- the same history and checker under asyncio (issue 15) ---------------------------------------


async def _arun(endpoint: str, model: type[Model], seed: int,
                ops: int) -> tuple[History, float, list[str]]:
    history = History(lambda _: LibraryWriter(model), absent=model.DoesNotExist, seed=seed)
    seconds = await history.arun(ops, AsyncLibraryWriter(model))
    found = anomalies(history.events)
    report = check([model], endpoint)
    found += [f"final table: {p}" for p in report.problems()]
    return history, seconds, found


@pytest.mark.anyio
@pytest.mark.parametrize("model_name", sorted(MODELS))
async def test_async_history(dynaunique_aio_db: str, model_name: str, history_ops: int,
                             summary: Summary) -> None:
    """The same random history run by 8 asyncio tasks on one loop (``asave``/``aget``/
    ``adelete``), judged by the same checker: no anomaly, and the final locks equal the live
    values."""
    model = MODELS[model_name]
    point(dynaunique_aio_db, model)
    fresh_tables(dynaunique_aio_db, model)
    seed = _seed()
    history, seconds, found = await _arun(dynaunique_aio_db, model, seed, history_ops)
    summary.add("async history", _describe(model_name, history, seconds, history_ops, seed,
                                           found))
    assert not found, f"seed {seed}: {len(found)} anomalies:\n" + "\n".join(found[:30])
    outcomes = history.outcomes()
    assert outcomes["create:ok"] > 0 and sum(
        n for k, n in outcomes.items() if k.endswith(":unique")) > 0, outcomes


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("model_name", sorted(MODELS))
async def test_async_history_done_when(dynaunique_aio_db: str, model_name: str, seed: int,
                                       summary: Summary) -> None:
    """5 seeds × 4,000 operations under asyncio, plain and versioned, zero anomalies."""
    model = MODELS[model_name]
    point(dynaunique_aio_db, model)
    fresh_tables(dynaunique_aio_db, model)
    history, seconds, found = await _arun(dynaunique_aio_db, model, seed, 4000)
    summary.add("async history (done-when)",
                _describe(model_name, history, seconds, 4000, seed, found))
    assert not found, f"seed {seed}: {len(found)} anomalies:\n" + "\n".join(found[:30])
