"""Issue #26's straight write path, counted (not timed): one create ``save()`` traced by
``benchmarks.trace`` in a child process (its stub transport patches the shared connection of
the model's endpoint, which other tests of this process must not meet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# benchmarks/trace.py names each function by its code object's co_qualname, new in Python 3.11.
pytestmark = pytest.mark.skipif(sys.version_info < (3, 11),
                                reason="benchmarks.trace needs Python 3.11 (code.co_qualname)")

_SCRIPT = """
import json
from benchmarks import trace
ours, _ = trace.measure()
print(json.dumps({"switches": ours.switches, "modules": list(ours.modules),
                  "calls": [list(c) for c in ours.calls]}))
"""


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=120)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_one_create_save_stays_on_its_straight_line(traced: dict[str, Any]) -> None:
    # Issue #26's target: at most 8 library modules and 20 module switches. Measured at the
    # merge of both halves: 8 modules, 13 switches. The planning is three modules and four
    # switches (_state -> _record, the item checked -> _locks, its key, its locks, their diff
    # and puts -> _render -> _flush); the sending half is five modules (model, _flush,
    # _connection, _state, _wire) and the rest of the switches, three of them the nested
    # sans-IO generators handing the answer back up (_wire -> _flush -> _connection -> _state).
    # More means the path wandered again.
    assert traced["switches"] <= 14
    assert len(traced["modules"]) <= 8
    planning = [m for m, _ in traced["calls"] if m in _PLANNING]
    assert sorted(set(planning)) == ["dynaunique/_locks.py", "dynaunique/_record.py",
                                     "dynaunique/_render.py"]


#: The modules a save's planning may touch (#26's planning half): at most three of them.
_PLANNING = {f"dynaunique/{m}.py" for m in ("_record", "_items", "normalizers", "_locks",
                                              "_lockcode", "_plan", "_writes", "_render")}


def test_sending_a_create_touches_five_modules(traced: dict[str, Any]) -> None:
    # The span (observe) and the request's set-up (_codec) are off the path of an untraced
    # create; so are the answers' and the refusals' modules, which only a failure needs.
    sending = {f"dynaunique/{m}.py" for m in (
        "model", "_flush", "observe", "_connection", "_state", "_wire", "_codec", "_answers",
        "_transaction")}
    assert [m for m in traced["modules"] if m in sending] == [
        "dynaunique/model.py", "dynaunique/_flush.py", "dynaunique/_connection.py",
        "dynaunique/_state.py", "dynaunique/_wire.py"]


def test_the_flush_calls_no_method_of_the_model(traced: dict[str, Any]) -> None:
    calls = [tuple(c) for c in traced["calls"]]
    start = next(i for i, (module, _) in enumerate(calls) if module == "dynaunique/_flush.py")
    assert calls[:start] == [("dynaunique/model.py", "Model.save"),
                             ("dynaunique/model.py", "pynamodb_writes")]
    assert [c for c in calls[start:] if c[0] == "dynaunique/model.py"
            or c[0].startswith("dynaunique/_model/")] == []


def test_a_create_is_planned_once_and_sent_once(traced: dict[str, Any]) -> None:
    names = [name for _, name in traced["calls"]]
    for step in ("plan", "plan_save_from", "render", "outgoing", "execute_steps", "exchange_steps",
                 "finish_steps"):
        assert step in names, step
    # No merge for a unit of one, no guard off other models' locks for a create, no span.
    for skipped in ("merge", "_guard_others", "_span", "as_operation"):
        assert skipped not in names, skipped
