"""The class's template (issue #26): what a save does once per class instead of once per record —
a string field's lock read off its stored ``S``, a built-in normalizer as its ``str`` method,
the key prefix of each lock name, a scalar model's item serialized by its attribute list — gives
exactly what the one builder gives (``_locks.lock_key``, PynamoDB's own ``serialize``)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pynamodb.attributes import ListAttribute, MapAttribute
from pynamodb.exceptions import AttributeNullError
from pynamodb.models import Model as PynamoModel
from support.declare import declare, pk_attr, sk_attr

from dynaunique import UniqueConstraint, normalizers
from dynaunique._lock.items import locks_of
from dynaunique._lock.locks import LockRef, lock_key, lock_prefix, stored_lock_refs
from dynaunique._write.record import _scalars, serialize_checked
from dynaunique.attributes import (
    BinaryAttribute,
    BooleanAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
)
from dynaunique.errors import InvalidValueError


class Reversed(UnicodeAttribute):
    """A string attribute that stores its value reversed: its lock is the python value's."""

    def serialize(self, value: Any) -> Any:
        return value[::-1]

    def deserialize(self, value: Any) -> Any:
        return value[::-1]


Templated = declare(
    "Templated", "template_records",
    meta={"lock_secret": "s3cret",
          "constraints": [UniqueConstraint(("first", "last"), name="FULL_NAME",
                                           normalize=normalizers.casefold)]},
    pk=pk_attr(), sk=sk_attr("R"),
    email=UnicodeAttribute(unique=True, normalize=normalizers.casefold, null=True),
    handle=UnicodeAttribute(unique=True, null=True),
    code=UnicodeAttribute(unique=True, normalize=lambda v: v.upper(), null=True),
    padded=UnicodeAttribute(unique=True, normalize=normalizers.strip, null=True),
    folded=UnicodeAttribute(unique=True, normalize=normalizers.nfkc_casefold, null=True),
    number=NumberAttribute(unique=True, null=True),
    mirrored=Reversed(unique=True, null=True),
    ssn=UnicodeAttribute(unique=True, hashed=True, null=True),
    first=UnicodeAttribute(null=True), last=UnicodeAttribute(null=True),
)


def _expected(model: Any, obj: Any) -> dict[str, LockRef]:
    """The locks the one builder makes of ``obj``'s python values, constraint by constraint."""
    info = model._du_info
    out = {}
    for bound in info.constraints:
        c = bound.constraint
        values = [getattr(obj, f) for f in c.fields]
        if None in values:
            continue
        normalized = c.normalized(values)
        key = lock_key(c.name, normalized, secret=info.secret() if c.hashed else None)
        out[c.name] = LockRef(c.name, c.fields, key,
                              normalized[0] if len(normalized) == 1 else normalized, c.hashed)
    return out


_texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40) | st.sampled_from(
    ["A#B", "a\\b", "\\n1", "#", "\\", " Ada@X.io ", "Straße", "\uff21da", "x" * 3000,
     "é" * 1100])


@settings(max_examples=60, deadline=None)
@given(email=_texts, handle=_texts, code=_texts, padded=_texts, folded=_texts,
       first=_texts, last=_texts | st.none(),
       number=st.integers() | st.decimals(allow_nan=False, allow_infinity=False, places=3),
       mirrored=_texts, ssn=_texts)
def test_a_records_locks_off_its_stored_item_are_the_one_builders(**values: Any) -> None:
    item = serialize_checked(Templated(pk="P#1", **values))
    stored = Templated.from_raw_data(item)   # the values as stored (a number loads as a float)
    assert stored_lock_refs(Templated._du_info, item) == _expected(Templated, stored)
    assert locks_of(Templated._du_info, stored) == _expected(Templated, stored)


def test_the_template_is_computed_per_constraint() -> None:
    bounds = {b.constraint.name: b for b in Templated._du_info.constraints}
    assert bounds["EMAIL"].prefix == lock_prefix("EMAIL") == "UNIQ#EMAIL#"
    assert bounds["HANDLE"].normalizers == (None,)
    # A string field is read off its S only through PynamoDB's own deserializing.
    assert bounds["HANDLE"].text == (True,)
    assert bounds["MIRRORED"].text == (False,)
    assert bounds["NUMBER"].text == (False,)


