"""The migrations' kinds are enums that read, print and serialize as the strings they were."""

from __future__ import annotations

import json

import pytest

from dynaunique.migrations._kinds import (
    DeleteOutcome,
    LeaseMode,
    LedgerKind,
    PhaseKind,
    ProgressState,
    PutOutcome,
)
from dynaunique.migrations.operations import FILL, REMOVE, RUN, SWEEP, Phase

ALL = [*PhaseKind, *PutOutcome, *DeleteOutcome, *LedgerKind, *LeaseMode, *ProgressState]


def test_the_values_are_the_old_strings() -> None:
    assert [k.value for k in ALL] == [
        "fill", "sweep", "remove", "run",
        "new", "present", "taken",
        "deleted", "absent", "foreign",
        "migration", "job", "progress", "lease", "stream", "budget",
        "exclusive", "workers",
        "started", "running", "finished", "record", "note",
    ]


@pytest.mark.parametrize("kind", ALL, ids=lambda k: k.value)
def test_a_kind_prints_compares_and_serializes_as_its_string(kind: PhaseKind) -> None:
    value = kind.value
    assert str(kind) == value
    assert f"{kind}" == value
    assert f"{kind:>10}" == f"{value:>10}"
    assert "%s" % kind == value  # noqa: UP031 - the logging module formats with %
    assert json.dumps(kind) == json.dumps(value)
    assert json.dumps({"kind": kind}) == json.dumps({"kind": value})
    assert kind == value
    assert hash(kind) == hash(value)
    assert type(kind)(value) is kind


def test_the_phase_kinds_keep_their_old_names_and_a_phase_accepts_the_old_strings() -> None:
    assert (FILL, SWEEP, REMOVE, RUN) == ("fill", "sweep", "remove", "run")
    phase = Phase("sweep", "Account", "accounts")
    assert phase.kind is PhaseKind.SWEEP
    assert phase == Phase(SWEEP, "Account", "accounts")
