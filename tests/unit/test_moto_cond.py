"""The local server's remembered condition expression parse, without a server: the same tree and
the same found names as moto's parse, one parse per distinct input, none shared with a request,
and a failing parse raised as moto raises it."""

from __future__ import annotations

from typing import Any

import pytest
from moto.dynamodb import comparisons
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from dynaunique.testing import _moto_cond

_STOCK = ConditionExpressionParser.parse
_STOCK = getattr(_STOCK, "__wrapped__", _STOCK)  # moto's, even if a test applied the patch


class _Counted:
    """moto's parse, counting the parsers it ran on."""

    def __init__(self) -> None:
        self.parsed: list[Any] = []

    def __call__(self, parser: Any) -> Any:
        self.parsed.append(parser)
        return _STOCK(parser)


def _remembering() -> tuple[Any, _Counted]:
    counted = _Counted()
    return _moto_cond.cached_parse(counted), counted


def _item(**attrs: Any) -> Item:
    return Item(DynamoType({"S": "p"}), DynamoType({"S": "LOCK"}),
                {"PK": {"S": "p"}, "SK": {"S": "LOCK"}, **attrs})


_GUARD = ("attribute_not_exists(#0)", {"#0": "PK"}, None)
_CASES = [
    _GUARD,
    ("attribute_not_exists(#0)", {"#0": "PK"}, {}),
    ("#o = :o AND attribute_exists(#m)", {"#o": "owner", "#m": "model"},
     {":o": {"M": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}}}),
    ("#v BETWEEN :a AND :b OR contains(#t, :c)", {"#v": "n", "#t": "tags"},
     {":a": {"N": "1"}, ":b": {"N": "9"}, ":c": {"S": "x"}}),
    ("NOT (size(#t) > :one) AND #f IN (:y, :z)", {"#t": "tags", "#f": "flag"},
     {":one": {"N": "1"}, ":y": {"BOOL": True}, ":z": {"NULL": True}}),
    ("begins_with(#e, :p) AND attribute_type(#l, :l)", {"#e": "email", "#l": "list"},
     {":p": {"S": "a@"}, ":l": {"S": "L"}}),
    ("", None, None),
]
_ITEMS = [
    None,
    _item(),
    _item(owner={"M": {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}}, model={"S": "User"}),
    _item(n={"N": "5"}, tags={"SS": ["x", "y"]}, flag={"BOOL": True}),
    _item(email={"S": "a@b.c"}, list={"L": [{"S": "q"}]}, tags={"SS": ["x"]}, flag={"NULL": True}),
]


def _answers(tree: Any) -> list[Any]:
    """What the tree says of each of :data:`_ITEMS`: a boolean, or the error it raises."""
    answers: list[Any] = []
    for item in _ITEMS:
        try:
            answers.append(tree.expr(item))
        except ValueError as error:
            answers.append((type(error), str(error)))
    return answers


@pytest.mark.parametrize("expression, names, values", _CASES)
def test_the_tree_and_the_found_names_are_moto_s(expression: str, names: Any,
                                                 values: Any) -> None:
    parse, counted = _remembering()
    stock = ConditionExpressionParser(expression, names, values)
    stock_tree = _STOCK(stock)
    for _ in range(3):
        parser = ConditionExpressionParser(expression, names, values)
        tree = parse(parser)
        assert repr(tree) == repr(stock_tree)
        assert _answers(tree) == _answers(stock_tree)
        assert parser.expr_attr_names_found == stock.expr_attr_names_found
        assert parser.expr_attr_values_found == stock.expr_attr_values_found
    assert len(counted.parsed) == 1


def test_each_caller_gets_its_own_found_lists() -> None:
    parse, _ = _remembering()
    first = ConditionExpressionParser(*_GUARD)
    parse(first)
    first.expr_attr_names_found += ["#added-by-the-caller"]  # as moto's query handler does
    second = ConditionExpressionParser(*_GUARD)
    parse(second)
    assert second.expr_attr_names_found == ["#0"]


