"""The local server's DynamoDB rules without a server: attribute and item sizes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from dynaunique.testing._server_rules import attribute_value_size, item_size


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "abc"}, 3),
        ({"S": "é€"}, 5),  # UTF-8 bytes, not characters
        ({"N": "123.45"}, 4),  # 5 significant digits: 3 bytes, plus 1
        ({"N": "100"}, 2),  # trailing zeroes do not count
        ({"N": "0.001"}, 2),  # nor leading ones
        ({"N": "-12345678901"}, 7),
        ({"N": "1.5E+10"}, 2),
        ({"B": base64.b64encode(b"\x00\x01\x02\x03").decode()}, 4),  # decoded bytes
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"SS": ["a", "bc"]}, 3),
        ({"NS": ["1", "22", "333"]}, 2 + 2 + 3),
        ({"L": [{"S": "a"}, {"N": "1"}]}, 3 + (1 + 1) + (1 + 2)),
        ({"M": {"ab": {"S": "c"}}}, 3 + 1 + 2 + 1),
        ({"L": []}, 3),
        ({"M": {"x": {"L": [{"NULL": True}]}}}, 3 + 1 + 1 + (3 + 1 + 1)),
    ],
)
def test_attribute_value_size(value: dict[str, Any], size: int) -> None:
    assert attribute_value_size(value) == size


def test_item_size_counts_names_and_values() -> None:
    assert item_size({"PK": {"S": "k"}, "count": {"N": "42"}}) == (2 + 1) + (5 + 2)
