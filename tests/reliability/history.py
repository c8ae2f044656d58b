"""A Jepsen-style history checker for one unique field.

Many threads run random writes — create (a never-loaded save), change and clear (a loaded copy
saved, sometimes after a pause that lets it go stale), delete (loaded or never-loaded) — over a
few record keys and a few values of one unique field, several threads on the same record at
once. Each operation is recorded as an :class:`Event`: who, what, which value, when it was
invoked and when it completed (``time.monotonic``), and how it ended. Nothing about the
interleaving is assumed; the checker only uses what the history proves:

* a write *may* have taken effect at any moment between its invocation and its completion, if
  it succeeded or its outcome is unknown; a ``UniqueViolation`` or ``ConcurrentModificationError``
  means nothing of it was applied (that is the library's promise, so trusting it cannot hide a
  duplicate: a write that was applied anyway still shows up in the state it left);
* a record **certainly holds** v from the completion of a successful write of v until the
  invocation of the next write on that record that may have taken effect after it.

The checks (:func:`anomalies`):

1. no two records ever certainly held one value at the same time;
2. every ``UniqueViolation`` named a holder that plausibly held the value during the call: a
   write of v to that holder that may have taken effect was invoked before the violation
   completed, and no successful write certainly moved the holder off v after it and before the
   violating call began;
3. (checked on the table by the caller) the final locks equal the live values exactly —
   ``invariants.check``.

Every operation must also end in success or a dynaunique error; anything else is reported.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import attrs

from dynaunique import (
    ConcurrentModificationError,
    DynauniqueError,
    Model,
    OutcomeUnknownError,
    UniqueViolation,
)

#: The kinds of operation; ``create`` and ``change`` write a value, the others remove it.
WRITES_VALUE = frozenset({"create", "change"})
#: Outcomes after which the write may have been applied.
MAYBE_APPLIED = frozenset({"ok", "unknown", "error", "crash"})


@attrs.frozen
class Event:
    """One operation of the history."""

    thread: int
    op: str
    key: str
    #: The value written (None for clear and delete).
    value: str | None
    invoked: float
    completed: float
    #: ok | unique | conflict | unknown | error | absent (a loaded op found no record) | crash
    outcome: str
    #: For ``unique``: the record key the error named as holder (None: it named nobody).
    holder: str | None = None
    detail: str = ""

    @property
    def wrote(self) -> bool:
        """Whether a write was attempted (a loaded op that found no record wrote nothing)."""
        return self.outcome != "absent"

    @property
    def maybe_applied(self) -> bool:
        """Whether the write may have taken effect."""
        return self.wrote and self.outcome in MAYBE_APPLIED

    @property
    def leaves(self) -> str | None:
        """The value the record holds right after this write took effect (None: no value)."""
        return self.value if self.op in WRITES_VALUE else None

    def __str__(self) -> str:
        held = f" (holder {self.holder})" if self.outcome == "unique" else ""
        return (f"t{self.thread} {self.op} {self.key}={self.value} "
                f"[{self.invoked:.4f}, {self.completed:.4f}] {self.outcome}{held}")


@attrs.frozen
class Interval:
    """A record certainly held ``value`` during [start, end)."""

    key: str
    value: str
    start: float
    end: float
    write: Event


def writes_by_key(events: Sequence[Event]) -> dict[str, list[Event]]:
    """Each record's writes (the events that wrote, whatever their outcome), in history order."""
    by_key: dict[str, list[Event]] = {}
    for event in events:
        if event.wrote:
            by_key.setdefault(event.key, []).append(event)
    return by_key


def certain_intervals(events: Sequence[Event]) -> list[Interval]:
    """For each successful write of a value, the time its record certainly held that value."""
    intervals: list[Interval] = []
    for key, writes in writes_by_key(events).items():
        for write in writes:
            if write.outcome != "ok" or write.leaves is None:
                continue
            # Any other write on the record that may have landed after this one ends certainty
            # at its invocation (it could have landed right then).
            end = min((other.invoked for other in writes
                       if other is not write and other.maybe_applied
                       and other.completed > write.invoked), default=float("inf"))
            if end > write.completed:
                intervals.append(Interval(key, write.leaves, write.completed, end, write))
    return intervals


def double_holders(events: Sequence[Event]) -> list[str]:
    """Check 1: two records that certainly held one value at the same time."""
    by_value: dict[str, list[Interval]] = {}
    for interval in certain_intervals(events):
        by_value.setdefault(interval.value, []).append(interval)
    found: list[str] = []
    for value, intervals in sorted(by_value.items()):
        intervals.sort(key=lambda i: i.start)
        for index, first in enumerate(intervals):
            for second in intervals[index + 1:]:
                if second.start >= first.end:
                    continue
                if second.key == first.key:
                    continue
                found.append(
                    f"{first.key} and {second.key} both certainly held {value!r} during "
                    f"[{max(first.start, second.start):.4f}, {min(first.end, second.end):.4f}]: "
                    f"{first.write} / {second.write}")
    return found


