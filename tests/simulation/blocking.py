"""The library's blocking calls (the audit's check and repair, a migration's backfill page) as
step generators the scheduler drives, request by request, like the sans-IO ones.

Those calls have no generator of their own: they send through
``dynaunique._transport.connection.send``, whose driver hands every request to the model's PynamoDB
``Connection.dispatch``. Here the call runs in a greenlet, and :func:`handing_off` makes
``dispatch`` — inside such a greenlet only — switch back to the scheduler with the
:class:`~dynaunique._transport.connection.Request` and return (or raise) the answer it is given.
Nothing of the library is replaced: the same code runs, and only the wire is the scheduler. A
greenlet a replay leaves unfinished is thrown ``GreenletExit`` when it is collected, which unwinds
it (no thread is left behind).

The retry loop's backoffs do not really sleep either: the blocking code sleeps through the
``sleep=time.sleep`` defaults of ``dynaunique._transport.connection.run``/``send``/``in_batches``
and their callers, and :func:`handing_off` points every such default of the library at a sleep that,
inside a simulated call, hands a :class:`~dynaunique._transport.connection.Sleep` step to the
scheduler (which goes straight on, as it does for the sans-IO generators' own ``Sleep`` steps).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import greenlet
from pynamodb.connection import Connection

from dynaunique._transport.answers import Ambiguous, Ok, Refused, Unreachable
from dynaunique._transport.connection import Request, Sleep, Steps


class _Call(greenlet.greenlet):  # type: ignore[misc]
    """A blocking call in progress."""


def blocking_steps(function: Callable[[], Any]) -> Steps[Any]:
    """``function()`` as steps: each request it sends is yielded, its answer (or the exception
    the generator is thrown) handed back; returns what ``function`` returns, raises what it
    raises."""
    call = _Call(lambda: ("done", function()))
    message = call.switch()
    while not call.dead:
        kind, request = message
        if kind == "sleep":
            yield Sleep(request)
            message = call.switch(("answer", None))
            continue
        try:
            answer = yield request
        except Exception as exc:
            message = call.switch(("throw", exc))
        else:
            # The blocking code's dispatch raises what the answer was read from.
            failed = answer.cause if isinstance(answer, (Refused, Ambiguous, Unreachable)) else None
            message = call.switch(("throw", failed) if failed is not None else
                                  ("answer", answer.data if isinstance(answer, Ok) else answer))
    return message[1]


class _Inline:
    """A one-thread executor that runs each task where it is called: the audit scans its one
    segment in a pool thread, which could not hand its requests to the scheduler."""

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, function: Callable[[Any], Any], *iterables: Any) -> Iterator[Any]:
        return iter([function(*args) for args in zip(*iterables, strict=True)])


_real_sleep = time.sleep


def _sleep(seconds: float) -> None:
    """A backoff: inside a simulated call, a ``Sleep`` step for the scheduler; elsewhere slept."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Call):
        _real_sleep(seconds)
        return
    current.parent.switch(("sleep", seconds))


#: The loaded library's modules (name, identity, size of their namespace) → the functions of
#: theirs whose defaults hold ``time.sleep``: walking every module and class costs about 0.1
#: CPU-second, and each simulated schedule enters :func:`handing_off`.
_sleepers: dict[tuple[tuple[str, int, int], ...], list[Any]] = {}


def _library_modules() -> list[tuple[str, Any]]:
    return [(name, module) for name, module in list(sys.modules.items())
            if name == "dynaunique" or name.startswith("dynaunique.")]


def _sleepers_of(modules: list[tuple[str, Any]]) -> list[Any]:
    """Every function of ``modules`` (and of their classes) with ``time.sleep`` among its
    defaults or keyword defaults."""
    found: dict[int, Any] = {}
    for _, module in modules:
        for value in list(vars(module).values()):
            inner = list(vars(value).values()) if inspect.isclass(value) else []
            for candidate in [value, *inner]:
                function = getattr(candidate, "__func__", candidate)
                if not inspect.isfunction(function) or id(function) in found:
                    continue
                if (function.__defaults__ and _real_sleep in function.__defaults__) or (
                        function.__kwdefaults__
                        and _real_sleep in function.__kwdefaults__.values()):
                    found[id(function)] = function
    return list(found.values())


