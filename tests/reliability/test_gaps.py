"""Gap attacks: another writer acts between two requests of one call, in every gap.

For every operation that can send more than one request — a stale identical save, a stale
delete, a never-loaded delete, a never-loaded save over an existing key, ``update(actions)`` on a
never-loaded object touching the unique field (set and remove), ``get_by_unique``, and swaps in
``atomic()`` with a stale and with a never-loaded participant — each test

1. runs the operation once, recorded, and checks that it sends the number of requests ``SENDS``
   states (cached per operation and model: the run is deterministic);
2. sets the same state up again and runs the operation with one adversary (``gaps.ADVERSARIES``)
   injected before forwarding request k (``FaultProxy.intercept``), for k = 2 … n;
3. requires: the call succeeded or raised a dynaunique error (``DoesNotExist`` for lookups);
   every request after the first carried a guard on the call's records; every live record's
   value has exactly one lock owned by it and no lock lacks a holder (``invariants.check``); a
   fresh record cannot take any held value (``invariants.probe_held_values``); a record
   ``get_by_unique`` returned really holds the value.

Each (operation, model, gap, adversary) is its own test id. Only the gaps an operation has are
generated (an operation that sends one request has none), from ``SENDS``;
``test_every_gap_is_covered`` fails if an operation sends another number of requests than
``SENDS`` says, so a gap can never go unattacked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from support.invariants import assert_sound, check, probe_held_values

from dynaunique import ConcurrentModificationError, DynauniqueError, Model, atomic
from dynaunique.attributes import VersionAttribute

from . import fresh_tables, point
from .gaps import (
    ADVERSARIES,
    MODELS,
    delete,
    recreate,
    set_value,
    swap_back,
    unguarded_followups,
)
from .proxy import FaultProxy

#: How many requests each operation sends, for every model (``test_every_gap_is_covered`` checks
#: it): the gaps attacked are before request 2 … n. A guarded stale call sends one request, so it
#: has no gap: its refusal is the whole call.
SENDS = {
    "get_by_unique": 2,
    "never_loaded_delete": 2,
    "never_loaded_save": 2,
    "never_loaded_swap": 2,
    "stale_delete": 1,
    "stale_identical_save": 1,
    "stale_identical_swap": 1,
    "stale_swap": 1,
    "update_remove_never_loaded": 2,
    "update_set_never_loaded": 2,
}


@attrs.define
class Setup:
    """One prepared call: what to run, the record the adversary moves, and its values."""

    run: Callable[[], Any]
    target: str
    old: str
    third: str
    contested: str
    #: The keys of the records the call writes (each later write must guard them all).
    records: tuple[str, ...]
    #: get_by_unique: the value looked up (the result must hold it).
    lookup: str | None = None
    #: Overrides of the default adversaries (a swap moves back as a pair).
    moves: dict[str, Callable[[], None]] = attrs.field(factory=dict)
    #: The only errors the call may raise (None: any dynaunique error).
    only: tuple[type[Exception], ...] | None = None
    #: Whether the call may report success (a refused stale write never does).
    may_succeed: bool = True

    def misbehaved(self, operation: str, model: type[Model],
                   error: BaseException | None) -> str | None:
        """Why this outcome is not allowed (None: it is)."""
        if error is None:
            return None if self.may_succeed else f"{operation} reported success"
        if self.only is not None and not isinstance(error, self.only):
            return (f"{operation} raised {type(error).__name__}: {error}, not "
                    f"{' or '.join(t.__name__ for t in self.only)}")
        if isinstance(error, DynauniqueError):
            return None
        # A lookup that finds nothing, or an update(actions) of a record that is gone, says so
        # as PynamoDB does.
        if operation.startswith(("get_by_unique", "update_")) and isinstance(
                error, model.DoesNotExist):
            return None
        return f"{operation} raised {type(error).__name__}: {error}, not a dynaunique error"


def _values(tag: str) -> tuple[str, str, str, str]:
    """The scenario's old, current, new and third values, namespaced by the run's tag."""
    return f"{tag}-o@x", f"{tag}-a@x", f"{tag}-b@x", f"{tag}-c@x"


def stale_identical_save(m: type[Model], tag: str) -> Setup:
    """R holds a; copies A and B load it; A saves b; B sets b and saves (B is stale, and its
    record already equals what it writes)."""
    _, a, b, c = _values(tag)
    key = f"{tag}R"
    m(pk=key, email=a).save()
    first, second = m.get(key, consistent_read=True), m.get(key, consistent_read=True)
    first.email = b  # type: ignore[attr-defined]
    first.save()
    second.email = b  # type: ignore[attr-defined]
    return Setup(second.save, key, old=a, third=c, contested=a, records=(key,),
                 only=(ConcurrentModificationError,), may_succeed=False)


def stale_delete(m: type[Model], tag: str) -> Setup:
    """R holds a; a copy S loads it; R is deleted elsewhere; S deletes."""
    _, a, _, c = _values(tag)
    key = f"{tag}R"
    m(pk=key, email=a).save()
    stale = m.get(key, consistent_read=True)
    m.get(key, consistent_read=True).delete()
    # Gone already: without a version (and no condition=) that is done, as in PynamoDB; with
    # one it is a failed optimistic lock.
    versioned = any(isinstance(a, VersionAttribute) for a in m.get_attributes().values())
    return Setup(stale.delete, key, old=a, third=c, contested=a, records=(key,),
                 only=(ConcurrentModificationError,), may_succeed=not versioned)


def _moved(m: type[Model], tag: str) -> tuple[str, str, str, str, str]:
    """R created with the old value o, then moved to a (so "back" has somewhere to go)."""
    o, a, b, c = _values(tag)
    key = f"{tag}R"
    m(pk=key, email=o).save()
    set_value(m, key, a)
    return key, o, a, b, c


def _as_stored(m: type[Model], key: str) -> dict[str, Any]:
    """A never-loaded object of a versioned model holds the stored version, as PynamoDB needs
    to write over a stored record (a new one, version unset, is refused after one request)."""
    if not any(isinstance(a, VersionAttribute) for a in m.get_attributes().values()):
        return {}
    return {"version": m.get(key, consistent_read=True).version}  # type: ignore[attr-defined]


def never_loaded_delete(m: type[Model], tag: str) -> Setup:
    """R holds a; ``M(pk=R).delete()`` (reads the record to know its locks)."""
    key, o, a, _, c = _moved(m, tag)
    return Setup(m(pk=key).delete, key, old=o, third=c, contested=a, records=(key,))


def never_loaded_save(m: type[Model], tag: str) -> Setup:
    """R holds a; ``M(pk=R, email=b).save()`` over the existing key (adopts the stored item)."""
    key, o, a, b, c = _moved(m, tag)
    fresh = m(pk=key, email=b, note="never-loaded", **_as_stored(m, key))
    return Setup(fresh.save, key, old=o, third=c, contested=a, records=(key,),
                 only=(ConcurrentModificationError,))


def update_set_never_loaded(m: type[Model], tag: str) -> Setup:
    """R holds a; ``M(pk=R).update([M.email.set(b)])``."""
    key, o, a, b, c = _moved(m, tag)
    email: Any = m.email  # type: ignore[attr-defined]
    obj = m(pk=key, **_as_stored(m, key))
    return Setup(lambda: obj.update(actions=[email.set(b)]), key, old=o, third=c, contested=a,
                 records=(key,))


def update_remove_never_loaded(m: type[Model], tag: str) -> Setup:
    """R holds a; ``M(pk=R).update([M.email.remove()])``."""
    key, o, a, _, c = _moved(m, tag)
    email: Any = m.email  # type: ignore[attr-defined]
    obj = m(pk=key, **_as_stored(m, key))
    return Setup(lambda: obj.update(actions=[email.remove()]), key, old=o, third=c,
                 contested=a, records=(key,))


def get_by_unique(m: type[Model], tag: str) -> Setup:
    """R holds a; ``M.get_by_unique("email", a)`` (reads the lock, then its owner)."""
    key, o, a, _, c = _moved(m, tag)
    return Setup(lambda: m.get_by_unique("email", a), key, old=o, third=c, contested=a,
                 records=(), lookup=a)


def _pair(m: type[Model], tag: str) -> tuple[str, str, str, str, str]:
    _, a, b, c = _values(tag)
    x, y = f"{tag}X", f"{tag}Y"
    m(pk=x, email=a).save()
    m(pk=y, email=b).save()
    return x, y, a, b, c


def stale_identical_swap(m: type[Model], tag: str) -> Setup:
    """X holds a, Y holds b; two pairs of copies load them; the first pair swaps in atomic();
    the second pair (stale, and already equal to what it writes) swaps too."""
    x, y, a, b, c = _pair(m, tag)
    x1, y1 = m.get(x, consistent_read=True), m.get(y, consistent_read=True)
    x2, y2 = m.get(x, consistent_read=True), m.get(y, consistent_read=True)
    for first, second in ((x1, y1), (x2, y2)):
        first.email, second.email = b, a  # type: ignore[attr-defined]
    with atomic():
        x1.save()
        y1.save()

    def swap() -> None:
        with atomic():
            x2.save()
            y2.save()

    return Setup(swap, x, old=a, third=c, contested=b, records=(x, y),
                 moves={"back": lambda: swap_back(m, x, y, a, b)},
                 only=(ConcurrentModificationError,), may_succeed=False)


def stale_swap(m: type[Model], tag: str) -> Setup:
    """X holds a, Y holds b; copies load them; X moves to c elsewhere; the copies swap."""
    x, y, a, b, c = _pair(m, tag)
    x1, y1 = m.get(x, consistent_read=True), m.get(y, consistent_read=True)
    set_value(m, x, c)
    x1.email, y1.email = b, a  # type: ignore[attr-defined]

    def swap() -> None:
        with atomic():
            x1.save()
            y1.save()

    return Setup(swap, x, old=a, third=f"{tag}-d@x", contested=a, records=(x, y),
                 only=(ConcurrentModificationError,), may_succeed=False)


def never_loaded_swap(m: type[Model], tag: str) -> Setup:
    """X holds a, Y holds b; in one atomic(): a never-loaded ``M(pk=X, email=b)`` and a loaded
    Y set to a (the create of X fails, X's stored item is adopted, the unit is replanned)."""
    x, y, a, b, c = _pair(m, tag)
    y1 = m.get(y, consistent_read=True)
    y1.email = a  # type: ignore[attr-defined]
    fresh = m(pk=x, email=b, **_as_stored(m, x))

    def swap() -> None:
        with atomic():
            fresh.save()
            y1.save()

    return Setup(swap, x, old=f"{tag}-o@x", third=c, contested=a, records=(x, y))


OPERATIONS: dict[str, Callable[[type[Model], str], Setup]] = {
    f.__name__: f for f in (stale_identical_save, stale_delete, never_loaded_delete,
                            never_loaded_save, update_set_never_loaded,
                            update_remove_never_loaded, get_by_unique, stale_identical_swap,
                            stale_swap, never_loaded_swap)
}

#: (operation, model) → how many requests the call sends, learned by running it once.
_discovered: dict[tuple[str, str], tuple[int, str | None]] = {}


@pytest.fixture
def gap_proxy(proxy: FaultProxy, dynaunique_db: str) -> Iterator[FaultProxy]:
    """The session proxy with the gap models pointed at it and their tables created."""
    models = list(MODELS.values())
    point(proxy.url, *models)
    fresh_tables(dynaunique_db, *models)
    yield proxy


def _outcome(setup: Setup) -> tuple[Any, BaseException | None]:
    try:
        return setup.run(), None
    except Exception as exc:
        return None, exc


def _discover(operation: str, model_name: str, proxy: FaultProxy) -> tuple[int, str | None]:
    """How many requests the unattacked call sends, and what was wrong with its outcome."""
    found = _discovered.get((operation, model_name))
    if found is None:
        model = MODELS[model_name]
        setup = OPERATIONS[operation](model, "d")
        with proxy.intercept() as call:
            _, error = _outcome(setup)
        found = _discovered[(operation, model_name)] = (
            len(call.requests), setup.misbehaved(operation, model, error))
    return found


def _adversary(setup: Setup, model: type[Model], name: str) -> Callable[[], None]:
    if name in setup.moves:
        return setup.moves[name]
    moves: dict[str, Callable[[], None]] = {
        "back": lambda: set_value(model, setup.target, setup.old),
        "third": lambda: set_value(model, setup.target, setup.third),
        "deleted": lambda: delete(model, setup.target),
        "recreated": lambda: recreate(model, setup.target, setup.contested),
    }
    return moves[name]


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_every_gap_is_covered(gap_proxy: FaultProxy, operation: str, model_name: str) -> None:
    """Each operation sends the number of requests ``SENDS`` says, so every gap is attacked;
    unattacked, it ends as it must and leaves the table sound."""
    _discovered.pop((operation, model_name), None)  # run it here, on this test's table
    sent, wrong = _discover(operation, model_name, gap_proxy)
    assert sent == SENDS[operation], (
        f"{operation} sent {sent} requests, SENDS says {SENDS[operation]}: update SENDS, so that "
        "every gap is attacked")
    assert wrong is None, f"unattacked: {wrong}"
    assert_sound([MODELS[model_name]], gap_proxy.url)


def _gap_cases() -> list[Any]:
    return [
        pytest.param(operation, model_name, gap, adversary,
                     id=f"{operation}-{model_name}-before-request-{gap}-{adversary}")
        for operation in sorted(OPERATIONS)
        for model_name in sorted(MODELS)
        for gap in range(2, SENDS[operation] + 1)
        for adversary in ADVERSARIES
    ]


def test_sends_names_every_operation() -> None:
    assert set(SENDS) == set(OPERATIONS)


@pytest.mark.parametrize(("operation", "model_name", "gap", "adversary"), _gap_cases())
def test_gap_attack(gap_proxy: FaultProxy, operation: str, model_name: str, gap: int,
                    adversary: str) -> None:
    """Another writer acts right before request ``gap`` of the call; nothing may break."""
    model = MODELS[model_name]
    sent, _ = _discover(operation, model_name, gap_proxy)
    assert gap <= sent, f"{operation} sent {sent} requests, SENDS says {SENDS[operation]}"
    setup = OPERATIONS[operation](model, "x")
    with gap_proxy.intercept(_adversary(setup, model, adversary), before=gap) as call:
        result, error = _outcome(setup)

    assert call.fired_before == gap, (
        f"the call sent {len(call.requests)} requests this time, the adversary did not run")
    assert call.adversary_error is None, f"the adversary failed: {call.adversary_error!r}"
    # Every problem at once: which guard was missing and what it broke.
    problems: list[str] = []
    wrong = setup.misbehaved(operation, model, error)
    if wrong is not None:
        problems.append(wrong)
    if setup.lookup is not None and error is None:
        held = getattr(result, "email", None)
        if held != setup.lookup:
            problems.append(f"get_by_unique({setup.lookup!r}) returned "
                            f"{getattr(result, 'pk', None)} holding {held!r}")
    problems += unguarded_followups(call.requests, [{"pk": {"S": k}} for k in setup.records],
                                    ("pk",))
    report = check([model], gap_proxy.url)
    problems += report.problems()
    problems += probe_held_values([model], gap_proxy.url)
    outcome = "succeeded" if error is None else f"raised {type(error).__name__}: {error}"
    assert not problems, (f"{operation} {outcome}; sent {call.operations()}; "
                          + "\n".join(problems))
