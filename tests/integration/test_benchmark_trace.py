"""``python -m benchmarks.trace --cases``: the four saves of issue 39's table traced on the local
server. A report, not a gate: this checks that each case runs and is what it says (the writes
reach the server, the counts are of the right package), never how many functions it takes."""

from __future__ import annotations

import sys

import pytest
from support.invariants import raw_client

from benchmarks import trace

# benchmarks/trace.py names each function by its code object's co_qualname, new in Python 3.11.
pytestmark = pytest.mark.skipif(sys.version_info < (3, 11),
                                reason="benchmarks.trace needs Python 3.11 (code.co_qualname)")


def test_the_four_saves_are_traced_on_the_server(dynaunique_db: str) -> None:
    traced = trace.measure_saves(dynaunique_db, warmup=1)
    assert list(traced) == [*trace.CASES, "PynamoDB save() (plain model)"]
    for case in trace.CASES:
        t = traced[case]
        assert t.package == "dynaunique" and t.functions > 0, case
        # Every case went through the model and out through the one request path.
        assert {"dynaunique/model.py", "dynaunique/_transport/wire.py"} <= set(t.modules), case
    assert traced["PynamoDB save() (plain model)"].modules[0] == "pynamodb/models.py"
    # Each record was created, read back (`get` raises if the create did not happen) and deleted
    # with its locks for real: nothing is left of them; the plain model's two items are.
    client = raw_client(dynaunique_db)
    assert client.scan(TableName="bench_accounts")["Items"] == []
    assert client.scan(TableName="bench_trace_plain", Select="COUNT")["Count"] == 2
    table = trace.render_saves(traced).splitlines()
    assert len(table) == 2 + 5 and table[2].startswith("| create | ")