def _sleeping_defaults() -> list[tuple[Any, str, Any]]:
    """Every function of the loaded library whose default ``sleep`` is ``time.sleep``:
    (function, ``__defaults__`` or ``__kwdefaults__``, the defaults with the sleep replaced)."""
    modules = _library_modules()
    known = tuple((name, id(module), len(vars(module))) for name, module in modules)
    functions = _sleepers.get(known)
    if functions is None:
        functions = _sleepers[known] = _sleepers_of(modules)
    found: list[tuple[Any, str, Any]] = []
    for function in functions:  # as they are now (inside another handing_off: none)
        if function.__defaults__ and _real_sleep in function.__defaults__:
            found.append((function, "__defaults__", tuple(
                _sleep if d is _real_sleep else d for d in function.__defaults__)))
        elif function.__kwdefaults__ and _real_sleep in function.__kwdefaults__.values():
            found.append((function, "__kwdefaults__", {
                k: _sleep if d is _real_sleep else d
                for k, d in function.__kwdefaults__.items()}))
    return found


@contextlib.contextmanager
def handing_off() -> Iterator[None]:
    """While active, a ``Connection.dispatch`` inside :func:`blocking_steps` goes to the
    scheduler (anywhere else, to the real connection), and so does a backoff's sleep. The
    audit's scan runs inline (:class:`_Inline`)."""
    import dynaunique.audit._check as check_module
    import dynaunique.audit._repair  # loaded now, so that its defaults are found
    import dynaunique.migrations._segments  # noqa: F401

    original = Connection.dispatch
    pool = check_module.ThreadPoolExecutor
    check_module.ThreadPoolExecutor = _Inline  # type: ignore[misc, assignment]

    def dispatch(self: Connection, operation_name: str, operation_kwargs: Any) -> Any:
        current = greenlet.getcurrent()
        if not isinstance(current, _Call):
            # Not a simulated call (test_memory drives the library against the local server
            # under simulation()): the real connection.
            return original(self, operation_name, operation_kwargs)
        kind, payload = current.parent.switch(
            ("request", Request(self, operation_name, dict(operation_kwargs))))
        if kind == "throw":
            raise payload
        return payload

    sleeping = _sleeping_defaults()
    originals = [(function, where, getattr(function, where)) for function, where, _ in sleeping]
    for function, where, replaced in sleeping:
        setattr(function, where, replaced)
    Connection.dispatch = dispatch  # type: ignore[method-assign]
    try:
        yield
    finally:
        Connection.dispatch = original  # type: ignore[method-assign]
        for function, where, before in originals:
            setattr(function, where, before)
        check_module.ThreadPoolExecutor = pool  # type: ignore[misc]


# --- the blocking calls a client makes -----------------------------------------------------------


class _Ledger:
    """The migration ledger, kept aside: its checkpoints go to a table the invariants do not
    read, so they are not simulated requests (each would only multiply the interleavings)."""

    def save_progress(self, progress: Any, *, worker: str, holder: str | None) -> None:
        """Nothing (the checkpoint is not simulated)."""


class _Lease:
    """A runner's lease that never expires (one page, no other runner waiting for it)."""

    holder = None

    def check(self, ident: str | None) -> None:
        """Still held."""


def backfill(models: tuple[Any, ...], model: Any, table: str) -> Any:
    """A migration's fill of ``model``'s first constraint over ``table``, one segment of one
    page: the segment runner the executor runs (scan the page, put each record's lock, verify
    with a batch read, reconcile what moved, re-check the conflicts) and its lock writes."""
    from dynaunique._transport.clients import connection_for
    from dynaunique.migrations._dynamo import TableKeys
    from dynaunique.migrations._kinds import PhaseKind
    from dynaunique.migrations._ledger import Progress
    from dynaunique.migrations._lockwrites import delete_lock, put_locks
    from dynaunique.migrations._phase import phase_run
    from dynaunique.migrations._reconcile import Keeper
    from dynaunique.migrations._report import SilentReporter
    from dynaunique.migrations._segments import SegmentRunner
    from dynaunique.migrations.operations import Phase
    from dynaunique.migrations.state import ConstraintState

    info = model._du_info
    constraint = ConstraintState.from_constraint(info.constraints[0].constraint,
                                                 owner=model.__name__)
    phase = Phase(PhaseKind.FILL, model.__name__, table, constraint)
    run = phase_run(phase, TableKeys(table, info.hash_attr, info.range_attr),
                    connection_for(model), {m.__name__: m for m in models})
    runner = SegmentRunner(Keeper(put_locks, delete_lock, lambda: None), _Ledger(),  # type: ignore
                           SilentReporter(), worker="all", threads=1, page_size=100,
                           conflict_cap=100, bucket=None)
    progress = Progress(job="simulated", total=1, segment=0)
    runner.run(run, [progress], _Lease(), phase.describe())  # type: ignore[arg-type]
    return progress


def repair(models: tuple[Any, ...]) -> Any:
    """``dynaunique repair --yes``: check the table, plan the repair, apply it."""
    from dynaunique.audit import apply_repair, check, plan_repair

    return apply_repair(plan_repair(check(list(models))))
