"""Mistakes in declaring constraints, caught at class definition (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from dynaunique import (
    ConfigurationError,
    Model,
    UniqueConstraint,
)
from dynaunique.attributes import (
    BinarySetAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    VersionAttribute,
)

# --- mistakes caught at class definition ---------------------------------------------------------


def test_unknown_field_in_a_constraint() -> None:
    with pytest.raises(ConfigurationError) as caught:
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unknown"
                constraints = [UniqueConstraint(("tenant", "slgu"), name="TS")]

            pk = UnicodeAttribute(hash_key=True)
            tenant = UnicodeAttribute()
            slug = UnicodeAttribute()
    assert "'slgu'" in str(caught.value)
    assert "TS" in str(caught.value)


def test_duplicate_constraint_names_across_field_and_meta() -> None:
    with pytest.raises(ConfigurationError, match="'EMAIL' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate"
                constraints = [UniqueConstraint("other", name="EMAIL")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)
            other = UnicodeAttribute()


def test_duplicate_constraint_names_in_meta() -> None:
    with pytest.raises(ConfigurationError, match="'AB' twice"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_duplicate_meta"
                constraints = [UniqueConstraint(("a", "b"), name="AB"),
                               UniqueConstraint(("b", "a"), name="AB")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_hash_sign_in_a_constraint_name() -> None:
    with pytest.raises(ConfigurationError, match="'#'"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_hash_sign"
                constraints = [UniqueConstraint(("a", "b"), name="A#B")]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute()
            b = UnicodeAttribute()


def test_non_string_hash_key() -> None:
    with pytest.raises(ConfigurationError, match="string hash key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_key"

            pk = NumberAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_range_key() -> None:
    with pytest.raises(ConfigurationError, match="range key"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_number_range"

            pk = UnicodeAttribute(hash_key=True)
            sk = NumberAttribute(range_key=True)
            email = UnicodeAttribute(unique=True)


def test_non_string_hash_key_is_fine_without_constraints() -> None:
    class Plain(Model):
        class Meta:
            table_name = "decl_plain_number_key"

        pk = NumberAttribute(hash_key=True)

    assert Plain._du_info is not None
    assert Plain._du_info.constraints == ()


@pytest.mark.parametrize(("first_name", "second_name"), [
    (None, None), ("EMAIL", None), (None, "EMAIL")])
def test_two_models_on_one_table_may_not_share_an_implicit_lock_name(
        first_name: str | None, second_name: str | None) -> None:
    table = f"decl_clash_{first_name}_{second_name}"

    class First(Model):
        class Meta:
            table_name = table

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True, lock_name=first_name)

    with pytest.raises(ConfigurationError) as caught:
        class Second(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True, lock_name=second_name)
    assert "First" in str(caught.value)
    assert "'EMAIL'" in str(caught.value)


def test_implicit_names_on_different_tables_do_not_clash() -> None:
    for table in ("decl_apart_1", "decl_apart_2"):
        class Holder(Model):
            class Meta:
                table_name = table

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)

        assert Holder._du_info is not None


def test_two_models_may_share_a_lock_name_both_declare_explicitly() -> None:
    class First(Model):
        class Meta:
            table_name = "decl_shared_explicit"
            constraints = [UniqueConstraint("email", name="EMAIL")]

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute()

    class Second(Model):
        class Meta:
            table_name = "decl_shared_explicit"

        pk = UnicodeAttribute(hash_key=True)
        address = UnicodeAttribute(unique=True, lock_name="EMAIL")

    assert [b.name for b in Second._du_info.constraints] == ["EMAIL"]  # type: ignore[union-attr]


def test_a_refused_class_leaves_no_lock_name_registered() -> None:
    class Holder(Model):
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        handle = UnicodeAttribute(unique=True)

    with pytest.raises(ConfigurationError):
        class Refused(Model):
            class Meta:
                table_name = "decl_registry_leak"
                constraints = [UniqueConstraint("handle")]   # clashes with Holder's HANDLE

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute(unique=True)   # registered before the clash was found
            handle = UnicodeAttribute()

    class Later(Model):   # Refused never existed: EMAIL is free on this table
        class Meta:
            table_name = "decl_registry_leak"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True)


@pytest.mark.parametrize("attribute", [
    lambda: UnicodeSetAttribute(null=True),
    lambda: MapAttribute(null=True),  # type: ignore[no-untyped-call]
    lambda: VersionAttribute(),
])
def test_constraint_on_a_set_map_or_version_attribute(attribute: Any) -> None:
    with pytest.raises(ConfigurationError, match="unique constraints take"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_kind"
                constraints = [UniqueConstraint("tags")]

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute()


@pytest.mark.parametrize("attribute_class", [
    UnicodeSetAttribute,
    NumberSetAttribute,
    BinarySetAttribute,
    ListAttribute,
    JSONAttribute,
    MapAttribute,
])
def test_unique_true_on_a_set_list_or_map_attribute(attribute_class: Any) -> None:
    with pytest.raises(ConfigurationError, match="cannot be unique"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_unique_set"

            pk = UnicodeAttribute(hash_key=True)
            tags = attribute_class(unique=True)


def test_constraints_without_a_table() -> None:
    with pytest.raises(ConfigurationError, match="table_name"):
        class Bad(Model):
            class Meta:
                constraints = [UniqueConstraint("email")]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()


def test_something_else_in_meta_constraints() -> None:
    with pytest.raises(ConfigurationError, match="only UniqueConstraint"):
        class Bad(Model):
            class Meta:
                table_name = "decl_bad_entry"
                constraints = [("email",)]

            pk = UnicodeAttribute(hash_key=True)
            email = UnicodeAttribute()
