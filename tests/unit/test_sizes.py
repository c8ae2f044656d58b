"""Sizes as DynamoDB counts them (dynaunique._lock.sizes), and the 4 MB guard that counts with them
(dynaunique._write.render.check_size): exact bytes per type, the boundary, and the cheap bound."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.examples import examples

from dynaunique._lock.sizes import (
    MAX_ITEM_BYTES,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    attribute_value_size,
    binary_size,
    item_size,
    number_size,
    transaction_size,
)
from dynaunique._write import render as _render
from dynaunique._write.render import MAX_BYTES, MAX_ITEMS, check_size, encode
from dynaunique.errors import TransactionTooLargeError
from dynaunique.testing import _server_rules


def test_the_limits() -> None:
    assert (MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ACTIONS) == (
        409_600, 4_194_304, 100)
    assert (MAX_BYTES, MAX_ITEMS) == (MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ACTIONS)
    # The local server counts with the very same functions.
    assert _server_rules.item_size is item_size
    assert _server_rules.MAX_TRANSACTION_BYTES == MAX_TRANSACTION_BYTES


@pytest.mark.parametrize(("value", "size"), [
    ({"S": ""}, 0), ({"S": "abc"}, 3), ({"S": "é€😀"}, 2 + 3 + 4),   # UTF-8 bytes
    ({"N": "0"}, 2), ({"N": "7"}, 2), ({"N": "12"}, 2), ({"N": "123"}, 3),
    ({"N": "-0.00120"}, 2),            # "12": leading and trailing zeroes trimmed
    ({"N": "1E+125"}, 2), ({"N": "9" * 38}, 20),
    ({"N": "1000000000000000000000000000000000000001"}, 21),   # inner zeroes count
    ({"B": b""}, 0), ({"B": b"\x00" * 7}, 7), ({"B": bytearray(b"ab")}, 2),
    ({"B": base64.b64encode(b"\xff" * 5).decode()}, 5),      # the wire's base64: decoded
    ({"BOOL": False}, 1), ({"NULL": True}, 1),
    ({"SS": ["a", "é"]}, 1 + 2), ({"NS": ["1", "100", "12345"]}, 2 + 2 + 4),
    ({"BS": [b"ab", b"c"]}, 3),
    ({"L": []}, 3), ({"M": {}}, 3),
    ({"L": [{"S": "ab"}, {"BOOL": True}]}, 3 + (1 + 2) + (1 + 1)),
    ({"M": {"né": {"N": "5"}}}, 3 + 1 + 3 + 2),
    ({"M": {"a": {"L": [{"M": {}}]}}}, 3 + 1 + 1 + (3 + 1 + 3)),
])
def test_attribute_value_sizes_byte_for_byte(value: dict[str, Any], size: int) -> None:
    assert attribute_value_size(value) == size


def test_numbers_binaries_and_items() -> None:
    assert [number_size(t) for t in ("1", "12", "123", "1234", "+5.50", "0.0")] == [
        2, 2, 3, 3, 2, 2]
    assert (binary_size(b"abc"), binary_size("YWJj"), binary_size("not base64!")) == (3, 3, 11)
    assert item_size({}) == 0
    assert item_size({"PK": {"S": "k"}, "count": {"N": "42"}, "é": {"NULL": True}}) == (
        (2 + 1) + (5 + 2) + (2 + 1))
    with pytest.raises(ValueError, match="unknown attribute value type 'X'"):
        attribute_value_size({"X": 1})


def test_a_transaction_counts_put_items_and_the_keys_of_the_rest() -> None:
    key = {"PK": {"S": "k1"}}                                    # 2 + 2
    actions = [
        {"Put": {"TableName": "t", "Item": {"PK": {"S": "k0"}, "v": {"S": "xyz"}},
                 "ConditionExpression": "attribute_not_exists(#a)",
                 "ExpressionAttributeValues": {":big": {"S": "y" * 1000}}}},   # 4 + 4
        {"Update": {"TableName": "t", "Key": key, "UpdateExpression": "SET a = :a",
                    "ExpressionAttributeValues": {":a": {"S": "z" * 1000}}}},  # 4
        {"Delete": {"TableName": "t", "Key": key}},                            # 4
        {"ConditionCheck": {"TableName": "t", "Key": key,
                            "ConditionExpression": "attribute_exists(PK)"}},   # 4
    ]
    assert transaction_size(actions) == 8 + 4 + 4 + 4
    assert transaction_size([]) == 0


# --- the guard -----------------------------------------------------------------------------------

def puts(sizes: list[int]) -> dict[str, Any]:
    """A transaction of record puts whose items count exactly ``sizes`` bytes."""
    items = []
    for n, size in enumerate(sizes):
        pk = f"p{n:03}"
        items.append({"Put": {"TableName": "t", "Item": {
            "PK": {"S": pk}, "pad": {"S": "x" * (size - 2 - len(pk) - 3)}},
            "ConditionExpression": "attribute_not_exists(#g0)",
            "ExpressionAttributeNames": {"#g0": "PK"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}})
    return {"TransactItems": items, "ReturnConsumedCapacity": "TOTAL"}


EXACT = [400_000] * 10 + [194_304]


def test_exactly_4_mb_of_items_passes_and_one_byte_more_is_refused() -> None:
    request = puts(EXACT)
    assert transaction_size(request["TransactItems"]) == MAX_BYTES
    assert len(encode(request)) > MAX_BYTES      # the request itself is larger: not what counts
    check_size(request)
    check_size(request, encode(request))
    with pytest.raises(TransactionTooLargeError) as refused:
        check_size(puts([*EXACT[:-1], EXACT[-1] + 1]))
    assert (refused.value.items, refused.value.size_bytes) == (11, MAX_BYTES + 1)
    assert (refused.value.max_items, refused.value.max_bytes) == (100, 4_194_304)


def test_101_actions_are_refused_with_their_exact_size() -> None:
    check_size(puts([20] * 100))
    with pytest.raises(TransactionTooLargeError) as refused:
        check_size(puts([20] * 101))
    assert (refused.value.items, refused.value.size_bytes) == (101, 2020)
    assert str(refused.value) == (
        "the transaction would have 101 items and 2020 bytes of items; DynamoDB allows at most "
        "100 items and 4194304 bytes. Nothing was sent: split the work into smaller atomic() "
        "blocks yourself if they need not be all-or-nothing.")


def test_far_below_the_limit_the_items_are_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The encoding, made anyway for the token, bounds the count: below 4 MB, no count."""
    def counted(actions: Any) -> int:
        raise AssertionError("counted a transaction whose encoding is under 4 MB")

    monkeypatch.setattr(_render, "transaction_size", counted)
    request = puts([400_000] * 10)
    check_size(request, encode(request))
    check_size(request)


