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
undone, with the stream record moto appended for it, if the item grew too large).

Two things moto's server redoes on every request never change while it runs, and cost more than
half its CPU on a small request: the dispatcher lists (and stats) every entry of moto's package
folder to recognise a service name (``moto.backends.list_of_moto_modules``), and each response
object inspects its class's methods (``method_names_from_class``). Here both are computed once.
And moto parses a condition expression three times per request (and per item of a transaction):
here each distinct one is parsed once (:mod:`dynaunique.testing._moto_cond` says why that is safe).
Three of moto's expression functions answer as DynamoDB does (:mod:`dynaunique.testing._moto_exprs`:
``begins_with`` on binary values, ``size()`` of a missing attribute, a ``#name[0]`` projection).
moto's request id is drawn without a call per character, and the server's HTTP front (set up by
the server itself, :mod:`dynaunique.testing._moto_front`) keeps connections open: these rely on
Python's standard library and werkzeug, which are not pinned, so :func:`front` checks them apart
and a piece that does not fit this Python is left out (the server answers as stock moto does),
never refused.

Everything else is moto's own code: the replacements call the original functions with a narrower
view of the table, and the transaction is moto's algorithm with the backup swapped for the log.
:func:`check` lists what this patch expects of moto's internals, so a moto release that moves
them fails loudly (the server refuses to start, and a test names what moved) instead of silently
running slow or wrong: each function it replaces or calls into must exist, take the parameters it
passes, and have the very source it was verified against (a hash of ``inspect.getsource``,
recorded for the moto releases in :data:`VERIFIED_MOTO`). A release whose source differs is
refused unless ``DYNAUNIQUE_MOTO_PATCH_FORCE=1`` (:data:`FORCE_ENV`) says to patch it anyway;
``DYNAUNIQUE_STOCK_MOTO=1`` runs stock moto instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dynaunique.testing import _moto_cond, _moto_exprs, _moto_front
from dynaunique.testing._moto_check import ABSENT, difference, find, source_hash
from dynaunique.testing._moto_fast import (
    bisected_scan,
    indexed_delete_item,
    indexed_put_item,
    partition_query,
    size_checked_update,
    transact_write_items,
    unchecked_setitem,
)
from dynaunique.testing._moto_json import serialize_result

__all__ = [
    "ABSENT",
    "EXPECTED_SIGNATURES",
    "EXPECTED_SOURCES",
    "FORCE_ENV",
    "VERIFIED_MOTO",
    "MotoPatchError",
    "apply",
    "check",
    "fitting_front",
    "front",
    "installed_hashes",
    "is_applied",
    "source_hash",
]

#: The moto releases this patch was verified against: the differential test
#: (tests/integration/test_local_server_patch.py) and the server's tests passed on them, and the
#: functions below have the same source in each (pyproject.toml pins the same range).
VERIFIED_MOTO = "5.2.0 to 5.2.5"

#: Set to ``1`` to apply the patch to a moto whose functions' source differs from the verified
#: releases' (a missing function or a changed signature is refused all the same).
FORCE_ENV = "DYNAUNIQUE_MOTO_PATCH_FORCE"

