"""The local server's moto patch without a server: it fits the installed moto, names what moved,
vanished or changed its source, and patches a changed source only when forced."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

from dynaunique.testing import _moto_check, _moto_front, _moto_patch

#: The real :func:`_moto_patch.source_hash`.
_SOURCE_HASH = _moto_patch.source_hash


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
    # A moved signature cannot be forced: the replacement would call it wrongly.
    monkeypatch.setenv(_moto_patch.FORCE_ENV, "1")
    with pytest.raises(_moto_patch.MotoPatchError) as raised:
        _moto_patch.apply()
    version = importlib.metadata.version("moto")
    assert str(raised.value) == (
        f"dynaunique's moto patch does not fit moto {version} (verified: moto 5.2.0 to 5.2.5): "
        f"{expected}. Set DYNAUNIQUE_STOCK_MOTO=1 to run stock moto (slow on large tables)"
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


# A moto whose Table.scan takes the same parameters but does something else.
def _other_scan(self: Any, filters: Any, limit: Any, exclusive_start_key: Any,
                filter_expression: Any, index_name: Any, consistent_read: Any,
                projection_expression: Any, segments: Any) -> Any:
    raise AssertionError("not called")


_REPLACED = [
    ("moto.dynamodb.models", "DynamoDBBackend", "transact_write_items"),
    ("moto.dynamodb.models", "DynamoDBBackend", "update_item"),
    ("moto.dynamodb.models.table", "Table", "put_item"),
    ("moto.dynamodb.models.table", "Table", "delete_item"),
    ("moto.dynamodb.models.table", "Table", "query"),
    ("moto.dynamodb.models.table", "Table", "scan"),
    ("moto.dynamodb.models.dynamo_type", "LimitedSizeDict", "__setitem__"),
    ("moto.backends", None, "list_of_moto_modules"),
    ("moto.core.responses", None, "method_names_from_class"),
    ("moto.core.serialize", "JSONSerializer", "_serialize_result"),
    ("moto.dynamodb.comparisons", "ConditionExpressionParser", "parse"),
]


def _restore_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let monkeypatch put back every function apply() replaces (moto stays stock here)."""
    for module, owner, name in _REPLACED:
        found = importlib.import_module(module)
        cls = found if owner is None else getattr(found, owner)
        monkeypatch.setattr(cls, name, getattr(cls, name))


def test_the_verified_sources_are_the_installed_ones() -> None:
    installed = _moto_patch.installed_hashes()
    # (the installed moto has all, and the front's functions are there too)
    assert set(installed) == set(_moto_patch.EXPECTED_SOURCES) | set(_moto_front.SOURCES)
    for dotted, hashes in _moto_patch.EXPECTED_SOURCES.items():
        assert installed[dotted] in hashes, dotted
    assert set(_moto_patch.EXPECTED_SOURCES) == set(_moto_patch.EXPECTED_SIGNATURES)
    assert set(_moto_front.SOURCES) == set(_moto_front.SIGNATURES)
    assert not set(_moto_front.SOURCES) & set(_moto_patch.EXPECTED_SOURCES)


@pytest.mark.skipif(sys.version_info[:3] != _moto_front.VERIFIED_PYTHON,
                    reason="the front is verified on CPython "
                           + ".".join(map(str, _moto_front.VERIFIED_PYTHON)))
def test_on_the_verified_python_every_piece_of_the_front_fits() -> None:
    assert _moto_patch.front() == {"keep_alive": [], "header_parser": [], "request_id": []}
    assert _moto_patch.fitting_front() == {"keep_alive", "header_parser", "request_id"}


