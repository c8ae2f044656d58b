"""dynaunique._write.flush.settle_steps: a refused attempt → a decision, the basis it was given
kept.

Pure: the decisions that need no read are driven here to their end; the ones that read (an
orphan's owner, a record to adopt) are the integration tests' (orphan healing, mixed tables).
"""

from __future__ import annotations

from typing import Any

from support.declare import declare, pk_attr, sk_attr

from dynaunique._write.flush import Attempt, Raise, Replan, Unit, settle_steps
from dynaunique._write.plan import Plan
from dynaunique._write.state import Basis, Op, OpKind, Stored
from dynaunique._write.writes import RecordPut
from dynaunique.attributes import UnicodeAttribute
from dynaunique.errors import ConcurrentModificationError, ForeignLockError, OutcomeUnknownError

Account = declare("Account", "settle_accounts", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  username=UnicodeAttribute(unique=True, null=True))

KEY = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}


def decided(steps: Any) -> Replan | Raise:
    """Drive steps that make no request to their decision."""
    try:
        request = next(steps)
    except StopIteration as stop:
        decision: Replan | Raise = stop.value
        return decision
    raise AssertionError(f"settling made a request: {request!r}")


def one_op() -> tuple[Unit, Attempt, Basis, RecordPut]:
    obj = Account(pk="ACCT#1", username="ada")
    unit = Unit()
    unit.add(Op(obj, OpKind.SAVE))
    write = RecordPut("settle_accounts", "Account", KEY, {**KEY}, None, None)
    stored = Stored({**KEY}, judged={**KEY})
    return unit, Attempt(Plan((write,)), {id(obj): write}), Basis({id(obj): stored}), write


def test_a_foreign_lock_is_left_out_of_the_next_attempt() -> None:
    unit, attempt, basis, _ = one_op()
    exc = ForeignLockError("held", model="Account", lock_keys=("UNIQ#HANDLE#ada",))
    decision = decided(settle_steps(unit, attempt, basis, exc, None, None))  # type: ignore[arg-type]
    assert decision == Replan(Basis(basis.stored, frozenset({"UNIQ#HANDLE#ada"})))
    assert basis.foreign == frozenset()   # the basis given is not written into


def test_an_unknown_outcome_is_raised_and_each_object_remembers_its_write() -> None:
    unit, attempt, basis, write = one_op()
    exc = OutcomeUnknownError("lost")
    assert decided(settle_steps(unit, attempt, basis, exc, None, None)) == Raise(exc)  # type: ignore[arg-type]
    (op,) = unit.ops.values()
    assert op.obj._du_state.unknown is write


def test_a_caller_s_stale_copy_is_raised() -> None:
    # The caller loaded it (not found by this flush): never replanned behind its back.
    unit, attempt, basis, write = one_op()
    exc = ConcurrentModificationError("changed", model="Account", key=KEY,
                                      current={**KEY, "username": {"S": "bob"}}, write=write)
    assert decided(settle_steps(unit, attempt, basis, exc, None, None)) == Raise(exc)  # type: ignore[arg-type]
