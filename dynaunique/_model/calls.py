"""How a Model's write call becomes a unit of work: collected by ``atomic()``, else flushed alone.

A ``save()`` or ``delete()`` inside ``atomic()`` is handed to the current unit and sent when the
block ends; outside, it is a unit of one, flushed at once — synchronously, or under asyncio by
``dynaunique.aio`` driving the very same flush steps. ``update(actions)`` becomes one op here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from dynaunique._flush import (
    Flushed,
    Op,
    OpKind,
    Unit,
    as_operation,
    current_unit,
    flush,
    flush_steps,
)
from dynaunique._model.planning import PlanningMixin
from dynaunique.errors import UnsupportedOperationError
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

    def _du_constrained(self) -> bool:
        info = self._du_info
        return info is not None and bool(info.constraints)

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
