"""Network faults before and after the server applies a write: nothing doubled, lost or orphaned.

Every kind of write runs through :class:`~.proxy.FaultProxy`, which drops the connection before
forwarding (the write never happened) or after the server applied it (the write happened, the
client cannot know), or delays it past the client's read timeout. dynaunique resends; the local
server ignores ``ClientRequestToken``, so these tests are exactly the "server that ignores
tokens" case: correctness must come from the guards, and each test checks that

* the call's effect is present exactly once (a ``VersionAttribute`` or an ``add`` counter would
  show a second application),
* every resend of one call is the very same request, with the same ``ClientRequestToken``,
* the table holds no orphan, missing, foreign or duplicate lock afterwards,
* when resends run out (``OutcomeUnknownError``) the state is all-or-nothing and repeating the
  call converges.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_item

from dynaunique import (
    ConcurrentModificationError,
    Model,
    OutcomeUnknownError,
    atomic,
    normalizers,
)
from dynaunique._transport.connection import policy_for
from dynaunique.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute

from . import fresh_tables, point
from .proxy import Fault, FaultProxy, Recorded

#: Generous, so a busy CI machine never turns a slow answer into an unplanned resend; the
#: timeout tests lower it (Meta is read each time dynaunique picks its client).
READ_TIMEOUT = 10.0
#: The timeout tests' read timeout, and how long they hold a request: longer than it by 0.25 s,
#: the time the client's thread has to wake up to its timeout before the answer comes (and, for
#: a held request, the resend has to land before it). The timeout itself is only far above a
#: request's time (a few ms; a few tens on a loaded machine): a request it cuts short by chance
#: is resent, which the tests allow.
SHORT_TIMEOUT = 0.5
HOLD = 0.75


def _account_fields() -> dict[str, Any]:
    """The fields both fault models have, as fresh attributes (a class owns its attributes)."""
    return {"pk": pk_attr(), "sk": sk_attr("PROFILE"),
            "email": UnicodeAttribute(unique=True, null=True, normalize=normalizers.casefold),
            "handle": UnicodeAttribute(unique=True, null=True),
            "note": UnicodeAttribute(null=True),
            "visits": NumberAttribute(default=0)}


#: A base backoff of 1 ms (PynamoDB's ``base_backoff_ms``, 25 by default): the resends are the
#: point, not how long the library waits between them (the full jitter of 25 ms doubled per
#: attempt was ~0.18 s of sleep in every test that exhausts the resends; the policy itself is
#: tests/unit/test_connection.py's).
TIMEOUTS = {"read_timeout_seconds": READ_TIMEOUT, "connect_timeout_seconds": READ_TIMEOUT,
            "base_backoff_ms": 1}


# A model with a VersionAttribute: a second application would bump the version twice.
FaultVersioned = declare("FaultVersioned", "rel_faults_versioned", meta=TIMEOUTS,
                         **_account_fields(), version=VersionAttribute())

# A model without a version: "unchanged since loaded" compares the unique values.
FaultPlain = declare("FaultPlain", "rel_faults_plain", meta=TIMEOUTS, **_account_fields())


MODELS: tuple[type[Model], ...] = (FaultVersioned, FaultPlain)
FIELDS = ("email", "handle", "note", "visits")


@pytest.fixture
def endpoints(proxy: FaultProxy, dynaunique_db: str) -> tuple[FaultProxy, str]:
    """Both models pointed at the proxy (tests create the table they use); returns the proxy
    and the server's direct URL."""
    # Only when needed: re-pointing drops the models' connections, and new ones cost time.
    if any(m.Meta.host != proxy.url for m in MODELS):
        point(proxy.url, *MODELS)
    return proxy, dynaunique_db


#: Faults that make the library give up: one more than it resends (PynamoDB's
#: max_retry_attempts setting, which both models take from the settings).
EXHAUSTING = policy_for(FaultVersioned.Meta).max_network_retries + 1


def prepare(proxy: FaultProxy, model: type[Model], name: str) -> Case:
    """Create ``model``'s table, set up case ``name`` without faults, and forget its requests."""
    fresh_tables(proxy.upstream, model)
    case = CASES[name](model)
    proxy.clear()
    return case


