"""Part 2: client-side cost per save — dynaunique against hand-written boto3, no server work.

Each round runs, for every implementation in a rotating order, the same three saves: a create,
a change of one unique value, a change of a plain field. The transport answers ``{}`` at once
(``benchmarks.transport``), so what is timed is the client: building the request, botocore's
serialization, signing and parsing, and — for dynaunique — planning and bookkeeping. Ratios are
taken per round (paired), which cancels drift in the machine's speed.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs

from benchmarks.handwritten import HandWritten, make_client
from benchmarks.models import TABLE, BenchAccount, point_at
from benchmarks.transport import NullServer, stub

#: Never contacted: the stub answers before a socket is opened.
STUB_ENDPOINT = "http://127.0.0.1:9"

OPS = ("create", "update_unique", "update_plain")
OP_LABELS = {
    "create": "create: `Model(...).save()`, a 3-item transaction",
    "update_unique": "change one unique value: `save()`, a 3-item transaction",
    "update_plain": "change a plain field: `save()`, one conditional write",
}
DYNAUNIQUE = "dynaunique"
FLOOR = "boto3 call, dynaunique's exact request"
TUNED = "hand-written boto3, same client config"
DEFAULT = "hand-written boto3, default client"
VARIANTS = (DYNAUNIQUE, FLOOR, TUNED, DEFAULT)
#: The ratios reported: dynaunique against each of these.
BASELINES = (FLOOR, TUNED, DEFAULT)
#: The issue's target for dynaunique / (the boto3 call with the same payload).
TARGET = 1.25
#: Stands in for dynaunique's per-call token (same length) in the FLOOR variant.
_TOKEN = "0" * 12 + "-" + "0" * 23

Round = tuple[Callable[[], Any], ...]


def quantiles(samples: list[float]) -> dict[str, float]:
    """Median, quartiles and the 10th/90th percentiles."""
    cuts = statistics.quantiles(samples, n=20, method="inclusive")
    return {"p10": cuts[1], "q1": cuts[4], "median": statistics.median(samples),
            "q3": cuts[14], "p90": cuts[17]}


@attrs.frozen
class Result:
    """Timings of one transport: microseconds per call, and per-round ratios."""

    transport: str
    rounds: int
    #: op → variant → quantiles of µs per call.
    times: dict[str, dict[str, dict[str, float]]]
    #: op → baseline variant → quantiles of (dynaunique µs / baseline µs), paired per round.
    ratios: dict[str, dict[str, dict[str, float]]]

    def worst_ratio(self, baseline: str = FLOOR) -> float:
        """The highest median ratio against ``baseline``."""
        return max(self.ratios[op][baseline]["median"] for op in OPS)


def _values(i: int) -> tuple[str, str, str, str]:
    return f"ACCT#{i}", f"u{i}@Example.com", f"user{i}", f"v{i}@example.com"


def _dynaunique_round(i: int) -> Round:
    pk, email, username, new_email = _values(i)
    account: list[BenchAccount] = []

    def create() -> None:
        a = BenchAccount(pk=pk, email=email, username=username, name="n")
        a.save()
        account.append(a)

    def update_unique() -> None:
        account[0].email = new_email
        account[0].save()

    def update_plain() -> None:
        account[0].name = "m"
        account[0].save()

    return create, update_unique, update_plain


def _send(client: Any, request: dict[str, Any]) -> Callable[[], Any]:
    """The bare botocore call for a request dynaunique rendered."""
    params = dict(request)
    operation = params.pop("Operation", None)
    if operation is None:
        return lambda: client.transact_write_items(**params, ClientRequestToken=_TOKEN)
    method = getattr(client, {"PutItem": "put_item", "UpdateItem": "update_item",
                              "DeleteItem": "delete_item"}[operation])
    return lambda: method(**params)


def _floor_round(client: Any, i: int) -> Round:
    """dynaunique's own requests for this round, rendered now, sent bare when timed."""
    pk, email, username, new_email = _values(i)
    a = BenchAccount(pk=f"{pk}f", email=email, username=username, name="n")
    requests = [a.save(dry_run=True)]
    a.save()  # the stub answers; the object is now loaded, as in the dynaunique round
    a.email = new_email
    requests.append(a.save(dry_run=True))
    a.save()
    a.name = "m"
    requests.append(a.save(dry_run=True))
    return tuple(_send(client, r) for r in requests)