#: The parameters of each step of moto's JSON response serializer's walk over a shape.
_WALK = ("self", "serialized", "value", "shape", "key")

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
    "moto.dynamodb.models.table.StreamShard.add": ("self", "old", "new"),
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
    "moto.backends.list_of_moto_modules": (),
    "moto.core.responses.method_names_from_class": ("clazz",),
    # The JSON response serializer: the one replaced, and all it does that the compiled
    # walk (_moto_json) reproduces, down to how a value is picked out of a result.
    **{f"moto.core.serialize.{name}": params for name, params in {
        "ResponseSerializer._serialize_result": ("self", "resp", "result"),
        "ResponseSerializer._serialize": _WALK,
        "ResponseSerializer._default_serialize": _WALK,
        "ResponseSerializer._serialize_type_structure": _WALK,
        "ResponseSerializer._serialize_structure_member": _WALK,
        "ResponseSerializer._serialize_type_timestamp": _WALK,
        "ResponseSerializer._serialize_type_blob": _WALK,
        "ResponseSerializer._serialize_type_integer": _WALK,
        "ResponseSerializer._serialize_type_float": _WALK,
        "ResponseSerializer._base64": ("self", "value"),
        "ResponseSerializer.get_value": ("self", "value", "key", "shape"),
        "ResponseSerializer.get_serialized_name": ("self", "shape", "default_name"),
        "BaseJSONSerializer._serialize_type_map": _WALK,
        "BaseJSONSerializer._serialize_type_list": _WALK,
        "BaseJSONSerializer._serialize_type_structure": _WALK,
        "BaseJSONSerializer._serialize_type_string": _WALK,
        "AttributePicker.__call__": ("self", "context"),
        "AttributePicker.get_possible_keys": ("self", "context"),
        "XFormedAttributePicker.get_possible_keys": ("self", "context"),
        "ExplicitAlias.has_alias": ("self", "key"),
        "ClassPrefixAlias.has_alias": ("self", "key"),
    }.items()},
    "moto.core.utils.get_value": ("obj", "key", "default"),
    "moto.core.utils._get_value_for_key": ("obj", "key", "default"),
    # The condition expression parse, remembered: the parser and the tree's classes.
    **_moto_cond.SIGNATURES,
    # Expression functions answered as DynamoDB answers them.
    **_moto_exprs.SIGNATURES,
}

#: :func:`source_hash` of each function above, as in the :data:`VERIFIED_MOTO` releases (a set per
#: function, so a release that changed one function can be added beside the older ones).
EXPECTED_SOURCES: dict[str, frozenset[str]] = {
    "moto.dynamodb.models.DynamoDBBackend.transact_write_items": frozenset({"81db2cb7d94e"}),
    "moto.dynamodb.models.DynamoDBBackend.get_item": frozenset({"290b95c46b38"}),
    "moto.dynamodb.models.DynamoDBBackend.get_table": frozenset({"a738146035fc"}),
    "moto.dynamodb.models.DynamoDBBackend.get_keys_value": frozenset({"1f948797496d"}),
    "moto.dynamodb.models.DynamoDBBackend.put_item": frozenset({"f5d9a5042c77"}),
    "moto.dynamodb.models.DynamoDBBackend.delete_item": frozenset({"083a4bb1af18"}),
    "moto.dynamodb.models.DynamoDBBackend.update_item": frozenset({"218984588dd6"}),
    "moto.dynamodb.models.table.Table.put_item": frozenset({"de23933013ef"}),
    "moto.dynamodb.models.table.Table.delete_item": frozenset({"1594f7b07616"}),
    "moto.dynamodb.models.table.StreamShard.add": frozenset({"357dc6da267e"}),
    "moto.dynamodb.models.table.Table.all_items": frozenset({"c80d2ee3c896"}),
    "moto.dynamodb.models.table.Table.query": frozenset({"002b4d00be6d"}),
    "moto.dynamodb.models.table.Table.scan": frozenset({"5ef1ab21eef0"}),
    "moto.dynamodb.models.dynamo_type.LimitedSizeDict.__setitem__": frozenset({"d979580fdbe1"}),
    "moto.backends.list_of_moto_modules": frozenset({"4f741a10b065"}),
    "moto.core.responses.method_names_from_class": frozenset({"9dbac89d082b"}),
    **{f"moto.core.serialize.{name}": frozenset({digest}) for name, digest in {
        "ResponseSerializer._serialize_result": "279351f4cb0e",
        "ResponseSerializer._serialize": "4eccca5bf025",
        "ResponseSerializer._default_serialize": "25ce8ddbb1a9",
        "ResponseSerializer._serialize_type_structure": "f9b47068f40c",
        "ResponseSerializer._serialize_structure_member": "437fdce43aa5",
        "ResponseSerializer._serialize_type_timestamp": "d7a3cfcabffc",
        "ResponseSerializer._serialize_type_blob": "acd7e746cf06",
        "ResponseSerializer._serialize_type_integer": "57e0b6b7148e",
        "ResponseSerializer._serialize_type_float": "24c40ea849f6",
        "ResponseSerializer._base64": "5a3642d8c2a1",
        "ResponseSerializer.get_value": "5ac16904b91c",
        "ResponseSerializer.get_serialized_name": "2c23dcac85cc",
        "BaseJSONSerializer._serialize_type_map": "faa32d1fa9a8",
        "BaseJSONSerializer._serialize_type_list": "f87b14fe9166",
        "BaseJSONSerializer._serialize_type_structure": "36873909cd0a",
        "BaseJSONSerializer._serialize_type_string": "44954e021450",  # and ABSENT, below
        "AttributePicker.__call__": "c15da8ec29c1",
        "AttributePicker.get_possible_keys": "cb284052c5ea",
        "XFormedAttributePicker.get_possible_keys": "f0d20f55f37f",
        "ExplicitAlias.has_alias": "1d7d27db6ed0",
        "ClassPrefixAlias.has_alias": "b2e0c50e1aa5",
    }.items()},
    "moto.core.utils.get_value": frozenset({"9b06b87ce416"}),
    "moto.core.utils._get_value_for_key": frozenset({"563aa7bc75bd"}),
    **_moto_cond.SOURCES,
    **_moto_exprs.SOURCES,
}
# moto 5.2.0 and 5.2.1 have no string method of their own (a string is written as it is).
EXPECTED_SOURCES["moto.core.serialize.BaseJSONSerializer._serialize_type_string"] |= {ABSENT}

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
    "moto.core.serialize": (
        "AttributePickerContext", "DEFAULT_ALIAS_PROVIDERS", "JSONSerializer",
        "TimestampSerializer", "XFormedAttributePicker",
    ),
}

