"""How a Model's write call becomes a unit of work: collected by ``atomic()``, else flushed alone.

A ``save()`` or ``delete()`` inside ``atomic()`` is handed to the current unit and sent when the
block ends; outside, it is a unit of one, flushed at once — synchronously, or under asyncio by
``dynaunique.aio`` driving the very same flush steps. ``update(actions)`` becomes one op here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from dynaunique._flush import (
    Flushed,
    Unit,
    as_operation,
    current_unit,
    flush,
    flush_steps,
)
from dynaunique._items import plain_key
from dynaunique._model.binding import table_holds_locks
from dynaunique._model.planning import PlanningMixin
from dynaunique._state import Op, OpKind
from dynaunique._transaction import condition_failed
from dynaunique.errors import ConcurrentModificationError, UnsupportedOperationError
from dynaunique.observe import traced


class CallsMixin(PlanningMixin):
    """A model's write calls as ops, and the flush of a unit of one."""

    def _du_collect(self, kind: OpKind, condition: Condition | None,
                    add_version_condition: bool) -> bool:
        """Inside ``atomic()``: hand this save or delete to the current unit (True); else False."""
        unit = current_unit()
        if unit is None:
            return False
        add = unit.add_save if kind is OpKind.SAVE else unit.add_delete
        add(self, condition, add_version_condition)
        return True

    @staticmethod
    def _du_check_update(actions: list[Action]) -> None:
        if current_unit() is not None:
            raise UnsupportedOperationError(
                "update(actions) inside atomic() is not supported: assign the new values and "
                "call save(), which atomic() collects"
            )
        if not isinstance(actions, list) or not actions:
            raise TypeError("the value of `actions` is expected to be a non-empty list")

    def _du_update_op(self, actions: list[Action], condition: Condition | None,
                      add_version_condition: bool) -> Op:
        actions = list(actions)
        version_condition = self._handle_version_attribute(actions=actions)
        if add_version_condition and version_condition is not None:
            condition = version_condition if condition is None else condition & version_condition
        return Op(self, OpKind.UPDATE, condition, add_version_condition, actions)

    def _du_pynamodb_writes(self) -> bool:
        """Whether this object's writes are PynamoDB's own: a model without constraints on a
        table that holds no lock items. On a table that does, every model's writes go through
        the flush, sync as async: one write path, guarded off the locks (``_model.mixed``)."""
        info = self._du_info
        return info is None or not (info.constraints or table_holds_locks(info.table))

    @contextmanager
    def _du_pynamodb_call(self, kind: OpKind) -> Iterator[None]:
        """Around PynamoDB's own write: a failed condition is the error the flush raises for it
        (a ``ConcurrentModificationError`` that is also PynamoDB's ``PutError``/``DeleteError``/
        ``UpdateError``, its ``cause`` the ConditionalCheckFailed), so ``save()`` and
        ``asave()`` fail alike; any other failure is PynamoDB's, as it raised it."""
        try:
            yield
        except PynamoDBException as exc:
            if exc.cause_response_code != "ConditionalCheckFailedException":
                raise
            key = plain_key(self._du_key())
            conflict = ConcurrentModificationError(
                condition_failed(type(self).__name__, key), model=type(self).__name__, key=key)
            with as_operation(kind.value):
                raise conflict from exc.cause

    @contextmanager
    def _du_alone(self, op: Op) -> Iterator[Unit]:
        """A unit of one holding ``op``, to flush inside: traced and named as the call."""
        unit = Unit()
        unit.add(op)
        # Also PynamoDB's PutError/DeleteError/UpdateError, for `except PutError:` code.
        with traced(type(self).__name__, op.kind.value), as_operation(op.kind.value):
            yield unit

    def _du_flush(self, op: Op, dry_run: bool) -> Flushed:
        with self._du_alone(op) as unit:
            return flush(unit, dry_run=dry_run)

    async def _du_aflush(self, op: Op) -> Flushed:
        """:meth:`_du_flush` under asyncio: the same flush, driven by ``dynaunique.aio``."""
        from dynaunique.aio import arun  # only an async caller needs the async client

        with self._du_alone(op) as unit:
            return await arun(flush_steps(unit))
