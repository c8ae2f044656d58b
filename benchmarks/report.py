"""Render a suite's results as docs/performance.md (MyST Markdown), and describe the machine."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks import cases, overhead, roundtrips, trace
from benchmarks.models import K

if TYPE_CHECKING:
    from benchmarks.run import Suite

ROOT = Path(__file__).resolve().parent.parent
# Written as escapes: ruff flags the characters themselves as look-alikes of x and -.
X = "\u00d7"
D = "\u2013"


def _run(*command: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False,
                              cwd=ROOT)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def machine() -> dict[str, str]:
    """The facts a reader needs to weigh the absolute times."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for package in ("dynaunique", "boto3", "botocore", "pynamodb", "moto"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    commit = _run("git", "rev-parse", "--short", "HEAD")
    if commit and _run("git", "status", "--porcelain", "--", "dynaunique"):
        commit += " + uncommitted changes in dynaunique/"
    node = _run("node", "--version") if shutil.which("node") else ""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return {
        "CPU": cpu,
        "cores (`nproc`)": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                               else os.cpu_count()),
        "load average at start (1, 5, 15 min)": load,
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        **versions,
        "dynaunique commit": commit or "?",
        "Node.js (peer)": node or "not installed",
        "date (UTC)": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
    }


def _us(value: float) -> str:
    return f"{value:,.0f} µs" if value >= 100 else f"{value:.1f} µs"


def _spread(q: dict[str, float]) -> str:
    return f"{_us(q['median'])} [{q['p10']:,.0f}{D}{q['p90']:,.0f}]"


def _ratio(q: dict[str, float]) -> str:
    return f"**{q['median']:.2f}{X}** [{q['q1']:.2f}{D}{q['q3']:.2f}]"


def render(suite: Suite) -> str:
    """The whole page."""
    out: list[str] = []
    add = out.append
    mode = "quick (smoke) run" if suite.quick else "full run"
    add("# Performance\n")
    cost = (" " + cases.headline(suite.cases)) if suite.cases is not None else ""
    add("dynaunique claims that every write does the physical minimum — one round trip, the "
        f"fewest items — and the counts below show it does.{cost} "
        "This page is generated, numbers and all, by one command from the `benchmarks/` "
        f"folder of the repository ({mode}, {suite.seconds:.0f} s). **Counts and ratios are "
        "the claims.** Absolute times are specific to the machine below, which is a shared "
        "2-core virtual machine (load average "
        f"{suite.machine.get('load average at start (1, 5, 15 min)', '?')} at the start of this "
        "run: the paired ratios cancel most of it): treat them as orders of magnitude.\n")
    add("```text\n" + suite.command + "\n```\n")
    add("`--quick` runs a small version of everything (CI runs it: "
        "`tests/integration/test_benchmarks_smoke.py`); `--out FILE` writes this page, "
        "`--json FILE` the raw results. A full run includes the peer, OneTable, when Node.js is "
        "installed (running `npm ci --prefix benchmarks/peer` first if needed); `--peer off` "
        "skips it, `--peer on` adds it to a quick run.\n")
    add("## Machine and versions\n")
    add("| | |\n|---|---|")
    for key, value in suite.machine.items():
        add(f"| {key} | {value} |")
    add("")
    _round_trips(suite, add)
    if suite.cases is not None:
        add(cases.render(suite.cases))
    if suite.trace is not None:
        add(trace.render(*suite.trace))
    _overhead(suite, add)
    _contention(suite, add)
    _bulk(suite, add)
    add("## What the numbers do and do not say\n")
    add("- Round trips and items are counted from the requests botocore actually sent (a "
        "`before-send` event handler; the Node peer counts at the AWS SDK's per-attempt "
        "middleware step), so a retry would show. They are the same against Amazon DynamoDB: "
        "they depend on the client, not the server.\n"
        "- Capacity units apply DynamoDB's published rules to items up to 1 KB (writes) and "
        "4 KB (reads): a plain write costs 1 WCU, every item of a TransactWriteItems 2 WCU, a "
        "strongly consistent read 1 RCU, an eventually consistent one 0.5 RCU. Larger items "
        "scale every column alike.\n"
        "- The local server is moto in server mode with every request serialized "
        "(`dynaunique.testing`), so throughput on it is the server's, not DynamoDB's; what "
        "carries over is the ratio between two clients doing the same work.\n"
        "- The overhead timings include botocore's request building, signing and parsing, "
        "which dominate; the stub transport isolates them from the network, the null HTTP "
        "server adds a real loopback round trip.\n")
    if suite.server is not None:
        from benchmarks import server  # imports this module: import it only once both exist

        add(server.render(suite.server))
    return "\n".join(out)


