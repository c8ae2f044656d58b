"""An AWS Lambda handler that runs a migration's units for a Step Functions Distributed Map
(deploy/stepfunctions/migrate.asl.json; the runbook is in docs/migrations.md).

The state machine first asks for the segments (``{"action": "status"}``), maps over them —
each item invoking ``{"segment": I}`` until its answer is no longer ``more`` — and starts over
until the status says ``done``, phase after phase. Each invocation runs segment I of the current
phase (never another one) within the invocation's remaining time, minus a margin, and answers:

* ``more`` — it stopped at a checkpoint (time is up), or its segment is leased by another
  invocation (a retried one whose predecessor died: its lease expires): invoke it again;
* ``phase done`` — its segment of the current phase is settled; other items still work on theirs;
* ``done`` — every migration up to the target is applied.

Duplicates raise :class:`~dynaunique.migrations.DuplicatesFound` (the execution fails with the
report in its error message), as ``migrate`` exits 1.

Configuration comes from the environment (the event may override each, in lower case without the
prefix): ``DYNAUNIQUE_MODULE`` (the models module, required), ``DYNAUNIQUE_TOTAL_SEGMENTS``
(default 8), ``DYNAUNIQUE_TARGET``, ``DYNAUNIQUE_MIGRATIONS_DIR``, ``DYNAUNIQUE_LEASE_SECONDS``,
``DYNAUNIQUE_MAX_WCU``, ``DYNAUNIQUE_MAX_RCU`` (totals over all invocations),
``DYNAUNIQUE_CONCURRENCY``, ``DYNAUNIQUE_PAGE_SIZE`` (default 100), ``DYNAUNIQUE_MARGIN_SECONDS``
(default 20: the time kept for the last page and the checkpoint) and
``AWS_ENDPOINT_URL_DYNAMODB``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from dynaunique.errors import ConfigurationError
from dynaunique.migrations._kinds import RunState
from dynaunique.migrations._units import Unit, run_unit, state_of

#: The answers of a segment invocation, as the state machine's Choice state reads them.
MORE, PHASE_DONE, DONE = "more", "phase done", "done"

_ANSWERS = {RunState.MORE: MORE, RunState.IDLE: PHASE_DONE, RunState.DONE: DONE}


class LambdaContext(Protocol):
    """The part of Lambda's context object the handler uses."""

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the invocation is stopped."""


def _setting(event: Mapping[str, Any], name: str, default: Any = None) -> Any:
    value = event.get(name)
    if value is None:
        value = os.environ.get(f"DYNAUNIQUE_{name.upper()}", default)
    return value


def _unit(event: Mapping[str, Any], max_seconds: float | None) -> Unit:
    module = _setting(event, "module")
    if not module:
        raise ConfigurationError("set DYNAUNIQUE_MODULE to the models module (a dotted path)")
    lease = _setting(event, "lease_seconds")
    wcu, rcu = _setting(event, "max_wcu"), _setting(event, "max_rcu")
    concurrency = _setting(event, "concurrency")
    return Unit(str(module), int(_setting(event, "total_segments", 8)),
                target=_setting(event, "target") or None,
                migrations_dir=_setting(event, "migrations_dir") or None,
                endpoint=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or None,
                lease_seconds=float(lease) if lease else None,
                max_wcu=float(wcu) if wcu else None, max_rcu=float(rcu) if rcu else None,
                concurrency=int(concurrency) if concurrency else None,
                max_seconds=max_seconds, only=True,
                page_size=int(_setting(event, "page_size", 100)))


def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point: ``{"action": "status"}`` → ``{"done", "segments"}``;
    ``{"segment": I}`` → ``{"status": "more" | "phase done" | "done", "segment": I}``."""
    if event.get("action") == "status":
        unit = _unit(event, None)
        executor = unit.project().executor()
        return {"done": not executor.plan(unit.target),
                "segments": list(range(unit.total_segments))}
    margin = float(_setting(event, "margin_seconds", 20))
    seconds = context.get_remaining_time_in_millis() / 1000 - margin
    if seconds <= 0:
        raise ConfigurationError(f"the invocation has {seconds + margin:.1f} s left, less than "
                                 f"the margin of {margin:g} s: raise the function's timeout")
    report = run_unit(_unit(event, seconds), int(event["segment"]))
    return {"status": _ANSWERS[state_of(report)], "segment": report["segment"]}
