"""Soak: many threads race random writes over a tiny value space; nothing is lost or orphaned.

Eight or more threads run a random mix — create, change email/handle, change a non-unique field
(by ``save()`` and by ``update(actions)``), loaded and never-loaded deletes, swaps in
``atomic()``, stale-copy saves and deletes, lookups — over 6 emails (in random letter case,
normalized by ``casefold``), 4 handles and 10 account ids, split between a versioned and a plain
model that share one table and one lock namespace.

The driver serializes the operations of one account (a lock per account id, taken in id order
for a swap) while different accounts race for the shared values. That makes the outcome of each
operation checkable: the driver knows every account's stored state before an operation, so

* a success must leave exactly the intended state (kept as the account's expected state);
* a failure must be an expected error type for that operation and leave the state untouched
  (through the lossy proxy: untouched or fully applied, never half);
* a stale copy's save must fail exactly when its guard ("unchanged since loaded") cannot hold;
* after the run every account's stored record equals its expected state, and the invariant
  check finds no orphan, missing, foreign or duplicate lock.

Short by default (CI); ``--soak`` / ``DYNAUNIQUE_SOAK=1`` runs the long form (``--soak-ops N``).
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_item

from dynaunique import (
    ConcurrentModificationError,
    Model,
    OutcomeUnknownError,
    UniqueViolation,
    atomic,
    normalizers,
)
from dynaunique.attributes import UnicodeAttribute, VersionAttribute

from . import fresh_tables, point
from .proxy import Fault, FaultProxy

if TYPE_CHECKING:
    from .conftest import Summary

THREADS = 8
ACCOUNTS = 10
EMAILS = ("ada@x.io", "bob@x.io", "cy@x.io", "dee@x.io", "eve@x.io", "fay@x.io")
HANDLES = ("ada", "bob", "cy", "dee")
NOTES = ("a", "b", "c", "d", "e")
TABLE = "rel_soak"


def _account_fields() -> dict[str, Any]:
    """The fields both soak models have, as fresh attributes (a class owns its attributes)."""
    return {"pk": pk_attr(), "sk": sk_attr("PROFILE"),
            "email": UnicodeAttribute(unique=True, null=True, normalize=normalizers.casefold,
                                      lock_name="EMAIL"),
            "handle": UnicodeAttribute(unique=True, null=True, lock_name="HANDLE"),
            "note": UnicodeAttribute(null=True)}


# Half the accounts: "unchanged since loaded" is the version.
SoakVersioned = declare("SoakVersioned", TABLE, meta={"read_timeout_seconds": 30},
                        **_account_fields(), version=VersionAttribute())

# The other half: "unchanged since loaded" compares the unique values.
SoakPlain = declare("SoakPlain", TABLE, meta={"read_timeout_seconds": 30}, **_account_fields())


MODELS: tuple[type[Model], ...] = (SoakVersioned, SoakPlain)
#: An account's stored fields (``version`` only for the versioned model); None = no record.
State = dict[str, Any] | None


def model_for(account: int) -> type[Model]:
    """Even ids are versioned, odd ids plain."""
    return SoakVersioned if account % 2 == 0 else SoakPlain


def pk_for(account: int) -> str:
    return f"{'V' if account % 2 == 0 else 'P'}#{account}"


def model_of(raw: dict[str, Any]) -> type[Model] | None:
    """Tell the two models' records apart (for the invariant check)."""
    pk = raw["PK"]["S"]
    return SoakVersioned if pk.startswith("V#") else SoakPlain if pk.startswith("P#") else None


def state_of(obj: Model) -> dict[str, Any]:
    """An object's fields as the expected-state dict."""
    state = {"email": obj.email, "handle": obj.handle,  # type: ignore[attr-defined]
             "note": obj.note}  # type: ignore[attr-defined]
    if isinstance(obj, SoakVersioned):
        state["version"] = obj.version
    return state


