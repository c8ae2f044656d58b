"""What a Model instance remembers: the item it was loaded from, its key, that item's locks.

Each instance keeps one :class:`~dynaunique._state.InstanceState` (the snapshot the next write
guards on and diffs against, and caches of the locks a snapshot holds); this mixin reads it for
the model: its key, the locks of a stored item, the one read of its record. What a success does
to it is ``dynaunique._state``'s (:func:`~dynaunique._state.finish_steps`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cached_property
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dynaunique._connection import Steps, connection_for, policy_for, send_steps
from dynaunique._items import LockRef, ModelInfo, locks_of
from dynaunique._state import same_item, state_of

if TYPE_CHECKING:
    # The mixins of dynaunique.Model are PynamoDB models to the type checker; at run time they
    # are plain classes that Model puts before PynamoDB's Model in its bases.
    from pynamodb.models import Model as ModelBase
else:
    ModelBase = object

_I = TypeVar("_I", bound="InstanceMixin")


class InstanceMixin(ModelBase):
    """Per-instance state of a model: its snapshot, keys and the locks the snapshot holds."""

    #: The class's binding (:mod:`dynaunique._model.binding`); None for a class without a table
    #: or keys.
    _du_info: ClassVar[ModelInfo | None] = None

    #: Everything dynaunique remembers of this instance (``dynaunique._state``): computed on
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

    def _du_loaded_for_key(self) -> dict[str, Any] | None:
        """The loaded item, if it is this object's current key (a changed key is a new record)."""
        loaded = self._du_loaded
        info = self._du_info
        if loaded is None or info is None:
            return None
        try:
            key = self._du_key()
        except Exception:
            return None
        if all(same_item(loaded.get(k), v) for k, v in key.items()):
            return loaded
        return None

    # --- the locks of a state --------------------------------------------------------------------

    @classmethod
    def _du_lock_inputs(cls, item: Mapping[str, Any]) -> Any:
        """What ``locks_of`` needs of a stored (or about to be stored) item: locks derive from
        what is stored, never from the python value. Without a condition (which may read any
        attribute) only the constrained fields are deserialized, not the whole record."""
        info = cls._du_info
        assert info is not None
        if info.has_conditions:
            return cls._du_build(item)
        attributes = cls.get_attributes()
        values: dict[str, Any] = {}
        for bound in info.constraints:
            for field in bound.constraint.fields:
                attribute = attributes[field]
                raw = item.get(attribute.attr_name)
                if raw is None or "NULL" in raw:
                    # As PynamoDB's loading does: a missing attribute takes its default.
                    default = attribute.default
                    values[field] = default() if callable(default) else default
                else:
                    values[field] = attribute.deserialize(attribute.get_value(raw))
        return SimpleNamespace(**values)

    def _du_old_locks(self, loaded: Mapping[str, Any] | None,
                      reads: set[str] | None = None) -> dict[str, LockRef]:
        info = self._du_info
        assert info is not None
        if loaded is None:
            return {}
        return state_of(self).locks_of_snapshot(
            loaded, lambda item, found: locks_of(info, self._du_lock_inputs(item), found), reads)

    # --- the unit of work's hooks about state (dynaunique._flush) ---------------------------------

    def _du_read_steps(self) -> Steps[dict[str, Any] | None]:
        """A strongly consistent read of this object's record (raw item, or None)."""
        info = self._du_info
        assert info is not None
        response = yield from send_steps(
            connection_for(self.Meta), "GetItem",
            {"TableName": info.table, "Key": self._du_key(), "ConsistentRead": True},
            policy=policy_for(self.Meta))
        item = response.get("Item")
        return dict(item) if item is not None else None