_names = st.text(min_size=1, max_size=8)
_scalars = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=30)),
    st.builds(lambda n: {"N": str(n)}, st.integers() | st.decimals(allow_nan=False,
                                                                      allow_infinity=False)),
    st.builds(lambda b: {"B": b}, st.binary(max_size=30)),
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(st.text(max_size=5), min_size=1, max_size=4)),
    st.builds(lambda s: {"NS": [str(n) for n in s]},
              st.sets(st.integers(), min_size=1, max_size=4)),
    st.builds(lambda s: {"BS": list(s)}, st.sets(st.binary(max_size=5), min_size=1,
                                                 max_size=4)),
)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.builds(lambda items: {"L": items}, st.lists(inner, max_size=4)),
    st.builds(lambda items: {"M": items}, st.dictionaries(_names, inner, max_size=4))),
    max_leaves=12)
_items = st.dictionaries(_names, _values, min_size=1, max_size=6)
_actions = st.one_of(
    st.builds(lambda item: {"Put": {"TableName": "t", "Item": item}}, _items),
    st.builds(lambda key, kind: {kind: {"TableName": "t", "Key": key}}, _items,
              st.sampled_from(["Update", "Delete", "ConditionCheck"])),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_actions, min_size=1, max_size=6))
def test_the_encoding_never_counts_fewer_bytes_than_dynamodb(actions: list[Any]) -> None:
    """What makes skipping the count safe: the bound is never below the count."""
    assert transaction_size(actions) <= len(encode({"TransactItems": actions}))