def _round_trips(suite: Suite, add: Callable[[str], None]) -> None:
    rt = suite.roundtrips
    peer = suite.peer
    at_minimum = all(r.dynaunique.same_counts(r.minimum) for r in rt.rows)
    add("## Round trips and items per operation\n")
    verdict = ("at the minimum for every operation" if at_minimum
               else "**above the minimum** where marked ✗")
    add(f"Each operation ran once against the local server, inside a counting window; the set-up "
        f"it needs (creating and loading records) ran outside it. dynaunique is {verdict}. "
        f"The model has k = {K} unique values (`email`, case-folded, and `username`) and one "
        "plain field. The hand-written column is `benchmarks/handwritten.py`: what a careful "
        "engineer writes with boto3 for the same lock-item pattern.\n")
    peer_head = f" | {peer.name} {peer.version}" if peer.costs else ""
    add(f"| operation | dynaunique | hand-written boto3{peer_head} | minimum | |")
    add("|---|---|---|" + ("---|" if peer.costs else "") + "---|---|")
    for row in rt.rows:
        ok = "✓" if row.dynaunique.same_counts(row.minimum) else "✗"
        dyn = f"{row.dynaunique.cell()}, {_units(row.dynaunique)}"
        hand = (f"{row.handwritten.cell()}, {_units(row.handwritten)}"
                if row.handwritten is not None else "same as the `save()` row")
        cells = [row.label, dyn, hand]
        if peer.costs:
            cost = peer.costs.get(row.key)
            if row.key in roundtrips.SAME_AS:
                cells.append("same as the `save()` row")
            elif cost is None:
                cells.append("no such API" if row.key == "get_by_unique" else "—")
            else:
                failed = " — **fails**" if row.key in peer.errors else ""
                cells.append(f"{cost.cell()}, {_units(cost)}{failed}")
        cells += [row.minimum.cell(), ok]
        add("| " + " | ".join(cells) + " |")
    add("")
    state = rt.state
    add(f"After both implementations ran every operation the table held {state.records} "
        f"records and {state.locks} locks: {state.duplicates} duplicates, {state.orphans} "
        f"orphan locks, {state.missing} missing locks.\n")
    add("RT = round trip (one HTTP request). Items are those a request writes (Put, Update, "
        "Delete slots) or reads.\n")
    add("### Why these are the minimum\n")
    for row in rt.rows:
        add(f"- **{row.label}**: {row.minimum.why}.")
    add("")
    add("Three of them take a word more.\n")
    add("A **never-loaded delete** (`Account(pk=...).delete()`) knows only the record's key, "
        "but its locks are keyed by the record's *values*. A TransactWriteItems must name every "
        "item's key up front and a condition cannot read another item, so an atomic delete of "
        "the record and its locks needs the values first: one strongly consistent GetItem, then "
        "the transaction. The alternative — DeleteItem with `ReturnValues=ALL_OLD`, then delete "
        "the locks — is also two round trips, and a crash between them leaves orphan locks. "
        "Load the object (or keep it loaded) and the delete is one round trip.\n")
    add("**`get_by_unique`** needs the lock (value → owner key) and then the record. A GSI on "
        "the value would be one request but is eventually consistent only, and DynamoDB offers "
        "no read that follows a key stored in another item.\n")
    add("A **swap** cannot be the naive 6 items (2 records, 2 lock deletes, 2 lock puts): "
        "DynamoDB rejects two operations on one item in a transaction. Each lock changes owner "
        "in one put guarded \"owned by the old holder\".\n")
    if peer.skipped:
        add(f"The peer (OneTable) was not run: {peer.skipped}.\n")
    elif peer.costs:
        add(f"### {peer.name}\n")
        add(f"`dynamodb-onetable` {peer.version} under Node, through its `unique: true` "
            "fields, against the same local server (`benchmarks/peer/onetable_bench.mjs`). "
            "It has no loaded objects: `update()` of a unique field and `remove()` read the "
            "prior item first (an eventually consistent GetItem), so each costs an extra round "
            "trip; it has no lookup by unique value (that needs a GSI). Errors it raised:\n")
        for key, error in sorted(peer.errors.items()):
            add(f"- {key}: `{error}`")
        add("")


def _units(cost: object) -> str:
    from benchmarks.roundtrips import Cost

    assert isinstance(cost, Cost)
    parts = []
    if cost.wcu:
        parts.append(f"{cost.wcu:g} WCU")
    if cost.rcu:
        parts.append(f"{cost.rcu:g} RCU")
    return " + ".join(parts) or "0 units"


