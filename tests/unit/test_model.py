"""dynaunique.Model: a bad class is refused at definition, a value DynamoDB would refuse is
named before sending (no server)."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

# Account holds the EMAIL lock name on model_accounts: the last test declares a second model there.
from support.accounts import Account  # noqa: F401
from support.declare import declare, pk_attr

from dynaunique import (
    ConfigurationError,
    InvalidValueError,
    Model,
    UniqueConstraint,
    atomic,
    normalizers,
)
from dynaunique._write import writes as _writes
from dynaunique._write.record import serialize_checked, stored_problem
from dynaunique.attributes import (
    NumberAttribute,
    UnicodeAttribute,
)


def test_non_string_hash_key_is_refused_at_class_definition() -> None:
    with pytest.raises(ConfigurationError, match="not a string attribute"):
        class Numbered(Model):
            class Meta:
                table_name = "model_numbered"

            id = NumberAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)


def test_hash_in_lock_name_is_refused_at_class_definition() -> None:
    with pytest.raises(ConfigurationError, match="lock name 'E#MAIL' is not allowed"):
        class Hashy(Model):
            class Meta:
                table_name = "model_hashy"

            id = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, lock_name="E#MAIL")


def test_unknown_normalize_target_is_refused_at_class_definition() -> None:
    with pytest.raises(ConfigurationError, match=r"normalize= names fields .*\['nickname'\]"):
        class Page(Model):
            class Meta:
                table_name = "model_pages"
                constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG",
                                                normalize={"nickname": normalizers.casefold})]

            id = UnicodeAttribute(hash_key=True)
            tenant = UnicodeAttribute()
            slug = UnicodeAttribute()


def test_non_callable_normalize_is_refused_at_class_definition() -> None:
    with pytest.raises(ConfigurationError, match="normalize= must be callable"):
        class Named(Model):
            class Meta:
                table_name = "model_named"

            id = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, normalize="casefold")  # type: ignore[arg-type]


def test_constraint_on_an_unknown_field_is_refused_at_class_definition() -> None:
    with pytest.raises(ConfigurationError, match="names unknown field 'slug'"):
        class Page(Model):
            class Meta:
                table_name = "model_pages"
                constraints = [UniqueConstraint(fields=("tenant", "slug"), name="TENANT_SLUG")]

            id = UnicodeAttribute(hash_key=True)
            tenant = UnicodeAttribute()


def test_unique_on_a_key_or_normalize_without_unique_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="already unique"):
        UnicodeAttribute(hash_key=True, unique=True)
    with pytest.raises(ConfigurationError, match="only apply together with unique=True"):
        UnicodeAttribute(normalize=normalizers.casefold)


def test_two_models_sharing_an_implicit_lock_name_on_one_table_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="both use lock name 'EMAIL'"):
        class Intruder(Model):
            class Meta:
                table_name = "model_accounts"

            pk = UnicodeAttribute(hash_key=True, attr_name="PK")
            sk = UnicodeAttribute(range_key=True, attr_name="SK")
            email = UnicodeAttribute(unique=True)


# --- values as stored: what DynamoDB would refuse, said without the value ----------------------


@pytest.mark.parametrize(("raw", "problem"), [
    ({"S": "ada"}, None), ({"S": "é"}, None), ({"N": "1.5"}, None), ({"B": b"\x00"}, None),
    ({"BOOL": True}, None), ({"NULL": True}, None),
    ({"S": "a\ud800"}, "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"S": 12}, "a string must be a str, not int"),
    ({"N": "NaN"}, "it is not a finite number"), ({"N": "12abc"}, "it is not a finite number"),
    ({"B": "text"}, "binary text"),
    ({"B": "\udfff"}, "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"B": 3}, "binary must be bytes, not int"),
    ({"BOOL": 1}, "a boolean must be a bool, not int"),
    ({"SS": ["a", "b\ud800"]}, "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"L": [{"S": "ok"}, {"L": [{"S": "\ud800"}]}]},
     "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"M": {"k\ud800": {"S": "v"}}}, "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"M": {"k": {"M": {"x": {"SS": ["\udc00"]}}}}},
     "it is not valid UTF-8 (it holds a lone surrogate)"),
    ({"L": [{"S": "ok"}, {"M": {"k": {"S": "v"}}}]}, None),
])
def test_stored_problem_says_why_dynamodb_would_refuse_a_value(raw: dict[str, Any],
                                                                problem: str | None) -> None:
    assert stored_problem(raw) == problem


class _Secret:
    def __repr__(self) -> str:
        return "SECRET-REPR"


_Badged = declare("_Badged", "unit_badged", meta={"lock_secret": "s"}, pk=pk_attr(),
                  badge=NumberAttribute(unique=True, hashed=True, null=True),
                  plain=NumberAttribute(unique=True, null=True))


def test_a_value_its_attribute_refuses_is_named_and_a_hashed_one_never_quoted() -> None:
    """PynamoDB's own error may quote the value: for a hashed field it is neither in the
    message nor chained (a recorded stack trace shows the whole chain)."""
    with pytest.raises(InvalidValueError) as hidden:
        serialize_checked(_Badged(pk="a", badge=_Secret()))
    assert str(hidden.value) == (
        "_Badged.badge = <hashed> cannot be stored as a NumberAttribute: TypeError")
    assert "SECRET" not in "".join(traceback.format_exception(hidden.value))
    with pytest.raises(InvalidValueError) as shown:
        serialize_checked(_Badged(pk="a", plain=_Secret()))
    assert str(shown.value) == (
        "_Badged.plain = SECRET-REPR cannot be stored as a NumberAttribute: Object of type "
        "_Secret is not JSON serializable")
    assert isinstance(shown.value.__cause__, TypeError)


_Renamed = declare("_Renamed", "unit_renamed", pk=pk_attr(),
                   first=UnicodeAttribute(attr_name="F", null=True),
                   second=UnicodeAttribute(attr_name="S2", null=True))


def test_a_stored_value_dynamodb_refuses_names_its_field_first_in_declaration_order() -> None:
    with pytest.raises(InvalidValueError) as refused:
        serialize_checked(_Renamed(pk="a", first="x\ud800", second="y\udfff"))
    assert str(refused.value) == (
        "_Renamed.first = 'x\\ud800' cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)")
    with pytest.raises(InvalidValueError) as second:
        serialize_checked(_Renamed(pk="a", first="ok", second="y\udfff"))
    assert str(second.value).startswith("_Renamed.second = 'y\\udfff' cannot be stored")
    assert serialize_checked(_Renamed(pk="a", second="ok")) == {
        "PK": {"S": "a"}, "S2": {"S": "ok"}}


Stamped = declare("Stamped", "unit_stamped", meta={"region": "us-east-1",
                                                    "host": "http://127.0.0.1:9"},
                  pk=pk_attr(), a=UnicodeAttribute(unique=True), b=UnicodeAttribute(unique=True))


def test_every_lock_of_one_unit_carries_one_timestamp(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []

    def now() -> str:
        taken.append(f"2026-01-01T00:00:00.{len(taken):06d}+00:00")
        return taken[-1]

    monkeypatch.setattr(_writes, "now", now)
    with atomic(dry_run=True) as tx:
        Stamped(pk="1", a="x", b="y").save()
        Stamped(pk="2", a="z", b="w").save()
    assert tx.request is not None
    created = [slot["Put"]["Item"]["created"] for slot in tx.request["TransactItems"]
               if "created" in slot["Put"]["Item"]]
    assert created == [{"S": "2026-01-01T00:00:00.000000+00:00"}] * 4
    assert taken == ["2026-01-01T00:00:00.000000+00:00"]
    # Outside a unit, each lock write stamps its own time.
    assert _writes.stamp() == "2026-01-01T00:00:00.000001+00:00"
