"""What a Model instance remembers: the item it was loaded from, its key, that item's locks.

Each instance keeps one :class:`~dynaunique._write.state.InstanceState` (the snapshot the next write
guards on and diffs against, and caches of the locks a snapshot holds); this mixin gives the
model its key and the one read of its record. Everything else about that state is
``dynaunique._write.state``'s, and the write path reads it there, not through the model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pynamodb.connection import Connection

from dynaunique._lock.items import ModelInfo, lock_inputs
from dynaunique._transport.answers import Refused, error_for
from dynaunique._transport.clients import connection_for, connection_in
from dynaunique._transport.connection import RetryPolicy, Steps, exchange_steps, policy_for
from dynaunique._transport.regions import route
from dynaunique._write.state import state_of

if TYPE_CHECKING:
    # The mixins of dynaunique.Model are PynamoDB models to the type checker; at run time they
    # are plain classes that Model puts before PynamoDB's Model in its bases.
    from pynamodb.models import Model as ModelBase
else:
    ModelBase = object

_I = TypeVar("_I", bound="InstanceMixin")


def read_steps(connection: Connection, policy: RetryPolicy, table: str, key: Mapping[str, Any],
               *, consistent: bool = True,
               invalid_key: Exception | None = None) -> Steps[dict[str, Any] | None]:
    """The one read the library sends itself, sync and async: one GetItem (strongly consistent
    unless ``consistent=False``), the raw item or None when there is none.

    ``aget``, ``get_by_unique``'s two reads, a never-loaded delete's or update's read and the
    read after an update are this generator. A refusal is the library's error
    (:func:`~dynaunique._transport.answers.error_for`); with ``invalid_key``, a
    ``ValidationException`` raises that instead (the table answered, so only the key can be invalid:
    one a lock names that DynamoDB cannot read).
    """
    params: dict[str, Any] = {"TableName": table, "Key": dict(key)}
    if consistent:
        params["ConsistentRead"] = True
    answer = yield from exchange_steps(connection, "GetItem", params, policy=policy)
    if isinstance(answer, Refused):
        if invalid_key is not None and answer.code == "ValidationException":
            raise invalid_key from None
        raise error_for(answer, "GetItem", params)
    item = answer.data.get("Item")
    return dict(item) if item is not None else None


class InstanceMixin(ModelBase):
    """Per-instance state of a model: its snapshot, keys and the locks the snapshot holds."""

    #: The class's binding (:mod:`dynaunique._model.binding`); None for a class without a table
    #: or keys.
    _du_info: ClassVar[ModelInfo | None] = None

    #: Everything dynaunique remembers of this instance (``dynaunique._write.state``): computed on
    #: first use, then a plain attribute of the instance (this is on every write's path).
    _du_state = cached_property(state_of)

    @property
    def _du_loaded(self) -> dict[str, Any] | None:
        """The item as last loaded from or written to DynamoDB (None: never loaded)."""
        return self._du_state.loaded

    @_du_loaded.setter
    def _du_loaded(self, item: dict[str, Any] | None) -> None:
        state_of(self).set_loaded(item)

    # --- loading and snapshots -------------------------------------------------------------------

    @classmethod
    def _instantiate(cls: type[_I], attribute_values: dict[str, dict[str, Any]]) -> _I:
        instance = super()._instantiate(attribute_values)
        if isinstance(instance, InstanceMixin):
            instance._du_loaded = copy.deepcopy(attribute_values)
        return instance

    @classmethod
    def _du_build(cls: type[_I], item: Mapping[str, Any]) -> _I:
        """A throwaway instance holding ``item``, for computing that state's locks.

        Deserializing does not mutate ``item``, and the instance is never saved, so neither a
        copy nor a snapshot is needed (this is on every save's path).
        """
        instance: _I = super()._instantiate(dict(item))
        return instance

    @classmethod
    def _du_key_of(cls, hash_key: Any, range_key: Any = None) -> dict[str, Any]:
        """The typed primary key of the record with these (python) key values."""
        info = cls._du_info
        assert info is not None
        return info.typed_key(*cls._serialize_keys(hash_key, range_key))

    def _du_key(self) -> dict[str, Any]:
        """This object's typed primary key, as PynamoDB serializes it."""
        info = self._du_info
        assert info is not None
        return info.typed_key(*self._get_hash_range_key_serialized_values())

    # --- the locks of a state --------------------------------------------------------------------

    @classmethod
    def _du_lock_inputs(cls, item: Mapping[str, Any]) -> Any:
        """What ``locks_of`` needs of a stored item (:func:`dynaunique._lock.items.lock_inputs`)."""
        return lock_inputs(cls, item)

    # --- the unit of work's hooks about state (dynaunique._write.flush) ---------------------------

    def _du_read_steps(self) -> Steps[dict[str, Any] | None]:
        """A strongly consistent read of this object's record (raw item, or None)."""
        info = self._du_info
        assert info is not None
        meta = route(self.Meta, lambda _meta: connection_for(type(self)), write=False)  # home
        return (yield from read_steps(connection_in(type(self), meta), policy_for(meta),
                                      info.table, self._du_key()))
