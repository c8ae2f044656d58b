"""Make moto's DynamoDB cost what the request touches, not the size of the table.

The local server (:mod:`dynaunique.testing`) applies this patch in its own process at start; nothing
else imports it. Stock moto 5.x does three things per request that grow with the table:

- ``DynamoDBBackend.transact_write_items`` takes a ``copy.deepcopy`` of every table an item of the
  transaction names, once per item, so it can roll back: O(items x table size) per transaction.
  Here it keeps an *undo log* instead — the prior state of each item the transaction touches —
  and on failure restores exactly those items.
- ``Table.query`` on the table's own key sorts every item of the table, then keeps one partition.
  Here it is handed that partition only (a secondary-index query still reads the whole table).
- ``Table.scan`` sorts every item of the table for every page, then walks from the first item to
  the page's ``ExclusiveStartKey``. Here each table keeps its keys sorted (maintained on every put
  and delete once the first scan built it), and a page starts by bisection.

It also makes the item size limit DynamoDB's: moto re-sums an item's size on every attribute it
sets (O(attributes^2) per item) against its own count and a 405,000-byte cut-off. Here an item
is checked once, counted as DynamoDB counts it (:func:`dynaunique.testing._server_rules.item_size`)
against 400 KB: a put by the server's request checks, an ``UpdateItem`` after it ran (and is
undone if the item grew too large).

Everything else is moto's own code: the replacements call the original functions with a narrower
view of the table, and the transaction is moto's algorithm with the backup swapped for the log.
:func:`check` lists what this patch expects of moto's internals, so a moto release that moves
them fails loudly (the server refuses to start, and a test names what moved) instead of silently
running slow or wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from dynaunique.testing._moto_fast import (
    bisected_scan,
    indexed_delete_item,
    indexed_put_item,
    partition_query,
    size_checked_update,
    transact_write_items,
    unchecked_setitem,
)

__all__ = ["EXPECTED_SIGNATURES", "MotoPatchError", "apply", "check", "is_applied"]

#: Every moto function this patch replaces or calls into, with the parameters it relies on.
EXPECTED_SIGNATURES: dict[str, tuple[str, ...]] = {
    "moto.dynamodb.models.DynamoDBBackend.transact_write_items": ("self", "transact_items"),
    "moto.dynamodb.models.DynamoDBBackend.get_item": (
        "self", "table_name", "keys", "projection_expressions",
    ),
    "moto.dynamodb.models.DynamoDBBackend.get_table": ("self", "table_name"),
    "moto.dynamodb.models.DynamoDBBackend.get_keys_value": ("self", "table", "keys"),
    "moto.dynamodb.models.DynamoDBBackend.put_item": (
        "self", "table_name", "item_attrs", "expected", "condition_expression",
        "expression_attribute_names", "expression_attribute_values", "overwrite",
        "return_values_on_condition_check_failure",
    ),
    "moto.dynamodb.models.DynamoDBBackend.delete_item": (
        "self", "table_name", "key", "expression_attribute_names",
        "expression_attribute_values", "condition_expression",
        "return_values_on_condition_check_failure",
    ),
    "moto.dynamodb.models.DynamoDBBackend.update_item": (
        "self", "table_name", "key", "update_expression", "expression_attribute_names",
        "expression_attribute_values", "attribute_updates", "expected", "condition_expression",
        "return_values_on_condition_check_failure",
    ),
    "moto.dynamodb.models.table.Table.put_item": (
        "self", "item_attrs", "expected", "condition_expression", "expression_attribute_names",
        "expression_attribute_values", "overwrite", "return_values_on_condition_check_failure",
    ),
    "moto.dynamodb.models.table.Table.delete_item": ("self", "hash_key", "range_key"),
    "moto.dynamodb.models.table.Table.all_items": ("self",),
    "moto.dynamodb.models.table.Table.query": (
        "self", "hash_key", "range_comparison", "range_objs", "limit", "exclusive_start_key",
        "scan_index_forward", "projection_expressions", "index_name", "consistent_read",
        "filter_expression", "hash_key_conditions", "range_key_conditions", "filter_kwargs",
    ),
    "moto.dynamodb.models.table.Table.scan": (
        "self", "filters", "limit", "exclusive_start_key", "filter_expression", "index_name",
        "consistent_read", "projection_expression", "segments",
    ),
    "moto.dynamodb.models.dynamo_type.LimitedSizeDict.__setitem__": ("self", "key", "value"),
}

#: Module-level names the replacement transaction uses, as ``module: names``.
EXPECTED_NAMES: dict[str, tuple[str, ...]] = {
    "moto.dynamodb.comparisons": ("get_filter_expression",),
    "moto.dynamodb.exceptions": (
        "ConditionalCheckFailed",
        "MockValidationException",
        "MultipleTransactionsException",
        "TooManyTransactionsException",
        "TransactionCanceledException",
        "TransactWriteSingleOpException",
        "ItemSizeToUpdateTooLarge",
    ),
    "moto.dynamodb.models.table": ("Table", "StreamShard"),
    "moto.dynamodb.models.dynamo_type": ("DynamoType", "Item", "LimitedSizeDict"),
}

# Set on the patched functions, so that applying twice is harmless and a test can tell.
_MARK = "__dynaunique_patched__"


class MotoPatchError(RuntimeError):
    """moto's internals are not what this patch was written against; the message says what moved."""


def check() -> list[str]:
    """Every way the installed moto differs from what this patch expects; ``[]`` if none."""
    import importlib

    problems: list[str] = []
    for dotted, expected in EXPECTED_SIGNATURES.items():
        module_name, _, rest = dotted.rpartition(".")
        module_name, _, class_name = module_name.rpartition(".")
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
            function = getattr(owner, rest)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{dotted} is gone ({exc})")
            continue
        function = getattr(function, "__wrapped__", function)
        actual = tuple(inspect.signature(function).parameters)
        if actual != expected:
            problems.append(f"{dotted} takes {actual}, this patch expects {expected}")
    for module_name, names in EXPECTED_NAMES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            problems.append(f"module {module_name} is gone ({exc})")
            continue
        problems.extend(
            f"{module_name}.{name} is gone" for name in names if not hasattr(module, name)
        )
    return problems


def is_applied() -> bool:
    """Whether :func:`apply` has patched moto in this process."""
    from moto.dynamodb.models import DynamoDBBackend

    return bool(getattr(DynamoDBBackend.transact_write_items, _MARK, False))


def apply() -> None:
    """Patch moto's DynamoDB in this process (idempotent).

    Raises:
        MotoPatchError: the installed moto does not have the functions this patch replaces, with
            the signatures it expects; the message names each one that moved.
    """
    problems = check()
    if problems:
        import moto

        raise MotoPatchError(
            f"dynaunique's moto patch does not fit moto {moto.__version__}: " + "; ".join(problems)
        )
    if is_applied():
        return
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.models.table import Table

    replacements: list[tuple[type, str, Callable[..., Any]]] = [
        (DynamoDBBackend, "transact_write_items", lambda _: transact_write_items),
        (Table, "put_item", indexed_put_item),
        (Table, "delete_item", indexed_delete_item),
        (Table, "query", partition_query),
        (Table, "scan", bisected_scan),
        (DynamoDBBackend, "update_item", size_checked_update),
        (LimitedSizeDict, "__setitem__", lambda _: unchecked_setitem),
    ]
    for owner, name, make in replacements:
        original = getattr(owner, name)
        setattr(owner, name, _marked(make(original), original))


def _marked(replacement: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    replacement.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(replacement, _MARK, True)
    return replacement
