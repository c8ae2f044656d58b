"""Part 3: throughput under contention — N threads signing up on the local server.

Every thread signs up accounts; about half the emails are fresh, the rest are drawn from a small
set of hot emails that every thread also tries, so many signups race for the same value. Both
implementations run the same transactional pattern; the local server runs one request at a time,
so the throughput is mostly the server's, and the ratio shows what the client adds on top. After
each run the table is audited: exactly one account per email, every lock held by its record.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import attrs

from benchmarks.consistency import TableState, table_state
from benchmarks.counting import RequestLog
from benchmarks.handwritten import HandWritten, Taken, make_client
from benchmarks.models import TABLE, BenchAccount, fresh_table, point_at
from dynaunique import UniqueViolation

HOT_EMAILS = 8
FRESH_SHARE = 0.5


@attrs.frozen
class Run:
    """One implementation's contention run."""

    implementation: str
    threads: int
    attempts: int
    created: int
    taken: int
    errors: int
    seconds: float
    #: Distinct emails attempted: exactly this many signups may succeed.
    distinct_emails: int
    #: Requests sent during the race (retries included).
    requests: int
    state: TableState

    @property
    def ops_per_second(self) -> float:
        """Signup attempts completed per second (successes and clean rejections)."""
        return self.attempts / self.seconds if self.seconds else 0.0


def _plan(threads: int, per_thread: int, seed: int) -> list[list[tuple[str, str, str]]]:
    """The (pk, email, username) each thread tries, the same for both implementations."""
    rng = random.Random(seed)
    work = []
    for t in range(threads):
        mine = []
        for n in range(per_thread):
            pk = f"ACCT#t{t}n{n}"
            if rng.random() < FRESH_SHARE:
                email = f"fresh-{t}-{n}@example.com"
            else:
                email = f"HOT{rng.randrange(HOT_EMAILS)}@example.com"  # differs only in case
            mine.append((pk, email if rng.random() < 0.5 else email.lower(), f"user-{t}-{n}"))
        work.append(mine)
    return work


def _race(name: str, work: list[list[tuple[str, str, str]]],
          signup: Callable[[str, str, str], bool], endpoint: str, log: RequestLog) -> Run:
    created = taken = errors = 0
    lock = threading.Lock()
    start_gate = threading.Barrier(len(work) + 1)

    def worker(mine: list[tuple[str, str, str]]) -> None:
        nonlocal created, taken, errors
        start_gate.wait()
        for pk, email, username in mine:
            try:
                ok = signup(pk, email, username)
            except Exception:  # counted, and the table audit shows any damage
                with lock:
                    errors += 1
                continue
            with lock:
                if ok:
                    created += 1
                else:
                    taken += 1

    threads = [threading.Thread(target=worker, args=(m,)) for m in work]
    for thread in threads:
        thread.start()
    with log.window() as sent:
        start_gate.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - start
    distinct = len({email.casefold() for mine in work for _, email, _ in mine})
    state = table_state(make_client(endpoint), TABLE)
    attempts = sum(len(m) for m in work)
    return Run(name, len(work), attempts, created, taken, errors, seconds, distinct, len(sent),
               state)


def _warm(client: Any) -> None:
    """One request before the race, so no run pays a new client's first-call set-up."""
    client.get_item(TableName=TABLE, Key={"PK": {"S": "ACCT#warm-up"}, "SK": {"S": "PROFILE"}})


def _dynaunique_signup(pk: str, email: str, username: str) -> bool:
    try:
        BenchAccount(pk=pk, email=email, username=username).save()
    except UniqueViolation:
        return False
    return True


def run(endpoint: str, threads: int, per_thread: int, repeats: int = 1, seed: int = 7,
        new_server: Callable[[], AbstractContextManager[str]] | None = None) -> list[Run]:
    """Race dynaunique and the hand-written code ``repeats`` times each, alternating, each run on
    an empty table with the same work.

    ``new_server`` (e.g. ``dynaunique.testing.local_dynamodb``) gives every run a server of its
    own: moto slows down as it ages, even across resets, which would favour whoever runs first.
    Without it, every run uses ``endpoint``, reset.
    """
    work = _plan(threads, per_thread, seed)
    log = RequestLog()

    def dynaunique_on(server: str) -> Callable[[str, str, str], bool]:
        client = point_at(server)
        _warm(client)
        log.attach(client)
        return _dynaunique_signup

    def handwritten_on(server: str) -> Callable[[str, str, str], bool]:
        hw = HandWritten(make_client(server), TABLE)
        _warm(hw.client)
        log.attach(hw.client)

        def signup(pk: str, email: str, username: str) -> bool:
            try:
                hw.create(pk, email, username)
            except Taken:
                return False
            return True

        return signup

    contenders = [("dynaunique", dynaunique_on), ("hand-written boto3", handwritten_on)]
    runs = []
    with log:
        for repeat in range(repeats):
            for name, prepare in contenders[repeat % 2:] + contenders[:repeat % 2]:
                server = new_server() if new_server is not None else nullcontext(endpoint)
                with server as current:
                    fresh_table(current)
                    runs.append(_race(name, work, prepare(current), current, log))
    point_at(endpoint)
    return runs
