"""What a Model instance remembers: the item it was loaded from, its key, that item's locks.

Each instance keeps one :class:`~dynaunique._flush.InstanceState`: the item as last loaded from
or written to DynamoDB (the snapshot the next write guards on and diffs against), and caches of
the locks a snapshot holds. A snapshot is replaced, never mutated, and only after a write
succeeded (:meth:`InstanceMixin._du_finish_steps`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dynaunique._connection import Steps, connection_for, policy_for, send_steps
from dynaunique._flush import InstanceState, Op, OpKind
from dynaunique._items import LockRef, ModelInfo, locks_of
from dynaunique._transaction import same_item
from dynaunique._writes import RecordPut, RecordUpdate, Write

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

    @property
    def _du_state(self) -> InstanceState:
        """Everything dynaunique remembers of this instance (``dynaunique._flush``)."""
        state = self.__dict__.get("_du_state_")
        if state is None:
            state = self.__dict__["_du_state_"] = InstanceState()
        return state

    @property
    def _du_loaded(self) -> dict[str, Any] | None:
        """The item as last loaded from or written to DynamoDB (None: never loaded)."""
        return self._du_state.loaded

    @_du_loaded.setter
    def _du_loaded(self, item: dict[str, Any] | None) -> None:
        state = self._du_state
        state.loaded = item
        state.unknown = None

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
        # The loaded state's locks are computed once per snapshot (snapshots are replaced, never
        # mutated), so repeated saves of one loaded object do not rebuild it.
        state = self._du_state
        cached = state.old_locks
        if cached is not None and cached[0] is loaded:
            if reads is not None:
                reads.update(cached[2])
            return dict(cached[1])
        found: set[str] = set()
        locks = locks_of(info, self._du_lock_inputs(loaded), found)
        state.old_locks = (loaded, locks, frozenset(found))
        if reads is not None:
            reads.update(found)
        return dict(locks)

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

    def _du_may_adopt(self, op: Op, current: Mapping[str, Any] | None) -> bool:
        """Whether a never-loaded save that met an existing record may become an update of it.

        Not when the model is versioned and the object's version does not match the stored
        one: PynamoDB refuses that save (its first save is guarded ``attribute_not_exists``,
        later ones on the version held), and so does dynaunique.
        """
        info = self._du_info
        assert info is not None
        if current is None or not op.add_version_condition or info.version_field is None:
            return True
        mine = getattr(self, info.version_field)
        stored = current.get(info.version_attr or "")
        return mine is not None and stored is not None and int(stored["N"]) == int(mine)

    def _du_finish_steps(self, op: Op, record: Write | None,
                         response: Mapping[str, Any]) -> Steps[None]:
        """After the unit succeeded: this object's new snapshot (one read when it is unknown)."""
        if op.kind is OpKind.DELETE:
            self._du_loaded = None
            return
        if op.kind is OpKind.SAVE:
            assert isinstance(record, RecordPut)
            self._du_after_save(record.item, record)
            return
        # An update: a plain UpdateItem returns the new item; a transaction (or a write found
        # already in place) returns none, so the known prediction is used, else one read.
        attributes = response.get("Attributes")
        if attributes is not None:
            self.deserialize(attributes)
        elif isinstance(record, RecordUpdate) and record.predicted is not None:
            self.deserialize(copy.deepcopy(record.predicted))
        else:
            item = yield from self._du_read_steps()
            if item is None:
                raise self.DoesNotExist("This item does not exist in the table.")
            self.deserialize(item)

    def _du_after_save(self, item: Mapping[str, Any], record: Write | None = None) -> None:
        """``item`` was written: it is the new snapshot (and the version the object holds)."""
        info = self._du_info
        assert info is not None
        state = self._du_state
        if info.version_field is not None and info.version_attr in item:
            setattr(self, info.version_field, int(item[info.version_attr or ""]["N"]))
        # The item was serialized for this write alone and nothing mutates it: no copy.
        loaded = dict(item)
        self._du_loaded = loaded
        seeded, state.new_locks = state.new_locks, None
        if seeded is not None and any(w is record for w in seeded[0].writes):
            # The locks just written are the new snapshot's: the next save need not rebuild.
            state.old_locks = (loaded, seeded[1], seeded[2])