def _handwritten_round(hw: HandWritten, i: int) -> Round:
    pk, email, username, new_email = _values(i)
    item: list[dict[str, Any]] = []

    def create() -> None:
        item.append(hw.create(pk, email, username, "n"))

    def update_unique() -> None:
        item[0] = hw.change_email(item[0], new_email)

    def update_plain() -> None:
        item[0] = hw.rename(item[0], "m")

    return create, update_unique, update_plain


def _implementations(endpoint: str, stubbed: bool) -> dict[str, Callable[[int], Round]]:
    dyn_client = point_at(endpoint)
    tuned = HandWritten(make_client(endpoint, tuned=True), TABLE)
    default = HandWritten(make_client(endpoint), TABLE)
    if stubbed:
        for client in (dyn_client, tuned.client, default.client):
            stub(client)
    return {
        DYNAUNIQUE: _dynaunique_round,
        FLOOR: lambda i: _floor_round(dyn_client, i),
        TUNED: lambda i: _handwritten_round(tuned, i),
        DEFAULT: lambda i: _handwritten_round(default, i),
    }


def _time(transport: str, endpoint: str, stubbed: bool, rounds: int, warmup: int) -> Result:
    impls = _implementations(endpoint, stubbed)
    samples: dict[str, dict[str, list[float]]] = {op: {v: [] for v in VARIANTS} for op in OPS}
    # With the stub, a call is pure CPU: the thread's CPU time ignores time spent descheduled
    # (other processes on a shared machine). With the server, waiting for the answer counts.
    clock = time.thread_time_ns if stubbed else time.perf_counter_ns
    gc.collect()
    for i in range(warmup + rounds):
        shift = i % len(VARIANTS)
        for variant in VARIANTS[shift:] + VARIANTS[:shift]:
            calls = impls[variant](i)  # set-up, not timed
            for op, call in zip(OPS, calls, strict=True):
                start = clock()
                call()
                elapsed = clock() - start
                if i >= warmup:
                    samples[op][variant].append(elapsed / 1000)
    times = {op: {v: quantiles(samples[op][v]) for v in VARIANTS} for op in OPS}
    ratios = {
        op: {base: quantiles([d / b for d, b in zip(samples[op][DYNAUNIQUE], samples[op][base],
                                                    strict=True)])
             for base in BASELINES}
        for op in OPS
    }
    return Result(transport, rounds, times, ratios)


def run_stub(rounds: int, warmup: int = 50) -> Result:
    """Time every implementation against the in-process stub transport."""
    return _time("stub (before-send handler)", STUB_ENDPOINT, True, rounds, warmup)


def run_null_server(rounds: int, warmup: int = 50) -> Result:
    """Time every implementation against the null HTTP server on loopback."""
    with NullServer() as endpoint:
        return _time("null HTTP server on 127.0.0.1", endpoint, False, rounds, warmup)


# --- stages --------------------------------------------------------------------------------------


@attrs.frozen
class Stages:
    """dynaunique's save cut into its steps, each timed alone (median thread CPU time, µs).

    Uses dynaunique's internals (``_record.plan_save``, ``_render.render``/``encode``/
    ``check_size``/``new_token``, ``_state.after_save``) — the steps ``save()`` runs — so it
    names where the time goes. If those internals change, the breakdown is skipped, not wrong.
    """

    rounds: int
    #: op → step → median µs.
    steps: dict[str, dict[str, float]]
    #: op → median µs of a whole ``save()`` (same objects and states as the steps).
    save: dict[str, float]
    #: op → median µs of the bare botocore call with dynaunique's request (the floor).
    floor: dict[str, float]
    #: Why there is no breakdown, when there is none.
    skipped: str | None = None


