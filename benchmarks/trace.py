"""How hard a save's path is to follow: one create ``save()`` traced with ``sys.setprofile``.

    python -m benchmarks.trace

Counts, over the Python calls one create of the k = 2 model (``benchmarks.models``) makes on the
stub transport, those into the library's own modules: distinct functions, distinct modules, and
module switches — a library call whose module is not the module of the library call before it.
The same is counted for PynamoDB's own ``Model.save()`` of a plain PynamoDB model (PynamoDB's
modules), as the comparison. Deterministic: the counts are the claims, not timings.

    python -m benchmarks.trace --cases [--endpoint URL] [--modules]

traces the four saves of issue 39's table on a local server (started for the run unless
``--endpoint`` names one): a create, an update changing a unique value, an update of a plain
field and a delete (the record read back with ``get`` after its create, then that one object
updated twice and deleted), with PynamoDB's own ``save()`` of a plain model on the same server
as the comparison. A report, not a gate
(docs/decisions.md, "What one save() crosses").
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class Trace:
    """What one traced call touched of one package."""

    package: str
    functions: int
    modules: tuple[str, ...]
    switches: int
    #: The distinct (module, function) pairs called, in the order first called.
    calls: tuple[tuple[str, str], ...] = ()


def trace(call: Callable[[], Any], package: str) -> Trace:
    """Run ``call`` under ``sys.setprofile`` and count its calls into ``package``'s modules."""
    marker = f"/{package}/"
    functions: dict[tuple[str, str], None] = {}
    modules: dict[str, None] = {}
    switches = 0
    last: list[str | None] = [None]

    def profiler(frame: Any, event: str, arg: Any) -> None:
        nonlocal switches
        if event != "call":
            return
        path = frame.f_code.co_filename.replace("\\", "/")
        if marker not in path:
            return
        module = package + "/" + path.rsplit(marker, 1)[1]
        functions.setdefault((module, frame.f_code.co_qualname))
        modules.setdefault(module)
        if last[0] is not None and last[0] != module:
            switches += 1
        last[0] = module

    sys.setprofile(profiler)
    try:
        call()
    finally:
        sys.setprofile(None)
    return Trace(package, len(functions), tuple(modules), switches, tuple(functions))


def plain_model(table: str, endpoint: str | None = None) -> Any:
    """A plain PynamoDB model of the benchmark's item (no constraint): the comparison."""
    from pynamodb.attributes import UnicodeAttribute
    from pynamodb.models import Model as PynamoModel

    class Plain(PynamoModel):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = endpoint

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        email = UnicodeAttribute()
        username = UnicodeAttribute()
        name = UnicodeAttribute(null=True)

    return Plain


def measure() -> tuple[Trace, Trace]:
    """(dynaunique's create ``save()``, PynamoDB's own ``save()``), both on the stub transport."""
    from benchmarks.models import BenchAccount, fake_credentials, point_at
    from benchmarks.transport import stub

    fake_credentials()
    stub(point_at("http://127.0.0.1:9"))
    Plain = plain_model("bench_plain", "http://127.0.0.1:9")
    stub(Plain._get_connection().connection.client)
    # Warm both paths (first calls load botocore's models and fill caches), then trace one each.
    for i in range(3):
        BenchAccount(pk=f"T#{i}", email=f"t{i}@Example.com", username=f"t{i}", name="n").save()
        Plain(pk=f"T#{i}", email="e", username="u", name="n").save()
    ours = trace(lambda: BenchAccount(pk="T#x", email="tx@Example.com", username="tx",
                                      name="n").save(), "dynaunique")
    theirs = trace(lambda: Plain(pk="T#x", email="e", username="u", name="n").save(), "pynamodb")
    return ours, theirs


#: The saves :func:`measure_saves` traces, in the order it runs them on one record.
CASES = ("create", "update changing a unique value", "update of a plain field", "delete")


