"""Answers damaged on the way: an answer whose body does not match its ``x-amz-crc32`` is never
taken for DynamoDB's answer.

The fault proxy replies with ``{}`` (an empty item: "no such record") under the true answer's
headers, checksum included. botocore checks that checksum only inside its retry handler, which
the library's connections turn off; dynaunique checks it on every answer (sync and async, fast
path and botocore's path), retries a mismatch as it retries a 5xx, and when the retries run out
raises, never returns the damaged answer as a success.
"""

from __future__ import annotations

import pytest
from support.invariants import assert_clean

from dynaunique import DynauniqueError, Model

from .proxy import Fault, FaultProxy
from .test_faults import EXHAUSTING, FaultPlain, endpoints, prepare, stored

__all__ = ["endpoints"]  # the fixture, shared with test_faults

READS = frozenset({"GetItem"})


def corrupted(proxy: FaultProxy) -> int:
    """How many answers the proxy damaged since it was last cleared."""
    return sum(r.fault is Fault.CORRUPT for r in proxy.records())


def _unloaded(model: type[Model], direct: str, proxy: FaultProxy) -> Model:
    """A record saved, then named by its key only (never loaded): its delete reads it first."""
    prepare(proxy, model, "create")
    record = model(pk="integrity", email="ada@example.com", handle="ada")
    record.save()
    proxy.clear()
    return model(pk="integrity")


def test_a_corrupted_read_of_an_unloaded_delete_is_retried(
        endpoints: tuple[FaultProxy, str]) -> None:
    proxy, direct = endpoints
    victim = _unloaded(FaultPlain, direct, proxy)
    proxy.inject(Fault.CORRUPT, operations=READS)

    victim.delete()

    assert corrupted(proxy) == 1
    assert [r.operation for r in proxy.records()][:2] == ["GetItem", "GetItem"]
    assert stored(direct, FaultPlain, "integrity") is None
    assert_clean([FaultPlain], direct)


def test_a_read_corrupted_every_time_is_an_error_not_nothing(
        endpoints: tuple[FaultProxy, str]) -> None:
    proxy, direct = endpoints
    victim = _unloaded(FaultPlain, direct, proxy)
    proxy.inject(Fault.CORRUPT, operations=READS, times=EXHAUSTING)

    with pytest.raises(DynauniqueError, match="crc32"):
        victim.delete()

    assert corrupted(proxy) == EXHAUSTING
    assert stored(direct, FaultPlain, "integrity") is not None
    assert_clean([FaultPlain], direct)


def test_get_by_unique_never_calls_a_held_value_free_on_a_corrupted_answer(
        endpoints: tuple[FaultProxy, str]) -> None:
    proxy, direct = endpoints
    _unloaded(FaultPlain, direct, proxy)
    proxy.inject(Fault.CORRUPT, operations=READS)

    found = FaultPlain.get_by_unique("email", "ada@example.com")

    assert found.pk == "integrity"
    assert corrupted(proxy) == 1


@pytest.mark.anyio
async def test_async_a_corrupted_read_of_an_unloaded_delete_is_retried(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str) -> None:
    proxy, direct = endpoints
    victim = _unloaded(FaultPlain, direct, proxy)
    proxy.inject(Fault.CORRUPT, operations=READS)

    await victim.adelete()

    assert corrupted(proxy) == 1
    assert stored(direct, FaultPlain, "integrity") is None
    assert_clean([FaultPlain], direct)


@pytest.mark.anyio
async def test_async_get_by_unique_on_corrupted_answers(
        endpoints: tuple[FaultProxy, str], dynaunique_aio_db: str) -> None:
    proxy, direct = endpoints
    _unloaded(FaultPlain, direct, proxy)
    proxy.inject(Fault.CORRUPT, operations=READS)

    found = await FaultPlain.aget_by_unique("email", "ada@example.com")
    assert found.pk == "integrity"

    proxy.inject(Fault.CORRUPT, operations=READS, times=EXHAUSTING)
    with pytest.raises(DynauniqueError, match="crc32"):
        await FaultPlain.aget_by_unique("email", "ada@example.com")
    assert corrupted(proxy) == 1 + EXHAUSTING


def test_botocores_own_path_checks_the_answer_too(
        endpoints: tuple[FaultProxy, str]) -> None:
    # A handler on an event the fast path skips makes it stand aside: botocore's steps send.
    proxy, direct = endpoints
    _unloaded(FaultPlain, direct, proxy)
    from dynaunique._transport.clients import client_for

    client = client_for(FaultPlain)

    def noop(**_: object) -> None:
        return None

    client.meta.events.register("before-sign.dynamodb", noop)
    try:
        proxy.inject(Fault.CORRUPT, operations=READS)
        assert FaultPlain.get_by_unique("email", "ada@example.com").pk == "integrity"
        assert corrupted(proxy) == 1
    finally:
        client.meta.events.unregister("before-sign.dynamodb", noop)