def _overhead(suite: Suite, add: Callable[[str], None]) -> None:
    add("## Client-side overhead per save\n")
    add("The same three saves, round after round: a create, a change of one unique value, a "
        "change of a plain field. Four ways to do each, interleaved in a rotating order: "
        f"**{overhead.DYNAUNIQUE}**; the **{overhead.FLOOR}** (the very request dynaunique "
        "renders, sent through dynaunique's own botocore client, its fast request path included — "
        "the floor of dynaunique's request path: what it adds is planning and bookkeeping); the "
        f"**{overhead.TUNED}** (`benchmarks/handwritten.py`, botocore's parameter validation and "
        f"retries off: dynaunique sends each request once); the **{overhead.DEFAULT}** (what "
        f"`boto3.client(\"dynamodb\")` gives you). Times are µs per call, median [p10{D}p90] "
        "(machine-specific; with the stub, the thread's CPU time, so time the OS gives to other "
        "processes is not counted; with the server, wall-clock time). Ratios are dynaunique's "
        "time over the other's, taken per round "
        f"(paired) — median [interquartile range]. The target is at most {overhead.TARGET}{X} "
        "against the call with the same payload.\n")
    for result in suite.overhead:
        add(f"### {result.transport} — {result.rounds} rounds\n")
        head = " | ".join(overhead.VARIANTS)
        ratios = " | ".join(f"÷ {b}" for b in overhead.BASELINES)
        add(f"| operation | {head} | {ratios} |")
        add("|---" * (1 + len(overhead.VARIANTS) + len(overhead.BASELINES)) + "|")
        for op in overhead.OPS:
            times = " | ".join(_spread(result.times[op][v]) for v in overhead.VARIANTS)
            rs = " | ".join(_ratio(result.ratios[op][b]) for b in overhead.BASELINES)
            add(f"| {overhead.OP_LABELS[op]} | {times} | {rs} |")
        add("")
        worst = result.worst_ratio()
        verdict = "meets" if worst <= overhead.TARGET else "**misses**"
        add(f"Worst median ratio against the same-payload call: **{worst:.3f}{X}** — {verdict} "
            f"the {overhead.TARGET}{X} target.\n")
    st = suite.stages
    if st is not None:
        add("### Where dynaunique's time goes: the steps of `save()`\n")
        if st.skipped:
            add(f"Not measured: {st.skipped}.\n")
        else:
            add(f"Each step of `save()` timed alone, on the stub transport ({st.rounds} rounds; "
                "median thread CPU time in µs, machine-specific; the share is of dynaunique's "
                "own time, i.e. the whole save minus the botocore call).\n")
            heads = [overhead.OP_LABELS[op].split(":")[0] for op in overhead.OPS]
            add("| step | " + " | ".join(heads) + " |")
            add("|---" * (1 + len(overhead.OPS)) + "|")
            for step in overhead.STEP_NAMES:
                cells = []
                for op in overhead.OPS:
                    value = st.steps[op][step]
                    own = st.save[op] - st.floor[op]
                    share = f" ({value / own * 100:.0f}%)" if own > 0 else ""
                    cells.append(f"{value:.1f}{share}")
                add(f"| {step} | " + " | ".join(cells) + " |")
            add("| **dynaunique's own time** | " + " | ".join(
                f"**{st.save[op] - st.floor[op]:.1f}**" for op in overhead.OPS) + " |")
            add("| botocore call (the floor) | " + " | ".join(
                f"{st.floor[op]:.1f}" for op in overhead.OPS) + " |")
            add("| whole `save()` | " + " | ".join(
                f"{st.save[op]:.1f} ({st.save[op] / st.floor[op]:.2f}{X})" for op in overhead.OPS)
                + " |")
            add("")
    profile = suite.profile
    if profile is not None:
        add("### Where dynaunique's time goes: the call tree\n")
        add(f"cProfile over {profile.saves} saves on the stub transport (the three saves "
            "above in equal parts). Each line is a call made from the line above it, with its "
            "share of the saves' total time (children included) and calls per save; lines under "
            f"1% are left out, botocore and PynamoDB are not expanded. The profiler slows "
            "every Python call, so read the shares, not the times "
            f"({profile.per_save_us:,.0f} µs per save under the profiler).\n")
        lines: list[str] = []

        def walk(nodes: tuple[overhead.Node, ...], depth: int) -> None:
            for node in nodes:
                lines.append(f"{'  ' * depth}{node.share * 100:5.1f}%  x{node.calls_per_save:<4.2f}"
                             f" {node.name}")
                walk(node.children, depth + 1)

        walk(profile.tree, 0)
        add("```text\n" + "\n".join(lines) + "\n```\n")
        add("Own time of dynaunique's busiest functions, and of what they call directly (the "
            "standard library, PynamoDB — not through botocore), as a share of all profiled "
            "time:\n")
        add("```text\n" + "\n".join(f"{share * 100:5.1f}%  {name}" for name, share in
                                     profile.own) + "\n```\n")


