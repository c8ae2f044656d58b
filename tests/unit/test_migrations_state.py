"""Pure parts of migrations: constraint serialization, the autodetector, the writer, the loader,
the token bucket. No server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.clock import FakeClock

from dynaunique import UniqueConstraint, normalizers
from dynaunique.errors import MigrationError
from dynaunique.migrations import (
    AddUniqueConstraint,
    AlterUniqueConstraint,
    ConstraintState,
    Migration,
    MigrationLoader,
    ProjectState,
    RemoveUniqueConstraint,
    RunPython,
)
from dynaunique.migrations.autodetector import detect_changes, suggest_name
from dynaunique.migrations.operations import FILL, REMOVE, RUN, SWEEP, Phase
from dynaunique.migrations.ratelimit import TokenBucket
from dynaunique.migrations.recorder import job_id
from dynaunique.migrations.state import callable_path, resolve
from dynaunique.migrations.writer import literal, render, write


def only_active(record: Any) -> bool:
    """A module-level condition."""
    return bool(getattr(record, "active", True))


EMAIL = ConstraintState(name="EMAIL", fields=("email",),
                        normalize="dynaunique.normalizers.casefold")


# --- callables as import paths -------------------------------------------------------------------


def test_a_module_level_function_is_stored_by_its_import_path() -> None:
    assert callable_path(normalizers.casefold, what="x") == "dynaunique.normalizers.casefold"
    assert resolve("dynaunique.normalizers.casefold") is normalizers.casefold


def test_a_builtin_method_is_stored_and_resolved() -> None:
    path = callable_path(str.casefold, what="x")
    assert path == "builtins.str.casefold"
    assert resolve(path) is str.casefold


def test_a_lambda_normalizer_is_refused_with_advice() -> None:
    constraint = UniqueConstraint("email", normalize=lambda v: v.lower())
    with pytest.raises(MigrationError) as info:
        ConstraintState.from_constraint(constraint, owner="Account")
    message = str(info.value)
    assert message.startswith("Account.EMAIL normalize= is a lambda")
    assert "define a named function at module level" in message


def test_a_local_function_is_refused() -> None:
    def lower(value: Any) -> Any:
        return value.lower()

    with pytest.raises(MigrationError, match="defined inside another function"):
        ConstraintState.from_constraint(UniqueConstraint("email", normalize=lower),
                                        owner="Account")


def test_a_lambda_condition_is_refused() -> None:
    constraint = UniqueConstraint("email", condition=lambda r: True)
    with pytest.raises(MigrationError, match=r"Account\.EMAIL condition= is a lambda"):
        ConstraintState.from_constraint(constraint, owner="Account")


def test_resolve_reports_a_missing_name() -> None:
    with pytest.raises(MigrationError, match=r"cannot import 'dynaunique\.normalizers\.nope'"):
        resolve("dynaunique.normalizers.nope")


# --- ConstraintState -----------------------------------------------------------------------------


def test_composed_normalizers_become_a_list_of_paths_and_back() -> None:
    constraint = UniqueConstraint(
        ("tenant", "slug"), name="TENANT_SLUG",
        normalize={"slug": normalizers.compose(normalizers.strip, normalizers.casefold)},
        condition=only_active, hashed=True,
    )
    state = ConstraintState.from_constraint(constraint, owner="Page")
    assert state.to_dict() == {
        "name": "TENANT_SLUG",
        "fields": ["tenant", "slug"],
        "normalize": {"slug": ["dynaunique.normalizers.strip",
                               "dynaunique.normalizers.casefold"]},
        "condition": f"{__name__}.only_active",
        "hashed": True,
    }
    assert ConstraintState.from_dict(state.to_dict()) == state
    rebuilt = state.to_constraint()
    assert rebuilt == constraint
    assert rebuilt.normalized(("Acme", "  Home ")) == ("Acme", "home")


def test_a_one_field_constraint_round_trips() -> None:
    constraint = UniqueConstraint("email", normalize=normalizers.casefold)
    state = ConstraintState.from_constraint(constraint, owner="Account")
    assert state == EMAIL
    assert state.to_constraint() == constraint
    assert state.describe() == "EMAIL (email; normalize casefold)"


def test_from_dict_rejects_unknown_keys_and_missing_ones() -> None:
    with pytest.raises(MigrationError, match="unknown constraint keys"):
        ConstraintState.from_dict({"name": "X", "fields": ["x"], "colour": "red"})
    with pytest.raises(MigrationError, match="needs 'fields'"):
        ConstraintState.from_dict({"name": "X"})


# --- the autodetector ----------------------------------------------------------------------------


def _state(*entries: tuple[str, str, ConstraintState]) -> ProjectState:
    state = ProjectState()
    for model, table, constraint in entries:
        state = state.with_constraint(model, table, constraint)
    return state


def test_a_new_constraint_is_an_add() -> None:
    assert detect_changes(ProjectState(), _state(("Account", "t", EMAIL))) == [
        AddUniqueConstraint(model="Account", table="t", constraint=EMAIL)
    ]


def test_a_dropped_constraint_is_a_remove_with_its_full_declaration() -> None:
    assert detect_changes(_state(("Account", "t", EMAIL)), ProjectState()) == [
        RemoveUniqueConstraint(model="Account", table="t", constraint=EMAIL)
    ]


def test_a_changed_normalizer_is_an_alter() -> None:
    new = ConstraintState(name="EMAIL", fields=("email",), normalize=None)
    assert detect_changes(_state(("Account", "t", EMAIL)), _state(("Account", "t", new))) == [
        AlterUniqueConstraint(model="Account", table="t", old=EMAIL, new=new)
    ]


def test_a_renamed_lock_is_a_remove_and_an_add() -> None:
    renamed = ConstraintState(name="EMAIL_V2", fields=("email",))
    assert detect_changes(_state(("A", "t", EMAIL)), _state(("A", "t", renamed))) == [
        RemoveUniqueConstraint(model="A", table="t", constraint=EMAIL),
        AddUniqueConstraint(model="A", table="t", constraint=renamed),
    ]


def test_a_model_moved_to_another_table_is_removed_then_added() -> None:
    assert detect_changes(_state(("A", "old", EMAIL)), _state(("A", "new", EMAIL))) == [
        RemoveUniqueConstraint(model="A", table="old", constraint=EMAIL),
        AddUniqueConstraint(model="A", table="new", constraint=EMAIL),
    ]


def test_equal_states_need_nothing() -> None:
    assert detect_changes(_state(("A", "t", EMAIL)), _state(("A", "t", EMAIL))) == []


def test_suggested_names() -> None:
    add = AddUniqueConstraint(model="Account", table="t", constraint=EMAIL)
    alter = AlterUniqueConstraint(model="Account", table="t", old=EMAIL, new=EMAIL)
    assert suggest_name([add], initial=True) == "initial"
    assert suggest_name([add], initial=False) == "add_account_email"
    assert suggest_name([alter, add], initial=False) == "alter_account_email_and_more"


# --- operations ----------------------------------------------------------------------------------


def test_phases_of_each_operation_and_its_inverse() -> None:
    new = ConstraintState(name="EMAIL", fields=("email",))
    add = AddUniqueConstraint(model="A", table="t", constraint=EMAIL)
    remove = RemoveUniqueConstraint(model="A", table="t", constraint=EMAIL)
    alter = AlterUniqueConstraint(model="A", table="t", old=EMAIL, new=new)
    assert add.phases() == (Phase(FILL, "A", "t", EMAIL),)
    assert add.phases(backwards=True) == (Phase(REMOVE, "A", "t", EMAIL),)
    assert remove.phases() == (Phase(REMOVE, "A", "t", EMAIL),)
    assert remove.phases(backwards=True) == (Phase(FILL, "A", "t", EMAIL),)
    assert alter.phases() == (Phase(SWEEP, "A", "t", new), Phase(FILL, "A", "t", new))
    assert alter.phases(backwards=True) == (Phase(SWEEP, "A", "t", EMAIL),
                                            Phase(FILL, "A", "t", EMAIL))


def test_alter_keeps_the_lock_name() -> None:
    with pytest.raises(MigrationError, match="keeps the lock name"):
        AlterUniqueConstraint(model="A", table="t", old=EMAIL,
                              new=ConstraintState(name="OTHER", fields=("email",)))


def test_run_python_takes_import_paths_and_refuses_to_unapply_without_backwards() -> None:
    op = RunPython(f"{__name__}.only_active")
    assert op.forwards is only_active
    assert not op.reversible
    assert op.phases()[0].kind == RUN
    with pytest.raises(MigrationError, match="cannot be unapplied"):
        op.phases(backwards=True)
    assert RunPython(only_active, RunPython.noop).reversible


def test_job_ids() -> None:
    assert job_id("0002_add_x", 1, False, 0) == "0002_add_x#1#F#0"
    assert job_id("0002_add_x", 1, True, 1) == "0002_add_x#1#B#1"


# --- the writer and the loader -------------------------------------------------------------------


def test_literal_renders_python() -> None:
    assert literal({"a": [None, True, "x\"y"], "b": {}}) == (
        '{\n    "a": [None, True, "x\\"y"],\n    "b": {},\n}'
    )


def test_rendered_file_is_exact_and_loads_back(tmp_path: Path) -> None:
    add = AddUniqueConstraint(model="Account", table="accounts", constraint=EMAIL)
    source = render("0002_add_account_email", label="app.models", dependencies=["0001_initial"],
                    operations=[add])
    assert source == '''\
"""Migration 0002_add_account_email of app.models, written by `dynaunique makemigrations`."""

from __future__ import annotations

from dynaunique.migrations import operations as ops

dependencies = ["0001_initial"]

operations = [
    ops.AddUniqueConstraint(
        model="Account",
        table="accounts",
        constraint={
            "name": "EMAIL",
            "fields": ["email"],
            "normalize": "dynaunique.normalizers.casefold",
            "condition": None,
            "hashed": False,
        },
    ),
]
'''
    write(tmp_path, "0001_initial", render("0001_initial", label="app.models", dependencies=[],
                                           operations=[]))
    path = write(tmp_path, "0002_add_account_email", source)
    assert (tmp_path / "__init__.py").exists()
    loader = MigrationLoader(tmp_path)
    assert loader.order == ["0001_initial", "0002_add_account_email"]
    assert loader.migrations["0002_add_account_email"].operations == (add,)
    assert loader.state() == _state(("Account", "accounts", EMAIL))
    with pytest.raises(MigrationError, match="exists already"):
        write(tmp_path, "0002_add_account_email", source)
    assert path.read_text(encoding="utf-8") == source


def test_loader_orders_by_dependencies_and_resolves_prefixes(tmp_path: Path) -> None:
    loader = MigrationLoader.from_migrations(tmp_path, [
        Migration("0002_b", ("0001_a",)), Migration("0001_a"), Migration("0003_c", ("0002_b",)),
    ])
    assert loader.order == ["0001_a", "0002_b", "0003_c"]
    assert loader.leaf() == "0003_c"
    assert loader.next_number() == 4
    assert loader.resolve("0002") == "0002_b"
    assert loader.resolve("zero") is None
    with pytest.raises(MigrationError, match="no migration called '0009'"):
        loader.resolve("0009")


def test_two_latest_migrations_conflict(tmp_path: Path) -> None:
    loader = MigrationLoader.from_migrations(tmp_path, [
        Migration("0001_a"), Migration("0002_b", ("0001_a",)), Migration("0002_c", ("0001_a",)),
    ])
    with pytest.raises(MigrationError, match=r"conflicting migrations .* 0002_b, 0002_c"):
        loader.leaf()


def test_a_missing_dependency_or_a_cycle_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="depends on '0000_x', which does not exist"):
        MigrationLoader.from_migrations(tmp_path, [Migration("0001_a", ("0000_x",))])
    with pytest.raises(MigrationError, match="cycle"):
        MigrationLoader.from_migrations(tmp_path, [Migration("0001_a", ("0002_b",)),
                                                   Migration("0002_b", ("0001_a",))])


def test_a_broken_migration_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / "0001_broken.py").write_text("operations = [42]\n", encoding="utf-8")
    with pytest.raises(MigrationError, match=r"0001_broken\.py: 42 is not a migration operation"):
        MigrationLoader(tmp_path)


def test_replaying_a_remove_of_an_unknown_constraint_fails(tmp_path: Path) -> None:
    loader = MigrationLoader.from_migrations(tmp_path, [Migration("0001_a", (), (
        RemoveUniqueConstraint(model="A", table="t", constraint=EMAIL),))])
    with pytest.raises(MigrationError, match="replaying 0001_a: A has no constraint 'EMAIL'"):
        loader.state()


# --- the token bucket ----------------------------------------------------------------------------


def test_the_bucket_allows_a_burst_then_paces_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        assert bucket.acquire() == 0.0
    assert bucket.acquire() == pytest.approx(0.1)
    assert bucket.acquire(2) == pytest.approx(0.2)
    assert clock.now == pytest.approx(0.3)


def test_charge_makes_the_next_acquire_pay() -> None:
    clock = FakeClock()
    bucket = TokenBucket(4, clock=clock, sleep=clock.sleep)
    bucket.acquire(4)
    bucket.charge(2)
    assert bucket.acquire(1) == pytest.approx(0.75)