STEP_NAMES = ("Model(...) construction", "_record.plan_save (plan: locks, guards)",
              "_render.render (request dict)", "encode + check_size + new_token",
              "_state.after_save (snapshot)",
              "rest of save(), by difference (client_for, retry loop; noise can make it < 0)")


def _account(n: int) -> BenchAccount:
    return BenchAccount(pk=f"ACCT#s{n}", email=f"u{n}@Example.com", username=f"user{n}",
                        name="n")


def _state(op: str, n: int) -> BenchAccount:
    """An object in the state the op saves from (created objects are saved on the stub first)."""
    account = _account(n)
    if op == "create":
        return account
    account.save()
    if op == "update_unique":
        account.email = f"v{n}@example.com"
    else:
        account.name = "m"
    return account


def stages(rounds: int) -> Stages:
    """Time each step of dynaunique's saves on the stub transport."""
    from dynaunique._write import record as _record
    from dynaunique._write import render as _render
    from dynaunique._write import state as _state
    from dynaunique._write.writes import RecordPut

    client = stub(point_at(STUB_ENDPOINT))
    clock = time.thread_time_ns
    steps: dict[str, dict[str, list[float]]] = {op: {s: [] for s in STEP_NAMES} for op in OPS}
    whole: dict[str, list[float]] = {op: [] for op in OPS}
    floor: dict[str, list[float]] = {op: [] for op in OPS}
    n = 20_000_000
    try:
        for i in range(rounds + 20):
            for op in OPS:
                n += 3
                t0 = clock()
                _account(n)
                t1 = clock()
                account = _state(op, n)
                t2 = clock()
                plan = _record.plan_save(account)
                t3 = clock()
                request = _render.render(plan)
                t4 = clock()
                if plan.is_transaction:
                    encoded = _render.encode(request)
                    _render.check_size(request, encoded)
                    _render.new_token(request, encoded)
                t5 = clock()
                record = plan.writes[0]
                assert isinstance(record, RecordPut)
                _state.after_save(account, record.item)
                t6 = clock()
                call = _send(client, request)  # with a token of the same length
                t7 = clock()
                call()
                t8 = clock()
                other = _state(op, n + 1)
                t9 = clock()
                if op == "create":
                    _account(n + 2).save()
                else:
                    other.save()
                t10 = clock()
                if i < 20:
                    continue
                construction = (t1 - t0) if op == "create" else 0
                save = (t10 - t9) + construction
                parts = [construction, t3 - t2, t4 - t3, t5 - t4, t6 - t5]
                for name, part in zip(STEP_NAMES, parts, strict=False):
                    steps[op][name].append(part / 1000)
                whole[op].append(save / 1000)
                floor[op].append((t8 - t7) / 1000)
    except (AttributeError, TypeError) as exc:
        return Stages(rounds, {}, {}, {}, skipped=f"dynaunique's internals changed: {exc}")
    medians = {op: {s: statistics.median(v) for s, v in steps[op].items() if v} for op in OPS}
    saves = {op: statistics.median(whole[op]) for op in OPS}
    floors = {op: statistics.median(floor[op]) for op in OPS}
    for op in OPS:
        # What the timed steps do not cover: save() minus its steps minus the botocore call.
        medians[op][STEP_NAMES[-1]] = saves[op] - floors[op] - sum(medians[op].values())
    return Stages(rounds, medians, saves, floors)


# --- profile -------------------------------------------------------------------------------------


@attrs.frozen
class Node:
    """One function in the profiled call tree of dynaunique's saves."""

    name: str
    #: Share of the time of all profiled saves spent in this call (children included).
    share: float
    calls_per_save: float
    children: tuple[Node, ...] = ()


