"""The paired cost benchmark: every write shape of the issue, measured in one run.

Each round runs, for every implementation in a rotating order, every case below once: a create,
a change of one unique value, a change of a plain field (the k = 2 model of
``benchmarks.models``), ``atomic()`` blocks of 10 and 100 items (creates of a k = 1 model: a record
and its lock per create), and creates with k = 1, 2, 5 and 10 unique fields. The implementations
are dynaunique, the hand-written boto3 code with dynaunique's client configuration (parameter
validation and botocore's retries off) and the same code on a default boto3 client
(``benchmarks.handwritten``). Everything runs on the stub transport (``benchmarks.transport``):
a request is built, serialized, signed and its answer parsed, but never sent. Each call is timed
in the thread's CPU time; ratios are dynaunique's time over the other's in the same round (paired),
which cancels the drift of a shared machine's speed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import attrs

import dynaunique
from benchmarks.handwritten import HandWritten, _now, make_client
from benchmarks.models import TABLE, BenchAccount, point_at
from benchmarks.overhead import quantiles
from benchmarks.transport import stub
from dynaunique._transport import clients as _clients
from dynaunique.attributes import UnicodeAttribute

#: Never contacted: the stub answers before a socket is opened.
STUB_ENDPOINT = "http://127.0.0.1:9"
KS = (1, 2, 5, 10)
ATOMIC_ITEMS = (10, 100)

DYNAUNIQUE = "dynaunique"
TUNED = "hand-written boto3, same client config"
DEFAULT = "hand-written boto3, default client"
VARIANTS = (DYNAUNIQUE, TUNED, DEFAULT)
BASELINES = (TUNED, DEFAULT)

#: The issue's targets for the median ratio against the hand-written code, same client config.
TARGETS = {"create": 0.90, "update_unique": 0.90, "update_plain": 0.90, "atomic_100": 1.10,
           "k_10": 1.0}

Call = Callable[[], Any]


def k_model(k: int) -> type[dynaunique.Model]:
    """A model with ``k`` unique fields ``u0`` … and one plain field, on a table of its own."""
    meta = type("Meta", (), {"table_name": f"bench_k{k}", "region": "us-east-1",
                             "host": STUB_ENDPOINT})
    fields: dict[str, Any] = {
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "name": UnicodeAttribute(null=True),
        **{f"u{j}": UnicodeAttribute(unique=True) for j in range(k)},
    }
    return type(f"BenchK{k}", (dynaunique.Model,), fields)


class HandWrittenK(HandWritten):
    """The hand-written code for a record with unique fields ``u0`` … ``u{k-1}``."""

    def __init__(self, client: Any, table: str, k: int) -> None:
        super().__init__(client, table, model=f"BenchK{k}")
        self.FIELDS = tuple((f"u{j}", f"U{j}") for j in range(k))  # type: ignore[misc]

    def _record(self, pk: str, values: dict[str, str]) -> tuple[dict[str, Any], list[Any],
                                                                  list[str | None]]:
        key = {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}
        item = {**key, **{f: {"S": v} for f, v in values.items()}, "name": {"S": "n"}}
        now = _now()
        items = [{"Put": {"TableName": self.table, "Item": item,
                          "ConditionExpression": "attribute_not_exists(PK)"}}]
        items += [self._lock_put(f, v, key, now) for f, v in values.items()]
        return item, items, [None, *values]

    def create_k(self, pk: str, values: dict[str, str]) -> dict[str, Any]:
        """One record with its k locks: one transaction of k + 1 items."""
        item, items, fields = self._record(pk, values)
        self._transact(items, fields)
        return item

    def create_many(self, records: list[tuple[str, dict[str, str]]]) -> None:
        """Several records and their locks in one transaction."""
        items: list[Any] = []
        fields: list[str | None] = []
        for pk, values in records:
            _, more, names = self._record(pk, values)
            items += more
            fields += names
        self._transact(items, fields)


@attrs.frozen
class Case:
    """One operation: a label and, per implementation, a set-up returning the timed call."""

    key: str
    label: str
    items: int
    build: dict[str, Callable[[int], Call]]


def _pairs(i: int, k: int, tag: str) -> dict[str, str]:
    return {f"u{j}": f"{tag}{i}-{j}" for j in range(k)}


def cases() -> tuple[Case, ...]:
    """Every case, its implementations bound to stubbed clients."""
    stub(point_at(STUB_ENDPOINT))
    tuned_client = stub(make_client(STUB_ENDPOINT, tuned=True))
    default_client = stub(make_client(STUB_ENDPOINT))
    hands = {TUNED: HandWritten(tuned_client, TABLE), DEFAULT: HandWritten(default_client, TABLE)}
    models = {k: k_model(k) for k in KS}
    stubbed = {id(_clients.client_for(BenchAccount))}
    for model in models.values():
        client = _clients.client_for(model)
        if id(client) not in stubbed:
            stubbed.add(id(stub(client)))
    hands_k = {(v, k): HandWrittenK(c, f"bench_k{k}", k) for k in KS
               for v, c in ((TUNED, tuned_client), (DEFAULT, default_client))}
    out: list[Case] = []

    def dyn_create(i: int) -> Call:
        return lambda: BenchAccount(pk=f"C#{i}", email=f"c{i}@Example.com",
                                    username=f"c{i}", name="n").save()

    def dyn_loaded(i: int, change: str) -> Call:
        a = BenchAccount(pk=f"L#{i}", email=f"l{i}@Example.com", username=f"l{i}", name="n")
        a.save()  # set-up: the stub answers, the object is loaded
        if change == "email":
            a.email = f"m{i}@example.com"
        else:
            a.name = "m"
        return a.save

    def hand_create(v: str) -> Callable[[int], Call]:
        return lambda i: lambda: hands[v].create(f"C#{i}", f"c{i}@Example.com", f"c{i}", "n")

    def hand_loaded(v: str, change: str) -> Callable[[int], Call]:
        def build(i: int) -> Call:
            item = hands[v].create(f"L#{i}", f"l{i}@Example.com", f"l{i}", "n")
            if change == "email":
                return lambda: hands[v].change_email(item, f"m{i}@example.com")
            return lambda: hands[v].rename(item, "m")
        return build

    out.append(Case("create", "create, k = 2: `Model(...).save()`", 3,
                    {DYNAUNIQUE: dyn_create, **{v: hand_create(v) for v in hands}}))
    out.append(Case("update_unique", "change one unique value: `save()`", 3,
                    {DYNAUNIQUE: lambda i: dyn_loaded(i, "email"),
                     **{v: hand_loaded(v, "email") for v in hands}}))
    out.append(Case("update_plain", "change a plain field: `save()`", 1,
                    {DYNAUNIQUE: lambda i: dyn_loaded(i, "name"),
                     **{v: hand_loaded(v, "name") for v in hands}}))

    def dyn_atomic(n: int) -> Callable[[int], Call]:
        model = models[1]

        def build(i: int) -> Call:
            def call() -> None:
                with dynaunique.atomic():
                    for r in range(n // 2):
                        model(pk=f"A#{i}-{r}", name="n", **_pairs(i * 1000 + r, 1, "a")).save()
            return call
        return build

    def hand_atomic(v: str, n: int) -> Callable[[int], Call]:
        hand = hands_k[(v, 1)]
        return lambda i: lambda: hand.create_many(
            [(f"A#{i}-{r}", _pairs(i * 1000 + r, 1, "a")) for r in range(n // 2)])

    for n in ATOMIC_ITEMS:
        out.append(Case(f"atomic_{n}", f"`atomic()`: {n // 2} creates, k = 1 ({n} items)", n,
                        {DYNAUNIQUE: dyn_atomic(n), **{v: hand_atomic(v, n) for v in hands}}))

    def dyn_k(k: int) -> Callable[[int], Call]:
        model = models[k]
        return lambda i: lambda: model(pk=f"K#{i}", name="n", **_pairs(i, k, "k")).save()

    def hand_k(v: str, k: int) -> Callable[[int], Call]:
        return lambda i: lambda: hands_k[(v, k)].create_k(f"K#{i}", _pairs(i, k, "k"))

    for k in KS:
        out.append(Case(f"k_{k}", f"create, k = {k} unique fields", k + 1,
                        {DYNAUNIQUE: dyn_k(k), **{v: hand_k(v, k) for v in hands}}))
    return tuple(out)


@attrs.frozen
class Paired:
    """The paired run: per case, µs per call and ratios (dynaunique over each baseline)."""

    rounds: int
    labels: dict[str, str]
    items: dict[str, int]
    #: case → variant → quantiles of µs per call.
    times: dict[str, dict[str, dict[str, float]]]
    #: case → baseline → quantiles of the paired ratio.
    ratios: dict[str, dict[str, dict[str, float]]]

    def median(self, case: str, baseline: str = TUNED) -> float:
        """The median paired ratio of ``case`` against ``baseline``."""
        return self.ratios[case][baseline]["median"]


def run(rounds: int, warmup: int = 20, only: tuple[str, ...] | None = None) -> Paired:
    """Time every case (or ``only`` these) for ``rounds`` rounds after ``warmup`` rounds."""
    chosen = [c for c in cases() if only is None or c.key in only]
    samples: dict[str, dict[str, list[float]]] = {c.key: {v: [] for v in VARIANTS}
                                                  for c in chosen}
    clock = time.thread_time_ns
    gc.collect()
    for i in range(warmup + rounds):
        shift = i % len(VARIANTS)
        for variant in VARIANTS[shift:] + VARIANTS[:shift]:
            for case in chosen:
                call = case.build[variant](i)   # set-up, not timed
                start = clock()
                call()
                elapsed = clock() - start
                if i >= warmup:
                    samples[case.key][variant].append(elapsed / 1000)
    times = {c.key: {v: quantiles(samples[c.key][v]) for v in VARIANTS} for c in chosen}
    ratios = {c.key: {b: quantiles([d / h for d, h in zip(samples[c.key][DYNAUNIQUE],
                                                           samples[c.key][b], strict=True)])
                      for b in BASELINES} for c in chosen}
    return Paired(rounds, {c.key: c.label for c in chosen}, {c.key: c.items for c in chosen},
                  times, ratios)


def table(result: Paired) -> str:
    """The result as a Markdown table (also what ``python -m benchmarks.cases`` prints)."""
    x = "\u00d7"
    lines = [f"| case | items | {' | '.join(VARIANTS)} | "
             + " | ".join(f"÷ {b}" for b in BASELINES) + " | target |",
             "|---" * (3 + len(VARIANTS) + len(BASELINES)) + "|"]
    for key, label in result.labels.items():
        times = " | ".join(f"{result.times[key][v]['median']:,.0f} µs" for v in VARIANTS)
        ratios = " | ".join(
            f"**{result.ratios[key][b]['median']:.2f}{x}** [{result.ratios[key][b]['q1']:.2f}"
            f"\u2013{result.ratios[key][b]['q3']:.2f}]" for b in BASELINES)
        target = TARGETS.get(key)
        verdict = ("—" if target is None else
                   f"≤ {target:.2f}{x}: {'met' if result.median(key) <= target else 'missed'}")
        lines.append(f"| {label} | {result.items[key]} | {times} | {ratios} | {verdict} |")
    return "\n".join(lines)


def main() -> None:
    """``python -m benchmarks.cases [rounds] [case ...]``: a short run, printed as a table."""
    import sys

    from benchmarks.models import fake_credentials

    fake_credentials()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    only = tuple(sys.argv[2:]) or None
    print(table(run(rounds, only=only)))


if __name__ == "__main__":
    main()


SINGLE = ("create", "update_unique", "update_plain")


def headline(result: Paired) -> str:
    """One sentence of what the paired run shows, for the page's first lines."""
    x = "\u00d7"
    singles = [result.median(c) for c in SINGLE if c in result.ratios]
    met = [c for c, t in TARGETS.items() if c in result.ratios and result.median(c) <= t]
    missed = [c for c in TARGETS if c in result.ratios and c not in met]
    span = f"{min(singles):.2f}{x}\u2013{max(singles):.2f}{x}" if singles else "?"
    verdict = ("every target is met" if not missed else
               f"issue #26's targets are not met ({len(missed)} of {len(missed) + len(met)} "
               "missed; see the table)")
    return (f"Measured on the stub transport against the same writes coded by hand with boto3 "
            f"under the same client configuration, a single save costs {span} the hand-written "
            f"code's CPU time (median paired ratio): {verdict}.")