# Set on the patched functions, so that applying twice is harmless and a test can tell.
_MARK = "__dynaunique_patched__"


class MotoPatchError(RuntimeError):
    """moto's internals are not what this patch was written against; the message says what moved."""


def installed_hashes() -> dict[str, str]:
    """:func:`source_hash` of each function of :data:`EXPECTED_SIGNATURES` in the installed moto,
    and of each function the server's HTTP front relies on (``_moto_front.PIECES``)."""
    return {
        dotted: source_hash(function)
        for dotted in (*EXPECTED_SIGNATURES, *_moto_front.SIGNATURES)
        if (function := find(dotted)) is not None and not isinstance(function, Exception)
    }


def check() -> list[str]:
    """Every way the installed moto differs from what this patch expects; ``[]`` if none."""
    hard, sources = _problems()
    return hard + sources


def front() -> dict[str, list[str]]:
    """Each piece of the server's HTTP front (``_moto_front.PIECES``), with how the installed
    functions it relies on differ from the verified ones; ``[]`` for a piece that fits.

    Unlike moto's DynamoDB (pinned, and refused when it moved), these are Python's standard
    library, werkzeug's handler and moto's request ids: a piece that does not fit is left out,
    and the server answers as werkzeug and moto do (slower, the same answers).
    """
    return {
        piece: [found[1] for dotted in functions
                if (found := difference(dotted, _moto_front.SIGNATURES[dotted],
                                         _moto_front.SOURCES[dotted])) is not None]
        for piece, functions in _moto_front.PIECES.items()
    }


def fitting_front() -> frozenset[str]:
    """The pieces of the HTTP front whose functions are as verified (see :func:`front`)."""
    return frozenset(piece for piece, problems in front().items() if not problems)


def _problems() -> tuple[list[str], list[str]]:
    """What no force can get past (gone, moved), and the functions whose source differs."""
    import importlib

    problems: list[str] = []
    sources: list[str] = []
    for dotted, expected in EXPECTED_SIGNATURES.items():
        found = difference(dotted, expected, EXPECTED_SOURCES[dotted])
        if found is not None:
            changed, problem = found
            (sources if changed else problems).append(problem)
    for module_name, names in EXPECTED_NAMES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            problems.append(f"module {module_name} is gone ({exc})")
            continue
        problems.extend(
            f"{module_name}.{name} is gone" for name in names if not hasattr(module, name)
        )
    return problems, sources


