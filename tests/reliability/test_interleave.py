"""The proxy's interleaving mode (``FaultProxy.intercept``) and body-picked fault rules, tested
on their own: the adversary runs exactly in the gap asked for, its requests are told apart from
the call's, and a rule's ``when`` picks requests by body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.invariants import raw_item

from dynaunique.testing import create_tables

from . import point
from .gaps import GapPlain
from .proxy import Fault, FaultProxy


@pytest.fixture
def table(proxy: FaultProxy) -> Iterator[FaultProxy]:
    point(proxy.url, GapPlain)
    create_tables(GapPlain)
    yield proxy


def test_a_call_is_recorded_apart_from_its_adversary(table: FaultProxy) -> None:
    """A never-loaded delete reads, then writes; the adversary runs before the write is
    forwarded (the record is still there), and its own read is not counted as the call's."""
    GapPlain(pk="R", email="a").save()
    seen: list[Any] = []

    def adversary() -> None:
        seen.append(GapPlain.get("R", consistent_read=True).email)

    with table.intercept(adversary, before=2) as call:
        GapPlain(pk="R").delete()
    assert call.fired_before == 2 and call.adversary_error is None
    assert seen == ["a"]  # the delete had not been forwarded yet
    assert call.operations() == ["GetItem", "TransactWriteItems"]
    assert [r.operation for r in call.adversary_requests] == ["GetItem"]
    assert all(r.adversary for r in call.adversary_requests)
    assert not any(r.adversary for r in call.requests)
    assert raw_item(table.url, "rel_gaps", {"pk": {"S": "R"}}) is None


def test_when_picks_the_request_by_operation_and_body(table: FaultProxy) -> None:
    GapPlain(pk="R", email="a").save()
    picked: list[int] = []

    def is_write(operation: str, body: dict[str, Any], index: int) -> bool:
        return operation == "TransactWriteItems" and "TransactItems" in body

    with table.intercept(lambda: picked.append(1), when=is_write) as call:
        GapPlain(pk="R").delete()
    assert call.fired_before == 2 and picked == [1]


def test_an_adversary_that_fails_is_reported_and_the_call_goes_on(table: FaultProxy) -> None:
    GapPlain(pk="R", email="a").save()

    def broken() -> None:
        raise RuntimeError("adversary bug")

    with table.intercept(broken, before=1) as call:
        GapPlain(pk="R").delete()
    assert isinstance(call.adversary_error, RuntimeError)
    assert raw_item(table.url, "rel_gaps", {"pk": {"S": "R"}}) is None


def test_nothing_runs_past_the_last_request(table: FaultProxy) -> None:
    with table.intercept(lambda: None, before=5) as call:
        GapPlain(pk="R", email="a").save()
    assert not call.fired and call.operations() == ["TransactWriteItems"]


def test_a_rule_with_when_only_hits_the_requests_it_picks(table: FaultProxy) -> None:
    def lock_b(operation: str, body: dict[str, Any]) -> bool:
        return "UNIQ#EMAIL#b" in str(body)

    table.inject(Fault.DELAY_BEFORE, times=10, delay=0.01, when=lock_b)
    GapPlain(pk="R", email="a").save()
    GapPlain(pk="S", email="b").save()
    faults = [r.fault for r in table.writes()]
    assert faults == [None, Fault.DELAY_BEFORE]


def test_arguments_are_checked(table: FaultProxy) -> None:
    with pytest.raises(ValueError, match="before= or when="), table.intercept(lambda: None):
        pass
    with pytest.raises(ValueError, match="counted from 1"), table.intercept(before=0):
        pass