def render(result: Paired) -> str:
    """The page's section of the paired run."""
    x = "\u00d7"
    return "\n".join([
        "## Client-side cost per write, paired against hand-written boto3\n",
        f"`benchmarks/cases.py`, {result.rounds} rounds: each round runs every case once per "
        f"implementation, in a rotating order — **{DYNAUNIQUE}**, the **{TUNED}** "
        "(`benchmarks/handwritten.py`: the same lock-item layout, parameter validation off as "
        "on the model's client, and botocore's retries off: each of dynaunique's requests is "
        f"sent once, its retries its own) and the **{DEFAULT}** (what "
        "`boto3.client(\"dynamodb\")` gives). On the stub transport (`benchmarks/transport.py`: "
        "every request is built, serialized, signed and its answer parsed, but not sent), each "
        "call timed in the thread's CPU time. Times are medians in µs (machine-specific); ratios "
        "are dynaunique's time over the other's in the same round, median [interquartile "
        "range]. The `atomic()` cases create records of a model with one unique field (a "
        "record and its lock each); the k cases create one record with k unique fields (k + 1 "
        "items). The targets are issue #26's, against the same client configuration.\n",
        table(result) + "\n",
        f"The shared machine's load makes single rounds noisy (see the interquartile ranges); "
        f"the medians of paired ratios are what is compared. `python -m benchmarks.cases 200` "
        f"reruns this table alone (about a minute), `python -m benchmarks.ablation` measures "
        f"each change of the request path switched off ({x} > 1: the change pays).\n",
    ])