def stored(endpoint: str, model: type[Model], pk: str) -> dict[str, Any] | None:
    """The record's fields as stored (None: no record), read raw and strongly consistent."""
    raw = raw_item(endpoint, model.Meta.table_name, {"PK": {"S": pk}, "SK": {"S": "PROFILE"}})
    if raw is None:
        return None
    record = model.from_raw_data(raw)
    state = {name: getattr(record, name) for name in FIELDS}
    if isinstance(record, FaultVersioned):
        state["version"] = record.version
    return state


def state_of(model: type[Model], version: int, **fields: Any) -> dict[str, Any]:
    """The expected stored state: unset fields None, ``visits`` 0, the version if versioned."""
    state: dict[str, Any] = {"email": None, "handle": None, "note": None, "visits": 0}
    state.update(fields)
    if model is FaultVersioned:
        state["version"] = version
    return state


# --- the writes under test -----------------------------------------------------------------------


@attrs.frozen
class Case:
    """One kind of write: the call under test and the state before and after it."""

    #: Repeatable: calling it again is "repeating the same call".
    act: Callable[[], object]
    before: dict[str, Any]
    after: dict[str, Any]
    #: The object whose snapshot must match the stored record after a successful save.
    saved: list[Model] = attrs.field(factory=list)


def _load(model: type[Model], pk: str) -> Any:  # Any: the fields are the model's
    return model.get(pk, "PROFILE", consistent_read=True)


def case_create(m: type[Model]) -> Case:
    obj = m(pk="A", email="Ada@Lovelace.io", handle="ada", note="n")
    return Case(obj.save, {"A": None},
                {"A": state_of(m, 1, email="Ada@Lovelace.io", handle="ada", note="n")}, [obj])


def _seed(m: type[Model], pk: str = "A", email: str = "ada@x.io", handle: str = "ada") -> Any:
    m(pk=pk, email=email, handle=handle, note="n").save()
    return _load(m, pk)


def case_move_unique(m: type[Model]) -> Case:
    obj = _seed(m)
    before = state_of(m, 1, email="ada@x.io", handle="ada", note="n")

    def act() -> None:
        obj.email = "ada@analytical.engine"
        obj.handle = "countess"
        obj.save()

    after = state_of(m, 2, email="ada@analytical.engine", handle="countess", note="n")
    return Case(act, {"A": before}, {"A": after}, [obj])