def measure_saves(endpoint: str, *, warmup: int = 2) -> dict[str, Trace]:
    """Each of :data:`CASES` traced once on ``endpoint`` (a local server, reset first), after
    ``warmup`` untraced rounds of the same four; then PynamoDB's own create ``save()`` of a
    plain model, as ``"PynamoDB save() (plain model)"``."""
    from benchmarks.models import BenchAccount, fake_credentials, fresh_table
    from dynaunique.testing import create_tables, use_endpoint

    fake_credentials()
    fresh_table(endpoint)
    Plain = plain_model("bench_trace_plain")
    use_endpoint(endpoint, Plain)
    create_tables(Plain)

    def steps(tag: str) -> list[Callable[[], Callable[[], Any]]]:
        """Each case's preparation (untraced) returning the call to trace: the record is
        created, read back with ``get``, and that one object updated twice and deleted."""
        key = f"T#{tag}"
        held: list[Any] = []

        def create() -> Callable[[], Any]:
            return BenchAccount(pk=key, email=f"{tag}@Example.com", username=tag, name="n").save

        def change_unique() -> Callable[[], Any]:
            held.append(BenchAccount.get(key, "PROFILE"))
            held[0].email = f"{tag}.new@Example.com"
            return held[0].save  # type: ignore[no-any-return]

        def change_plain() -> Callable[[], Any]:
            held[0].name = "m"
            return held[0].save  # type: ignore[no-any-return]

        def delete() -> Callable[[], Any]:
            return held[0].delete  # type: ignore[no-any-return]

        return [create, change_unique, change_plain, delete]

    for i in range(warmup):
        for prepare in steps(f"w{i}"):
            prepare()()
        Plain(pk=f"W#{i}", email="e", username="u", name="n").save()
    traced = {case: trace(prepare(), "dynaunique")
              for case, prepare in zip(CASES, steps("x"), strict=True)}
    traced["PynamoDB save() (plain model)"] = trace(
        lambda: Plain(pk="T#x", email="e", username="u", name="n").save(), "pynamodb")
    return traced


def render_saves(traced: dict[str, Trace]) -> str:
    """The four saves (and PynamoDB's) as a Markdown table: functions / modules / switches."""
    rows = ["| one call, traced with `sys.setprofile` on the local server | functions / modules "
            "/ module switches |", "|---|---|"]
    rows += [f"| {case} | {t.functions} / {len(t.modules)} / {t.switches} |"
             for case, t in traced.items()]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the counts (``--cases``: the four saves on a local server)."""
    import argparse
    import contextlib

    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trace")
    parser.add_argument("--cases", action="store_true",
                        help="the four saves of issue 39's table, on a local server")
    parser.add_argument("--endpoint", default=None,
                        help="a local server to use (reset first); default: start one")
    parser.add_argument("--modules", action="store_true", help="list each case's modules")
    args = parser.parse_args(argv)
    if not args.cases:
        for t in measure():
            print(f"{t.package}: {t.functions} functions in {len(t.modules)} modules, "
                  f"{t.switches} module switches")
            for module in t.modules:
                print(f"    {module}")
        return
    from dynaunique.testing import local_dynamodb

    with contextlib.ExitStack() as stack:
        endpoint = args.endpoint or stack.enter_context(local_dynamodb())
        traced = measure_saves(endpoint)
    print(render_saves(traced))
    if args.modules:
        for case, t in traced.items():
            print(f"\n{case}: " + ", ".join(m.split("/", 1)[1] for m in t.modules))


if __name__ == "__main__":
    main()


def render(ours: Trace, theirs: Trace) -> str:
    """The page's section of the trace."""
    return "\n".join([
        "## How far one save's path wanders\n",
        "`python -m benchmarks.trace`: one create `save()` of the k = 2 model traced with "
        "`sys.setprofile` — the distinct functions of the library it calls, the modules they are "
        "in, and the module switches (a library call in another module than the library call "
        "before it). PynamoDB's own `save()` of the same item, counted over PynamoDB's "
        "modules, for comparison. A report, not a gate (issue #39; docs/decisions.md, "
        "\"What one save() crosses\"): the cost is the paired benchmark's.\n",
        "| save | functions | modules | module switches |",
        "|---|---|---|---|",
        f"| dynaunique `Model(...).save()` (create, k = 2) | {ours.functions} | "
        f"{len(ours.modules)} | {ours.switches} |",
        f"| PynamoDB `Model(...).save()` | {theirs.functions} | {len(theirs.modules)} | "
        f"{theirs.switches} |",
        "",
        "dynaunique's modules, in the order the save first enters them: "
        + ", ".join(f"`{m.split('/', 1)[1]}`" for m in ours.modules) + ".\n",
    ])