def test_inputs_that_differ_in_type_or_order_are_parsed_apart() -> None:
    parse, counted = _remembering()
    expression = "#f = :v AND #g = :w"
    names = {"#f": "f", "#g": "g"}
    inputs = [
        {":v": {"BOOL": True}, ":w": {"S": "x"}},
        {":v": {"BOOL": 1}, ":w": {"S": "x"}},  # equal in Python, not the same input
        {":w": {"S": "x"}, ":v": {"BOOL": True}},  # another order
        {":v": {"S": "1"}, ":w": {"S": "x"}},
    ]
    for values in inputs + inputs:
        parse(ConditionExpressionParser(expression, names, values))
    assert [parser.expression_attribute_values for parser in counted.parsed] == inputs
    parse(ConditionExpressionParser(expression, {"#g": "g", "#f": "f"}, inputs[0]))
    parse(ConditionExpressionParser("#f = :v  AND #g = :w", names, inputs[0]))
    assert len(counted.parsed) == 6


def test_the_tree_shares_nothing_with_the_request_that_built_it() -> None:
    parse, _ = _remembering()
    values = {":l": {"L": [{"S": "a"}]}}
    tree = parse(ConditionExpressionParser("#l = :l", {"#l": "list"}, values))
    values[":l"]["L"].append({"S": "b"})  # the request's objects, changed after the parse
    assert tree.expr(_item(list={"L": [{"S": "a"}]})) is True
    changed = parse(ConditionExpressionParser("#l = :l", {"#l": "list"}, values))
    assert changed is not tree
    assert changed.expr(_item(list={"L": [{"S": "a"}, {"S": "b"}]})) is True


def test_a_failing_parse_is_raised_as_moto_raises_it_every_time() -> None:
    parse, counted = _remembering()
    for _ in range(2):
        with pytest.raises(KeyError) as raised:
            parse(ConditionExpressionParser("#a = :missing", {"#a": "a"}, {}))
        assert raised.value.args == (":missing",)
    between_null = ("#a BETWEEN :n AND :m", {"#a": "a"}, {":n": {"NULL": True}, ":m": {"N": "1"}})
    stock = ConditionExpressionParser(*between_null)
    with pytest.raises(comparisons.IncorrectOperandType):
        _STOCK(stock)
    parser = ConditionExpressionParser(*between_null)
    with pytest.raises(comparisons.IncorrectOperandType):
        parse(parser)
    # moto fails after it recorded the names found: the caller's parser is left as moto leaves it
    assert parser.expr_attr_names_found == stock.expr_attr_names_found == ["#a"]
    # each failure is parsed privately, then again on the caller's parser, and never remembered
    assert len(counted.parsed) == 6


def test_an_input_that_is_not_plain_json_is_parsed_uncached() -> None:
    parse, counted = _remembering()
    for _ in range(2):
        parse(ConditionExpressionParser("#a = :v", {"#a": "a"}, {":v": {"N": 1.5}}))
    assert len(counted.parsed) == 2


def test_the_memory_starts_again_past_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_moto_cond, "LIMIT", 2)
    parse, counted = _remembering()
    for expression in ["attribute_exists(a)", "attribute_exists(b)", "attribute_exists(c)",
                       "attribute_exists(c)", "attribute_exists(a)"]:
        parse(ConditionExpressionParser(expression, None, None))
    assert [p.condition_expression for p in counted.parsed] == [
        "attribute_exists(a)", "attribute_exists(b)", "attribute_exists(c)", "attribute_exists(a)"]


def test_every_class_a_tree_can_hold_is_checked() -> None:
    builders = {*comparisons.FUNC_CLASS.values(), *comparisons.COMPARATOR_CLASS.values()}
    named = {f"{_moto_cond._MODULE}.{builder.__name__}" for builder in builders}
    assert named <= set(_moto_cond.SIGNATURES)
    assert {"OpAnd", "OpOr", "OpNot", "OpDefault", "FuncIn", "AttributePath",
            "AttributeValue", "ConditionExpressionParser"} <= {
        name.rpartition(".")[2] for name in _moto_cond.SIGNATURES}