def test_a_string_attribute_that_deserializes_is_locked_on_its_python_value() -> None:
    obj = Templated(pk="P#1", mirrored="abc")
    item = serialize_checked(obj)
    assert item["mirrored"] == {"S": "cba"}
    (lock,) = stored_lock_refs(Templated._du_info, item).values()
    assert lock.key == "UNIQ#MIRRORED#abc"


def test_a_lone_surrogate_in_a_locked_string_is_refused_when_its_lock_is_read() -> None:
    info = Templated._du_info
    with pytest.raises(InvalidValueError, match="not valid UTF-8"):
        stored_lock_refs(info, {"PK": {"S": "P#1"}, "SK": {"S": "R"}, "handle": {"S": "a\ud800"}})


def test_a_key_too_long_keeps_the_same_digest_as_the_builder() -> None:
    for value in ("x" * 2100, "é" * 1100, "x" * 500):
        refs = stored_lock_refs(Templated._du_info, {"PK": {"S": "P"}, "handle": {"S": value}})
        assert refs["HANDLE"].key == lock_key("HANDLE", [value])


# --- a scalar model's item ------------------------------------------------------------------------


Scalars = declare(
    "Scalars", "template_scalars", pk=pk_attr(), sk=sk_attr("S"),
    name=UnicodeAttribute(unique=True), count=NumberAttribute(null=True),
    blob=BinaryAttribute(null=True, legacy_encoding=False), flag=BooleanAttribute(null=True),
    when=UTCDateTimeAttribute(null=True), price=NumberAttribute(null=True),
    alias=UnicodeAttribute(attr_name="a", null=True),
    kind=UnicodeAttribute(default="user"),
)


class _Address(MapAttribute[str, Any]):
    city = UnicodeAttribute(null=True)


WithMap = declare("WithMap", "template_map", pk=pk_attr(), name=UnicodeAttribute(unique=True),
                  address=_Address(null=True))
WithList = declare("WithList", "template_list", pk=pk_attr(), name=UnicodeAttribute(unique=True),
                   tags=ListAttribute(null=True))


@pytest.mark.parametrize("fields", [
    {"name": "n"},
    {"name": "n", "count": 3, "blob": b"\x00\x01", "flag": False, "price": Decimal("1.50"),
     "when": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc), "alias": "x", "kind": "k"},
    {"name": "n", "count": 0, "flag": True, "blob": b""},
])
def test_a_scalar_models_item_is_pynamodbs_own(fields: dict[str, Any]) -> None:
    assert _scalars(Scalars) is not None
    obj = Scalars(pk="P#1", **fields)
    expected = PynamoModel.serialize(obj, null_check=True)
    item = serialize_checked(obj)
    assert item == expected
    assert list(item) == list(expected)   # the same order: the request's bytes are the same


def test_a_missing_required_value_is_pynamodbs_error() -> None:
    obj = Scalars(pk="P#1")
    with pytest.raises(AttributeNullError) as ours:
        serialize_checked(obj)
    with pytest.raises(AttributeNullError) as theirs:
        PynamoModel.serialize(obj, null_check=True)
    assert str(ours.value) == str(theirs.value)


def test_a_value_its_attribute_refuses_is_named_as_before() -> None:
    with pytest.raises(InvalidValueError, match=r"Scalars\.count .* NumberAttribute"):
        serialize_checked(Scalars(pk="P#1", name="n", count="many"))


def test_maps_and_lists_keep_pynamodbs_walk() -> None:
    assert _scalars(WithMap) is None
    assert _scalars(WithList) is None
    obj = WithMap(pk="P#1", name="n", address=_Address(city="c"))
    assert serialize_checked(obj) == PynamoModel.serialize(obj, null_check=True)


def test_a_model_with_its_own_serialize_keeps_it() -> None:
    class Own(Scalars):
        def serialize(self, null_check: bool = True) -> dict[str, Any]:
            item: dict[str, Any] = super().serialize(null_check=null_check)
            item["extra"] = {"S": "mine"}
            return item

    assert _scalars(Own) is None
    assert serialize_checked(Own(pk="P#1", name="n"))["extra"] == {"S": "mine"}