def _contention(suite: Suite, add: Callable[[str], None]) -> None:
    runs = suite.contention
    if not runs:
        return
    first = runs[0]
    add("## Throughput under contention\n")
    add(f"{first.threads} threads sign up accounts at once on the local server, "
        f"{first.attempts} attempts per run: about half with a fresh email, the rest with one of "
        "8 hot emails that every thread also tries (in random letter case: the lock is on the "
        "case-folded value). Both implementations send one TransactWriteItems per attempt and "
        "report a taken email without a retry. Each run starts on an empty table (on a server "
        "of its own, unless `--endpoint` was given); runs alternate between the two.\n")
    add("| run | implementation | signed up | rejected (taken) | errors | requests | "
        "attempts/s (machine-specific) | duplicates | orphan locks | missing locks |")
    add("|---|---|---|---|---|---|---|---|---|---|")
    for n, run in enumerate(runs, 1):
        s = run.state
        add(f"| {n} | {run.implementation} | {run.created} of {run.distinct_emails} possible | "
            f"{run.taken} | {run.errors} | {run.requests} | {run.ops_per_second:,.1f} | "
            f"{s.duplicates} | {s.orphans} | {s.missing} |")
    add("")
    totals: dict[str, list[float]] = {}
    for run in runs:
        totals.setdefault(run.implementation, [0.0, 0.0])
        totals[run.implementation][0] += run.attempts
        totals[run.implementation][1] += run.seconds
    rates = {name: a / s for name, (a, s) in totals.items() if s}
    names = list(rates)
    if len(names) == 2:
        ratio = rates[names[0]] / rates[names[1]]
        spread = {name: [r.ops_per_second for r in runs if r.implementation == name]
                  for name in names}
        shown = "; ".join(f"{name} {rates[name]:,.1f} attempts/s (runs {min(spread[name]):,.1f}"
                          f"{D}{max(spread[name]):,.1f})" for name in names)
        add(f"Throughput over all runs: {shown} — ratio **{ratio:.2f}{X}**. The server runs one "
            "request at a time and shares the machine's cores with the client threads, so the "
            "ratio mixes server time with client CPU time; compare it with the run-to-run "
            "spread. The claims here are the counts: one request per attempt, and exactly one "
            "account per email with every lock right, for both.\n")


def _bulk(suite: Suite, add: Callable[[str], None]) -> None:
    bulk = suite.bulk
    add("## Bulk: migration backfill and audit, per record\n")
    runs = [r for r in bulk.runs if r.max_wcu is None]
    if runs:
        add("A backfill starts from N records without locks (a unique constraint added to a "
            "live table: `Project.make_migrations()` then `MigrationExecutor.migrate()`) and "
            f"must write k = {K} locks per record. An audit (`dynaunique.audit.check`) reads a "
            "table of N records with their locks. Requests and write units are counted per "
            "record of the table; records/s is machine-specific. The floor for a backfill "
            "without transactions is k plain conditional writes per record (2 WCU) plus the "
            "scan; for an audit, the scan itself (every item read once).\n")
        add("| job | segments | records | requests per record | by operation | items written "
            "per record | WCU per record | items scanned per record | records/s | correct |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for r in runs:
            ops = ", ".join(f"{op} {n}" for op, n in sorted(r.requests.items()))
            add(f"| {r.kind} | {r.segments} | {r.records} | {r.requests_per_record:.3g} | {ops} "
                f"| {r.written / r.records:.2f} | {r.wcu_per_record:.2f} | "
                f"{r.scanned / r.records:.2f} | {r.records_per_second:,.0f} | "
                f"{'yes' if r.correct else '**no**'} |")
        add("")
        add("Correct: for a backfill, every record holds exactly its locks afterwards (no "
            "orphan, none missing, no duplicate); for an audit, the report is clean.\n")
    capped = [r for r in bulk.runs if r.max_wcu is not None]
    for r in capped:
        assert r.max_wcu is not None
        add(f"`max_wcu={r.max_wcu:g}` (the CLI's `--max-wcu`), {r.segments} segments, "
            f"{r.records} records: {r.wcu:g} WCU in {r.seconds:.1f} s = "
            f"**{r.wcu_per_second:.1f} WCU/s, {r.wcu_per_second / r.max_wcu:.2f}{X} the cap** "
            "(a token bucket allows an initial burst, so short runs land above the cap).\n")
    if bulk.not_measured:
        add("### Not measured yet\n")
        for part, reason in sorted(bulk.not_measured.items()):
            add(f"- **{part}**: {reason}")
        add("")
        add("The benchmark code is in `benchmarks/bulk.py` and imports `dynaunique.migrations` "
            "and `dynaunique.audit` lazily: rerun the command once they work and this section "
            "fills in. No number is shown for a part that did not run.\n")
