"""moto's DynamoDB functions as :mod:`dynaunique.testing._moto_patch` replaces them: same
algorithms, costing what the request touches (sorted keys for scans, a partition for queries, an
undo log for transactions, DynamoDB's item size).
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Iterator
from typing import Any

# Set on the tables the patch has indexed: their keys, kept sorted.
_INDEX = "_dynaunique_sorted_keys"


# --- sorted keys: moto's scan order, kept up to date instead of re-sorted per page -------------


def _sort_key(item: Any) -> Any:
    """The key moto's ``Table.all_items`` sorts by (hash key, then range key if any)."""
    return (item.hash_key, item.range_key) if item.range_key else item.hash_key


class _SortedKeys:
    """A table's item keys in moto's scan order, with O(log n) insert, delete and seek."""

    def __init__(self, items: list[Any]) -> None:
        self.keys = sorted(_sort_key(item) for item in items)
        self.members = set(self.keys)

    def add(self, key: Any) -> None:
        if key not in self.members:
            self.members.add(key)
            bisect.insort(self.keys, key)

    def discard(self, key: Any) -> None:
        if key in self.members:
            self.members.discard(key)
            del self.keys[bisect.bisect_left(self.keys, key)]


def _sorted_keys(table: Any) -> _SortedKeys:
    index: _SortedKeys | None = table.__dict__.get(_INDEX)
    if index is None:
        index = _SortedKeys(table.all_items())
        table.__dict__[_INDEX] = index
    return index


def _stored(table: Any, key: Any) -> Any:
    """The item stored under a sort key, or ``None`` (never creates a partition)."""
    if isinstance(key, tuple):
        return table.items.get(key[0], {}).get(key[1])
    return table.items.get(key)


def indexed_put_item(original: Callable[..., Any]) -> Callable[..., Any]:
    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original(self, *args, **kwargs)
        index = self.__dict__.get(_INDEX)
        if index is not None:
            index.add(_sort_key(item))
        return item

    return put_item


def indexed_delete_item(original: Callable[..., Any]) -> Callable[..., Any]:
    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        item = original(self, hash_key, range_key)
        index = self.__dict__.get(_INDEX)
        if index is not None and item is not None:
            index.discard(_sort_key(item))
        return item

    return delete_item


class _TableView:
    """A table as moto's query/scan code sees it, with ``all_items`` narrowed to ``items``."""

    def __init__(self, table: Any, items: Callable[[], Any]) -> None:
        self._table = table
        self.all_items = items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def partition_query(original: Callable[..., Any]) -> Callable[..., Any]:
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name or hash_key is None:
            return original(self, hash_key, *args, **kwargs)

        def partition() -> list[Any]:
            stored = self.items.get(hash_key)
            if stored is None:
                return []
            return list(stored.values()) if self.range_key_attr else [stored]

        return original(_TableView(self, partition), hash_key, *args, **kwargs)

    return query


def bisected_scan(original: Callable[..., Any]) -> Callable[..., Any]:
    def scan(self: Any, filters: Any, limit: Any, exclusive_start_key: Any, *args: Any,
             **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[1] if len(args) > 1 else None)
        if index_name:
            return original(self, filters, limit, exclusive_start_key, *args, **kwargs)
        index = _sorted_keys(self)
        start = 0
        if exclusive_start_key is not None:
            from moto.dynamodb.models.dynamo_type import DynamoType

            start_key: Any = DynamoType(exclusive_start_key[self.hash_key_attr])
            if self.range_key_attr is None:
                # moto's own loop then skips the start key itself if it is still there.
                start = bisect.bisect_left(index.keys, start_key)
            elif self.range_key_attr in exclusive_start_key:
                start_key = (start_key, DynamoType(exclusive_start_key[self.range_key_attr]))
                start = bisect.bisect_left(index.keys, start_key)
            # (a start key without the range key: moto's loop seeks from the first item)

        def from_start() -> Iterator[Any]:
            # A generator: moto stops reading at the page limit, so a page costs its own size.
            for key in index.keys[start:]:
                item = _stored(self, key)
                if item is not None:
                    yield item

        return original(
            _TableView(self, from_start), filters, limit, exclusive_start_key, *args, **kwargs
        )

    return scan


# --- item size, as DynamoDB counts it ---------------------------------------------------------


def unchecked_setitem(self: dict[str, Any], key: str, value: Any) -> None:
    dict.__setitem__(self, key, value)


def _wire(value: Any) -> dict[str, Any]:
    """A moto ``DynamoType`` back in wire format (binaries stay bytes), for sizing."""
    if value.type == "L":
        return {"L": [_wire(element) for element in value.value]}
    if value.type == "M":
        return {"M": {name: _wire(element) for name, element in value.value.items()}}
    return {value.type: value.value}


