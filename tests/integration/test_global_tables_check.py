"""Cross-region drift (dynaunique/audit/_replicas.py): ``dynaunique check --regions`` compares
the lock items of a global table's replicas — clean once replication has drained, and a double
grant made by writers that bypassed the home region named with both regions and owners."""

from __future__ import annotations

import json

import support.global_models as gm
from click.testing import CliRunner, Result
from support.global_tables import EAST, WEST, make_global, member_model

from dynaunique import audit
from dynaunique.cli import cli
from dynaunique.testing import set_replication_delay

REGIONS = f"{EAST},{WEST}"


def run(endpoint: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["check", gm.__name__, "--regions", REGIONS, *args,
                                    "--endpoint", endpoint])


def test_replicas_agree_once_drained_and_a_bypass_double_grant_names_both_regions(
        dynaunique_db: str) -> None:
    home = member_model("gt_cli", EAST, dynaunique_db, home=EAST)
    make_global(home, dynaunique_db)
    home(pk="M0", email="zero@x.io").save()   # replicated before the next request (delay 0)
    agreed = run(dynaunique_db)
    assert agreed.exit_code == 0, agreed.output
    assert "global table (eventual consistency) in eu-west-1, us-east-1" in agreed.output
    assert "The replicas agree on every lock." in agreed.output

    set_replication_delay(dynaunique_db, 30)
    # A misconfigured service in eu-west-1 names its own region home: both regions grant.
    home(pk="M1", email="ada@x.io").save()
    member_model("gt_cli", WEST, dynaunique_db, home=WEST)(pk="M2", email="ADA@x.io").save()
    code = run(dynaunique_db, "--json")
    assert code.exit_code == 1, code.output
    assert json.loads(code.output)["differences"] == [
        {"table": "gt_cli", "lock": "UNIQ#EMAIL#ada@x.io", "kind": "double_grant",
         "owners": {EAST: "M1", WEST: "M2"}}]
    report = audit.compare_regions([home], [EAST, WEST])
    assert [d.describe() for d in report.differences] == [
        "UNIQ#EMAIL#ada@x.io: grants it — us-east-1 to M1, eu-west-1 to M2"]
    assert dict(report.locks) == {EAST: 2, WEST: 2}


def test_a_lock_only_one_replica_holds_is_not_everywhere(dynaunique_db: str) -> None:
    home = member_model("gt_cli", EAST, dynaunique_db, home=EAST)
    make_global(home, dynaunique_db)
    set_replication_delay(dynaunique_db, 30)
    home(pk="M1", email="ada@x.io").save()   # in flight to eu-west-1
    report = audit.compare_regions([home], [EAST, WEST])
    assert [(d.kind, d.owner_labels()) for d in report.differences] == [
        ("not_everywhere", ("M1", "-"))]
    assert not report.clean


def test_check_of_one_region_names_the_table_s_mode(dynaunique_db: str) -> None:
    home = member_model("gt_cli", EAST, dynaunique_db, home=EAST)
    make_global(home, dynaunique_db)
    home(pk="M0", email="zero@x.io").save()
    result = CliRunner().invoke(cli, ["check", gm.__name__, "--endpoint", dynaunique_db])
    assert result.exit_code == 0, result.output
    assert ("Table gt_cli: global table (eventual consistency) in eu-west-1, us-east-1; this "
            "check read us-east-1's replica") in " ".join(result.output.split())
