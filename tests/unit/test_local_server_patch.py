"""The local server's moto patch without a server: it fits the installed moto, and names what
moved or vanished."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from dynaunique.testing import _moto_patch


def test_patch_fits_the_installed_moto() -> None:
    assert _moto_patch.check() == []


def test_a_moved_signature_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models.table import Table

    def scan(self: Any, filters: Any) -> Any:  # what a future moto might look like
        raise AssertionError("not called")

    monkeypatch.setattr(Table, "scan", scan)
    expected = (
        "moto.dynamodb.models.table.Table.scan takes ('self', 'filters'), this patch expects "
        "('self', 'filters', 'limit', 'exclusive_start_key', 'filter_expression', 'index_name', "
        "'consistent_read', 'projection_expression', 'segments')"
    )
    assert _moto_patch.check() == [expected]
    with pytest.raises(_moto_patch.MotoPatchError) as raised:
        _moto_patch.apply()
    version = importlib.metadata.version("moto")
    assert str(raised.value) == (
        f"dynaunique's moto patch does not fit moto {version}: {expected}"
    )


def test_a_vanished_name_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import moto.dynamodb.exceptions

    monkeypatch.delattr(moto.dynamodb.exceptions, "ItemSizeToUpdateTooLarge")
    monkeypatch.delattr("moto.dynamodb.models.table.Table.all_items")
    assert _moto_patch.check() == [
        "moto.dynamodb.models.table.Table.all_items is gone "
        "(type object 'Table' has no attribute 'all_items')",
        "moto.dynamodb.exceptions.ItemSizeToUpdateTooLarge is gone",
    ]
