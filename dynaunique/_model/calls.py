"""What a Model's write calls need besides the flush: PynamoDB's own writes, and update ops.

A model without constraints on a table that holds no lock items writes as PynamoDB does, its
failed condition raised as the flush raises it (:func:`pynamodb_call`); ``update(actions)``
becomes one op here (:func:`update_op`). Collecting into ``atomic()`` and flushing a unit of
one are ``dynaunique._write.flush``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from dynaunique._lock.items import plain_key
from dynaunique._write.atomic import current_unit
from dynaunique._write.flush import as_operation
from dynaunique._write.state import Op, OpKind
from dynaunique._write.transaction import condition_failed
from dynaunique.errors import ConcurrentModificationError, UnsupportedOperationError


def check_update(actions: list[Action]) -> None:
    """Refuse ``update(actions)`` inside ``atomic()``, or without actions."""
    if current_unit() is not None:
        raise UnsupportedOperationError(
            "update(actions) inside atomic() is not supported: assign the new values and "
            "call save(), which atomic() collects"
        )
    if not isinstance(actions, list) or not actions:
        raise TypeError("the value of `actions` is expected to be a non-empty list")


def update_op(obj: Any, actions: list[Action], condition: Condition | None,
              add_version_condition: bool) -> Op:
    """``obj.update(actions, condition)`` as an op (PynamoDB's version action added)."""
    actions = list(actions)
    version_condition = obj._handle_version_attribute(actions=actions)
    if add_version_condition and version_condition is not None:
        condition = version_condition if condition is None else condition & version_condition
    return Op(obj, OpKind.UPDATE, condition, add_version_condition, actions)


@contextmanager
def pynamodb_call(obj: Any, kind: OpKind) -> Iterator[None]:
    """Around PynamoDB's own write: a failed condition is the error the flush raises for it
    (a ``ConcurrentModificationError`` that is also PynamoDB's ``PutError``/``DeleteError``/
    ``UpdateError``, its ``cause`` the ConditionalCheckFailed), so ``save()`` and ``asave()``
    fail alike; any other failure is PynamoDB's, as it raised it."""
    try:
        yield
    except PynamoDBException as exc:
        if exc.cause_response_code != "ConditionalCheckFailedException":
            raise
        key = plain_key(obj._du_key())
        conflict = ConcurrentModificationError(
            condition_failed(type(obj).__name__, key), model=type(obj).__name__, key=key)
        with as_operation(kind.value):
            raise conflict from exc.cause
