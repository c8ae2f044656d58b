"""PynamoDB compatibility without a server: keyless base classes, the registry of lock tables."""

from __future__ import annotations

import pytest
from support.compat_models import Inherited, KeylessBase, Locked, Neighbour, Plain

from dynaunique import ConfigurationError, Model
from dynaunique.attributes import UnicodeAttribute


def test_a_keyless_base_class_is_not_bound() -> None:
    assert KeylessBase._du_info is None
    assert Inherited._du_info is not None
    assert (Inherited._du_info.table, Inherited._du_info.hash_attr) == ("compat_inherited", "id")
    assert Inherited._du_info.constraints == ()


def test_a_keyless_class_that_declares_constraints_is_refused() -> None:
    with pytest.raises(ConfigurationError,
                       match=r"^Orphaned declares unique constraints but has no hash key; "):
        class Orphaned(Model):
            class Meta:
                table_name = "compat_orphaned"

            email = UnicodeAttribute(unique=True)


def test_the_registry_knows_which_tables_hold_locks() -> None:
    assert Plain._du_table_holds_locks() is False
    assert Locked._du_table_holds_locks() is True
    assert Neighbour._du_table_holds_locks() is True
    assert Plain._du_not_lock() is None
