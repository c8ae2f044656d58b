"""Keep lock items out of a model's reads: refuse reserved keys, filter them out of scans.

A lock item shares the table of the records it protects (hash key ``UNIQ#...``, range key
``LOCK``), so PynamoDB's reads could meet one. These are the checks and the filter that
``Model``'s ``get``, ``query``, ``scan`` and ``count`` apply, and the marking of partial
projections, which are never taken as a loaded state.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path
from pynamodb.pagination import ResultIterator

from dynaunique._lock.locks import LOCK_SORT_KEY, RESERVED_PREFIX, is_reserved_key
from dynaunique._model.binding import table_holds_locks
from dynaunique._model.instance import InstanceMixin, read_steps
from dynaunique._transport.clients import connection_for
from dynaunique._transport.connection import Steps, policy_for
from dynaunique.errors import ConfigurationError, InvalidValueError

_R = TypeVar("_R", bound="ReadMixin")
_T = TypeVar("_T")


def mark_partial(result: ResultIterator[_T], attributes_to_get: Any) -> ResultIterator[_T]:
    """``result``, its objects marked "never loaded" when it is a projection."""
    if attributes_to_get is None:
        return result
    original = result._map_fn

    def load_partial(data: Any) -> Any:
        instance = original(data) if original is not None else data
        if isinstance(instance, InstanceMixin):
            # A projection is not the record: never diff locks against it.
            instance._du_loaded = None
        return instance

    result._map_fn = load_partial
    return result


class ReadMixin(InstanceMixin):
    """The guards of a model's reads, and the one read dynaunique sends itself (``aget``)."""

    @classmethod
    def _du_table_holds_locks(cls) -> bool:
        """Whether this table holds lock items: a model defined in this process declares a
        constraint on it, or marks it with ``Meta.holds_locks = True``.

        Decided from the registry of lock names per table, so a model without constraints that
        shares its table with one that has them still keeps lock items out of its reads. A table
        whose models declare none holds no lock items, and its reads are PynamoDB's, unchanged.
        """
        return table_holds_locks(getattr(getattr(cls, "Meta", None), "table_name", None) or "")

    @classmethod
    def _du_not_lock(cls) -> Condition | None:
        """The filter that keeps lock items out of a scan; None when the table holds none."""
        if not cls._du_table_holds_locks():
            return None
        info = cls._du_info
        hash_attr = info.hash_attr if info is not None else cls._hash_keyname or ""
        condition: Condition = ~Path(hash_attr).startswith(RESERVED_PREFIX)
        return condition

    @classmethod
    def _du_check_key(cls, hash_key: Any) -> None:
        if is_reserved_key(hash_key):
            raise InvalidValueError(
                f"{hash_key!r} starts with 'UNIQ#', which is reserved for dynaunique's lock items"
            )

    @classmethod
    def _du_check_keys(cls, items: Any) -> list[Any]:
        """``batch_get``'s keys as a list, each hash key checked (:meth:`_du_check_key`)."""
        keys = list(items)
        for item in keys:
            ranged = cls._range_keyname and isinstance(item, (tuple, list)) and item
            cls._du_check_key(item[0] if ranged else item)
        return keys

    @classmethod
    def _du_check_query_key(cls, hash_key: Any, index_name: str | None) -> None:
        """Refuse a query that could only return lock items.

        A lock's hash key starts with ``UNIQ#`` and its range key is ``LOCK``; an index keyed
        on the table's range key (an inverted index) would list the locks under ``LOCK``.
        """
        if not cls._du_table_holds_locks():
            return  # no lock items to reach: the query is PynamoDB's
        if not index_name:
            cls._du_check_key(hash_key)
            return
        info = cls._du_info
        index = cls._indexes.get(index_name)
        if info is None or index is None:
            return
        index_hash = next((a.attr_name for a in index.Meta.attributes.values()
                           if a.is_hash_key), None) if hasattr(index.Meta, "attributes") else None
        if index_hash == info.hash_attr:
            cls._du_check_key(hash_key)
        elif index_hash is not None and index_hash == info.range_attr and hash_key == LOCK_SORT_KEY:
            raise InvalidValueError(
                f"querying {index_name} for {LOCK_SORT_KEY!r} would list dynaunique's lock items "
                "(an index keyed on the table's range key sees them); that value is reserved"
            )

    @classmethod
    def _du_get_steps(cls: type[_R], hash_key: Any, range_key: Any,
                      consistent_read: bool) -> Steps[_R]:
        """One GetItem of the record with these keys, loaded with its snapshot."""
        cls._du_check_key(hash_key)
        info = cls._du_info
        if info is None:
            raise ConfigurationError(f"{cls.__name__} has no Meta.table_name")
        item = yield from read_steps(connection_for(cls), policy_for(cls.Meta), info.table,
                                     cls._du_key_of(hash_key, range_key),
                                     consistent=consistent_read)
        if not item:
            raise cls.DoesNotExist()
        return cls.from_raw_data(item)
