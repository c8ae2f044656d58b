"""The one way migrations talk to DynamoDB: the call boundary, batch reads and deletes, and a
table's key schema.

:func:`call` sends through the one boundary; a failure becomes a
:class:`~dynaunique.errors.MigrationError` by the library's one mapping
(``dynaunique._transport.answers.error_for``), a failed condition a :class:`ConditionFailed` the
caller interprets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id
from dynaunique._lock.locks import lock_primary_key
from dynaunique._transport.answers import Refused, error_for
from dynaunique._transport.connection import RetryPolicy, exchange, in_batches
from dynaunique.errors import ConfigurationError, MigrationError

#: The attribute holding all of a ledger item's data (no index may be keyed on it).
LEDGER_ATTR = "ledger"

#: Bulk work tolerates longer waits than a user's save: throttling is expected under a cap.
BULK_POLICY = RetryPolicy(max_conflict_retries=12, max_network_retries=6, base_delay=0.05,
                          max_delay=5.0)

class MissingTableError(MigrationError, ConfigurationError):
    """The table is not there (or the endpoint or region is wrong): a configuration mistake,
    exit status 2."""

    exit_code = 2


class ConditionFailed(Exception):
    """A conditional write's condition did not hold; ``item`` is the item as it is (or None).

    For a cancelled transaction, ``reasons`` are its ``CancellationReasons``, slot by slot (at
    least one a ``ConditionalCheckFailed``). Internal: callers always catch it and decide what
    the failure means.
    """

    def __init__(self, item: Mapping[str, Any] | None,
                 reasons: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__("condition failed")
        self.item = dict(item) if item is not None else None
        self.reasons = [dict(reason) for reason in reasons]


def call(connection: Any, operation: str, *, policy: RetryPolicy = BULK_POLICY,
         sleep: Any = time.sleep, on_throttle: Callable[[str], None] | None = None,
         **params: Any) -> dict[str, Any]:
    """Send ``operation`` (``"put_item"``…) through dynaunique's one boundary and retry loop
    (``on_throttle(code)``: told of each throttling refusal, see ``_connection.send``).

    Every write migrations send is idempotent (guarded by ownership, or a plain overwrite of a
    ledger item), so resending after an ambiguous failure is safe.

    :raises ConditionFailed: the request's condition did not hold (a transaction's: one of
        its conditions, the reasons say which).
    :raises MigrationError: any other refusal, or the retries ran out.
    """
    name = "".join(part.title() for part in operation.split("_"))
    answer = exchange(connection, name, params, policy=policy, sleep=sleep,
                      on_throttle=on_throttle, error=MigrationError)
    if isinstance(answer, Refused):
        if answer.code == "ConditionalCheckFailedException":
            raise ConditionFailed(answer.response.get("Item")) from None
        reasons = answer.response.get("CancellationReasons") or []
        if answer.code == "TransactionCanceledException" and any(
                r.get("Code") == "ConditionalCheckFailed" for r in reasons):
            raise ConditionFailed(None, reasons) from None
        raise error_for(answer, name, params, error=MigrationError, missing=MissingTableError)
    return answer.data


def batch_get(connection: Any, table: str, keys: Sequence[Mapping[str, Any]], *,
              consistent: bool = True) -> list[dict[str, Any]]:
    """Strongly consistent BatchGetItem of any number of keys (chunks of 100, retries the
    unprocessed ones); the items found, in no particular order."""
    found: list[dict[str, Any]] = []

    def send_chunk(chunk: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        response = call(connection, "batch_get_item", RequestItems={
            table: {"Keys": [dict(k) for k in chunk], "ConsistentRead": consistent}
        })
        found.extend(response.get("Responses", {}).get(table, []))
        return list(response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", []))

    in_batches(list({key_id(k): k for k in keys}.values()), 100, send_chunk,
               policy=BULK_POLICY, what="BatchGetItem keys", error=MigrationError)
    return found


def batch_delete(connection: Any, table: str, keys: Sequence[Mapping[str, Any]]) -> None:
    """Unconditional BatchWriteItem deletes (chunks of 25), for ledger items only."""

    def send_chunk(chunk: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        response = call(connection, "batch_write_item", RequestItems={
            table: [{"DeleteRequest": {"Key": dict(k)}} for k in chunk]
        })
        return [r["DeleteRequest"]["Key"] for r in response.get("UnprocessedItems", {})
                .get(table, [])]

    in_batches(keys, 25, send_chunk, policy=BULK_POLICY, what="BatchWriteItem requests",
               error=MigrationError)


@attrs.frozen
class TableKeys:
    """A table's key schema as DescribeTable reports it, for building ledger and lock keys."""

    table: str
    hash_attr: str
    range_attr: str | None
    #: Key attributes of the table's indexes: no ledger or lock attribute may be one of them.
    index_attrs: frozenset[str] = frozenset()
    #: DescribeTable's approximate item count (refreshed every ~6 hours by DynamoDB).
    item_count: int = 0

    @property
    def key_attributes(self) -> tuple[str, str | None]:
        """Hash and range key attribute names."""
        return self.hash_attr, self.range_attr

    def key(self, hash_value: str) -> dict[str, Any]:
        """The typed primary key of a dynaunique item with this hash key value."""
        return lock_primary_key(self.key_attributes, hash_value)


def describe_table(connection: Any, table: str) -> TableKeys:
    """Read ``table``'s key schema; it must have string keys (as lock items need)."""
    description = call(connection, "describe_table", TableName=table)["Table"]
    types = {a["AttributeName"]: a["AttributeType"]
             for a in description.get("AttributeDefinitions", [])}
    hash_attr = range_attr = None
    for element in description["KeySchema"]:
        if element["KeyType"] == "HASH":
            hash_attr = element["AttributeName"]
        else:
            range_attr = element["AttributeName"]
    assert hash_attr is not None
    for attr in (hash_attr, range_attr):
        if attr is not None and types.get(attr) != "S":
            raise MigrationError(f"table {table!r} has a non-string key attribute {attr!r}; "
                                 "dynaunique's lock and ledger items need string keys")
    index_attrs = set()
    for index in (description.get("GlobalSecondaryIndexes", [])
                  + description.get("LocalSecondaryIndexes", [])):
        for element in index.get("KeySchema", []):
            index_attrs.add(element["AttributeName"])
    if LEDGER_ATTR in index_attrs:
        raise MigrationError(f"an index of table {table!r} is keyed on {LEDGER_ATTR!r}, the "
                             "attribute dynaunique's ledger items use; rename that attribute")
    return TableKeys(table, hash_attr, range_attr, frozenset(index_attrs),
                     int(description.get("ItemCount", 0) or 0))