def implausible_violations(events: Sequence[Event]) -> list[str]:
    """Check 2: a ``UniqueViolation`` must name a holder that plausibly held the value."""
    by_key = writes_by_key(events)
    found: list[str] = []
    for event in events:
        if event.outcome != "unique":
            continue
        if event.holder is None:
            found.append(f"{event}: the UniqueViolation named no holder")
            continue
        holder_writes = by_key.get(event.holder, [])
        candidates = [w for w in holder_writes
                      if w.maybe_applied and w.leaves == event.value
                      and w.invoked < event.completed]
        plausible = any(
            not any(other.outcome == "ok" and other.leaves != event.value
                    and other.invoked > w.completed and other.completed < event.invoked
                    for other in holder_writes)
            for w in candidates)
        if not plausible:
            why = ("no write of that value to it was invoked before the violation completed"
                   if not candidates else "it was certainly moved off the value before the call")
            found.append(f"{event}: named holder {event.holder}, but {why}")
    return found


def crashes(events: Sequence[Event]) -> list[str]:
    """Operations that ended in neither success nor a dynaunique error."""
    return [f"{e}: {e.detail}" for e in events if e.outcome == "crash"]


def anomalies(events: Sequence[Event]) -> list[str]:
    """Checks 1 and 2 plus crashes, one line per anomaly (check 3 reads the table)."""
    return crashes(events) + double_holders(events) + implausible_violations(events)


# --- running a history ---------------------------------------------------------------------------


class Writer(Protocol):
    """How one thread performs the four operations (the library, or a broken stand-in)."""

    def create(self, key: str, value: str) -> None:
        """Write ``value`` to ``key`` without loading it first."""

    def change(self, key: str, value: str | None, pause: float) -> None:
        """Load ``key`` (``DoesNotExist`` when absent), wait ``pause``, write ``value``."""

    def delete(self, key: str, loaded: bool, pause: float) -> None:
        """Delete ``key``: from a loaded copy, or a never-loaded object."""


class LibraryWriter:
    """The operations through dynaunique's public API on ``model`` (``pk`` and ``email``)."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model

    def create(self, key: str, value: str) -> None:
        """A never-loaded save: a create, or an update of the stored item."""
        self.model(pk=key, email=value).save()

    def change(self, key: str, value: str | None, pause: float) -> None:
        """Load (strongly consistent), pause (the copy may go stale), assign, save."""
        record = self.model.get(key, consistent_read=True)
        time.sleep(pause)
        record.email = value  # type: ignore[attr-defined]
        record.save()

    def delete(self, key: str, loaded: bool, pause: float) -> None:
        """A loaded delete (after a pause) or a never-loaded one."""
        if loaded:
            record = self.model.get(key, consistent_read=True)
            time.sleep(pause)
            record.delete()
        else:
            self.model(pk=key).delete()


class AsyncWriter(Protocol):
    """:class:`Writer` under asyncio."""

    async def create(self, key: str, value: str) -> None:
        """Write ``value`` to ``key`` without loading it first."""

    async def change(self, key: str, value: str | None, pause: float) -> None:
        """Load ``key``, wait ``pause`` (other tasks run), write ``value``."""

    async def delete(self, key: str, loaded: bool, pause: float) -> None:
        """Delete ``key``: from a loaded copy, or a never-loaded object."""


class AsyncLibraryWriter:
    """:class:`LibraryWriter` through the async API (``asave``, ``aget``, ``adelete``)."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model

    async def create(self, key: str, value: str) -> None:
        """A never-loaded save."""
        await self.model(pk=key, email=value).asave()

    async def change(self, key: str, value: str | None, pause: float) -> None:
        """Load (strongly consistent), pause, assign, save."""
        record = await self.model.aget(key, consistent_read=True)
        await asyncio.sleep(pause)
        record.email = value  # type: ignore[attr-defined]
        await record.asave()

    async def delete(self, key: str, loaded: bool, pause: float) -> None:
        """A loaded delete (after a pause) or a never-loaded one."""
        if loaded:
            record = await self.model.aget(key, consistent_read=True)
            await asyncio.sleep(pause)
            await record.adelete()
        else:
            await self.model(pk=key).adelete()


def holder_of(error: UniqueViolation) -> str | None:
    """The hash key the violation named as holder."""
    owner = error.owner or {}
    value = owner.get("pk")
    return str(value) if value is not None else None