def test_a_piece_of_the_front_whose_source_differs_is_left_out_not_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another Python (3.10.13 and 3.11.2 have another ``parse_request``) or werkzeug: the
    piece is reported and left out, moto's patch still fits (it used to refuse to start).

    The other pieces are compared with what this Python gives unpatched, not with "all fit":
    on 3.12.1 and 3.13.0 ``http.client.parse_headers`` and ``random``'s
    ``_randbelow_with_getrandbits`` differ from the verified Python's too (they are left out
    there as well, which is the behaviour under test)."""
    import http.server

    def parse_request(self: Any) -> bool:  # the same parameters, another source
        return bool(stock(self))

    before, fitting_before = _moto_patch.front(), _moto_patch.fitting_front()
    stock = http.server.BaseHTTPRequestHandler.parse_request
    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "parse_request", parse_request)
    front = _moto_patch.front()
    (problem,) = front["keep_alive"]
    assert problem.startswith("http.server.BaseHTTPRequestHandler.parse_request has changed "
                              "(source sha256 ")
    assert front["header_parser"] == before["header_parser"]
    assert front["request_id"] == before["request_id"]
    assert _moto_patch.fitting_front() == fitting_before - {"keep_alive"}
    assert _moto_patch.check() == []


def test_a_piece_of_the_front_whose_function_is_gone_is_left_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    monkeypatch.delattr(random.Random, "_randbelow_with_getrandbits")
    # On 3.10.13 the piece has a second problem, another random.Random.choice (reported too).
    problems = _moto_patch.front()["request_id"]
    assert [p for p in problems if "_randbelow_with_getrandbits" in p] == [
        "random.Random._randbelow_with_getrandbits is gone (type object 'Random' has no "
        "attribute '_randbelow_with_getrandbits')"]
    assert "request_id" not in _moto_patch.fitting_front()


def test_a_function_recorded_as_possibly_absent_may_be_missing(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from moto.core.serialize import BaseJSONSerializer

    _restore_after(monkeypatch)
    monkeypatch.delattr(BaseJSONSerializer, "_serialize_type_string")  # as in moto 5.2.0
    assert _moto_patch.check() == []
    monkeypatch.setitem(_moto_patch.EXPECTED_SOURCES,
                        "moto.core.serialize.BaseJSONSerializer._serialize_type_string",
                        frozenset({"44954e021450"}))
    assert _moto_patch.check() == [
        "moto.core.serialize.BaseJSONSerializer._serialize_type_string is gone (type object "
        "'BaseJSONSerializer' has no attribute '_serialize_type_string')"]


def test_the_source_hash_is_the_sha256_of_the_functions_text(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    text = "def answer(x):\n    return x + 1\n"
    (tmp_path / "hashed_module.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hashed_module", raising=False)
    module = importlib.import_module("hashed_module")
    assert _SOURCE_HASH(module.answer) == hashlib.sha256(
        b"def answer(x):\n    return x + 1\n").hexdigest()[:12]


def test_every_checked_source_is_inspects() -> None:
    """The hash's text is ``inspect.getsource``'s, for each function and class the patch and
    the front check (classes are found in one parse of their module: ``_moto_check._source``)."""
    names = [*_moto_patch.EXPECTED_SIGNATURES, *_moto_front.SIGNATURES]
    found = [f for f in map(_moto_check.find, names) if not isinstance(f, Exception)]
    assert sum(isinstance(f, type) for f in found) >= 20
    assert [f for f in found if _moto_check._source(f) != inspect.getsource(f)] == []


def test_a_class_source_is_inspects_when_decorated_nested_or_defined_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "import functools\n\n"
        "class Twice:\n    first = 1\n\n"
        "class Twice:  # the second\n    second = 2\n\n"
        "@functools.total_ordering\n# between\nclass Decorated:\n"
        "    def __lt__(self, other):\n        return False\n\n"
        "    class Inner:\n        x = 1\n\n"
        "def make():\n    class Local:\n        y = 2\n    return Local\n"
    )
    (tmp_path / "classes_module.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "classes_module", raising=False)
    module = importlib.import_module("classes_module")
    for cls in (module.Twice, module.Decorated, module.Decorated.Inner, module.make()):
        assert _moto_check._source(cls) == inspect.getsource(cls), cls
    assert _moto_check._source(module.Decorated).startswith("@functools.total_ordering\n")
    # Which of two definitions of one name: from 3.13 a class records the line it was defined
    # on (``__firstlineno__``), and inspect (so the hash) takes the definition that made it, the
    # second; before 3.13 inspect took the first ``class Twice`` of the file.
    if sys.version_info >= (3, 13):
        assert _moto_check._source(module.Twice) == "class Twice:  # the second\n    second = 2\n"
    else:
        assert _moto_check._source(module.Twice) == "class Twice:\n    first = 1\n"


def test_a_changed_source_with_the_same_signature_is_refused(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    from moto.dynamodb.models.table import Table

    _restore_after(monkeypatch)
    monkeypatch.delenv(_moto_patch.FORCE_ENV, raising=False)
    monkeypatch.setattr(Table, "scan", _other_scan)
    digest = _SOURCE_HASH(_other_scan)
    expected = (
        f"moto.dynamodb.models.table.Table.scan has changed (source sha256 {digest}, "
        "verified: 5ef1ab21eef0)"
    )
    assert _moto_patch.check() == [expected]
    with pytest.raises(_moto_patch.MotoPatchError) as raised:
        _moto_patch.apply()
    version = importlib.metadata.version("moto")
    assert str(raised.value) == (
        f"dynaunique's moto patch does not fit moto {version} (verified: moto 5.2.0 to 5.2.5): "
        f"{expected}. Set DYNAUNIQUE_MOTO_PATCH_FORCE=1 to patch it anyway, or "
        "DYNAUNIQUE_STOCK_MOTO=1 to run stock moto (slow on large tables)"
    )
    assert not _moto_patch.is_applied()


def test_the_force_variable_patches_a_changed_source(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models.table import Table

    _restore_after(monkeypatch)
    monkeypatch.setattr(Table, "scan", _other_scan)
    monkeypatch.setenv(_moto_patch.FORCE_ENV, "1")
    _moto_patch.apply()
    assert _moto_patch.is_applied()
    assert Table.scan.__wrapped__ is _other_scan


def test_what_cannot_change_while_the_server_runs_is_computed_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import backends
    from moto.core import responses, utils
    from moto.dynamodb.responses import DynamoHandler

    _restore_after(monkeypatch)
    stock_modules = list(backends.list_of_moto_modules())
    stock_names = utils.method_names_from_class(DynamoHandler)
    monkeypatch.setenv(_moto_patch.FORCE_ENV, "1")
    _moto_patch.apply()
    listing = backends.list_of_moto_modules
    assert listing is not backends.list_of_moto_modules.__wrapped__  # type: ignore[attr-defined]
    assert list(listing()) == stock_modules and "dynamodb" in stock_modules
    lookup = responses.method_names_from_class  # type: ignore[attr-defined]
    names = lookup(DynamoHandler)
    assert names == stock_names and "transact_write_items" in names
    names.append("mutated by a caller")
    assert lookup(DynamoHandler) == stock_names  # each caller gets its own list
