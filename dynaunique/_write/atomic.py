"""atomic(): collect the saves and deletes of many objects and commit them as one transaction.

Inside ``with atomic():`` a ``save()`` or ``delete()`` is recorded, not sent. Leaving the block
plans every object (``dynaunique._write.plan``), fuses the writes that meet on one lock item (a
value moving between records becomes one owner transfer), and sends ONE TransactWriteItems. An
exception in the block sends nothing. A nested ``atomic()`` joins the outer one. The current unit
is a context variable, so each thread and each asyncio task has its own; ``async with atomic()``
is the same unit, committed by the async sender (``dynaunique.aio``), and belongs to the task
that opened it.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from pynamodb.expressions.condition import Condition

from dynaunique._write import flush as _flush
from dynaunique._write.flush import Unit
from dynaunique._write.plan import Plan
from dynaunique._write.render import render_checked, to_json
from dynaunique._write.state import Op, OpKind
from dynaunique._write.writes import ConditionCheck, Expression
from dynaunique.errors import UnsupportedOperationError
from dynaunique.observe import traced

__all__ = ["Atomic", "atomic", "current_unit"]

# --- the current unit ----------------------------------------------------------------------------

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("dynaunique_atomic", default=None)


def current_unit() -> Any:
    """The open ``atomic()`` block this thread or task is inside, if any.

    A block belongs to the asyncio task that opened it. Another task that sees it (a task
    started inside the block copies the context: ``asyncio.gather(a.asave(), ...)``,
    ``asyncio.to_thread``) may not write into it: that would race the block's end. It gets an
    ``UnsupportedOperationError`` rather than a write outside the transaction it expects.
    """
    unit = _own_unit()
    if unit is None and _current.get() is not None and not _current.get().closed:
        raise UnsupportedOperationError(
            "this atomic() block belongs to another asyncio task (or thread); await asave() / "
            "adelete() in the task that opened it — asyncio.gather() runs each coroutine in a "
            "task of its own"
        )
    return unit


def _own_unit() -> Any:
    """The open ``atomic()`` block of this context if this task opened it, else None."""
    unit = _current.get()
    if unit is None or unit.closed or unit.task is not running_task():
        return None
    return unit


def running_task() -> object | None:
    """The asyncio task running this code (None outside a running event loop)."""
    # asyncio is not imported here: a program that never imported it runs no event loop.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        task: object | None = asyncio.current_task()
    except RuntimeError:
        return None
    return task


@contextmanager
def collecting(block: Any) -> Iterator[None]:
    """Make ``block`` the current unit of this context while the ``with`` body runs."""
    token = _current.set(block)
    try:
        yield
    finally:
        _current.reset(token)


def collect(obj: Any, kind: OpKind, condition: Any, add_version_condition: bool) -> bool:
    """Inside ``atomic()``: hand this save or delete to the current unit (True); else False."""
    unit = current_unit()
    if unit is None:
        return False
    add = unit.add_save if kind is OpKind.SAVE else unit.add_delete
    add(obj, condition, add_version_condition)
    return True




class Atomic:
    """One unit of work; use it through :func:`atomic`.

    ``request`` holds the TransactWriteItems request after the block ends (the one sent, or — in
    a dry run — the one that would have been sent), without the per-call ClientRequestToken.
    """

    def __init__(self, *, dry_run: bool = False) -> None:
        self.dry_run = dry_run
        #: The request of this unit, available once the block has ended.
        self.request: dict[str, Any] | None = None
        #: The plan of this unit, available once the block has ended.
        self.plan: Plan | None = None
        self.unit = Unit()
        self._outer: Atomic | None = None
        # What the outer unit held when this nested block began (a savepoint).
        self._savepoint: tuple[dict[int, Op], int] | None = None
        self._context: Any = None
        # Set once the block has ended: a context copied from inside the block (an asyncio
        # task started there) must then write directly, not into a finished unit.
        self.closed = False
        # The asyncio task that opened the block (None outside an event loop): only it may
        # add to the unit (see :func:`current_unit`).
        self.task: object | None = None

    # --- collecting --------------------------------------------------------------------------

    def add_save(self, obj: Any, condition: Condition | None,
                 add_version_condition: bool) -> None:
        """Record a save of ``obj`` (planned with its state when the block ends)."""
        self.unit.add(Op(obj, OpKind.SAVE, condition, add_version_condition))

    def add_delete(self, obj: Any, condition: Condition | None,
                   add_version_condition: bool) -> None:
        """Record a delete of ``obj``."""
        self.unit.add(Op(obj, OpKind.DELETE, condition, add_version_condition))

    def condition_check(self, model: Any, hash_key: Any, range_key: Any = None, *,
                        condition: Condition, label: str | None = None) -> None:
        """Add a ConditionCheck: the unit commits only if ``condition`` holds on that item.

        ``tx.condition_check(Workspace, "WS#1", condition=Workspace.pk.exists())``.
        """
        info = getattr(model, "_du_info", None)
        if info is None:
            raise UnsupportedOperationError(f"{model.__name__} has no table")
        shown = hash_key if range_key is None else (hash_key, range_key)
        self.unit.check_models.append(model)
        self.unit.checks.append(ConditionCheck(
            table=info.table, model=model.__name__, key=model._du_key_of(hash_key, range_key),
            condition=Expression.of(condition),
            label=label or f"{model.__name__} {shown!r}: {condition}",
        ))

    # --- the block -------------------------------------------------------------------------------

    def __enter__(self) -> Atomic:
        # A block opened in a task that merely sees another task's block is a unit of its own.
        outer = _own_unit()
        if outer is not None and not self.dry_run:
            # Nested: join the outer unit, with a savepoint as Django's atomic() has: if this
            # block raises, what it added is dropped and the outer unit goes on without it.
            self._outer = outer
            self._savepoint = outer.unit.savepoint()
            return outer  # type: ignore[no-any-return]
        # A dry run is always a unit of its own: nothing in it is ever sent.
        self.task = running_task()
        self._context = collecting(self)
        self._context.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._leave(exc_type):
            self.commit()

    async def __aenter__(self) -> Atomic:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._leave(exc_type):
            await self.acommit()

    def _leave(self, exc_type: type[BaseException] | None) -> bool:
        """End the block; True when this unit is to be committed now."""
        if self._outer is not None:
            if exc_type is not None and self._savepoint is not None:
                self._outer.unit.rollback(self._savepoint)
            return False
        self._context.__exit__(None, None, None)
        self._context = None
        self.closed = True
        # After an exception nothing was sent; nothing to undo.
        return exc_type is None

    def commit(self) -> None:
        """Plan and send the unit (called when the block ends): one TransactWriteItems."""
        if self.unit.ops or self.unit.checks:
            with traced(self._model_names(), "atomic"), _flush.as_operation("transact_write"):
                flushed = _flush.flush(self.unit, dry_run=self.dry_run)
            self._committed(flushed)

    async def acommit(self) -> None:
        """:meth:`commit` under asyncio (called when an ``async with`` block ends)."""
        from dynaunique.aio import arun  # only an async caller needs the async client

        if self.unit.ops or self.unit.checks:
            with traced(self._model_names(), "atomic"), _flush.as_operation("transact_write"):
                flushed = await arun(_flush.flush_steps(self.unit, dry_run=self.dry_run))
            self._committed(flushed)

    def _model_names(self) -> str:
        """The models the unit writes or checks, comma-separated in first-touched order."""
        names = [type(op.obj).__name__ for op in self.unit.ops.values()]
        names += [m.__name__ for m in self.unit.check_models]
        return ",".join(dict.fromkeys(names))

    def _committed(self, flushed: _flush.Flushed) -> None:
        self.plan = flushed.plan
        request = flushed.sent()   # the very request sent: rendered once
        if request is None and flushed.plan.has_work:   # a dry run: rendered here
            request = render_checked(flushed.plan)
        self.request = request

    def explain(self) -> str:
        """The unit's request as readable JSON (after the block has ended)."""
        if self.request is None:
            return "{}  // nothing to send"
        return to_json(self.request)


def atomic(*, dry_run: bool = False) -> Atomic:
    """A unit of work: ``with atomic() as tx: a.save(); b.delete()`` — one transaction.

    Under asyncio: ``async with atomic() as tx: await a.asave(); await b.adelete()`` — the
    same unit, committed without blocking the event loop.

    With ``dry_run=True`` nothing is sent; ``tx.request`` / ``tx.explain()`` show what would be.
    """
    return Atomic(dry_run=dry_run)
