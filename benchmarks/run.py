"""Run the whole benchmark suite and write docs/performance.md: one command, one run.

    python -m benchmarks.run [--quick] [--out docs/performance.md] [--json results.json]
                             [--peer auto|on|off] [--endpoint URL]

Starts the local DynamoDB-compatible server (``dynaunique.testing.local_dynamodb``) unless
``--endpoint`` names one — which is then reset, so never point it at anything that matters.
The server-scaling part starts a server per point; with ``--quick`` its patched points use the
run's server instead (a table each), and only its stock-moto point starts one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bulk, cases, contention, overhead, peer, report, roundtrips, server, trace
from benchmarks.bulk import Bulk
from benchmarks.cases import Paired
from benchmarks.contention import Run
from benchmarks.models import fake_credentials
from benchmarks.overhead import Profile, Result, Stages
from benchmarks.peer import PeerResult
from benchmarks.roundtrips import RoundTrips
from benchmarks.server import Scaling
from benchmarks.trace import Trace
from dynaunique.testing import local_dynamodb


@attrs.frozen
class Sizes:
    """How much of each part to run."""

    stub_rounds: int
    null_rounds: int
    warmup: int
    profile_rounds: int
    stage_rounds: int
    threads: int
    per_thread: int
    contention_repeats: int
    bulk_records: int
    cap_records: int
    cap_wcu: float
    case_rounds: int


QUICK = Sizes(stub_rounds=150, null_rounds=40, warmup=20, profile_rounds=60, stage_rounds=60,
              threads=8, per_thread=5, contention_repeats=1, bulk_records=20, cap_records=20,
              cap_wcu=100.0, case_rounds=20)
FULL = Sizes(stub_rounds=2000, null_rounds=800, warmup=100, profile_rounds=400, stage_rounds=1000,
             threads=8, per_thread=20, contention_repeats=3, bulk_records=500, cap_records=400,
             cap_wcu=100.0, case_rounds=300)


@attrs.frozen
class Suite:
    """Everything one run measured."""

    command: str
    quick: bool
    seconds: float
    machine: dict[str, str]
    roundtrips: RoundTrips
    overhead: tuple[Result, ...]
    profile: Profile | None
    stages: Stages | None
    contention: tuple[Run, ...]
    bulk: Bulk
    peer: PeerResult
    server: Scaling | None = None
    cases: Paired | None = None
    trace: tuple[Trace, Trace] | None = None


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a small version of every part (the CI smoke run, ~20 s)")
    parser.add_argument("--out", type=Path, help="write the Markdown report here "
                        "(e.g. docs/performance.md); default: print it")
    parser.add_argument("--json", type=Path, help="also write the raw results as JSON")
    parser.add_argument("--peer", choices=("auto", "on", "off"), default="auto",
                        help="OneTable under Node: auto = on for a full run, off for --quick")
    parser.add_argument("--endpoint", help="use this running local server (it is RESET)")
    return parser.parse_args(argv)


#: The repository's root: a path inside it is shown relative to it.
ROOT = Path(__file__).resolve().parent.parent


def shown_command(argv: Sequence[str]) -> str:
    """The command line as the page shows it: one a reader can run from the repository's root.

    What belongs to the machine that ran it is left out: a path inside the repository is shown
    relative to its root, a path outside it by its file name, and ``--endpoint`` (a server of
    that machine, which the run resets; without it the run starts its own) not at all."""
    shown: list[str] = []
    words = iter(argv)
    for word in words:
        name, equals, value = word.partition("=")
        if name == "--endpoint":
            if not equals:
                next(words, None)
            continue
        if name in ("--out", "--json"):
            path = Path(value if equals else next(words, ""))
            try:
                portable = path.resolve().relative_to(ROOT).as_posix()
            except ValueError:
                portable = path.name
            shown += [name, portable]
            continue
        shown.append(word)
    return " ".join(["python -m benchmarks.run", *shown])


@contextmanager
def _server(endpoint: str | None) -> Iterator[str]:
    if endpoint:
        yield endpoint
        return
    with local_dynamodb() as started:
        yield started


_clock = time.perf_counter()


def _say(text: str) -> None:
    print(f"[benchmarks {time.perf_counter() - _clock:6.1f} s] {text}", file=sys.stderr,
          flush=True)


def execute(args: argparse.Namespace, argv: Sequence[str] | None = None) -> Suite:
    """Run every part once, in one process, against one local server."""
    fake_credentials()
    sizes = QUICK if args.quick else FULL
    use_peer = args.peer == "on" or (args.peer == "auto" and not args.quick)
    command = shown_command(sys.argv[1:] if argv is None else argv)
    machine = report.machine()
    start = time.perf_counter()
    with _server(args.endpoint) as endpoint:
        _say("round trips and items per operation")
        counts = roundtrips.run(endpoint)
        if use_peer:
            _say("peer: OneTable under Node")
            peer_result = peer.run(endpoint, allow_install=True)
        else:
            peer_result = PeerResult("OneTable", "", {}, {}, skipped=(
                "not requested (`--peer on`, or a full run, includes it)"))
        _say("client cost per write, paired: every case")
        paired = cases.run(sizes.case_rounds, warmup=min(20, sizes.case_rounds))
        _say("the path of one save: sys.setprofile")
        traced = trace.measure()
        _say("client overhead: stub transport")
        timings = [overhead.run_stub(sizes.stub_rounds, sizes.warmup)]
        _say("client overhead: null HTTP server")
        timings.append(overhead.run_null_server(sizes.null_rounds, sizes.warmup))
        _say("client overhead: the steps of save()")
        steps = overhead.stages(sizes.stage_rounds)
        _say("client overhead: profile")
        profiled = overhead.profile(sizes.profile_rounds)
        _say("throughput under contention")
        # A server per run, unless the caller gave one (the smoke test shares its session's).
        raced = contention.run(endpoint, sizes.threads, sizes.per_thread,
                               repeats=sizes.contention_repeats,
                               new_server=None if args.endpoint else local_dynamodb)
        _say("bulk: migration backfill and audit")
        bulk_result = bulk.run(endpoint, sizes.bulk_records, sizes.cap_records, sizes.cap_wcu)
        # --quick: the patched points on this run's server, a table each (a server start costs
        # more than their few transactions); stock moto's point has a server of its own.
        scaling = server.run(quick=True, say=_say, endpoint=endpoint) if args.quick else None
    if scaling is None:  # a full run: its own servers, stock and patched, one per table size
        scaling = server.run(quick=False, say=_say)
    return Suite(command.strip(), bool(args.quick), time.perf_counter() - start, machine, counts,
                 tuple(timings), profiled, steps, tuple(raced), bulk_result, peer_result,
                 scaling, paired, traced)


def _jsonable(value: object) -> object:
    if attrs.has(type(value)):
        names = [f.name for f in attrs.fields(type(value))]  # type: ignore[arg-type]
        return {name: _jsonable(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def produce(argv: Sequence[str] | None = None) -> Suite:
    """Run the suite as the command line says, write (or print) the report, return the results."""
    args = parse(argv)
    suite = execute(args, argv)
    page = report.render(suite)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(page, encoding="utf-8")
        _say(f"wrote {args.out}")
    else:
        print(page)
    if args.json is not None:
        args.json.write_text(json.dumps(_jsonable(suite), indent=2, ensure_ascii=False),
                             encoding="utf-8")
    _say(f"done in {suite.seconds:.1f} s")
    return suite


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.run``."""
    produce(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
