"""The search without replays visits exactly the states the replaying search visits.

``_explore_by_replay`` is the first explorer's search, kept here as the reference: every state
rebuilt by replaying its whole schedule through a real ``World`` (the library and the model run
again for every request of it). ``search.Search`` computes each transition once; on small
configurations — with lost answers, faults, a mutant — both must meet the same set of states
(compared by the replaying world's own key), in the same number, and find the same first
violation with the same schedule.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

from .explore import Action, Found, Step, replay, simulation, workloads
from .search import Node, Search
from .workloads import DEFAULT_SCENARIOS


def _explore_by_replay(workload: Sequence[Sequence[Action]], *, lost: int = 0,
                       faults: int = 0, scenario: str = "", replay: Any = replay
                       ) -> tuple[set[Any], list[Found]]:
    """The first explorer's breadth-first search: (every state's key, the first violation);
    ``replay`` makes the world of a schedule (test_replicas.py: the replicated one)."""
    start = replay(workload, (), lost=lost, faults=faults, scenario=scenario)
    seen: set[Any] = {start.key()}
    if start.violations():
        return seen, [Found(workload, (), start.violations(), lost, scenario, faults)]
    queue: deque[tuple[tuple[Step, ...], list[Step]]] = deque([((), start.runnable())])
    while queue:
        schedule, runnable = queue.popleft()
        for step in runnable:
            child = (*schedule, step)
            world = replay(workload, child, lost=lost, faults=faults, scenario=scenario)
            key = world.key()
            if key in seen:
                continue
            seen.add(key)
            if world.violations():
                return seen, [Found(workload, child, world.violations(), lost, scenario,
                                    faults)]
            queue.append((child, world.runnable()))
    return seen, []


def _by_search(workload: Sequence[Sequence[Action]], *, lost: int = 0, faults: int = 0,
               scenario: str = "") -> tuple[set[Any], int, list[Found]]:
    search = Search(workload, lost=lost, faults=faults, scenario=scenario)
    nodes: list[Node] = []
    states, found = search.run(visit=nodes.append)
    return {search.canonical(n) for n in nodes}, states, found


def _same(scenario: str, clients: int, ops: int, *, lost: int = 0, faults: int = 0,
          mutant: str | None = None) -> int:
    with simulation(mutant):
        ((_, workload),) = workloads(clients, ops, 3, [scenario])
        expected, found_before = _explore_by_replay(workload, lost=lost, faults=faults,
                                                    scenario=scenario)
        keys, states, found = _by_search(workload, lost=lost, faults=faults, scenario=scenario)
    assert states == len(keys) == len(expected)
    assert keys == expected
    assert [(f.schedule, f.problems) for f in found] == [
        (f.schedule, f.problems) for f in found_before]
    return states


# Exhaustive: every schedule replayed from the start, the reference the search is checked
# against (tests/README.md, "Two runs"); CI's second pytest step runs these two.
@pytest.mark.exhaustive
@pytest.mark.parametrize("scenario", DEFAULT_SCENARIOS)
def test_the_search_meets_the_states_a_replaying_search_meets(scenario: str) -> None:
    assert _same(scenario, 2, 2) > 5


@pytest.mark.exhaustive
@pytest.mark.parametrize("scenario", ["basic", "swap", "stale", pytest.param(
    "repair", marks=pytest.mark.slow)])   # the replaying reference: 250 CPU-s on the repair
def test_so_it_does_with_faults_and_lost_answers(scenario: str) -> None:
    assert _same(scenario, 2, 2, faults=1) > _same(scenario, 2, 2)
    assert _same(scenario, 2, 2, lost=1) > 5


@pytest.mark.parametrize(("mutant", "scenario"), [("lock-put-unguarded", "basic"),
                                                  ("lock-delete-unguarded", "drift")])
def test_and_finds_the_same_first_violation(mutant: str, scenario: str) -> None:
    assert _same(scenario, 2, 3, mutant=mutant) > 1


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [s for s in DEFAULT_SCENARIOS if s != "repair"])
def test_the_same_states_on_two_clients_three_calls_with_a_fault(scenario: str) -> None:
    assert _same(scenario, 2, 3, faults=1) > 5


# --- sleep sets --------------------------------------------------------------------------------


def _depths(scenario: str, clients: int, ops: int, *, reduced: bool, lost: int = 0,
            faults: int = 0, mutant: str | None = None) -> tuple[dict[Any, int], list[Any]]:
    """Every state met, with the length of the schedule it was first met by; the violations."""
    from . import sleep

    with simulation(mutant):
        ((_, workload),) = workloads(clients, ops, 3, [scenario])
        search = Search(workload, lost=lost, faults=faults, scenario=scenario)
        nodes: list[Node] = []
        states, found = (sleep.run if reduced else Search.run)(search, visit=nodes.append)
        depths = {search.canonical(n): len(n.schedule()) for n in nodes}
    assert states == len(depths)
    return depths, [(len(f.schedule), f.problems) for f in found]


_SLEEPING = [(s, 0, 0) for s in DEFAULT_SCENARIOS] + [
    (s, lost, faults) for s in ("basic", "swap") for lost, faults in ((0, 1), (1, 0))] + [
    pytest.param(s, lost, faults, marks=pytest.mark.slow) for s in DEFAULT_SCENARIOS
    if s not in ("basic", "swap") for lost, faults in ((0, 1), (1, 0))]


@pytest.mark.parametrize(("scenario", "lost", "faults"), _SLEEPING)
def test_sleep_sets_meet_every_state_at_its_depth(scenario: str, lost: int, faults: int) -> None:
    reduced = _depths(scenario, 2, 2, reduced=True, lost=lost, faults=faults)
    assert reduced == _depths(scenario, 2, 2, reduced=False, lost=lost, faults=faults)


@pytest.mark.parametrize(("mutant", "scenario"), [("lock-put-unguarded", "basic"),
                                                  ("stale-record-unguarded", "swap")])
def test_sleep_sets_find_a_mutant_by_the_same_shortest_schedule_length(mutant: str,
                                                                        scenario: str) -> None:
    reduced = _depths(scenario, 2, 3, reduced=True, mutant=mutant)[1]
    assert reduced == _depths(scenario, 2, 3, reduced=False, mutant=mutant)[1] != []
