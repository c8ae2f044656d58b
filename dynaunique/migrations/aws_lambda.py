"""An AWS Lambda handler that runs a migration's assignments for a Step Functions Distributed
Map (deploy/stepfunctions/migrate.asl.json; the runbook is in docs/migrations.md).

The state machine first asks for the segments (``{"action": "status"}``), maps over them —
each item invoking ``{"segment": I}`` until its answer is no longer ``more`` — and starts over
until the status says ``done``, phase after phase. Each invocation runs segment I of the current
phase (never another one) within the invocation's remaining time, minus a margin, and answers:

* ``more`` — it stopped at a checkpoint (time is up), or its segment is leased by another
  invocation (a retried one whose predecessor died: its lease expires): invoke it again;
* ``phase done`` — its segment of the current phase is at rest; other items still work on
  theirs;
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
from dynaunique.migrations._assignments import Assignment, run_assignment, state_of
from dynaunique.migrations._kinds import RunState
from dynaunique.migrations.project import load_settings, options_from

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


def _field(name: str, value: Any, kind: type[int] | type[float], minimum: float) -> Any:
    """``value`` (from the event, or a string from the environment) as a ``kind`` of at least
    ``minimum``; anything else — a bool, a fraction for an integer, a word — is refused with
    the field named, before anything runs."""
    number: int | float | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int) or (kind is float and isinstance(value, float)):
        number = value
    elif isinstance(value, str):
        try:
            number = kind(value.strip())
        except ValueError:
            number = None
    if number is None or number != number or number in (float("inf"), float("-inf")) \
            or number < minimum:
        raise ConfigurationError(
            f"{name} must be {'an integer' if kind is int else 'a number'} of at least "
            f"{minimum:g}, not {value!r}")
    return number


def _optional(name: str, value: Any, kind: type[int] | type[float], minimum: float) -> Any:
    return None if value is None or value == "" else _field(name, value, kind, minimum)


def _assignment(event: Mapping[str, Any], max_seconds: float | None) -> Assignment:
    """The event (its settings over the environment's) as an :class:`Assignment`. The event's
    and the environment's word for the migration to migrate to stays ``target``
    (``DYNAUNIQUE_TARGET``), ``migrate``'s ``TARGET``: deployed state machines send it
    (docs/decisions.md, the glossary); it becomes :attr:`Assignment.to_migration`."""
    module = _setting(event, "module")
    if not module or not isinstance(module, str):
        raise ConfigurationError("set DYNAUNIQUE_MODULE to the models module (a dotted path)")
    target = _setting(event, "target")
    directory = _setting(event, "migrations_dir")
    for name, text in (("target", target), ("migrations_dir", directory)):
        if text is not None and not isinstance(text, str):
            raise ConfigurationError(f"{name} must be a string, not {text!r}")
    total = _field("total_segments", _setting(event, "total_segments", 8), int, 1)
    options = options_from(
        load_settings(module), worker=(0, total), only=True,  # run_assignment sets the segment
        lease_seconds=_optional("lease_seconds", _setting(event, "lease_seconds"), float, 0),
        max_wcu=_optional("max_wcu", _setting(event, "max_wcu"), float, 0),
        max_rcu=_optional("max_rcu", _setting(event, "max_rcu"), float, 0),
        concurrency=_optional("concurrency", _setting(event, "concurrency"), int, 1),
        page_size=_field("page_size", _setting(event, "page_size", 100), int, 1))
    return Assignment(module, total, options, to_migration=target or None,
                      migrations_dir=directory or None,
                      endpoint=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or None,
                      max_seconds=max_seconds)


def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    """The Lambda entry point: ``{"action": "status"}`` → ``{"done", "segments"}``;
    ``{"segment": I}`` → ``{"status": "more" | "phase done" | "done", "segment": I}``.

    :raises ConfigurationError: the event is not one of these (an unknown action, no segment, a
        segment that is not an integer in ``range(total_segments)``, a setting of the wrong
        type), naming the field; nothing has run.
    """
    if not isinstance(event, Mapping):
        raise ConfigurationError(f"the event must be a JSON object, not {event!r}")
    if "action" in event:
        if event["action"] != "status":
            raise ConfigurationError(
                f'action must be "status" (or leave it out and give a segment), '
                f"not {event['action']!r}")
        assignment = _assignment(event, None)
        executor = assignment.project().executor()
        return {"done": not executor.plan(assignment.to_migration),
                "segments": list(range(assignment.total_segments))}
    if "segment" not in event:
        raise ConfigurationError('the event needs a segment ({"segment": I}) or '
                                 '{"action": "status"}')
    segment = _field("segment", event["segment"], int, 0)
    margin = _field("margin_seconds", _setting(event, "margin_seconds", 20), float, 0)
    seconds = context.get_remaining_time_in_millis() / 1000 - margin
    assignment = _assignment(event, seconds)
    if segment >= assignment.total_segments:
        raise ConfigurationError(f"segment must be below total_segments "
                                 f"({assignment.total_segments}), not {segment}")
    if seconds <= 0:
        raise ConfigurationError(f"the invocation has {seconds + margin:.1f} s left, less than "
                                 f"the margin of {margin:g} s: raise the function's timeout")
    report = run_assignment(assignment, segment)
    return {"status": _ANSWERS[state_of(report)], "segment": report["segment"]}
