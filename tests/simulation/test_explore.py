"""The exhaustive simulation finds no violation in the library, and finds each mutant.

The configurations are the smallest that still reach every call kind (and, for a mutant, its
bug); ``python -m tests.simulation.explore`` explores larger ones.
"""

from __future__ import annotations

import pytest

from .explore import MUTANTS, explore, main, simulation, violations, workloads


def _explore_all(clients: int, ops: int, values: int) -> tuple[int, list[object]]:
    states, found = 0, []
    for workload in workloads(clients, ops, values):
        n, more = explore(workload)
        states += n
        found += more
    return states, found


def test_two_clients_three_operations_three_values_break_nothing() -> None:
    with simulation():
        states, found = _explore_all(2, 3, 3)
    assert found == []
    # 3 workloads, every interleaving of creates, unique changes and never-loaded deletes.
    assert states >= 150


def test_three_clients_two_operations_break_nothing() -> None:
    with simulation():
        states, found = _explore_all(3, 2, 3)
    assert found == []
    assert states >= 100


#: The smallest configuration catching each mutant.
_CATCHING = {"lock-put-unguarded": (2, 3, 3), "stale-record-unguarded": (2, 6, 3)}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_mutant_is_caught_with_a_trace(mutant: str, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    clients, ops, values = _CATCHING[mutant]
    code = main(["--clients", str(clients), "--ops", str(ops), "--values", str(values),
                 "--mutant", mutant])
    out = capsys.readouterr().out
    assert code == 1
    last = out.strip().splitlines()[-1]
    assert last.startswith("explored ") and not last.endswith(" 0 violations"), last
    assert "counterexample (" in out and "VIOLATION:" in out


def test_the_mutant_switch_is_undone() -> None:
    with simulation("lock-put-unguarded"):
        pass
    with simulation():
        states, found = _explore_all(2, 3, 3)
    assert found == [] and states >= 150


def test_the_shortest_trace_of_a_duplicate_is_three_requests() -> None:
    with simulation("lock-put-unguarded"):
        _, found = explore(workloads(2, 3, 3)[0])
    assert len(found) == 1
    (item,) = found
    # A create, the same record moving to v1, and the other record's create of v1: both hold v1.
    assert item.schedule == (0, 0, 1)  # type: ignore[attr-defined]
    assert "value 'v1' held by 2 live records: ['R0', 'R1']" in item.problems  # type: ignore


def test_random_mode_reports_its_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--clients", "3", "--ops", "4", "--values", "2", "--random", "30",
                 "--seed", "7"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("explored ") and last.endswith(" states, 0 violations"), last
    assert int(last.split()[1]) > 30


def test_list_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-mutants"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{n}: {w}" for n, (w, _) in MUTANTS.items()]


def test_the_invariants_see_each_kind_of_damage() -> None:
    from .world import new_memory

    memory = new_memory()
    table = memory.items["sim_accounts"]
    record = {"PK": {"S": "R0"}, "SK": {"S": "PROFILE"}, "email": {"S": "v0"}}
    table["r0"] = record
    assert violations(memory) == ["record R0 has no lock UNIQ#EMAIL#v0"]
    table["r1"] = {**record, "PK": {"S": "R1"}}
    assert "value 'v0' held by 2 live records: ['R0', 'R1']" in violations(memory)
    del table["r0"], table["r1"]
    table["lock"] = {"PK": {"S": "UNIQ#EMAIL#v0"}, "SK": {"S": "LOCK"},
                     "owner": {"M": {"PK": {"S": "R9"}, "SK": {"S": "PROFILE"}}}}
    assert violations(memory) == ["lock UNIQ#EMAIL#v0 has no live holder requiring it"]


def test_a_lost_answer_is_resent_with_its_token_and_succeeds_once() -> None:
    from .explore import Action, replay

    with simulation():
        world = replay([[Action("save", "R0", "v0")], [Action("save", "R1", "v0")]],
                       (-1, 1, 0), lost=1)
    # Client 0's create applied, its answer lost; client 1 is refused the value; client 0's
    # resend (same token) is answered as the success it was.
    assert world.log[0].endswith("-> ok, ANSWER LOST")
    assert world.clients[0].outcomes == ["save R0 email='v0': ok"]
    assert world.clients[1].outcomes[0].startswith("save R1 email='v0': UniqueViolation")
    assert violations(world.memory) == []
    assert list(world.memory.tokens) == ["sim-c0-a0-t1"]


def test_two_clients_with_one_lost_answer_break_nothing() -> None:
    with simulation():
        states, found = 0, []
        for workload in workloads(2, 2, 3):
            n, more = explore(workload, lost=1)
            states += n
            found += more
    assert found == []
    assert states >= 100