def is_applied() -> bool:
    """Whether :func:`apply` has patched moto in this process."""
    from moto.dynamodb.models import DynamoDBBackend

    return bool(getattr(DynamoDBBackend.transact_write_items, _MARK, False))


def apply() -> None:
    """Patch moto's DynamoDB in this process (idempotent).

    Raises:
        MotoPatchError: the installed moto does not have the functions this patch replaces, with
            the signatures it expects, or (unless ``DYNAUNIQUE_MOTO_PATCH_FORCE=1``) their source
            is not the verified releases'; the message names each one that moved.
    """
    hard, sources = _problems()
    forced = os.environ.get(FORCE_ENV) == "1"
    if hard or (sources and not forced):
        import moto

        hints = [] if hard else [f"{FORCE_ENV}=1 to patch it anyway"]
        hints.append("DYNAUNIQUE_STOCK_MOTO=1 to run stock moto (slow on large tables)")
        raise MotoPatchError(
            f"dynaunique's moto patch does not fit moto {moto.__version__} (verified: moto "
            f"{VERIFIED_MOTO}): " + "; ".join(hard + sources) + ". Set " + ", or ".join(hints)
        )
    if is_applied():
        return
    from moto.core.serialize import JSONSerializer
    from moto.dynamodb.comparisons import ConditionExpressionParser, FuncBeginsWith, FuncSize
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.models.table import StreamShard, Table
    from moto.dynamodb.responses import ProjectionExpressionParser
    from moto.moto_api._internal.moto_random import MotoRandom

    replacements: list[tuple[type, str, Callable[..., Any]]] = [
        (DynamoDBBackend, "transact_write_items", lambda _: transact_write_items),
        (Table, "put_item", indexed_put_item),
        (Table, "delete_item", indexed_delete_item),
        (Table, "query", partition_query),
        (Table, "scan", bisected_scan),
        (DynamoDBBackend, "update_item", size_checked_update),
        (LimitedSizeDict, "__setitem__", lambda _: unchecked_setitem),
        (JSONSerializer, "_serialize_result", serialize_result),
        (ConditionExpressionParser, "parse", _moto_cond.cached_parse),
        (FuncBeginsWith, "expr", _moto_exprs.begins_with),
        (FuncSize, "expr", _moto_exprs.size),
        (ProjectionExpressionParser, "parse", _moto_exprs.projection_parse),
        (StreamShard, "add", regional_stream_add),
    ]
    if "request_id" in fitting_front():
        replacements.append((MotoRandom, "get_random_string", _moto_front.random_string))
    for owner, name, make in replacements:
        original = getattr(owner, name)
        setattr(owner, name, _marked(make(original), original))
    _compute_once()


def regional_stream_add(original: Callable[..., Any]) -> Callable[..., Any]:
    """``StreamShard.add``, its record naming the region of the table's replica in
    ``awsRegion``, as DynamoDB's do (moto writes ``us-east-1`` whatever the region: a global
    table's replica in eu-west-1 would deliver records claiming us-east-1)."""

    def add(self: Any, old: Any, new: Any) -> None:
        original(self, old, new)
        self.items[-1].record["awsRegion"] = self.table.region_name

    return add


def _compute_once() -> None:
    """Per-request work whose answer cannot change while the server runs, done once."""
    from moto import backends
    from moto.core import responses

    listing = backends.list_of_moto_modules
    if not getattr(listing, _MARK, False):
        modules = tuple(listing())  # the installed package's folders

        def list_of_moto_modules() -> tuple[str, ...]:
            return modules

        backends.list_of_moto_modules = _marked(list_of_moto_modules, listing)
    method_names = getattr(responses, "method_names_from_class")  # noqa: B009 (not exported)
    if not getattr(method_names, _MARK, False):
        known: dict[object, list[str]] = {}

        def method_names_from_class(clazz: object) -> list[str]:
            names = known.get(clazz)
            if names is None:
                names = known[clazz] = method_names(clazz)
            return list(names)

        setattr(responses, "method_names_from_class",  # noqa: B010 (not exported)
                _marked(method_names_from_class, method_names))


def _marked(replacement: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    replacement.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(replacement, _MARK, True)
    return replacement
