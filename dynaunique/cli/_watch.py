"""The ``watch`` command: read the tables' streams, print what the stream guard finds.

Exit codes: 0 nothing found, 1 findings, 2 the command could not run (module, endpoint, a
table without a NEW_AND_OLD_IMAGES stream, a record it could not handle: it is read again by the
next run, which starts at the record before it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

import click

from dynaunique import audit
from dynaunique._user_models import open_models
from dynaunique.cli._common import CannotRun, endpoint_option
from dynaunique.cli._output import Output
from dynaunique.streams import STARTS, BatchResult, Checker, Reader, finding_dict


def _printer(as_json: bool, output: Output
             ) -> tuple[list[int], list[str], Callable[[BatchResult], None]]:
    counts = [0]
    failed: list[str] = []

    def on_batch(result: BatchResult) -> None:
        counts[0] += len(result.findings) + len(result.double_grants)
        failed.extend(result.failed)
        if as_json:
            for finding in result.findings:
                click.echo(json.dumps(finding_dict(finding, result.sources), ensure_ascii=False,
                                      sort_keys=True))
            for grant in result.double_grants:
                click.echo(json.dumps(grant.to_dict(), ensure_ascii=False, sort_keys=True))
            for outcome in result.repairs:
                click.echo(json.dumps({"repair": outcome.to_dict()}, ensure_ascii=False,
                                      sort_keys=True))
            return
        if result.findings:
            output.table(("kind", "constraint", "value", "lock owner", "records holding it",
                          "why"), [
                (audit.KIND_LABELS[f.kind], f.constraint or "-", f.shown_value,
                 f.lock.owner_label if f.lock else "-", [h.label for h in f.holders], f.detail)
                for f in result.findings])
        for grant in result.double_grants:
            output.note(grant.message, "bold red")
        for outcome in result.repairs:
            output.note(f"repair {outcome.action.kind.replace('_', ' ')} "
                        f"{outcome.action.finding.constraint} "
                        f"{outcome.action.finding.shown_value}: {outcome.status}")
        if result.refused:
            output.note(result.refused, "bold red")
        for sequence in result.failed:
            output.note(f"stream record {sequence} could not be handled", "red")

    return counts, failed, on_batch


@click.command("watch")
@click.argument("module")
@click.option("--from", "start", type=click.Choice(sorted(STARTS)), default="trim-horizon",
              show_default=True,
              help="Where a shard without a checkpoint starts: its oldest record (streams keep "
                   "24 hours) or only the writes from now on.")
@click.option("--once", is_flag=True,
              help="Read what the streams hold now, then exit (else poll until interrupted).")
@click.option("--json", "as_json", is_flag=True, help="Print one finding per line, as JSON.")
@click.option("--repair", is_flag=True,
              help="Send the audit's guarded repair for what is found (never touches a record).")
@click.option("--consumer", default="watch", show_default=True, metavar="NAME",
              help="The name its checkpoints are kept under (one per concurrent watcher).")
@click.option("--poll", "poll_seconds", default=2.0, show_default=True,
              type=click.FloatRange(0.1, 300), metavar="SECONDS",
              help="Seconds between two passes over the shards.")
@click.option("--max-seconds", default=None, type=click.FloatRange(0), metavar="SECONDS",
              help="Stop after this long (without --once).")
@click.option("--regions", metavar="R1,R2", default=None,
              help="A global table: read the stream of each of these regions' replicas, and "
                   "each lock key a change touches in every one of them; report a value "
                   "granted in two regions (a write that bypassed the home region).")
@click.option("--settle", "settle_seconds", default=10.0, show_default=True,
              type=click.FloatRange(0), metavar="SECONDS",
              help="With --regions: how long to wait for the replicas to agree on a value held "
                   "by different records in different regions.")
@endpoint_option
def watch_command(module: str, start: str, once: bool, as_json: bool, repair: bool,
                  consumer: str, poll_seconds: float, max_seconds: float | None,
                  regions: str | None, settle_seconds: float, endpoint: str | None) -> None:
    """Check what is written to MODULE's tables, from their DynamoDB streams (the stream
    guard): exit 0 when nothing was found, 1 with findings.

    Every change of a record of a constrained model or of a lock item is re-checked with a
    consistent read of the locks it touches (a transaction's records arrive one by one, so a
    stream record alone proves nothing). Each table needs a NEW_AND_OLD_IMAGES stream; each
    shard's position is kept in the table's ledger, so the next run resumes where this one
    stopped. With --regions (a global table) each region's stream is read, and a value granted
    in two regions is reported naming both.
    """
    output = Output()
    models, _ = open_models(module, endpoint)
    named: list[str | None] = [r.strip() for r in (regions or "").split(",") if r.strip()]
    checker = Checker(models, repair=repair, regions=[r for r in named if r],
                      settle_seconds=settle_seconds)
    # A table no loaded model declares a constraint on holds no lock to guard (and needs no
    # stream).
    guarded = [table for table in checker.tables.values() if table.declared]
    if not guarded:
        raise CannotRun(f"no model of {module!r} declares a unique constraint: nothing to watch")
    readers: Sequence[Reader] = [Reader(checker, table, start=start, consumer=consumer,
                                        region=region)
                                 for table in guarded for region in named or [None]]
    counts, failed, on_batch = _printer(as_json, output)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    try:
        while True:
            for reader in readers:
                reader.read_all(on_batch)
            if once or (deadline is not None and time.monotonic() >= deadline):
                break
            left = poll_seconds if deadline is None else min(poll_seconds,
                                                             deadline - time.monotonic())
            time.sleep(max(left, 0.0))
    except KeyboardInterrupt:
        pass
    if failed:
        raise CannotRun(f"{len(failed)} stream record(s) could not be handled (first: "
                        f"{failed[0]}); the next run reads them again")
    if not as_json:
        output.note(f"{counts[0]} finding(s)" if counts[0] else
                    "No findings: every change re-checked agrees.",
                    "red" if counts[0] else "green")
    click.get_current_context().exit(1 if counts[0] else 0)


COMMANDS: list[click.Command] = [watch_command]
