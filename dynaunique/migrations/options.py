"""How a migration runs — one frozen value, :class:`MigrationOptions` — and what it tells its
caller as it goes — one callback, :data:`ProgressCallback`, fed :class:`ProgressEvent` values.

``MigrationExecutor(loader, recorder, models, options, progress_callback=...)`` takes both;
``Project.options()`` builds the value from ``[tool.dynaunique]``, and ``migrate``'s options,
``run_on_dask`` and the Lambda handler each build one, so a knob is named in one place. The
options are plain, picklable data (a Dask task or a Lambda invocation receives them); the
callback is the caller's (Django's ``MigrationExecutor(progress_callback=...)``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dynaunique.errors import ConfigurationError, MigrationError
from dynaunique.migrations._kinds import ProgressState
from dynaunique.migrations._ledger import Counters


class InvalidOptionError(MigrationError, ConfigurationError):
    """A :class:`MigrationOptions` value is out of range or of the wrong type (named, with what
    it must be). A configuration mistake: the CLI exits 2; nothing has run."""

    exit_code = 2


def _number(name: str, value: Any, *, integer: bool, low: float, high: float | None = None,
            above: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    if ok:
        number = float(value)
        ok = math.isfinite(number) and (number > low if above else number >= low) \
            and (high is None or number <= high)
    if not ok:
        what = "an integer" if integer else "a number"
        bound = f"above {low:g}" if above else f"at least {low:g}"
        if high is not None:
            bound = f"in {low:g}..{high:g}"
        raise InvalidOptionError(f"MigrationOptions {name} must be {what} {bound}, "
                                 f"not {value!r}")


@attrs.frozen
class MigrationOptions:
    """How :meth:`MigrationExecutor.migrate <dynaunique.migrations.MigrationExecutor.migrate>`
    runs. Every field has the default ``migrate`` uses; bad values raise
    :class:`InvalidOptionError` when the value is made. ``attrs.evolve(options, page_size=10)``
    (or :meth:`replace`) gives a changed copy.

    * ``segments`` — scan segments (threads) of a new phase, 1..1000 (``--segments``);
    * ``worker`` — ``(I, N)``: run as one of several workers, each phase split in *N* segments,
      starting with segment *I* and taking any other open one (``--segment``,
      ``--total-segments``); ``only`` — run segment *I* alone (a Step Functions Map item);
    * ``concurrency`` — lock writes of a page in flight at once, per segment, 1..256;
    * ``max_wcu``, ``max_rcu`` — caps on write and scan read units per second, over all
      workers (None: not capped);
    * ``page_size`` — items per scanned page (a run stops at a page boundary);
    * ``lease_seconds`` — how long a lease lasts unless renewed (a dead runner's is taken over
      after it); ``wait_seconds`` — how long a worker waits, polling every ``poll_seconds``,
      when every open segment is leased by a running worker, before it ends as ``idle``;
    * ``conflict_cap`` — duplicates a segment stores before it stops scanning;
    * ``accept_other_secret`` — judge hashed locks the current lock secret did not make as its
      own (a sweep deletes them as stale, a backfill locks beside them); without it a phase that
      meets them stops with a :class:`~dynaunique.migrations.LockSecretError`.
    """

    segments: int = 1
    worker: tuple[int, int] | None = None
    only: bool = False
    concurrency: int = 1
    max_wcu: float | None = None
    max_rcu: float | None = None
    page_size: int = 100
    lease_seconds: float = 60.0
    wait_seconds: float = 0.0
    poll_seconds: float = 1.0
    conflict_cap: int = 500
    accept_other_secret: bool = False

    def __attrs_post_init__(self) -> None:
        _number("segments", self.segments, integer=True, low=1, high=1000)
        _number("concurrency", self.concurrency, integer=True, low=1, high=256)
        _number("page_size", self.page_size, integer=True, low=1)
        _number("conflict_cap", self.conflict_cap, integer=True, low=1)
        _number("lease_seconds", self.lease_seconds, integer=False, low=0, above=True)
        _number("poll_seconds", self.poll_seconds, integer=False, low=0, above=True)
        _number("wait_seconds", self.wait_seconds, integer=False, low=0)
        for name in ("max_wcu", "max_rcu"):
            if getattr(self, name) is not None:
                _number(name, getattr(self, name), integer=False, low=0, above=True)
        for name in ("only", "accept_other_secret"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionError(f"MigrationOptions {name} must be True or False, not "
                                         f"{getattr(self, name)!r}")
        worker = self.worker
        if worker is not None and not (
                isinstance(worker, tuple) and len(worker) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in worker)
                and 0 <= worker[0] < worker[1] <= 1000):
            raise InvalidOptionError(
                f"MigrationOptions worker must be (segment, total_segments) with the segment in "
                f"0..total-1 and the total at most 1000, not {worker!r}")
        if self.only and worker is None:
            raise InvalidOptionError("MigrationOptions only=True runs one worker's segment "
                                     "alone: it needs worker=(segment, total_segments)")

    def replace(self, **changes: Any) -> MigrationOptions:
        """A copy with ``changes`` (field names); an unknown name is refused, naming the
        fields."""
        unknown = sorted(set(changes) - set(FIELDS))
        if unknown:
            raise InvalidOptionError(f"no such migration option: {', '.join(unknown)}; the "
                                     f"options are {', '.join(FIELDS)}")
        return attrs.evolve(self, **changes)


#: The names of :class:`MigrationOptions`' fields, in order.
FIELDS: tuple[str, ...] = tuple(f.name for f in attrs.fields(MigrationOptions))


@attrs.frozen
class ProgressEvent:
    """What a run tells its :data:`ProgressCallback`, as it goes.

    ``state`` says which moment (a :class:`~dynaunique.migrations._kinds.ProgressState`):

    * ``started`` — phase ``label`` starts or resumes; ``counters`` what earlier runs of it did
      (its duplicates those standing then), ``estimate`` the table's approximate item count
      when the phase scans;
    * ``running`` — a page of the phase was processed and checkpointed; ``counters`` are the
      page's (a delta: sum them), ``segment`` of ``segments`` says where;
    * ``record`` — one record (or lock) of a page was processed, before the page's checkpoint
      (called from scan and write threads; ``counters`` is None);
    * ``finished`` — the phase completed; ``counters`` its totals;
    * ``note`` — ``text`` is worth a line of output (``label`` empty).
    """

    state: ProgressState
    label: str = ""
    counters: Counters | None = None
    estimate: int | None = None
    text: str = ""
    segment: int | None = None
    segments: int | None = None


#: ``progress_callback(event)``: called from the running threads (it must be thread-safe); an
#: exception it raises stops the run where it is, as a crash would (the checkpoints resume it).
ProgressCallback = Callable[[ProgressEvent], None]


def legacy_options(options: MigrationOptions | None, legacy: Mapping[str, Any], where: str,
                   ) -> MigrationOptions:
    """``options`` with the knobs ``where`` took as keyword arguments before
    :class:`MigrationOptions` (deprecated: a :class:`DeprecationWarning` names the call to
    write instead)."""
    base = options if options is not None else MigrationOptions()
    if not legacy:
        return base
    changed = base.replace(**legacy)  # an unknown name is refused before any warning
    given = ", ".join(f"{k}={v!r}" for k, v in legacy.items())
    warnings.warn(f"{where}(..., {given}) is deprecated: pass "
                  f"options=MigrationOptions({given}) (dynaunique.migrations.MigrationOptions)",
                  DeprecationWarning, stacklevel=3)
    return changed
