"""Another writer acts between two requests of one ASYNC call: the locks stay exactly right.

The attack is injected at the transport: the fault proxy holds the answer to the call's k-th
request while an adversary (the sync API, through the same proxy) changes the record — moves it
back to its old value, to a third value, deletes it, or deletes and re-creates it — and only
then lets the answer through. Every gap of every multi-request async operation is attacked
(after each of its requests; the last one too: the write landed, its answer is late).
Afterwards: the invariant checker finds every live value held by exactly one lock owned by its
holder and no lock without a holder, and a fresh record cannot take any held value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
from pynamodb.exceptions import DoesNotExist
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean

from dynaunique import (
    ConcurrentModificationError,
    DynauniqueError,
    Model,
    UniqueViolation,
    atomic,
)
from dynaunique.attributes import UnicodeAttribute, VersionAttribute
from dynaunique.testing import reset_local_dynamodb

from . import fresh_tables, point
from .proxy import Fault, FaultProxy

pytestmark = pytest.mark.anyio

ALL_OPERATIONS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem",
                            "TransactWriteItems"})
OLD, NEW, THIRD = "a@x.io", "b@x.io", "c@x.io"


AsyncGapVersioned = declare("AsyncGapVersioned", "rel_async_gaps_versioned", pk=pk_attr(),
                            sk=sk_attr("PROFILE"), email=UnicodeAttribute(unique=True, null=True),
                            version=VersionAttribute())

AsyncGapPlain = declare("AsyncGapPlain", "rel_async_gaps_plain", pk=pk_attr(),
                        sk=sk_attr("PROFILE"), email=UnicodeAttribute(unique=True, null=True))


MODELS: tuple[type[Model], ...] = (AsyncGapVersioned, AsyncGapPlain)


def _load(model: type[Model], pk: str = "R") -> Any:  # Any: the fields are the model's
    return model.get(pk, "PROFILE", consistent_read=True)


def _seed(model: type[Model], pk: str = "R", email: str = OLD) -> Any:
    model(pk=pk, email=email).save()
    return _load(model, pk)


# --- the async calls under attack ---------------------------------------------------------------


@attrs.frozen
class Scenario:
    """Set up (sync, unattacked) and return the async call; ``allowed``: its permitted ends."""

    setup: Callable[[type[Model]], Callable[[], Awaitable[object]]]
    allowed: tuple[type[BaseException], ...] = (ConcurrentModificationError, UniqueViolation)
    #: True: the call must fail whatever the adversary does (a stale write never succeeds).
    must_fail: bool = False


def stale_identical_save(m: type[Model]) -> Callable[[], Awaitable[object]]:
    _seed(m)
    stale, fresh = _load(m), _load(m)
    fresh.email = NEW
    fresh.save()
    stale.email = NEW  # "identical" to what is stored now, but planned from the old state
    return stale.asave


def stale_delete(m: type[Model]) -> Callable[[], Awaitable[object]]:
    stale = _seed(m)
    _load(m).delete()
    return stale.adelete


def never_loaded_delete(m: type[Model]) -> Callable[[], Awaitable[object]]:
    _seed(m)
    return m(pk="R").adelete


def never_loaded_save_over_existing(m: type[Model]) -> Callable[[], Awaitable[object]]:
    _seed(m)
    return m(pk="R", email=NEW).asave


def update_actions(m: type[Model]) -> Callable[[], Awaitable[object]]:
    loaded = _seed(m)
    return lambda: loaded.aupdate([m.email.set(NEW)])  # type: ignore[attr-defined]


def get_by_unique(m: type[Model]) -> Callable[[], Awaitable[object]]:
    _seed(m)
    return lambda: m.aget_by_unique("email", OLD)


def atomic_swap(m: type[Model]) -> Callable[[], Awaitable[object]]:
    r, q = _seed(m), _seed(m, "Q", NEW)

    async def swap() -> None:
        async with atomic():
            r.email, q.email = NEW, OLD
            await r.asave()
            await q.asave()
    return swap


SCENARIOS = {
    "stale identical save": Scenario(stale_identical_save, must_fail=True),
    "stale delete": Scenario(stale_delete),
    "never-loaded delete": Scenario(never_loaded_delete),
    "never-loaded save over an existing key": Scenario(never_loaded_save_over_existing),
    "update(actions)": Scenario(update_actions),
    "get_by_unique": Scenario(get_by_unique, allowed=(DoesNotExist,)),
    "atomic swap": Scenario(atomic_swap),
}


# --- the adversaries (sync, run by the proxy while it holds an answer) -------------------------


def _set_email(m: type[Model], email: str) -> None:
    try:
        record = _load(m)
    except m.DoesNotExist:
        record = m(pk="R")
    record.email = email
    record.save()


def _delete(m: type[Model]) -> None:
    m(pk="R").delete()


ADVERSARIES: dict[str, Callable[[type[Model]], None]] = {
    "moves back": lambda m: _set_email(m, OLD),
    "moves to a third value": lambda m: _set_email(m, THIRD),
    "is deleted": _delete,
    "is re-created": lambda m: (_delete(m), _set_email(m, OLD)),
}


def _adversary(m: type[Model], act: Callable[[type[Model]], None],
               refused: list[BaseException]) -> Callable[[], None]:
    def attack() -> None:
        try:
            act(m)
        except DynauniqueError as exc:  # e.g. the value it wants is held: a legitimate outcome
            refused.append(exc)
    return attack


# --- the test ------------------------------------------------------------------------------------


@pytest.fixture
def gaps(proxy: FaultProxy, dynaunique_aio_db: str) -> tuple[FaultProxy, str]:
    point(proxy.url, *MODELS)
    return proxy, dynaunique_aio_db


async def _requests_of(proxy: FaultProxy, endpoint: str, model: type[Model],
                       scenario: Scenario) -> int:
    """How many requests the call sends when nobody interferes."""
    call = _fresh(proxy, endpoint, model, scenario)
    with contextlib.suppress(scenario.allowed):
        await call()
    proxy.wait_idle()
    return len(proxy.records())


def _fresh(proxy: FaultProxy, endpoint: str, model: type[Model],
           scenario: Scenario) -> Callable[[], Awaitable[object]]:
    reset_local_dynamodb(endpoint)
    fresh_tables(endpoint, model)
    call = scenario.setup(model)
    proxy.clear()
    return call


def _no_value_can_be_taken_twice(model: type[Model]) -> None:
    held = {r.email for r in model.scan() if r.email is not None}  # type: ignore[attr-defined]
    for value in held:
        with pytest.raises(UniqueViolation):
            model(pk="FRESH", email=value).save()


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_every_gap_of_an_async_call_survives_every_adversary(
        gaps: tuple[FaultProxy, str], model: type[Model], name: str) -> None:
    proxy, endpoint = gaps
    scenario = SCENARIOS[name]
    requests = await _requests_of(proxy, endpoint, model, scenario)
    assert requests >= 1
    attacked = 0
    for gap in range(1, requests + 1):
        for adversary_name, act in ADVERSARIES.items():
            call = _fresh(proxy, endpoint, model, scenario)
            for _ in range(gap - 1):  # let the first gap-1 requests through untouched
                proxy.inject(Fault.DELAY_AFTER, operations=ALL_OPERATIONS)
            refused: list[BaseException] = []
            proxy.inject(Fault.DELAY_AFTER, operations=ALL_OPERATIONS,
                         on_applied=_adversary(model, act, refused))
            where = f"{name}, {adversary_name} after request {gap}/{requests}"
            outcome: BaseException | None = None
            try:
                await call()
            except scenario.allowed as exc:
                outcome = exc
            proxy.wait_idle()
            assert proxy.hook_errors == [], where
            if proxy.pending_faults() == 0:
                attacked += 1
            proxy.clear()
            if scenario.must_fail:
                assert isinstance(outcome, ConcurrentModificationError), where
            assert_clean([model], endpoint)
            _no_value_can_be_taken_twice(model)
    assert attacked > 0
