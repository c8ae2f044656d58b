"""MigrationOptions: one value for how a migration runs, checked when it is made; the one
progress callback; the keyword arguments it replaced, deprecated. No server."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.migrations import (
    Counters,
    InvalidOptionError,
    MigrationOptions,
    ProgressEvent,
    Settings,
)
from dynaunique.migrations._kinds import ProgressState
from dynaunique.migrations._report import reporter_callback
from dynaunique.migrations.options import FIELDS, legacy_options
from dynaunique.migrations.project import options_from


def test_the_defaults_are_migrates() -> None:
    options = MigrationOptions()
    assert (options.segments, options.worker, options.only, options.concurrency,
            options.max_wcu, options.max_rcu, options.page_size, options.lease_seconds,
            options.wait_seconds, options.poll_seconds, options.conflict_cap,
            options.accept_other_secret) == (1, None, False, 1, None, None, 100, 60.0, 0.0,
                                             1.0, 500, False)
    assert FIELDS == ("segments", "worker", "only", "concurrency", "max_wcu", "max_rcu",
                      "page_size", "lease_seconds", "wait_seconds", "poll_seconds",
                      "conflict_cap", "accept_other_secret")


def test_options_are_frozen_and_picklable_for_a_worker() -> None:
    options = MigrationOptions(worker=(1, 4), only=True, max_wcu=20)
    with pytest.raises(AttributeError):
        options.page_size = 5  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(options)) == options
    assert options.replace(page_size=5) == MigrationOptions(worker=(1, 4), only=True,
                                                             max_wcu=20, page_size=5)


@pytest.mark.parametrize(("changes", "message"), [
    ({"segments": 0}, "MigrationOptions segments must be an integer in 1..1000, not 0"),
    ({"segments": 1001}, "MigrationOptions segments must be an integer in 1..1000, not 1001"),
    ({"segments": 2.0}, "MigrationOptions segments must be an integer in 1..1000, not 2.0"),
    ({"segments": True}, "MigrationOptions segments must be an integer in 1..1000, not True"),
    ({"concurrency": 257},
     "MigrationOptions concurrency must be an integer in 1..256, not 257"),
    ({"page_size": 0}, "MigrationOptions page_size must be an integer at least 1, not 0"),
    ({"conflict_cap": 0}, "MigrationOptions conflict_cap must be an integer at least 1, not 0"),
    ({"lease_seconds": 0}, "MigrationOptions lease_seconds must be a number above 0, not 0"),
    ({"poll_seconds": -1}, "MigrationOptions poll_seconds must be a number above 0, not -1"),
    ({"wait_seconds": float("nan")},
     "MigrationOptions wait_seconds must be a number at least 0, not nan"),
    ({"max_wcu": 0}, "MigrationOptions max_wcu must be a number above 0, not 0"),
    ({"max_rcu": "10"}, "MigrationOptions max_rcu must be a number above 0, not '10'"),
    ({"max_wcu": float("inf")}, "MigrationOptions max_wcu must be a number above 0, not inf"),
    ({"only": 1}, "MigrationOptions only must be True or False, not 1"),
    ({"accept_other_secret": "yes"},
     "MigrationOptions accept_other_secret must be True or False, not 'yes'"),
    ({"worker": (2, 2)}, "MigrationOptions worker must be (segment, total_segments) with the "
     "segment in 0..total-1 and the total at most 1000, not (2, 2)"),
    ({"worker": [0, 2]}, "MigrationOptions worker must be (segment, total_segments) with the "
     "segment in 0..total-1 and the total at most 1000, not [0, 2]"),
    ({"worker": (0, 1001)}, "MigrationOptions worker must be (segment, total_segments) with "
     "the segment in 0..total-1 and the total at most 1000, not (0, 1001)"),
    ({"only": True}, "MigrationOptions only=True runs one worker's segment alone: it needs "
     "worker=(segment, total_segments)"),
])
def test_a_bad_value_is_refused_when_the_options_are_made(changes: dict[str, Any],
                                                           message: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        MigrationOptions(**changes)
    assert str(info.value) == message
    # A configuration mistake (the CLI exits 2) that a caller of the migrations catches too.
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, MigrationError)
    assert info.value.exit_code == 2


def test_replace_refuses_an_unknown_option_naming_the_options() -> None:
    with pytest.raises(InvalidOptionError, match="no such migration option: pagesize; the "
                       "options are segments, worker, only, "):
        MigrationOptions().replace(pagesize=10)


def test_the_settings_come_under_the_changes() -> None:
    settings = Settings(segments=4, max_wcu=50.0, concurrency=8, lease_seconds=30.0,
                        max_rcu=None)
    assert options_from(settings) == MigrationOptions(segments=4, max_wcu=50.0, concurrency=8,
                                                      lease_seconds=30.0)
    # A change of None keeps the setting; a value wins over it.
    assert options_from(settings, segments=None, concurrency=2, page_size=10) == \
        MigrationOptions(segments=4, max_wcu=50.0, concurrency=2, lease_seconds=30.0,
                         page_size=10)
    assert options_from(Settings()) == MigrationOptions()


def test_the_old_keyword_arguments_still_work_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"MigrationExecutor\(\.\.\., page_size=10\) is "
                      r"deprecated: pass options=MigrationOptions\(page_size=10\)"):
        options = legacy_options(None, {"page_size": 10}, "MigrationExecutor")
    assert options == MigrationOptions(page_size=10)
    base = MigrationOptions(segments=3)
    assert legacy_options(base, {}, "run_on_dask") is base
    with pytest.raises(InvalidOptionError, match="no such migration option: colour"):
        legacy_options(None, {"colour": "red"}, "MigrationExecutor")


def test_a_reporter_gets_each_event_at_its_method() -> None:
    calls: list[tuple[Any, ...]] = []

    class Reporter:
        def phase_started(self, label: str, *, estimate: int | None,
                          so_far: Counters | None = None) -> None:
            calls.append(("started", label, estimate, so_far))

        def advance(self, label: str, delta: Counters) -> None:
            calls.append(("advance", label, delta))

        def phase_finished(self, label: str, totals: Counters) -> None:
            calls.append(("finished", label, totals))

        def note(self, text: str) -> None:
            calls.append(("note", text))

    forward = reporter_callback(Reporter())
    page, totals = Counters(scanned=3), Counters(scanned=9)
    forward(ProgressEvent(ProgressState.STARTED, "p", Counters(duplicates=1), 40))
    forward(ProgressEvent(ProgressState.RUNNING, "p", page, segment=0, segments=2))
    forward(ProgressEvent(ProgressState.RECORD))
    forward(ProgressEvent(ProgressState.FINISHED, "p", totals))
    forward(ProgressEvent(ProgressState.NOTE, text="Applied 0001"))
    assert calls == [("started", "p", 40, Counters(duplicates=1)), ("advance", "p", page),
                     ("finished", "p", totals), ("note", "Applied 0001")]


def test_the_executors_old_keywords_and_reporter_still_work_deprecated() -> None:
    from types import SimpleNamespace

    from dynaunique.migrations import MigrationExecutor

    ledger = SimpleNamespace(table="t", keys=None, connection=None, app="a")  # no cap: no read
    with pytest.warns(DeprecationWarning, match=r"MigrationExecutor\(\.\.\., page_size=10, "
                      r"segments=2\) is deprecated"):
        executor = MigrationExecutor(None, ledger, {}, page_size=10,  # type: ignore[arg-type]
                                     segments=2)
    assert executor.options == MigrationOptions(page_size=10, segments=2)
    notes: list[str] = []

    class Notes:
        def note(self, text: str) -> None:
            notes.append(text)

    with pytest.warns(DeprecationWarning, match=r"reporter=\.\.\.\) is deprecated: pass "
                      "progress_callback="):
        executor = MigrationExecutor(None, ledger, {}, reporter=Notes())  # type: ignore[arg-type]
    assert executor.options == MigrationOptions()
    assert executor.progress_callback is not None
    executor.progress_callback(ProgressEvent(ProgressState.NOTE, text="Applying 0001"))
    assert notes == ["Applying 0001"]
    with pytest.raises(InvalidOptionError, match="no such migration option: pagesize"):
        MigrationExecutor(None, ledger, {}, pagesize=10)  # type: ignore[arg-type]


def test_client_names_a_botocore_client_only_the_old_names_warn() -> None:
    """Issue 39's glossary: a PynamoDB connection is a ``connection``; the old names still
    work for a release, each with a DeprecationWarning naming the new one."""
    from types import SimpleNamespace

    from dynaunique.migrations import MigrationExecutor
    from dynaunique.migrations.project import Project
    from dynaunique.migrations.recorder import MigrationRecorder, TableKeys

    connection = SimpleNamespace(client="botocore client")
    recorder = MigrationRecorder(connection, TableKeys("t", "PK", "SK"), "a")
    assert recorder.connection is connection
    with pytest.warns(DeprecationWarning, match=r"MigrationRecorder\.client is deprecated: use "
                      r"MigrationRecorder\.connection"):
        assert recorder.client is connection
    executor = MigrationExecutor(None, recorder, {})  # type: ignore[arg-type]
    assert executor.connection_for("t") is connection
    tables: list[str] = []

    def old(table: str) -> Any:
        tables.append(table)
        return "other"

    with pytest.warns(DeprecationWarning, match=r"client_for=\.\.\.\) is deprecated: pass "
                      "connection_for="):
        executor = MigrationExecutor(None, recorder, {}, client_for=old)  # type: ignore[arg-type]
    assert executor.connection_for("u") == "other" and tables == ["u"]
    project = Project("no_models_here", [], migrations_dir=Path("dynamigrations"))
    with pytest.raises(ConfigurationError, match="no_models_here has no models"):
        project.connection_for("t")
    with pytest.warns(DeprecationWarning, match=r"Project\.client_for\(\) is deprecated: use "
                      r"Project\.connection_for\(\)"), \
            pytest.raises(ConfigurationError, match="no_models_here has no models"):
        project.client_for("t")


def test_the_rounds_constant_is_named_for_reconcile_the_old_name_warns() -> None:
    from dynaunique.migrations import executor

    assert executor.MAX_RECONCILE_ROUNDS == 8
    with pytest.warns(DeprecationWarning, match=r"executor\.MAX_SETTLE_ROUNDS is deprecated: "
                      "use MAX_RECONCILE_ROUNDS"):
        assert executor.MAX_SETTLE_ROUNDS == 8
    with pytest.raises(AttributeError, match="has no attribute 'MAX_SETTLE'"):
        executor.MAX_SETTLE  # noqa: B018


def test_run_on_dasks_time_bound_is_max_seconds_the_old_keyword_warns() -> None:
    """``unit_seconds=`` (a task's time bound, named after the migrations' old ``Unit``) is
    ``max_seconds=``, as ``migrate --max-seconds``; the old keyword warns, then runs as before
    (here: to the refusal of zero segments, before any cluster is reached)."""
    pytest.importorskip("distributed")
    from dynaunique.migrations import run_on_dask

    with pytest.warns(DeprecationWarning, match=r"run_on_dask\(\.\.\., unit_seconds=\.\.\.\) is "
                      "deprecated: pass max_seconds="), \
            pytest.raises(MigrationError, match="total_segments must be between 1 and 1000"):
        run_on_dask("m", "tcp://127.0.0.1:1", total_segments=0, unit_seconds=5.0,
                    options=MigrationOptions())
    with pytest.raises(MigrationError, match="total_segments must be between 1 and 1000"):
        run_on_dask("m", "tcp://127.0.0.1:1", total_segments=0, max_seconds=5.0,
                    options=MigrationOptions())
