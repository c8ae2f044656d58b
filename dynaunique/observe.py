"""Logging and tracing: one structured event per notable thing, one span per write.

**Logging.** Every event is a record of a logger under ``dynaunique`` (``dynaunique.write``,
``dynaunique.connection``, ``dynaunique.migrations``), silent by default: the package logger has
a ``NullHandler`` and nothing else, so nothing is printed until the application configures
logging. Each record's message is a readable sentence and its ``dynaunique`` attribute (set with
``extra=``) a dict of machine-readable fields, always with ``"event"`` first::

    record.dynaunique == {"event": "unique_violation", "model": "User", ...}

Events are emitted where the thing happens — the sans-IO generators of
``dynaunique._transport.connection``, ``dynaunique._write.transaction`` and
``dynaunique._write.flush`` — so the sync and the asyncio senders emit the very same events. A value
of a ``hashed=True`` constraint never appears in any field or message: only its lock key (which
holds a digest) does. docs/observability.md lists the events.

**Tracing.** With OpenTelemetry's API installed (``pip install -e '/path/to/clone[otel]'``),
:func:`traced` opens one span per ``save``/``delete``/``update``/``atomic`` commit (and their
async forms), current while its requests are sent — so botocore's instrumented spans are its
children — and records what the write did on it. Without OpenTelemetry the import fails once,
here, and a write pays one ``is None`` check; with it but no tracer provider set, one more.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import attrs

from dynaunique.errors import HASHED as _HASHED

_trace: Any
try:  # optional: the `otel` extra
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised in a subprocess test
    _trace = None

#: The package logger: a ``NullHandler`` (added by ``import dynaunique``), so the library is
#: silent unless the app configures logging.
logger = logging.getLogger("dynaunique")
#: Outcomes of writes: violations, stale refusals, foreign locks, drift.
write_logger = logging.getLogger("dynaunique.write")
#: The retry loop: retries, resends, throttling, and (at DEBUG) each request sent.
connection_logger = logging.getLogger("dynaunique.connection")
#: Migration progress.
migrations_logger = logging.getLogger("dynaunique.migrations")

#: What a value of a ``hashed=True`` constraint is shown as in events (the one marker, from
#: :func:`dynaunique.errors.format_value`, which renders every value a message shows).
HASHED = _HASHED


def emit(log: logging.Logger, level: int, event: str, message: str, **fields: Any) -> None:
    """Log one event: ``message`` for people, ``{"event": event, **fields}`` as the record's
    ``dynaunique`` attribute for machines. Costs one ``isEnabledFor`` when silent."""
    if log.isEnabledFor(level):
        log.log(level, message, extra={"dynaunique": {"event": event, **fields}})


def enabled(log: logging.Logger, level: int) -> bool:
    """Whether ``log`` would emit at ``level`` (to skip building fields nobody reads)."""
    return log.isEnabledFor(level)


# --- tracing -------------------------------------------------------------------------------------


@attrs.define
class WriteStats:
    """What one traced write did, filled in by the generators while it runs."""

    round_trips: int = 0
    retries: int = 0
    plan: Any = None
    #: Orphan locks the write took over (``dynaunique._write.heal``).
    healed: int = 0


_stats: contextvars.ContextVar[WriteStats | None] = contextvars.ContextVar(
    "dynaunique_write_stats", default=None)


#: The stats of the traced write running in this context (None: tracing is off). The context
#: variable's own ``get``: the generators ask it on every request, so it costs no call of ours.
stats = _stats.get


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    # Imported here: errors imports nothing of this module, but keep the import graph flat.
    from dynaunique.errors import ConcurrentModificationError, UniqueViolation

    if isinstance(exc, UniqueViolation):
        return "unique_violation"
    if isinstance(exc, ConcurrentModificationError):
        return "concurrent_modification"
    return "error"


def _attributes(model: str, operation: str, st: WriteStats,
                exc: BaseException | None) -> dict[str, Any]:
    plan = st.plan
    constraints: list[str] = []
    items = 0
    if plan is not None:
        items = len(plan.writes)
        constraints = sorted({w.lock.constraint for w in plan.writes
                              if getattr(w, "lock", None) is not None})
    attributes = {
        "dynaunique.model": model,
        "dynaunique.operation": operation,
        "dynaunique.constraints": constraints,
        "dynaunique.items": items,
        "dynaunique.round_trips": st.round_trips,
        "dynaunique.retries": st.retries,
        "dynaunique.outcome": _outcome(exc),
    }
    if st.healed:   # only on a write that took orphan locks over (dynaunique._write.heal)
        attributes["dynaunique.healed_orphans"] = st.healed
    return attributes


#: The shared no-op context of an untraced write.
_UNTRACED: AbstractContextManager[None] = nullcontext()

#: OpenTelemetry's getter of the global tracer provider (None: OpenTelemetry is not installed)
#: and the API's default provider, a proxy whose spans record nothing until a provider is set.
#: Tracing is on when the first is not None and what it returns is not the second (:func:`traced`).
_tracer_provider: Any = None if _trace is None else _trace.get_tracer_provider
_UNSET_PROVIDER: Any = None if _trace is None else _trace.ProxyTracerProvider


def traced(model: str, operation: str) -> AbstractContextManager[None]:
    """One span ``dynaunique.<operation>`` around a write, current while it runs (sync or
    async: the span lives in this context's ``contextvars``). A shared no-op context when
    tracing is off: no OpenTelemetry, or no tracer provider set yet (the API's default proxy,
    whose spans record nothing) — then a write pays these two checks only."""
    if _tracer_provider is None or isinstance(_tracer_provider(), _UNSET_PROVIDER):
        return _UNTRACED
    return _span(model, operation)


@contextmanager
def _span(model: str, operation: str) -> Iterator[None]:
    """The span of :func:`traced`, opened whatever the provider (the caller checked)."""
    tracer = _trace.get_tracer("dynaunique")
    st = WriteStats()
    token = _stats.set(st)
    try:
        with tracer.start_as_current_span(f"dynaunique.{operation}", record_exception=False,
                                          set_status_on_exception=False) as span:
            try:
                yield
            except BaseException as exc:
                span.set_attributes(_attributes(model, operation, st, exc))
                if isinstance(exc, Exception):
                    # The exception's message never carries a hashed value (UniqueViolation
                    # omits it), so recording it is safe.
                    span.record_exception(exc)
                    span.set_status(_trace.Status(_trace.StatusCode.ERROR, type(exc).__name__))
                raise
            span.set_attributes(_attributes(model, operation, st, None))
    finally:
        _stats.reset(token)