@attrs.frozen
class Profile:
    """Where the time of dynaunique's saves goes (cProfile, cumulative time per callee)."""

    saves: int
    #: µs per save under the profiler (the profiler inflates every call; read shares, not µs).
    per_save_us: float
    #: The call tree below each entry point (``Model.save``), down to ``depth`` levels.
    tree: tuple[Node, ...]
    #: Largest own times of dynaunique's functions and of what they call directly (not through
    #: botocore): (file:function, share of all profiled time).
    own: tuple[tuple[str, float], ...]


_Key = tuple[str, int, str]


def _short(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/work/main/"):
        if marker in path:
            return path.split(marker, 1)[1].lstrip("/")
    if "/lib/python3" in path:
        return path.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return path.rsplit("/", 1)[-1]


def _label(key: _Key) -> str:
    filename, line, func = key
    return f"{_short(filename)}:{func}" if line else func


def _opaque(key: _Key) -> bool:
    """Calls whose insides are not dynaunique's to change: shown as one line."""
    path = key[0].replace("\\", "/")
    return "/botocore/" in path or "/pynamodb/" in path or not key[1]


def _ours(key: _Key) -> bool:
    return "/dynaunique/" in key[0].replace("\\", "/")


def profile(rounds: int, depth: int = 3, cutoff: float = 0.01) -> Profile:
    """Profile ``rounds`` rounds of dynaunique's three saves on the stub transport."""
    impls = _implementations(STUB_ENDPOINT, True)
    for i in range(30):  # warm caches outside the profile
        for call in impls[DYNAUNIQUE](10_000_000 + i):
            call()
    rounds_calls = [impls[DYNAUNIQUE](i) for i in range(rounds)]
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for calls in rounds_calls:
        for call in calls:
            call()
    profiler.disable()
    elapsed = time.perf_counter() - start
    raw: dict[_Key, Any] = pstats.Stats(profiler, stream=io.StringIO()).stats  # type: ignore
    saves = rounds * len(OPS)
    callees: dict[_Key, dict[_Key, tuple[int, float]]] = {}
    for key, (_, _, _, _, callers) in raw.items():
        for caller, (_, ncalls, _, cumulative) in callers.items():
            callees.setdefault(caller, {})[key] = (ncalls, cumulative)
    roots = [k for k in raw if k[2] == "save" and k[0].replace("\\", "/").endswith(
        "dynaunique/model.py")]
    total = sum(raw[k][3] for k in roots) or 1.0

    def walk(key: _Key, level: int, seen: frozenset[_Key]) -> tuple[Node, ...]:
        if level >= depth or _opaque(key):
            return ()
        nodes = []
        for child, (ncalls, cumulative) in sorted(callees.get(key, {}).items(),
                                                  key=lambda c: -c[1][1]):
            if cumulative / total < cutoff or child in seen:
                continue
            nodes.append(Node(_label(child), cumulative / total, ncalls / saves,
                              walk(child, level + 1, seen | {child})))
        return tuple(nodes)

    tree = tuple(Node(_label(r), raw[r][3] / total, raw[r][1] / saves, walk(r, 0, frozenset({r})))
                 for r in roots)
    # Own time spent in dynaunique's functions, and in whatever they call directly (stdlib,
    # PynamoDB), split by caller — so botocore's own use of the stdlib is not charged to us.
    everything = sum(v[2] for v in raw.values()) or 1.0
    own: dict[str, float] = {}
    for key, (_, _, tottime, _, callers) in raw.items():
        if _ours(key):
            own[_label(key)] = own.get(_label(key), 0.0) + tottime
            continue
        if "/botocore/" in key[0]:
            continue
        direct = sum(stats[2] for caller, stats in callers.items() if _ours(caller))
        if direct:
            own[_label(key)] = own.get(_label(key), 0.0) + direct
    top = sorted(((name, t / everything) for name, t in own.items()), key=lambda r: -r[1])[:12]
    return Profile(saves, elapsed / saves * 1e6, tree, tuple(top))
