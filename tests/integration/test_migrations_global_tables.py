"""``migrate`` on a global table (issue 35): the migrations read and write where the library's
writes go, the table's home region, whatever region the models point at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.global_tables import EAST, WEST, regional_client
from support.migrations_workspace import UNIQUE_EMAIL, Workspace, open_workspace

from dynaunique._transport import regions as _regions
from dynaunique.errors import GlobalTableError
from dynaunique.testing import set_replication_delay

TABLE = "mig_global_accounts"


@pytest.fixture
def ws(dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    workspace = open_workspace(tmp_path, dynaunique_db, TABLE, monkeypatch)  # made in EAST
    workspace.client.update_table(TableName=TABLE,
                                  ReplicaUpdates=[{"Create": {"RegionName": WEST}}])
    _regions.forget()
    yield workspace
    _regions.forget()


def test_a_backfill_from_another_region_is_written_in_the_home_region(ws: Workspace) -> None:
    set_replication_delay(ws.endpoint, 30)   # nothing reaches the other replica meanwhile
    ws.put_raw_many({f"ACCT#{i:03d}": {"email": f"user{i}@x.io"} for i in range(5)})  # at home
    # The application runs in WEST; its table's home region is EAST.
    ws.deploy(email=UNIQUE_EMAIL, meta=f'region = "{WEST}"\nhome_region = "{EAST}"')
    assert ws.project().make_migrations().changed
    result = ws.project().executor().migrate()
    assert result.applied == ["0001_initial"]
    assert ws.locks() == ws.expected_locks()   # read in EAST
    assert len(ws.locks()) == 5
    assert ws.ledger() == ws.applied_only()
    west = regional_client(ws.endpoint, WEST).scan(TableName=TABLE, ConsistentRead=True)
    assert west["Items"] == []   # no lock, no ledger item written in WEST


def test_a_backfill_on_a_global_table_without_a_home_region_is_refused_before_writing(
        ws: Workspace) -> None:
    """As the library's writes and ``repair`` are: a lock put in whichever region the models point
    at could be granted again in another region. ``showmigrations`` (a read) still answers."""
    ws.put_raw_many({f"ACCT#{i:03d}": {"email": f"user{i}@x.io"} for i in range(3)})
    ws.deploy(email=UNIQUE_EMAIL)   # no home region anywhere
    assert ws.project().make_migrations().changed
    with pytest.raises(GlobalTableError, match="home"):
        ws.project().executor().migrate()
    assert ws.locks() == {}
    assert ws.ledger() == set()
    assert not ws.project().recorder().is_applied("0001_initial")
