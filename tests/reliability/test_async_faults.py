"""Network faults on the async sender: the same resends, tokens and errors as the sync path.

The writes of tests/reliability/test_faults.py, sent by the async sender: each case's sync
``act`` runs inside ``async with atomic()``, where its saves and deletes are collected and the
block's end sends them through ``dynaunique.aio`` — so httpx's failures must map onto the very
errors the one retry loop reads (a dropped request or answer, a read timeout, a refused
connection).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from support.invariants import assert_clean

from dynaunique import Model, OutcomeUnknownError, UnreachableError, atomic
from dynaunique.testing import create_tables, use_endpoint

from .proxy import Fault, FaultProxy
from .test_faults import (
    EXHAUSTING,
    HOLD,
    MODELS,
    SHORT_TIMEOUT,
    FaultVersioned,
    _seed,
    assert_applied_once,
    assert_one_request,
    assert_snapshots,
    assert_states,
    endpoints,
    prepare,
    state_of,
)

pytestmark = pytest.mark.anyio

__all__ = ["endpoints"]  # the fixture, shared with test_faults

CASES = ("create", "move_unique", "non_unique_save", "loaded_delete", "unloaded_delete",
         "atomic_swap")


async def _act_async(act: Any) -> None:
    async with atomic():
        act()


@pytest.mark.parametrize("fault", [Fault.DROP_BEFORE, Fault.DROP_AFTER])
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
async def test_an_async_resend_applies_the_write_exactly_once(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str, model: type[Model], name: str,
        fault: Fault) -> None:
    proxy, direct = endpoints
    case = prepare(proxy, model, name)
    proxy.inject(fault)

    await _act_async(case.act)

    assert_applied_once(proxy, direct, model, case, fault)


async def test_an_async_update_whose_result_cannot_be_known_is_never_resent(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str) -> None:
    proxy, direct = endpoints
    case = prepare(proxy, FaultVersioned, "update_add")
    obj = FaultVersioned.get("A", "PROFILE", consistent_read=True)
    proxy.clear()
    proxy.inject(Fault.DROP_AFTER)

    with pytest.raises(OutcomeUnknownError):
        await obj.aupdate([FaultVersioned.visits.add(1)])

    assert [r.fault for r in proxy.writes()] == [Fault.DROP_AFTER]
    assert_states(direct, FaultVersioned, case.after)
    assert_clean([FaultVersioned], direct)


async def test_async_outcome_unknown_then_the_same_call_converges(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str) -> None:
    proxy, direct = endpoints
    prepare(proxy, FaultVersioned, "create")
    obj = FaultVersioned(pk="A", email="Ada@Lovelace.io", handle="ada", note="n")
    proxy.inject(Fault.DROP_AFTER, times=EXHAUSTING)

    with pytest.raises(OutcomeUnknownError):
        await obj.asave()

    first = proxy.writes()
    assert len(first) == EXHAUSTING
    assert_one_request(first)
    proxy.clear()
    await obj.asave()  # the same call again: finds its own write in place, sends nothing more
    after = state_of(FaultVersioned, 1, email="Ada@Lovelace.io", handle="ada", note="n")
    assert_states(direct, FaultVersioned, {"A": after})
    assert [w.token != first[0].token for w in proxy.writes()] == [True]
    assert_clean([FaultVersioned], direct)


async def test_an_async_read_timeout_is_resent_and_applies_once(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, direct = endpoints
    case = prepare(proxy, FaultVersioned, "move_unique")
    monkeypatch.setattr(FaultVersioned.Meta, "read_timeout_seconds", SHORT_TIMEOUT)
    proxy.inject(Fault.DELAY_AFTER, delay=HOLD)

    await _act_async(case.act)
    proxy.wait_idle()

    writes = proxy.writes()
    assert [r.fault for r in writes].count(Fault.DELAY_AFTER) == 1 and len(writes) >= 2
    assert_one_request(writes)
    assert_states(direct, FaultVersioned, case.after)
    assert_clean([FaultVersioned], direct)


async def test_an_unreachable_server_is_unreachable_error_and_nothing_applied(
        dynaunique_aio_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_endpoint(dynaunique_aio_db, FaultVersioned)
    create_tables(FaultVersioned)
    loaded = _seed(FaultVersioned)
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setattr(FaultVersioned.Meta, "host", f"http://127.0.0.1:{port}")
    loaded.email = "elsewhere@x.io"

    with pytest.raises(UnreachableError):
        await loaded.asave()

    monkeypatch.undo()
    assert_states(dynaunique_aio_db, FaultVersioned,
                  {"A": state_of(FaultVersioned, 1, email="ada@x.io", handle="ada", note="n")})


async def test_a_write_cancelled_in_flight_is_recognised_by_its_repeat(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str) -> None:
    """A task cancelled after its write landed but before the answer: repeating the same call
    finds its own write in place and is done (as after OutcomeUnknownError). Without the
    cancellation being recorded, the repeat would be a ConcurrentModificationError."""
    proxy, direct = endpoints
    case = prepare(proxy, FaultVersioned, "move_unique")
    obj = case.saved[0]
    obj.email, obj.handle = "ada@analytical.engine", "countess"
    proxy.inject(Fault.DELAY_AFTER, delay=HOLD)

    task = asyncio.create_task(obj.asave())
    while not proxy.records():  # the write reached the server and was applied
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    proxy.wait_idle()
    assert_states(direct, FaultVersioned, case.after)

    proxy.clear()
    await obj.asave()  # the same call again: refused, and the refusal shows its own write
    assert [w.status for w in proxy.writes()] == [400]
    assert_states(direct, FaultVersioned, case.after)
    assert_snapshots(direct, case)
    assert_clean([FaultVersioned], direct)