def stored_state(endpoint: str, account: int) -> State:
    """An account's record as stored, read raw and strongly consistent."""
    raw = raw_item(endpoint, TABLE, {"PK": {"S": pk_for(account)}, "SK": {"S": "PROFILE"}})
    if raw is None:
        return None
    return state_of(model_for(account).from_raw_data(raw))


class UnexpectedOutcome(AssertionError):
    """An operation ended in a way its guards and the driver's knowledge rule out."""


class Soak:
    """The driver: per-account locks, expected states, counters."""

    def __init__(self, endpoint: str, seed: int, *, lossy: bool = False) -> None:
        self.endpoint = endpoint
        self.seed = seed
        #: Through a lossy network an error may follow an applied attempt: then the state may
        #: be the intended one instead of the old one (never anything else).
        self.lossy = lossy
        self.locks = [threading.Lock() for _ in range(ACCOUNTS)]
        self.expected: list[State] = [None] * ACCOUNTS
        #: Bumped whenever an account's record is created from nothing (detects the ABA case).
        self.generation = [0] * ACCOUNTS
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.problems: list[str] = []
        self._guard = threading.Lock()
        self._counter = itertools.count()

    # --- bookkeeping -----------------------------------------------------------------------------

    def count(self, op: str, outcome: str) -> None:
        with self._guard:
            self.outcomes[(op, outcome)] += 1

    def fail(self, message: str) -> None:
        with self._guard:
            self.problems.append(message)

    def hold(self, *accounts: int) -> ExitStack:
        """Take the accounts' driver locks in id order (no deadlock between swaps)."""
        stack = ExitStack()
        for account in sorted(set(accounts)):
            stack.enter_context(self.locks[account])
        return stack

    def settle(self, op: str, accounts: tuple[int, ...], intended: dict[int, State],
               error: BaseException | None, allowed: tuple[type[BaseException], ...]) -> None:
        """Check one operation's outcome against what the driver knows, then record it.

        Called with the accounts' locks held: nobody else can have written them.
        """
        before = {a: self.expected[a] for a in accounts}
        if error is None:
            self.count(op, "ok")
            for account in accounts:
                if account in intended:
                    if before[account] is None and intended[account] is not None:
                        self.generation[account] += 1
                    self.expected[account] = intended[account]
                    # The effect is there, exactly once (a second application bumps the version).
                    stored_now = stored_state(self.endpoint, account)
                    if stored_now != intended[account]:
                        self.fail(f"{op} {accounts} succeeded but account {account} holds "
                                  f"{stored_now}, not the intended {intended[account]}")
                        self.expected[account] = stored_now
            return
        name = type(error).__name__
        self.count(op, name)
        if not isinstance(error, allowed):
            detail = "".join(traceback.format_exception(error)).strip()
            self.fail(f"{op} {accounts}: unexpected {name}: {error}\n{detail}")
        stored = {a: stored_state(self.endpoint, a) for a in accounts}
        applied = {a: intended.get(a, before[a]) for a in accounts}
        if stored == before:
            return
        if self.lossy and stored == applied:
            # An attempt landed and its answer was lost; the error came from a later resend.
            self.count(op, f"{name}-but-applied")
            for account in accounts:
                if before[account] is None and stored[account] is not None:
                    self.generation[account] += 1
                self.expected[account] = stored[account]
            return
        self.fail(f"{op} {accounts} raised {name} but changed the state: before {before}, "
                  f"stored {stored}, intended {applied}")
        for account in accounts:  # keep going with the truth, so one bug is reported once
            self.expected[account] = stored[account]

    # --- random values ---------------------------------------------------------------------------

    @staticmethod
    def email(rnd: random.Random) -> str | None:
        if rnd.random() < 0.1:
            return None
        base = rnd.choice(EMAILS)
        return "".join(c.upper() if rnd.random() < 0.3 else c for c in base)

    @staticmethod
    def handle(rnd: random.Random) -> str | None:
        # Four handles for ten accounts: most accounts must do without one.
        return None if rnd.random() < 0.4 else rnd.choice(HANDLES)

    # --- operations ------------------------------------------------------------------------------

    def load(self, account: int) -> Model:
        return model_for(account).get(pk_for(account), "PROFILE", consistent_read=True)

    def bumped(self, before: State, after: dict[str, Any], account: int) -> dict[str, Any]:
        """``after`` with the version one above ``before``'s (1 for a new record)."""
        if model_for(account) is SoakVersioned:
            after = {**after, "version": (before["version"] + 1) if before else 1}
        return after

    def op_create(self, rnd: random.Random, account: int) -> None:
        """A never-loaded save: a create, or an update of the record if it exists (refused for
        the versioned model, as PynamoDB refuses it)."""
        obj = model_for(account)(pk=pk_for(account), email=self.email(rnd),
                                 handle=self.handle(rnd), note=rnd.choice(NOTES))
        with self.hold(account):
            if self.expected[account] is not None and model_for(account) is SoakVersioned:
                # PynamoDB's first-save guard (attribute_not_exists(version)): a new object of
                # a versioned model never overwrites, nor adopts, a stored record.
                error = self.attempt("create", (account,), {}, obj.save,
                                     (ConcurrentModificationError,))
                if error is None:
                    self.fail(f"create {account}: a new versioned object overwrote the record")
                return
            intended = self.bumped(self.expected[account], state_of(obj), account)
            self.attempt("create", (account,), {account: intended}, obj.save,
                         (UniqueViolation,))

    def op_change(self, rnd: random.Random, account: int, what: str) -> None:
        """Load, change email/handle/note (by save() or update(actions)), write."""
        model = model_for(account)
        with self.hold(account):
            try:
                obj = self.load(account)
            except model.DoesNotExist:
                self.count(what, "DoesNotExist")
                return
            before = self.expected[account]
            if before is None or state_of(obj) != before:
                self.fail(f"{what} {account}: loaded {state_of(obj)}, expected {before}")
            fields = state_of(obj)
            act: Callable[[], object] = obj.save
            allowed: tuple[type[BaseException], ...] = (UniqueViolation,)
            if what == "change_email":
                obj.email = fields["email"] = self.email(rnd)  # type: ignore[attr-defined]
            elif what == "change_handle":
                obj.handle = fields["handle"] = self.handle(rnd)  # type: ignore[attr-defined]
            elif what == "change_note":
                obj.note = fields["note"] = rnd.choice(NOTES)  # type: ignore[attr-defined]
                allowed = ()
            elif what == "update_note_actions":
                fields["note"] = rnd.choice(NOTES)
                note: Any = model.note  # type: ignore[attr-defined]
                actions = [note.set(fields["note"])]
                act = lambda: obj.update(actions=actions)  # noqa: E731
                allowed = ()
            else:  # update_email_actions: a lock change through update(actions)
                fields["email"] = self.email(rnd)
                email: Any = model.email  # type: ignore[attr-defined]
                change = [email.remove() if fields["email"] is None else email.set(fields["email"])]
                act = lambda: obj.update(actions=change)  # noqa: E731
            intended = self.bumped(before, fields, account)
            self.attempt(what, (account,), {account: intended}, act, allowed)

    def op_delete(self, rnd: random.Random, account: int) -> None:
        """A loaded delete, or a never-loaded one (read first by the library)."""
        model = model_for(account)
        with self.hold(account):
            if rnd.random() < 0.5:
                self.attempt("delete_unloaded", (account,), {account: None},
                             model(pk=pk_for(account)).delete, ())
                return
            try:
                obj = self.load(account)
            except model.DoesNotExist:
                self.count("delete_loaded", "DoesNotExist")
                return
            self.attempt("delete_loaded", (account,), {account: None}, obj.delete, ())

    def op_swap(self, rnd: random.Random, a: int, b: int) -> None:
        """Swap two accounts' emails and handles in one atomic() unit."""
        with self.hold(a, b):
            try:
                x, y = self.load(a), self.load(b)
            except (SoakVersioned.DoesNotExist, SoakPlain.DoesNotExist):
                self.count("swap", "DoesNotExist")
                return
            before_a, before_b = self.expected[a], self.expected[b]
            x.email, y.email = y.email, x.email  # type: ignore[attr-defined]
            x.handle, y.handle = y.handle, x.handle  # type: ignore[attr-defined]
            intended: dict[int, State] = {a: self.bumped(before_a, state_of(x), a),
                                          b: self.bumped(before_b, state_of(y), b)}

            def swap() -> None:
                with atomic():
                    x.save()
                    y.save()

            self.attempt("swap", (a, b), intended, swap, ())

    def op_stale(self, rnd: random.Random, account: int) -> None:
        """Load a copy, let other threads at the account, then save or delete the stale copy.

        The driver knows the stored state when the stale write is sent, so it knows whether
        the guard "unchanged since loaded" holds: the write must fail exactly when it does not.
        """
        model = model_for(account)
        with self.hold(account):
            try:
                copy = self.load(account)
            except model.DoesNotExist:
                self.count("stale", "DoesNotExist")
                return
            loaded = self.expected[account]
            generation = self.generation[account]
        time.sleep(rnd.uniform(0, 0.02))  # the window in which other threads change it
        with self.hold(account):
            current = self.expected[account]
            assert loaded is not None
            # The guard compares the stored unique values, as stored — and, on the versioned
            # model, the version too (alone it would pass a record deleted and created again).
            holds = current is not None and all(
                current[f] == loaded[f] for f in ("email", "handle"))
            if model is SoakVersioned:
                holds = holds and current is not None and current["version"] == loaded["version"]
            if holds and self.generation[account] != generation:
                self.count("stale", "recreated-same-values")
            delete = rnd.random() < 0.25
            op = "stale_delete" if delete else "stale_save"
            if delete:
                intended: State = None
                act: Callable[[], object] = copy.delete
            else:
                copy.email = self.email(rnd)  # type: ignore[attr-defined]
                copy.note = rnd.choice(NOTES)  # type: ignore[attr-defined]
                intended = self.bumped(loaded, state_of(copy), account)
                act = copy.save
            error = self.attempt(op, (account,), {account: intended}, act,
                                 (ConcurrentModificationError, UniqueViolation))
            # A record that already is exactly what the write intends (for a delete: gone) is
            # success, not a conflict: deletes are idempotent, and a repeat converges.
            if not holds and error is None and current != intended:
                self.fail(f"{op} {account}: a stale copy (loaded {loaded}) was written over "
                          f"{current}")
            if holds and isinstance(error, ConcurrentModificationError) and not self.lossy:
                self.fail(f"{op} {account}: refused although nothing changed since loading")

    def op_lookup(self, rnd: random.Random) -> None:
        """get_by_unique: the record returned holds the value (no lock held: it races)."""
        wanted = rnd.choice(EMAILS).upper()
        model = rnd.choice(MODELS)
        try:
            found = model.get_by_unique("email", wanted)
        except model.DoesNotExist:
            self.count("lookup", "DoesNotExist")
            return
        self.count("lookup", "ok")
        email = found.email  # type: ignore[attr-defined]
        if email is None or email.casefold() != wanted.casefold():
            self.fail(f"get_by_unique('email', {wanted!r}) returned a record holding {email!r}")

    def attempt(self, op: str, accounts: tuple[int, ...], intended: dict[int, State],
                act: Callable[[], object],
                allowed: tuple[type[BaseException], ...]) -> BaseException | None:
        """Run one write and settle it; returns the error it raised, if any."""
        if self.lossy:
            allowed = (*allowed, ConcurrentModificationError, UniqueViolation,
                       OutcomeUnknownError)
        error: BaseException | None = None
        try:
            act()
        except Exception as exc:
            error = exc
        self.settle(op, accounts, intended, error, allowed)
        return error

    # --- running ---------------------------------------------------------------------------------

    def pick(self, rnd: random.Random) -> int:
        """Mostly an account that exists (read without its lock: a hint that may be stale)."""
        existing = [a for a in range(ACCOUNTS) if self.expected[a] is not None]
        if existing and rnd.random() < 0.85:
            return rnd.choice(existing)
        return rnd.randrange(ACCOUNTS)

    def step(self, rnd: random.Random) -> None:
        """One random operation."""
        roll = rnd.random()
        if roll < 0.24:
            self.op_create(rnd, rnd.randrange(ACCOUNTS))
            return
        account = self.pick(rnd)
        if roll < 0.36:
            self.op_change(rnd, account, "change_email")
        elif roll < 0.44:
            self.op_change(rnd, account, "change_handle")
        elif roll < 0.50:
            self.op_change(rnd, account, "change_note")
        elif roll < 0.56:
            self.op_change(rnd, account, "update_note_actions")
        elif roll < 0.62:
            self.op_change(rnd, account, "update_email_actions")
        elif roll < 0.70:
            self.op_delete(rnd, account)
        elif roll < 0.82:
            other = self.pick(rnd)
            if other == account:
                other = (account + 1 + rnd.randrange(ACCOUNTS - 1)) % ACCOUNTS
            self.op_swap(rnd, account, other)
        elif roll < 0.94:
            self.op_stale(rnd, account)
        else:
            self.op_lookup(rnd)

    def run(self, ops: int, threads: int = THREADS) -> float:
        """Run ``ops`` operations on ``threads`` threads; returns the seconds it took."""

        def worker(index: int) -> None:
            rnd = random.Random(self.seed * 1000 + index)
            while next(self._counter) < ops:
                try:
                    self.step(rnd)
                except Exception as exc:  # a bug in an operation itself: report, keep going
                    self.fail("".join(traceback.format_exception(exc)))

        started = time.monotonic()
        workers = [threading.Thread(target=worker, args=(i,), name=f"soak-{i}")
                   for i in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        return time.monotonic() - started

    def verify(self) -> None:
        """Every account's stored record is its expected state; the invariant holds."""
        for account in range(ACCOUNTS):
            actual = stored_state(self.endpoint, account)
            if actual != self.expected[account]:
                self.fail(f"account {account}: stored {actual}, expected "
                          f"{self.expected[account]} (the last successful write)")
        assert_clean(list(MODELS), self.endpoint, model_of=model_of)
        _audit_if_available(self.endpoint)

    def describe(self, seconds: float, ops: int) -> list[str]:
        """Human-readable numbers for the terminal summary."""
        by_type: Counter[str] = Counter()
        skipped: Counter[str] = Counter()
        for (_, outcome), n in self.outcomes.items():
            if outcome.startswith("skipped"):
                skipped[outcome] += n
            elif outcome != "ok":
                by_type[outcome] += n
        ok = sum(v for k, v in self.outcomes.items() if k[1] == "ok")
        lines = [f"{ops} ops in {seconds:.1f} s = {ops / seconds:.0f} ops/s on {THREADS} "
                 f"threads (seed {self.seed}); {ok} succeeded",
                 "failures by type: " + ", ".join(f"{k} {v}" for k, v in by_type.most_common())]
        if skipped:
            lines.append("not sent (known core bug): "
                         + ", ".join(f"{k} {v}" for k, v in skipped.items()))
        per_op: dict[str, list[str]] = {}
        for (op, outcome), n in sorted(self.outcomes.items()):
            per_op.setdefault(op, []).append(f"{outcome} {n}")
        lines += [f"  {op}: {', '.join(parts)}" for op, parts in per_op.items()]
        return lines


def _audit_if_available(endpoint: str) -> None:
    """Also run ``dynaunique.audit.check`` when that module exists, and require it clean.

    It is an independent implementation of the same invariant (scan, then confirm each
    suspect with a transactional read), so the two checkers cross-check each other.
    """
    try:
        from dynaunique import audit
    except ImportError:
        return
    check = getattr(audit, "check", None)
    if check is None:
        return
    point(endpoint, *MODELS)
    report = check(list(MODELS))
    assert report.clean, f"dynaunique.audit.check is not clean: {report.findings}"


def _seed() -> int:
    return int(os.environ.get("DYNAUNIQUE_SOAK_SEED") or random.randrange(10**6))


@pytest.fixture
def soak_table(dynaunique_db: str) -> Iterator[str]:
    point(dynaunique_db, *MODELS)
    fresh_tables(dynaunique_db, *MODELS)
    yield dynaunique_db


def test_soak(soak_table: str, soak_ops: int, summary: Summary) -> None:
    """Race a random mix of writes; every outcome is accounted for, the table stays clean."""
    soak = Soak(soak_table, _seed())
    seconds = soak.run(soak_ops)
    soak.verify()
    summary.add("soak", soak.describe(seconds, soak_ops))
    assert not soak.problems, "\n".join(soak.problems[:20])
    ok = sum(v for k, v in soak.outcomes.items() if k[1] == "ok")
    violations = sum(v for k, v in soak.outcomes.items() if k[1] == "UniqueViolation")
    # The value space is small on purpose: a run without collisions tested nothing.
    if soak_ops >= 100:
        assert ok > soak_ops // 4 and violations > 0, soak.outcomes


def test_soak_through_a_lossy_network(dynaunique_db: str, soak_ops: int, summary: Summary) -> None:
    """The same race through a proxy that drops 5% of writes before and 5% after the server
    applied them: an error may now follow an applied attempt, never a half-applied one."""
    seed = _seed()
    with FaultProxy(dynaunique_db, seed=seed) as proxy:
        point(proxy.url, *MODELS)
        try:
            fresh_tables(dynaunique_db, *MODELS)
            proxy.inject(Fault.DROP_BEFORE, times=10**9, chance=0.05)
            proxy.inject(Fault.DROP_AFTER, times=10**9, chance=0.05)
            soak = Soak(dynaunique_db, seed, lossy=True)
            ops = max(soak_ops // 2, 150)
            seconds = soak.run(ops)
            proxy.clear()
            soak.verify()
        finally:
            point(dynaunique_db, *MODELS)
        injected = {f.value: n for f, n in proxy.injected.items() if n}
    summary.add("lossy soak", [*soak.describe(seconds, ops), f"faults injected: {injected}"])
    assert not soak.problems, "\n".join(soak.problems[:20])
    assert sum(injected.values()) > 0


# --- the stale-copy ABA case, deterministically ------------------------------------------------


# A VersionAttribute restarts at 1 when a record is deleted and created again, so a version-only
# guard would let a stale copy of the first incarnation write over the second: the guard also
# compares the lock inputs.


@pytest.mark.parametrize("write", ["save", "delete"])
def test_stale_copy_of_a_deleted_and_recreated_record_is_refused(soak_table: str,
                                                                 write: str) -> None:
    """Delete a record and create it again (version 1 again) with another email; a copy from
    before must not write over it: that would leave the new email's lock orphaned and let the
    old email be held twice."""
    SoakVersioned(pk="V#0", email="ada@x.io").save()
    stale = SoakVersioned.get("V#0", "PROFILE", consistent_read=True)
    SoakVersioned.get("V#0", "PROFILE", consistent_read=True).delete()
    SoakVersioned(pk="V#0", email="bob@x.io").save()
    SoakVersioned(pk="V#2", email="ada@x.io").save()  # the freed email, taken by another

    refused = False
    try:
        if write == "save":
            stale.note = "stale"
            stale.save()
        else:
            stale.delete()
    except ConcurrentModificationError:
        refused = True
    assert_clean(list(MODELS), soak_table, model_of=model_of)
    assert refused, "the stale copy's write was accepted"
