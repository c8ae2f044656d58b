"""Model: a PynamoDB model whose unique constraints are kept by lock items on every write.

This module is Model's API — the sync and asyncio writes and reads, PynamoDB's own methods kept
safe — over mixins of one job each, in :mod:`dynaunique._model`: the metaclass binds the
declared constraints when the class is defined (``binding``); every instance remembers the item
it was loaded from (``instance``); a write diffs that snapshot against the current values
(``dynaunique._write.record`` builds the one value the pure planner takes) and is collected by
``atomic()`` or flushed alone (``dynaunique._write.flush``), which never calls back into the model;
the snapshot is refreshed only after a write succeeded. Unique lookups are ``lookup``'s; the guards
that keep lock items out of reads, ``reads``'.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model as PynamoModel
from pynamodb.pagination import ResultIterator

from dynaunique._model.binding import ModelMeta, table_holds_locks
from dynaunique._model.calls import check_update, pynamodb_call, update_op
from dynaunique._model.lookup import LookupMixin
from dynaunique._model.reads import ReadMixin, mark_partial
from dynaunique._transport.connection import run
from dynaunique._write.atomic import collect
from dynaunique._write.flush import aflush_one, flush_one
from dynaunique._write.mixed import GuardedBatchWrite, transact_condition
from dynaunique._write.state import Op, OpKind
from dynaunique.errors import UnsupportedOperationError

__all__ = ["Model", "ModelMeta"]

_M = TypeVar("_M", bound="Model")


class Model(LookupMixin, ReadMixin, PynamoModel, metaclass=ModelMeta):
    """A PynamoDB model whose ``unique=True`` fields and ``Meta.constraints`` are enforced.

    Everything PynamoDB offers keeps working (get, query, scan, indexes, conditions); lock items
    never come back from ``scan``/``query``/``count``. Declare a string hash key.
    """

    # --- loading and writes ----------------------------------------------------------------------

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        """Load ``attribute_values`` (as PynamoDB does) and remember them as the loaded state."""
        super().deserialize(attribute_values)
        self._du_loaded = copy.deepcopy(attribute_values)

    def save(self, condition: Condition | None = None, *, add_version_condition: bool = True,
             dry_run: bool = False) -> dict[str, Any]:
        """Save this object and keep its locks right, in one request.

        A never-loaded object is tried as a create; if the record exists, the stored item becomes
        the loaded state and the save is redone as an update guarded on it. A copy loaded earlier
        whose record changed since is refused (``ConcurrentModificationError``), never written
        over. Inside ``atomic()`` the save is collected and sent when the block ends.
        ``dry_run=True`` sends nothing and returns the request that would be sent (on a
        multi-Region strong consistency table, the protocol's requests: ``{"Protocol": "MRSC",
        "Requests": [...]}``, docs/global-tables.md). A model that
        declares no constraint saves exactly as PynamoDB does; on a table that holds lock items
        its save is still one put, guarded off the other models' locks.

        :raises UniqueViolation: a value is held by another record.
        :raises ConcurrentModificationError: the record changed since this copy was loaded.
        :raises OtherModelRecordError: the item is another model's record holding locks this
            save does not carry.
        """
        pynamodb = not dry_run and pynamodb_writes(self)
        if not dry_run and collect(self, OpKind.SAVE, condition, add_version_condition):
            return {}
        if pynamodb:
            with pynamodb_call(self, OpKind.SAVE):
                response = super().save(condition, add_version_condition=add_version_condition)
            self._du_loaded = self.serialize(null_check=False)
            return response
        flushed = flush_one(Op(self, OpKind.SAVE, condition, add_version_condition),
                            dry_run=dry_run)
        return flushed.shown() if dry_run else flushed.response

    async def asave(self, condition: Condition | None = None, *,
                    add_version_condition: bool = True) -> dict[str, Any]:
        """:meth:`save` for asyncio: ``await obj.asave()`` — the same plan, request and errors.

        Inside ``async with atomic()`` (or ``with atomic()``) the save is collected, as
        :meth:`save` is. A model without constraints is saved through the same flush (the
        request PynamoDB's ``save`` sends).
        """
        if collect(self, OpKind.SAVE, condition, add_version_condition):
            return {}
        op = Op(self, OpKind.SAVE, condition, add_version_condition)
        return (await aflush_one(op)).response

    def delete(self, condition: Condition | None = None, *, add_version_condition: bool = True,
               dry_run: bool = False) -> Any:
        """Delete this record and every lock it holds, in one request.

        An object that was never loaded (or was loaded partially) is read consistently first.
        Deleting a record that does not exist does nothing, as in PynamoDB (unless a version
        or a ``condition`` was to be checked on it).
        """
        pynamodb = not dry_run and pynamodb_writes(self)
        if not dry_run and collect(self, OpKind.DELETE, condition, add_version_condition):
            return {}
        if pynamodb:
            with pynamodb_call(self, OpKind.DELETE):
                response = super().delete(condition, add_version_condition=add_version_condition)
            self._du_loaded = None
            return response
        flushed = flush_one(Op(self, OpKind.DELETE, condition, add_version_condition),
                            dry_run=dry_run)
        if dry_run:
            return flushed.shown() if flushed.plan.has_work else {}
        return flushed.response

    async def adelete(self, condition: Condition | None = None, *,
                      add_version_condition: bool = True) -> Any:
        """:meth:`delete` for asyncio: ``await obj.adelete()`` — the same requests and errors."""
        if collect(self, OpKind.DELETE, condition, add_version_condition):
            return {}
        op = Op(self, OpKind.DELETE, condition, add_version_condition)
        return (await aflush_one(op)).response

    def update(self, actions: list[Action], condition: Condition | None = None, *,
               add_version_condition: bool = True, dry_run: bool = False) -> Any:
        """PynamoDB's ``update(actions)``, keeping the locks right.

        Actions that touch no constrained field, nor the TTL, nor an attribute a condition reads,
        are one plain UpdateItem (guarded "unchanged since loaded" when the model has a
        conditional constraint). Actions that set or remove a
        constrained field become one transaction with the lock changes. An action whose result
        cannot be known before sending (``add``, arithmetic, ``if_not_exists`` …) on a field a
        lock depends on raises :class:`UnsupportedOperationError`: assign and ``save()`` instead.
        """
        check_update(actions)
        if not dry_run and pynamodb_writes(self):
            with pynamodb_call(self, OpKind.UPDATE):
                return super().update(actions, condition,
                                      add_version_condition=add_version_condition)
        flushed = flush_one(update_op(self, actions, condition, add_version_condition),
                            dry_run=dry_run)
        return flushed.shown() if dry_run else flushed.response

    async def aupdate(self, actions: list[Action], condition: Condition | None = None, *,
                      add_version_condition: bool = True) -> Any:
        """:meth:`update` for asyncio: ``await obj.aupdate([Model.n.add(1)])``."""
        check_update(actions)
        op = update_op(self, actions, condition, add_version_condition)
        return (await aflush_one(op)).response

    # --- reads -----------------------------------------------------------------------------------

    @classmethod
    def get_by_unique(cls: type[_M], field_or_name: str | None = None, value: Any = None,
                      **values: Any) -> _M:
        """The record holding a unique value: ``Account.get_by_unique("email", "ADA@x.io")``.

        ``field_or_name`` is a field of a one-field constraint or a constraint name (give a tuple
        for a composite: ``get_by_unique("TENANT_SLUG", ("acme", "home"))``); or pass the fields
        as keywords: ``get_by_unique(tenant="acme", slug="home")``. The value is normalized as on
        save. Both reads are strongly consistent.

        :raises Model.DoesNotExist: no record holds the value.
        """
        return run(cls._du_get_by_unique_steps(field_or_name, value, values))

    @classmethod
    async def aget_by_unique(cls: type[_M], field_or_name: str | None = None, value: Any = None,
                             **values: Any) -> _M:
        """:meth:`get_by_unique` for asyncio: the same two reads, the same errors."""
        from dynaunique.aio import arun

        return await arun(cls._du_get_by_unique_steps(field_or_name, value, values))

    @classmethod
    def scan(cls: type[_M], filter_condition: Condition | None = None,
             *args: Any, **kwargs: Any) -> ResultIterator[_M]:
        """PynamoDB's scan; on a table that holds lock items, they are filtered out."""
        not_lock = cls._du_not_lock()
        combined = (filter_condition if not_lock is None
                    else not_lock if filter_condition is None else filter_condition & not_lock)
        result = super().scan(combined, *args, **kwargs)
        return mark_partial(result, kwargs.get("attributes_to_get"))

    @classmethod
    def query(cls: type[_M], hash_key: Any, *args: Any,
              **kwargs: Any) -> ResultIterator[_M]:
        """PynamoDB's query; a hash key in dynaunique's reserved namespace is refused."""
        cls._du_check_query_key(hash_key, kwargs.get("index_name"))
        result = super().query(hash_key, *args, **kwargs)
        return mark_partial(result, kwargs.get("attributes_to_get"))

    @classmethod
    def count(cls, hash_key: Any = None, *args: Any, **kwargs: Any) -> int:
        """PynamoDB's count. On a table that holds lock items, a count without a hash key is a
        scan that excludes them (DescribeTable's approximate ItemCount, which PynamoDB returns,
        would include them); on any other table it is PynamoDB's, DescribeTable included."""
        not_lock = cls._du_not_lock() if hash_key is None else None
        if not_lock is not None:
            if kwargs.get("filter_condition") is not None or args:
                raise ValueError("A hash_key must be given to use filters")
            hash_attr = cls.get_attributes()[cls._hash_keyname or ""].attr_name
            # A full scan can be costly: honour the read options a caller gave count().
            return sum(1 for _ in super().scan(
                not_lock, attributes_to_get=[hash_attr],
                consistent_read=kwargs.get("consistent_read"),
                rate_limit=kwargs.get("rate_limit")))
        cls._du_check_query_key(hash_key, kwargs.get("index_name"))
        return super().count(hash_key, *args, **kwargs)

    @classmethod
    def get(cls: type[_M], hash_key: Any, range_key: Any = None,
            consistent_read: bool = False, attributes_to_get: Sequence[str] | None = None) -> _M:
        """PynamoDB's get; a key in dynaunique's reserved namespace is refused."""
        cls._du_check_key(hash_key)
        instance = super().get(hash_key, range_key, consistent_read=consistent_read,
                               attributes_to_get=attributes_to_get)
        if attributes_to_get is not None:
            instance._du_loaded = None
        return instance

    @classmethod
    async def aget(cls: type[_M], hash_key: Any, range_key: Any = None,
                   consistent_read: bool = False) -> _M:
        """:meth:`get` for asyncio: the loaded object, its snapshot set (ready to change and
        ``asave()``). ``await Account.aget("ACCT#1", consistent_read=True)``.

        :raises Model.DoesNotExist: no such record.
        """
        from dynaunique.aio import arun

        return await arun(cls._du_get_steps(hash_key, range_key, consistent_read))

    @classmethod
    def batch_get(cls: type[_M], items: Iterable[Any],
                  consistent_read: bool | None = None,
                  attributes_to_get: Sequence[str] | None = None) -> Iterator[_M]:
        """PynamoDB's batch_get; a key in dynaunique's reserved namespace is refused, and
        partial projections are not taken as loaded state."""
        items = cls._du_check_keys(items)
        for instance in super().batch_get(items, consistent_read=consistent_read,
                                          attributes_to_get=attributes_to_get):
            if attributes_to_get is not None:
                instance._du_loaded = None
            yield instance

    def refresh(self, consistent_read: bool = False) -> None:
        """PynamoDB's refresh; a key in dynaunique's reserved namespace is refused."""
        self._du_check_key(self._get_hash_range_key_serialized_values()[0])
        super().refresh(consistent_read)

    @classmethod
    def batch_write(cls, auto_commit: bool = True) -> Any:
        """Refused for models with unique constraints: a batch cannot keep locks atomic. On a
        table that holds lock items, a model without constraints writes each item guarded
        (:class:`~dynaunique._write.mixed.GuardedBatchWrite`)."""
        info = cls._du_info
        if info is not None and info.constraints:
            raise UnsupportedOperationError(
                f"{cls.__name__}.batch_write() would write records without their locks; use "
                "`with dynaunique.atomic(): ...` and save()/delete() (up to 100 items per "
                "transaction)"
            )
        if info is not None and cls._du_table_holds_locks():
            return GuardedBatchWrite(cls, auto_commit=auto_commit)
        return super().batch_write(auto_commit)

    def get_save_kwargs_from_instance(self, condition: Condition | None = None, *args: Any,
                                      **kwargs: Any) -> dict[str, Any]:
        """Refused for constrained models: PynamoDB's TransactWrite would bypass the locks;
        for others, guarded off the locks of a table that holds them."""
        _refuse_pynamo_transaction(self)
        return super().get_save_kwargs_from_instance(transact_condition(self, condition),
                                                     *args, **kwargs)

    def get_delete_kwargs_from_instance(self, condition: Condition | None = None, *args: Any,
                                        **kwargs: Any) -> dict[str, Any]:
        """As :meth:`get_save_kwargs_from_instance`, for PynamoDB's ``TransactWrite.delete``."""
        _refuse_pynamo_transaction(self)
        return super().get_delete_kwargs_from_instance(transact_condition(self, condition),
                                                       *args, **kwargs)

    def get_update_kwargs_from_instance(self, actions: list[Action],
                                        condition: Condition | None = None, *args: Any,
                                        **kwargs: Any) -> dict[str, Any]:
        """As :meth:`get_save_kwargs_from_instance`, for PynamoDB's ``TransactWrite.update``."""
        _refuse_pynamo_transaction(self)
        return super().get_update_kwargs_from_instance(
            actions, transact_condition(self, condition), *args, **kwargs)


def pynamodb_writes(obj: Any) -> bool:
    """Whether ``obj``'s writes are PynamoDB's own: a model without constraints on a table
    that holds no lock items. On a table that does, every model's writes go through the flush,
    sync as async: one write path, guarded off the locks (``_model.mixed``)."""
    info = obj._du_info
    return info is None or not (info.constraints or table_holds_locks(info.table))


def _refuse_pynamo_transaction(obj: Any) -> None:
    info = obj._du_info
    if info is not None and info.constraints:
        raise UnsupportedOperationError(
            f"PynamoDB's TransactWrite would write {type(obj).__name__} without its locks; "
            "use `with dynaunique.atomic(): obj.save()` instead"
        )