@attrs.define
class History:
    """Runs random operations on threads and records the history."""

    writer_for: Callable[[int], Writer]
    absent: type[Exception]
    seed: int
    keys: int = 10
    values: int = 5
    threads: int = 8
    #: Share of operations that go to the first three keys (several threads on one record).
    hot: float = 0.5
    events: list[Event] = attrs.field(factory=list)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def key(self, rnd: random.Random) -> str:
        index = rnd.randrange(3) if rnd.random() < self.hot else rnd.randrange(self.keys)
        return f"K{index}"

    def value(self, rnd: random.Random) -> str:
        return f"v{rnd.randrange(self.values)}@x"

    def choose(self, rnd: random.Random) -> tuple[str, str, str | None, float, bool]:
        """The next random operation: (op, key, value, pause, loaded)."""
        roll = rnd.random()
        key = self.key(rnd)
        pause = rnd.uniform(0, 0.01) if rnd.random() < 0.5 else 0.0
        if roll < 0.4:
            return "create", key, self.value(rnd), pause, False
        if roll < 0.7:
            return "change", key, self.value(rnd), pause, False
        if roll < 0.82:
            return "clear", key, None, pause, False
        return "delete", key, None, pause, rnd.random() < 0.5

    def record(self, thread: int, op: str, key: str, value: str | None, invoked: float,
               error: BaseException | None) -> None:
        """Record how one operation ended (``error`` None: it succeeded)."""
        completed = time.monotonic()
        holder: str | None = None
        detail = ""
        if error is None:
            outcome = "ok"
        elif isinstance(error, UniqueViolation):
            outcome, holder = "unique", holder_of(error)
        elif isinstance(error, ConcurrentModificationError):
            outcome = "conflict"
        elif isinstance(error, OutcomeUnknownError):
            outcome = "unknown"
        elif isinstance(error, DynauniqueError):
            outcome, detail = "error", f"{type(error).__name__}: {error}"
        elif isinstance(error, self.absent):
            outcome = "absent"
        else:
            outcome = "crash"
            detail = "".join(traceback.format_exception(error)).strip()
        with self._lock:
            self.events.append(Event(thread, op, key, value, invoked, completed, outcome,
                                     holder, detail))

    def step(self, thread: int, rnd: random.Random, writer: Writer) -> None:
        """One random operation, recorded."""
        op, key, value, pause, loaded = self.choose(rnd)
        invoked = time.monotonic()
        try:
            if op == "create":
                writer.create(key, value or "")
            elif op in ("change", "clear"):
                writer.change(key, value, pause)
            else:
                writer.delete(key, loaded, pause)
        except Exception as exc:
            self.record(thread, op, key, value, invoked, exc)
        else:
            self.record(thread, op, key, value, invoked, None)

    async def astep(self, task: int, rnd: random.Random, writer: AsyncWriter) -> None:
        """One random operation through the async API, recorded (the same choice and record
        as :meth:`step`)."""
        op, key, value, pause, loaded = self.choose(rnd)
        invoked = time.monotonic()
        try:
            if op == "create":
                await writer.create(key, value or "")
            elif op in ("change", "clear"):
                await writer.change(key, value, pause)
            else:
                await writer.delete(key, loaded, pause)
        except Exception as exc:
            self.record(task, op, key, value, invoked, exc)
        else:
            self.record(task, op, key, value, invoked, None)

    async def arun(self, ops: int, writer: AsyncWriter) -> float:
        """Run ``ops`` operations on :attr:`threads` asyncio tasks of one event loop."""
        counter = iter(range(ops))

        async def worker(index: int) -> None:
            rnd = random.Random(self.seed * 1000 + index)
            for _ in counter:
                await self.astep(index, rnd, writer)

        started = time.monotonic()
        await asyncio.gather(*(worker(i) for i in range(self.threads)))
        return time.monotonic() - started

    def run(self, ops: int) -> float:
        """Run ``ops`` operations on :attr:`threads` threads; returns the seconds taken."""
        counter = iter(range(ops))
        guard = threading.Lock()

        def worker(index: int) -> None:
            rnd = random.Random(self.seed * 1000 + index)
            writer = self.writer_for(index)
            while True:
                with guard:
                    if next(counter, None) is None:
                        return
                self.step(index, rnd, writer)

        started = time.monotonic()
        workers = [threading.Thread(target=worker, args=(i,), name=f"history-{i}")
                   for i in range(self.threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        return time.monotonic() - started

    def outcomes(self) -> Counter[str]:
        """How the operations ended, as ``op:outcome`` counts."""
        return Counter(f"{e.op}:{e.outcome}" for e in self.events)


def summary(events: Iterable[Event]) -> str:
    """One line of outcome counts."""
    counts = Counter(e.outcome for e in events)
    return ", ".join(f"{k} {v}" for k, v in counts.most_common())