def size_checked_update(original: Callable[..., Any]) -> Callable[..., Any]:
    def update_item(self: Any, table_name: str, key: Any, *args: Any, **kwargs: Any) -> Any:
        from moto.dynamodb.exceptions import ItemSizeToUpdateTooLarge, MockValidationException

        from dynaunique.testing._server_rules import MAX_ITEM_BYTES, item_size

        table = self.get_table(table_name)
        try:
            hash_value, range_value = self.get_keys_value(table, key)
        except MockValidationException:  # an incomplete key: moto's own error, as it words it
            return original(self, table_name, key, *args, **kwargs)
        before = copy.deepcopy(table.get_item(hash_value, range_value))
        shard = table.stream_shard
        records = len(shard.items) if shard is not None else 0
        item = original(self, table_name, key, *args, **kwargs)
        if item_size({name: _wire(v) for name, v in item.attrs.items()}) > MAX_ITEM_BYTES:
            _restore(table, hash_value, range_value, before)
            if shard is not None:
                # moto appended the update's stream record: a refused update leaves none.
                del shard.items[records:]
            raise ItemSizeToUpdateTooLarge()
        return item

    return update_item


# --- TransactWriteItems with an undo log ------------------------------------------------------


def _restore(table: Any, hash_value: Any, range_value: Any, before: Any) -> None:
    """Put ``before`` (an item, or ``None`` for none) back under its key, keeping the index."""
    index = table.__dict__.get(_INDEX)
    if range_value is not None:
        partition = table.items.get(hash_value)
        if partition is not None:
            partition.pop(range_value, None)
    else:
        table.items.pop(hash_value, None)
    if index is not None:
        index.discard((hash_value, range_value) if range_value is not None else hash_value)
    if before is not None:
        if range_value is not None:
            table.items[hash_value][range_value] = before
        else:
            table.items[hash_value] = before
        if index is not None:
            index.add(_sort_key(before))


class _UndoLog:
    """The prior state of each item a transaction touched, to put back if it is cancelled."""

    def __init__(self) -> None:
        self._entries: list[tuple[Any, Any, Any, Any]] = []
        self._streams: dict[int, tuple[Any, int]] = {}

    def remember(self, table: Any, hash_value: Any, range_value: Any) -> None:
        current = table.get_item(hash_value, range_value)
        # An Update changes the stored item in place, so keep a copy of this one item.
        self._entries.append((table, hash_value, range_value, copy.deepcopy(current)))
        shard = table.stream_shard
        if shard is not None and id(table) not in self._streams:
            self._streams[id(table)] = (shard, len(shard.items))

    def roll_back(self) -> None:
        for table, hash_value, range_value, before in reversed(self._entries):
            _restore(table, hash_value, range_value, before)
        # A cancelled transaction leaves no stream records, as a restored table copy would not.
        for shard, length in self._streams.values():
            del shard.items[length:]


def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:  # noqa: C901, PLR0912, PLR0915  # moto's function, line for line
    """moto 5.2.5's ``DynamoDBBackend.transact_write_items``, rolled back by an undo log.

    Differs from moto only in what it saves before writing: instead of a deep copy of each table
    named in the transaction (taken once per item), the prior state of each item it writes.
    """
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo = _UndoLog()
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[Any, Any, Any]] = []  # [(Code, Message, Item), ..]
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            expression_attribute_names = op.get("ExpressionAttributeNames")
            expression_attribute_values = op.get("ExpressionAttributeValues")
            return_values_on_condition_check_failure = op.get(
                "ReturnValuesOnConditionCheckFailure"
            )
            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(
                    condition_expression, expression_attribute_names, expression_attribute_values
                )
                if not condition_op.expr(current):
                    if return_values_on_condition_check_failure == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type != "ConditionCheck":
                table = self.get_table(table_name)
                undo.remember(table, *self.get_keys_value(table, key))
            guard = {
                "condition_expression": condition_expression,
                "expression_attribute_names": expression_attribute_names,
                "expression_attribute_values": expression_attribute_values,
            }
            if op_type == "Put":
                self.put_item(table_name, op["Item"], **guard)
            elif op_type == "Delete":
                self.delete_item(table_name, key, **guard)
            elif op_type == "Update":
                self.update_item(table_name, key, update_expression=op["UpdateExpression"], **guard)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            undo.roll_back()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))
        except Exception as e:  # moto reports any other failure as that item's reason
            errors.append((type(e).__name__, str(e), original_item))

    if any(code is not None for code, _, _ in errors):
        undo.roll_back()
        raise TransactionCanceledException(errors)
