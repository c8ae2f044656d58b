"""The soak (test_soak.py) again, with the local server cancelling 10% of all transactions with
``TransactionConflict``: conflict retries run end to end, and every outcome is still accounted for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from support.local_server import server_state

from dynaunique.testing import set_conflict_rate

from .test_soak import Soak, _seed, soak_table

if TYPE_CHECKING:
    from .conftest import Summary

__all__ = ["soak_table"]  # the fixture, imported so this module can use it


def test_soak_with_10_percent_conflicts(soak_table: str, soak_ops: int, summary: Summary) -> None:
    seed = _seed()
    set_conflict_rate(soak_table, 0.10, seed=seed)
    soak = Soak(soak_table, seed)
    seconds = soak.run(soak_ops)
    injected = server_state(soak_table)["conflicts_injected"]
    set_conflict_rate(soak_table, 0.0)
    soak.verify()
    summary.add("soak, 10% conflicts", [*soak.describe(seconds, soak_ops),
                                        f"conflicts injected: {injected}"])
    assert not soak.problems, "\n".join(soak.problems[:20])
    assert injected > 0
    ok = sum(v for k, v in soak.outcomes.items() if k[1] == "ok")
    assert ok > soak_ops // 4, soak.outcomes
