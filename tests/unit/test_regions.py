"""dynaunique/_transport/regions.py without a server: a table's mode read from DescribeTable once,
the home region's precedence, and the route chosen (or refused) for each mode — a strong
consistency table's for the flush's protocol."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dynaunique import GlobalTableError
from dynaunique._transport import regions as _regions
from dynaunique.testing._replica_parts import tables_of, written_keys


class FakeConnection:
    """What table_mode uses of a PynamoDB connection: its client's region and describe_table."""

    def __init__(self, region: str, described: dict[str, Any]) -> None:
        self.client = SimpleNamespace(meta=SimpleNamespace(region_name=region))
        self.described = described
        self.asked = 0

    def describe_table(self, table: str) -> dict[str, Any]:
        self.asked += 1
        return self.described


GLOBAL = {"Replicas": [{"RegionName": "eu-west-1"}, {"RegionName": "us-east-1"}]}


@pytest.fixture(autouse=True)
def forgotten(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv(_regions.HOME_REGION_ENV, raising=False)
    monkeypatch.chdir(tmp_path)   # no pyproject.toml
    _regions.forget()
    yield
    _regions.forget()


def meta(region: str = "eu-west-1", **extra: Any) -> type:
    return type("Meta", (), {"table_name": "t", "region": region, "host": None, **extra})


def test_the_mode_is_read_once_and_lists_the_other_regions() -> None:
    connection = FakeConnection("eu-west-1", {**GLOBAL, "MultiRegionConsistency": "STRONG"})
    first = _regions.table_mode("t", connection)
    assert _regions.table_mode("t", connection) == first
    assert connection.asked == 1
    assert first == _regions.TableMode("t", "eu-west-1", ("us-east-1",), "STRONG")
    assert first.regions == ("eu-west-1", "us-east-1")
    assert first.describe() == "global table (strong consistency) in eu-west-1, us-east-1"
    lone = _regions.table_mode("u", FakeConnection("eu-west-1", {}))
    assert (lone.is_global, lone.consistency, lone.describe()) == (
        False, None, "one region (eu-west-1)")


def test_the_home_region_meta_then_environment_then_pyproject(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.dynaunique]\nhome_region = "ap-south-1"\n')
    assert _regions.home_region(meta()) == "ap-south-1"
    monkeypatch.setenv(_regions.HOME_REGION_ENV, "us-west-2")
    assert _regions.home_region(meta()) == "us-west-2"
    assert _regions.home_region(meta(home_region="us-east-1")) == "us-east-1"


def test_routes_for_each_mode() -> None:
    def connect(m: Any) -> FakeConnection:
        return FakeConnection(m.region, GLOBAL)

    home = meta(home_region="us-east-1")
    routed = _regions.route(home, connect)
    assert (routed.region, routed.table_name, routed.host) == ("us-east-1", "t", None)
    assert _regions.route(home, connect) is routed   # kept per Meta
    at_home = meta("us-east-1", home_region="us-east-1")
    assert _regions.route(at_home, connect) is at_home
    homeless = meta()
    assert _regions.route(homeless, connect, write=False) is homeless   # a lookup stays local
    with pytest.raises(GlobalTableError) as refused:
        _regions.route(homeless, connect)
    assert (refused.value.table, refused.value.mode, refused.value.regions) == (
        "t", "EVENTUAL", ("eu-west-1", "us-east-1"))


def test_a_strong_table_is_routed_for_the_protocol_and_refused_to_any_other_write() -> None:
    """The flush routes with ``strong=True`` (``sending_for``): its writes go where the model
    points, and ``strong`` tells it the table's mode; any other write (a tool's transaction)
    is refused. An eventually consistent table without a home region is refused either way."""
    def connect(m: Any) -> FakeConnection:
        return FakeConnection(m.region, {**GLOBAL, "MultiRegionConsistency": "STRONG"})

    mine = meta()
    assert not _regions.strong(mine)   # not routed yet
    assert _regions.route(mine, connect, strong=True) is mine
    assert _regions.strong(mine)
    with pytest.raises(GlobalTableError) as refused:
        _regions.route(mine, connect)
    assert refused.value.mode == "STRONG"
    assert _regions.route(mine, connect, write=False) is mine
    eventual = meta(table_name="e")
    with pytest.raises(GlobalTableError, match="none is set"):
        _regions.route(eventual, lambda m: FakeConnection(m.region, GLOBAL), strong=True)
    assert not _regions.strong(eventual)
    lone = meta(table_name="l")
    assert _regions.route(lone, lambda m: FakeConnection(m.region, {}), strong=True) is lone
    assert not _regions.strong(lone)


def test_the_server_finds_every_key_a_write_wrote() -> None:
    group: dict[str, Any] = {
        "t": SimpleNamespace(regions={"us-east-1", "eu-west-1"}, key_names=["PK"])}
    key = {"PK": {"S": "a"}}
    request = {"TransactItems": [
        {"Put": {"TableName": "t", "Item": {**key, "x": {"S": "1"}}}},
        {"ConditionCheck": {"TableName": "t", "Key": {"PK": {"S": "c"}}}},
        {"Delete": {"TableName": "t", "Key": {"PK": {"S": "d"}}}},
        {"Put": {"TableName": "other", "Item": {"PK": {"S": "o"}}}}]}
    assert written_keys("TransactWriteItems", request, group, "us-east-1") == [
        ("t", key), ("t", {"PK": {"S": "d"}})]
    assert written_keys("PutItem", {"TableName": "t", "Item": key}, group, "ap-south-1") == []
    assert tables_of("TransactWriteItems", request) == ["t", "other"]
    assert tables_of("BatchWriteItem", {"RequestItems": {"a": [], "b": []}}) == ["a", "b"]