def case_non_unique_save(m: type[Model]) -> Case:
    obj = _seed(m)

    def act() -> None:
        obj.note = "changed"
        obj.save()

    return Case(act, {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": state_of(m, 2, email="ada@x.io", handle="ada", note="changed")}, [obj])


def case_update_unique_actions(m: type[Model]) -> Case:
    obj = _seed(m)
    field: Any = m.email  # type: ignore[attr-defined]
    return Case(lambda: obj.update(actions=[field.set("ada@analytical.engine")]),
                {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": state_of(m, 2, email="ada@analytical.engine", handle="ada", note="n")})


def case_update_note_actions(m: type[Model]) -> Case:
    obj = _seed(m)
    field: Any = m.note  # type: ignore[attr-defined]
    return Case(lambda: obj.update(actions=[field.set("changed")]),
                {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": state_of(m, 2, email="ada@x.io", handle="ada", note="changed")})


def case_update_add(m: type[Model]) -> Case:
    obj = _seed(m)
    field: Any = m.visits  # type: ignore[attr-defined]
    return Case(lambda: obj.update(actions=[field.add(1)]),
                {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": state_of(m, 2, email="ada@x.io", handle="ada", note="n", visits=1)})


def case_loaded_delete(m: type[Model]) -> Case:
    obj = _seed(m)
    return Case(obj.delete, {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": None})


def case_unloaded_delete(m: type[Model]) -> Case:
    _seed(m)
    obj = m(pk="A")
    return Case(obj.delete, {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n")},
                {"A": None})


def case_atomic_swap(m: type[Model]) -> Case:
    a = _seed(m, "A", "ada@x.io", "ada")
    b = _seed(m, "B", "bob@x.io", "bob")

    def act() -> None:
        with atomic():
            a.email, b.email = "bob@x.io", "ada@x.io"
            a.handle, b.handle = "bob", "ada"
            a.save()
            b.save()

    before = {"A": state_of(m, 1, email="ada@x.io", handle="ada", note="n"),
              "B": state_of(m, 1, email="bob@x.io", handle="bob", note="n")}
    after = {"A": state_of(m, 2, email="bob@x.io", handle="bob", note="n"),
             "B": state_of(m, 2, email="ada@x.io", handle="ada", note="n")}
    return Case(act, before, after, [a, b])


CASES: dict[str, Callable[[type[Model]], Case]] = {
    "create": case_create,
    "move_unique": case_move_unique,
    "non_unique_save": case_non_unique_save,
    "update_unique_actions": case_update_unique_actions,
    "update_note_actions": case_update_note_actions,
    "update_add": case_update_add,
    "loaded_delete": case_loaded_delete,
    "unloaded_delete": case_unloaded_delete,
    "atomic_swap": case_atomic_swap,
}

# Known core bugs, reported to the lead. Each marker is strict and names the exception the bug
# produces, so a fix turns the test into an XPASS failure (remove the marker then), and any other
# failure (a broken invariant) still fails the test. None is open today.
Bug = tuple[str, type[BaseException]]
KNOWN_BUGS: dict[tuple[str, str, Fault], Bug] = {}
#: An update whose result cannot be predicted (``add``) is never resent: it has its own tests.
UNRESENDABLE = {"update_add"}


def xfail_bug(bug: Bug) -> pytest.MarkDecorator:
    """A strict xfail for a known core bug that must fail with exactly its exception."""
    reason, raises = bug
    return pytest.mark.xfail(strict=True, reason=reason, raises=raises)


def _params(faults: tuple[Fault, ...], bugs: dict[tuple[str, str, Fault], Bug]) -> list[Any]:
    params = []
    for model in MODELS:
        for name in (n for n in CASES if n not in UNRESENDABLE):
            for fault in faults:
                bug = bugs.get((model.__name__, name, fault))
                marks = [xfail_bug(bug)] if bug else []
                params.append(pytest.param(model, name, fault, marks=marks,
                                           id=f"{model.__name__}-{name}-{fault.value}"))
    return params


def assert_states(endpoint: str, model: type[Model], expected: dict[str, Any]) -> None:
    """Each record named in ``expected`` is stored exactly so (None: it does not exist)."""
    actual = {pk: stored(endpoint, model, pk) for pk in expected}
    assert actual == expected


def _versions_from(endpoint: str, model: type[Model], expected: dict[str, Any],
                   slack: int) -> dict[str, Any]:
    """``expected``, with each version replaced by the stored one when it is at most ``slack``
    above the expected one (so the caller's equality check compares everything else)."""
    adjusted: dict[str, Any] = {}
    for pk, state in expected.items():
        current = stored(endpoint, model, pk)
        if state is not None and current is not None and "version" in state \
                and state["version"] <= current["version"] <= state["version"] + slack:
            state = {**state, "version": current["version"]}
        adjusted[pk] = state
    return adjusted


def assert_one_request(records: list[Recorded]) -> None:
    """Every recorded write is a resend of the first: same body, same ClientRequestToken."""
    assert records, "no write reached the proxy"
    first = records[0]
    for record in records[1:]:
        assert record.operation == first.operation
        assert record.body == first.body, "a resend differs from the first attempt"
    if first.operation == "TransactWriteItems":
        tokens = {r.token for r in records}
        assert len(tokens) == 1 and None not in tokens, tokens


def assert_snapshots(endpoint: str, case: Case) -> None:
    """A saved object's snapshot is the stored record, so its next save is not refused."""
    for obj in case.saved:
        info = obj._du_info
        assert info is not None
        raw = raw_item(endpoint, info.table, obj._du_key())
        assert obj._du_loaded == raw


def assert_applied_once(proxy: FaultProxy, direct: str, model: type[Model], case: Case,
                        fault: Fault) -> None:
    """The faulted request was resent once, as the very same request, and the write stands
    applied exactly once: the case's ``after`` states, snapshots, and locks."""
    writes = proxy.writes()
    assert [r.fault for r in writes] == [fault, None]
    assert_one_request(writes)
    assert_states(direct, model, case.after)
    assert_snapshots(direct, case)
    assert_clean([model], direct)


@pytest.mark.parametrize(("model", "name", "fault"),
                         _params((Fault.DROP_BEFORE, Fault.DROP_AFTER), KNOWN_BUGS))
def test_resend_applies_the_write_exactly_once(endpoints: tuple[FaultProxy, str],
                                               model: type[Model], name: str,
                                               fault: Fault) -> None:
    """A request dropped before the server, or a response dropped after it applied the write,
    ends with the write applied exactly once, by a resend of the very same request."""
    proxy, direct = endpoints
    case = prepare(proxy, model, name)
    assert_states(direct, model, case.before)
    proxy.inject(fault)

    case.act()

    assert_applied_once(proxy, direct, model, case, fault)


@pytest.mark.parametrize("fault", [Fault.DROP_BEFORE, Fault.DROP_AFTER])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_an_update_whose_result_cannot_be_known_is_never_resent(
        endpoints: tuple[FaultProxy, str], model: type[Model], fault: Fault) -> None:
    """``add`` after a lost request or answer: resending could apply it twice (unguarded) or fail
    on its own write (guarded), so the library stops with OutcomeUnknownError — and the write
    was applied once or not at all."""
    proxy, direct = endpoints
    case = prepare(proxy, model, "update_add")
    proxy.inject(fault)

    with pytest.raises(OutcomeUnknownError):
        case.act()

    writes = proxy.writes()
    assert [r.fault for r in writes] == [fault]
    assert_states(direct, model, case.after if fault is Fault.DROP_AFTER else case.before)
    assert_clean([model], direct)


@pytest.mark.parametrize("name", [n for n in CASES if n not in UNRESENDABLE])
def test_a_run_of_mixed_faults_still_applies_once(endpoints: tuple[FaultProxy, str],
                                                  name: str) -> None:
    """Lost, applied-but-unanswered and lost again, in a row: one application, one token."""
    proxy, direct = endpoints
    model = FaultVersioned
    case = prepare(proxy, model, name)
    run = [Fault.DROP_BEFORE, Fault.DROP_AFTER, Fault.DROP_BEFORE]
    for fault in run:
        proxy.inject(fault)

    case.act()

    writes = proxy.writes()
    assert [r.fault for r in writes] == [*run, None]
    assert_one_request(writes)
    assert_states(direct, model, case.after)
    assert_clean([model], direct)


# After every resend failed, a repeated call must converge on the intended state (a record that
# already is exactly what the call writes counts as done; its locks still go out, guarded).
EXHAUSTION_BUGS: dict[tuple[str, str, Fault], Bug] = {}


EXHAUSTION_CASES = _params((Fault.DROP_AFTER,), EXHAUSTION_BUGS) + [
    pytest.param(FaultVersioned, name, Fault.DROP_BEFORE,
                 id=f"FaultVersioned-{name}-{Fault.DROP_BEFORE.value}")
    for name in ("create", "move_unique", "atomic_swap", "loaded_delete")
]


@pytest.mark.parametrize(("model", "name", "fault"), EXHAUSTION_CASES)
def test_outcome_unknown_is_all_or_nothing_and_a_repeat_converges(
        endpoints: tuple[FaultProxy, str], model: type[Model], name: str, fault: Fault) -> None:
    """When every resend fails the write applied fully or not at all; repeating it converges."""
    proxy, direct = endpoints
    case = prepare(proxy, model, name)
    proxy.inject(fault, times=EXHAUSTING)

    with pytest.raises(OutcomeUnknownError):
        case.act()

    writes = proxy.writes()
    assert len(writes) == EXHAUSTING
    assert_one_request(writes)
    applied = case.after if fault is Fault.DROP_AFTER else case.before
    assert_states(direct, model, applied)
    assert_clean([model], direct)

    proxy.clear()
    case.act()  # the same call again, network healthy

    # Converged: the intended values; a repeat that re-applied may have bumped the version once.
    assert_states(direct, model, _versions_from(direct, model, case.after, slack=1))
    assert_clean([model], direct)
    repeat = proxy.writes()
    if repeat and repeat[0].token is not None:
        assert repeat[0].token != writes[0].token, "a new call must not reuse the old token"


TIMEOUT_CASES = [
    pytest.param(FaultVersioned, name, fault, id=f"FaultVersioned-{name}-{fault.value}")
    for name in ("create", "move_unique", "atomic_swap", "loaded_delete")
    for fault in (Fault.DELAY_BEFORE, Fault.DELAY_AFTER)
] + [
    pytest.param(FaultPlain, "non_unique_save", fault,
                 id=f"FaultPlain-non_unique_save-{fault.value}")
    for fault in (Fault.DELAY_BEFORE, Fault.DELAY_AFTER)
]


@pytest.mark.parametrize(("model", "name", "fault"), TIMEOUT_CASES)
def test_timeout_then_late_arrival_changes_nothing(endpoints: tuple[FaultProxy, str],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   model: type[Model], name: str,
                                                   fault: Fault) -> None:
    """A request held past the read timeout is resent; when the held one lands (before or
    after the resend) the outcome is still exactly one application."""
    proxy, direct = endpoints
    case = prepare(proxy, model, name)
    monkeypatch.setattr(model.Meta, "read_timeout_seconds", SHORT_TIMEOUT)
    proxy.inject(fault, delay=HOLD)

    case.act()
    proxy.wait_idle()

    writes = proxy.writes()  # in the order they reached the server: a held one comes late
    assert [r.fault for r in writes].count(fault) == 1
    assert len(writes) >= 2  # more only if the loaded machine was slower than the timeout
    assert_one_request(writes)
    assert_states(direct, model, case.after)
    assert_clean([model], direct)


def test_a_slow_answer_within_the_timeout_is_not_resent(
        endpoints: tuple[FaultProxy, str]) -> None:
    """A delay shorter than the read timeout is just a slow write: sent once."""
    proxy, direct = endpoints
    case = prepare(proxy, FaultVersioned, "move_unique")
    proxy.inject(Fault.DELAY_AFTER, delay=HOLD)
    case.act()
    assert len(proxy.writes()) == 1
    assert_states(direct, FaultVersioned, case.after)


# --- another client writes between the applied attempt and its resend -----------------------


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("name", ["move_unique", "loaded_delete", "unloaded_delete"])
def test_applied_write_succeeds_though_its_freed_value_was_taken_before_the_resend(
        endpoints: tuple[FaultProxy, str], model: type[Model], name: str) -> None:
    """The write landed and freed ada@x.io; another record took it before the resend. The
    resend's old-lock delete now fails, yet the call did land: it must report success."""
    proxy, direct = endpoints
    case = prepare(proxy, model, name)

    def steal() -> None:
        model(pk="THIEF", email="ada@x.io").save()

    proxy.inject(Fault.DROP_AFTER, on_applied=steal)

    case.act()

    assert proxy.hook_errors == []
    assert_states(direct, model, case.after)
    assert stored(direct, model, "THIEF") == state_of(model, 1, email="ada@x.io")
    assert_snapshots(direct, case)
    assert_clean([model], direct)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_stale_resend_never_overwrites_a_newer_write(endpoints: tuple[FaultProxy, str],
                                                     model: type[Model]) -> None:
    """The move landed, then another copy moved the record on before the resend: the resend
    must not roll the record back, and the locks follow the newest write."""
    proxy, direct = endpoints
    case = prepare(proxy, model, "move_unique")

    def move_on() -> None:
        other = _load(model, "A")
        other.email = "ada@third.place"
        other.save()

    proxy.inject(Fault.DROP_AFTER, on_applied=move_on)
    # Success or ConcurrentModificationError are both honest: the record is no longer what
    # this call wrote. What matters is the stored state.
    with contextlib.suppress(ConcurrentModificationError):
        case.act()
    assert proxy.hook_errors == []
    newest = dict(case.after["A"] or {})
    newest["email"] = "ada@third.place"
    if model is FaultVersioned:
        newest["version"] = 3
    assert_states(direct, model, {"A": newest})
    assert_clean([model], direct)
