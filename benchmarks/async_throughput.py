"""Async throughput: N asyncio tasks (``asave``) vs N threads (``save``), in one run, one server.

Both sides run the same signups — the same (pk, email, username) per worker, half of the emails
fresh and half drawn from a few hot ones every worker also tries, so many signups race for one
value — on a freshly reset table of the local server. Reported per side and N: attempts per
second, the client's CPU time per attempt (the process's, so the server's own CPU is not in it),
and the audit after the run (exactly one account per distinct email, every lock held). The
server runs in its own process; the sync side uses PynamoDB's connection (urllib3), the async
side ``dynaunique.aio`` (httpx) on one event loop.

    python -m benchmarks.async_throughput [--endpoint URL] [--workers 1 4 16 64] [--per-worker 25]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
import time
from collections.abc import Sequence

import attrs

from benchmarks.consistency import table_state
from benchmarks.models import TABLE, BenchAccount, fake_credentials, fresh_table, point_at
from dynaunique import UniqueViolation, aio
from dynaunique.testing import local_dynamodb

HOT_EMAILS = 8


@attrs.frozen
class Run:
    """One side's run at one concurrency."""

    side: str
    workers: int
    attempts: int
    created: int
    taken: int
    seconds: float
    cpu_seconds: float
    distinct_emails: int
    clean: bool

    @property
    def per_second(self) -> float:
        """Signup attempts completed per second."""
        return self.attempts / self.seconds

    @property
    def cpu_ms_per_attempt(self) -> float:
        """The client process's CPU time per attempt, in milliseconds."""
        return 1000 * self.cpu_seconds / self.attempts


def plan(workers: int, per_worker: int, seed: int) -> list[list[tuple[str, str, str]]]:
    """(pk, email, username) per worker; the same for both sides."""
    rng = random.Random(seed)
    return [[(f"ACCT#{w}-{n}",
              f"hot{rng.randrange(HOT_EMAILS)}@x.io" if rng.random() < 0.5
              else f"fresh-{w}-{n}@x.io",
              f"user-{w}-{n}") for n in range(per_worker)] for w in range(workers)]


def _account(pk: str, email: str, username: str) -> BenchAccount:
    return BenchAccount(pk=pk, email=email, username=username)


def run_threads(work: list[list[tuple[str, str, str]]]) -> tuple[int, int, float, float]:
    created = taken = 0
    lock = threading.Lock()
    barrier = threading.Barrier(len(work) + 1)

    def worker(mine: list[tuple[str, str, str]]) -> None:
        nonlocal created, taken
        barrier.wait()
        for values in mine:
            try:
                _account(*values).save()
                outcome = "created"
            except UniqueViolation:
                outcome = "taken"
            with lock:
                if outcome == "created":
                    created += 1
                else:
                    taken += 1

    threads = [threading.Thread(target=worker, args=(mine,)) for mine in work]
    for thread in threads:
        thread.start()
    cpu, start = time.process_time(), time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join()
    return created, taken, time.perf_counter() - start, time.process_time() - cpu


async def run_tasks(work: list[list[tuple[str, str, str]]]) -> tuple[int, int, float, float]:
    created = taken = 0

    async def worker(mine: list[tuple[str, str, str]]) -> None:
        nonlocal created, taken
        for values in mine:
            try:
                await _account(*values).asave()
                created += 1
            except UniqueViolation:
                taken += 1

    async with aio.session():
        await _account("WARM", "warm@x.io", "warm").asave()  # the client, made once per loop
        cpu, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(mine) for mine in work))
        return created, taken, time.perf_counter() - start, time.process_time() - cpu


def measure(endpoint: str, workers: int, per_worker: int, seed: int,
            repeats: int = 2) -> list[Run]:
    """Both sides at one concurrency, each run on a fresh table, ``repeats`` times in
    alternating order (the machine's load drifts); the faster run of each side is kept."""
    work = plan(workers, per_worker, seed)
    distinct = len({email for mine in work for _, email, _ in mine})
    sides = ["sync threads", "async tasks"]
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    for repeat in range(repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:
            fresh_table(endpoint)
            if side == "sync threads":
                _account("WARM", "warm@x.io", "warm").save()
                created, taken, seconds, cpu = run_threads(work)
            else:
                created, taken, seconds, cpu = asyncio.run(run_tasks(work))
            state = table_state(point_at(endpoint), TABLE)
            runs[side].append(Run(side, workers, created + taken, created, taken, seconds, cpu,
                                  distinct, clean=created == distinct and state.clean))
    # An unclean run is always the one shown; otherwise the fastest.
    return [min(runs[side], key=lambda run: (run.clean, run.seconds)) for side in sides]


def report(runs: Sequence[Run]) -> str:
    """The runs as a Markdown table."""
    lines = ["| N | side | attempts/s | client CPU ms/attempt | created | taken | audit |",
             "|---:|---|---:|---:|---:|---:|---|"]
    for run in runs:
        lines.append(f"| {run.workers} | {run.side} | {run.per_second:.0f} | "
                     f"{run.cpu_ms_per_attempt:.2f} | {run.created} | {run.taken} | "
                     f"{'clean' if run.clean else 'NOT CLEAN'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.async_throughput",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="use this running local server (it is RESET)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--per-worker", type=int, default=25)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    fake_credentials()

    def run_all(endpoint: str) -> list[Run]:
        runs: list[Run] = []
        for workers in args.workers:
            # Keep the total roughly constant so that every N measures a similar table size.
            per_worker = max(2, args.per_worker * max(args.workers) // (workers * 4))
            runs.extend(measure(endpoint, workers, per_worker, args.seed, args.repeats))
        return runs

    if args.endpoint:
        runs = run_all(args.endpoint)
    else:
        with local_dynamodb() as endpoint:
            runs = run_all(endpoint)
    print(report(runs))
    return 0 if all(run.clean for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
