"""atomic(): collect the saves and deletes of many objects and commit them as one transaction.

Inside ``with atomic():`` a ``save()`` or ``delete()`` is recorded, not sent. Leaving the block
plans every object (``dynaunique.unit_of_work``), fuses the writes that meet on one lock item (a
value moving between records becomes one owner transfer), and sends ONE TransactWriteItems. An
exception in the block sends nothing. A nested ``atomic()`` joins the outer one. The current unit
is a context variable, so each thread and each asyncio task has its own.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pynamodb.expressions.condition import Condition

from dynaunique import transaction
from dynaunique.errors import (
    ConcurrentModificationError,
    ForeignLockError,
    UnsupportedOperationError,
)
from dynaunique.unit_of_work import ConditionCheck, Expression, Plan, RecordPut, merge

if TYPE_CHECKING:
    from dynaunique.model import Model

_current: contextvars.ContextVar[Atomic | None] = contextvars.ContextVar(
    "dynaunique_atomic", default=None
)


def current_unit() -> Atomic | None:
    """The open ``atomic()`` block this thread or task is inside, if any."""
    unit = _current.get()
    return unit if unit is not None and not unit.closed else None


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
        # Objects in first-touched order; each planned once, with its last operation.
        self._ops: dict[int, tuple[Model, str, Condition | None, bool]] = {}
        self._checks: list[ConditionCheck] = []
        # The models of the condition checks: they, too, decide which endpoint gets the unit.
        self._check_models: list[type[Model]] = []
        self._token: contextvars.Token[Atomic | None] | None = None
        self._outer: Atomic | None = None
        # What the outer unit held when this nested block began (a savepoint).
        self._savepoint: tuple[dict[int, tuple[Model, str, Condition | None, bool]], int] | None
        self._savepoint = None
        # Set once the block has ended: a context copied from inside the block (an asyncio
        # task started there) must then write directly, not into a finished unit.
        self.closed = False

    # --- collecting --------------------------------------------------------------------------

    def add_save(self, obj: Model, condition: Condition | None,
                 add_version_condition: bool) -> None:
        """Record a save of ``obj`` (planned with its state when the block ends)."""
        self._ops[id(obj)] = (obj, "save", condition, add_version_condition)

    def add_delete(self, obj: Model, condition: Condition | None,
                   add_version_condition: bool) -> None:
        """Record a delete of ``obj``."""
        self._ops[id(obj)] = (obj, "delete", condition, add_version_condition)

    def condition_check(self, model: type[Model], hash_key: Any, range_key: Any = None, *,
                        condition: Condition, label: str | None = None) -> None:
        """Add a ConditionCheck: the unit commits only if ``condition`` holds on that item.

        ``tx.condition_check(Workspace, "WS#1", condition=Workspace.pk.exists())``.
        """
        info = model._du_info
        if info is None:
            raise UnsupportedOperationError(f"{model.__name__} has no table")
        hash_value, range_value = model._serialize_keys(hash_key, range_key)
        hash_attribute = model.get_attributes()[info.hash_field]
        key = {info.hash_attr: {hash_attribute.attr_type: hash_value}}
        if info.range_attr is not None:
            range_attribute = model.get_attributes()[info.range_field or ""]
            key[info.range_attr] = {range_attribute.attr_type: range_value}
        expression = Expression.of(condition)
        shown = hash_key if range_key is None else (hash_key, range_key)
        self._check_models.append(model)
        self._checks.append(ConditionCheck(
            table=info.table, model=model.__name__, key=key, condition=expression,
            label=label or f"{model.__name__} {shown!r}: {condition}",
        ))

    # --- the block -------------------------------------------------------------------------------

    def __enter__(self) -> Atomic:
        outer = current_unit()
        if outer is not None and not self.dry_run:
            # Nested: join the outer unit, with a savepoint as Django's atomic() has: if this
            # block raises, what it added is dropped and the outer unit goes on without it.
            self._outer = outer
            self._savepoint = (dict(outer._ops), len(outer._checks))
            return outer
        # A dry run is always a unit of its own: nothing in it is ever sent.
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._outer is not None:
            if exc_type is not None and self._savepoint is not None:
                ops, checks = self._savepoint
                self._outer._ops = ops
                del self._outer._checks[checks:]
                del self._outer._check_models[checks:]
            return
        assert self._token is not None
        _current.reset(self._token)
        self._token = None
        self.closed = True
        if exc_type is not None:
            return  # nothing was sent; nothing to undo
        self.commit()

    # --- committing ------------------------------------------------------------------------------

    def _plan(self, loaded: Mapping[int, dict[str, Any] | None]) -> tuple[Plan, dict[int, Any]]:
        plans = []
        records: dict[int, Any] = {}
        for ident, (obj, op, condition, add_version) in self._ops.items():
            if op == "save":
                plan = obj._du_plan_save(condition, add_version)
            else:
                item = loaded.get(ident)
                if item is None:
                    continue  # deleting a record that does not exist: nothing to do
                plan = obj._du_plan_delete(item, condition, add_version)
            records[ident] = plan.writes[0]
            plans.append(plan)
        return merge(plans, self._checks), records

    def commit(self) -> None:
        """Plan and send the unit (called when the block ends)."""
        loaded: dict[int, dict[str, Any] | None] = {}
        for ident, (obj, op, _, _) in self._ops.items():
            if op == "delete":
                item = obj._du_loaded_for_key()
                loaded[ident] = item if item is not None else obj._du_read()
        plan, records = self._plan(loaded)
        self.plan = plan
        self.request = transaction.render_checked(plan) if plan.has_work else None
        if self.dry_run or not plan.has_work:
            return
        client = self._client()
        foreign: set[str] = set()
        for _ in range(4):
            try:
                transaction.execute(plan, client)
            except ForeignLockError as exc:
                # Locks another record holds were never this unit's to delete: leave them.
                foreign.update(exc.lock_keys)
                plan = plan.without_deletes(foreign)
                continue
            except ConcurrentModificationError as exc:
                # A never-loaded object whose record exists: adopt it as loaded and replan.
                owner = next((i for i, w in records.items() if w is exc.write), None)
                write = exc.write
                if owner is None or not (isinstance(write, RecordPut) and write.create):
                    raise
                obj = self._ops[owner][0]
                current = exc.current if exc.current is not None else obj._du_read()
                obj._du_loaded = copy.deepcopy(current) if current is not None else None
                plan, records = self._plan(loaded)
                plan = plan.without_deletes(foreign)
                self.plan = plan
                self.request = transaction.render(plan)
                continue
            break
        else:
            raise ConcurrentModificationError("records kept changing while this unit was "
                                              "retried; try again")
        for ident, (obj, op, _, _) in self._ops.items():
            if op == "save":
                record = records[ident]
                obj._du_after_save(record.item)
            else:
                obj._du_loaded = None

    def _client(self) -> Any:
        metas = [obj.Meta for obj, _, _, _ in self._ops.values()]
        metas += [model.Meta for model in self._check_models]
        clients = {id(transaction.client_for(meta)): transaction.client_for(meta)
                   for meta in metas}
        if len(clients) > 1:
            raise UnsupportedOperationError(
                "the models of one atomic() block point at different endpoints or regions; one "
                "transaction can only go to one DynamoDB"
            )
        return next(iter(clients.values()))

    def explain(self) -> str:
        """The unit's request as readable JSON (after the block has ended)."""
        if self.request is None:
            return "{}  // nothing to send"
        return transaction.to_json(self.request)


def atomic(*, dry_run: bool = False) -> Atomic:
    """A unit of work: ``with atomic() as tx: a.save(); b.delete()`` — one transaction.

    With ``dry_run=True`` nothing is sent; ``tx.request`` / ``tx.explain()`` show what would be.
    """
    return Atomic(dry_run=dry_run)
