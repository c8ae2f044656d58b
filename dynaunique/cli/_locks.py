"""The ``locks``, ``check`` and ``repair`` commands: parse, call ``dynaunique.audit``, print.

Exit codes: ``check`` 0 clean, 1 findings; ``repair`` 0 when everything planned was (or, in a
dry run, can be) fixed, 1 when something is left for a person; ``locks`` 0. Any of them exits 2
when it could not run at all (bad module, endpoint, region or credentials, unreachable endpoint,
missing table). Tables are drawn with rich on a terminal, and printed as plain tab-separated rows
otherwise (``dynaunique._output``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from dynaunique import audit
from dynaunique._user_models import open_models
from dynaunique._write.render import to_json
from dynaunique.cli._common import CannotRun, endpoint_option
from dynaunique.cli._output import Output, progress_bar
from dynaunique.cli._regions import compare_regions, print_modes
from dynaunique.errors import DynauniqueError
from dynaunique.model import Model

_KIND_LABELS = audit.KIND_LABELS
_STATUS_STYLES = {audit.FIXED: "green", audit.ALREADY_FIXED: "green", audit.NOT_FIXED: "red",
                  audit.SKIPPED: "yellow", audit.FAILED: "red"}


@contextmanager
def _reported() -> Iterator[None]:
    try:
        yield
    except DynauniqueError as exc:
        raise CannotRun(str(exc)) from exc


def _models(module: str, endpoint: str | None,
            segments: int | None = None) -> tuple[list[type[Model]], int]:
    """The module's models, pointed at the endpoint, and the scan segments (the option, else
    ``[tool.dynaunique] segments``, else 1)."""
    models, settings = open_models(module, endpoint)
    return models, segments or settings.segments or 1


def _when(epoch: int | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _created(text: str | None) -> str:
    if not text:
        return "-"
    return text.replace("T", " ")[:19] + "Z"


_LOCK_COLUMNS = ("constraint", "value", "owner", "model", "created", "expiry")


def _lock_row(lock: audit.LockInfo) -> tuple[str, ...]:
    return (lock.constraint, lock.shown_value, lock.owner_label, lock.model or "-",
            _created(lock.created), _when(lock.expires))


def _intent_note(lock: audit.LockInfo, now: float) -> str | None:
    """One line on an MRSC pending intent (None: the lock is none): its token, when its writer
    put it (the writer's clock) and whether its grace period has ended at ``now``."""
    intent = lock.intent
    if intent is None or not intent.pending:
        return None
    grace = audit.INTENT_GRACE
    where = "within" if intent.within(grace, now) else "past"
    when = datetime.fromtimestamp(intent.at, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return (f"{lock.constraint} {lock.shown_value}: a pending intent (MRSC), not a held lock: "
            f"token {intent.token}, put at {when} by its writer's clock ({now - intent.at:.0f} s "
            f"ago, {where} its {grace:g} s grace period). A write in flight, or one whose writer "
            "stopped before clearing the mark; dynaunique check judges it")


def _graced(lock: dict[str, Any] | None, now: float) -> None:
    """Add ``within_grace`` (at ``now``) to a JSON lock's MRSC marks, when it has some."""
    intent = (lock or {}).get("intent")
    if intent is not None:
        intent["within_grace"] = bool(intent["pending"]) and now < (
            float(intent["at"]) + audit.INTENT_GRACE)


# --- locks ---------------------------------------------------------------------------------------


@click.command("locks")
@click.argument("module")
@click.option("--model", "model_name", metavar="M", help="Only locks written by this model.")
@click.option("--constraint", metavar="NAME",
              help="Only this constraint's locks (lock name such as EMAIL, or a field name).")
@click.option("--value", "values", multiple=True, metavar="PREFIX",
              help="Values starting with PREFIX (normalized like the constraint); with --exact, "
                   "the exact value. Repeat for the fields of a composite constraint.")
@click.option("--exact", is_flag=True,
              help="Look up the exact --value of --constraint: ONE consistent GetItem, no scan.")
@click.option("--owner", metavar="KEY",
              help="The locks one record (by hash key) requires, and whether it holds them.")
@click.option("--owner-range", metavar="KEY",
              help="The record's range key (default: the model's default range key).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@endpoint_option
def locks_command(module: str, model_name: str | None, constraint: str | None,
                  values: tuple[str, ...], exact: bool, owner: str | None,
                  owner_range: str | None, as_json: bool, endpoint: str | None) -> None:
    """List lock items of MODULE's models, look one value up, or show a record's locks.

    \b
    dynaunique locks myapp.models                          every lock (a scan)
    dynaunique locks myapp.models --constraint EMAIL --value ada@x.io --exact
                                                           who holds it: 1 GetItem
    dynaunique locks myapp.models --owner 'ACCT#1'         the locks ACCT#1 should hold
    """
    if owner is not None and (exact or constraint is not None or values):
        raise click.UsageError("--owner lists one record's locks; it takes no --constraint, "
                               "--value or --exact")
    if owner_range is not None and owner is None:
        raise click.UsageError("--owner-range needs --owner")
    with _reported():
        models, _ = _models(module, endpoint)
        if exact:
            if constraint is None or not values:
                raise click.UsageError("--exact needs --constraint and --value")
            _print_holder(models, model_name, constraint, values, as_json)
        elif owner is not None:
            result = audit.owner_locks(models, owner, owner_range, model=model_name)
            _print_owner(result, owner, as_json)
        else:
            prefix: Any = None
            if values:
                prefix = values[0] if len(values) == 1 else tuple(values)
            listing = audit.list_locks(models, model=model_name, constraint=constraint,
                                       value_prefix=prefix)
            _print_listing(listing, as_json)


def _hashed(model: type[Model], constraint: str) -> bool:
    info = model._du_info
    return info is not None and any(
        b.constraint.hashed and constraint in (b.name, *b.constraint.fields)
        for b in info.constraints)


def _asked(model: type[Model], constraint: str, values: Sequence[str]) -> str:
    """The looked-up value as output may show it: never a hashed constraint's."""
    if _hashed(model, constraint):
        return f"that {constraint} value (hashed, not shown)"
    return f"{constraint} {' / '.join(values)!r}"


def _print_holder(models: Sequence[type[Model]], model_name: str | None, constraint: str,
                  values: Sequence[str], as_json: bool) -> None:
    model = audit.pick_model(models, constraint, model=model_name)
    try:
        value = audit.parse_value(model, constraint, values)
        lock = audit.who_holds(model, constraint, value)
    except DynauniqueError as exc:
        if not _hashed(model, constraint):
            raise
        # The message may quote the value: say only what failed.
        raise CannotRun(f"that value cannot be looked up as {constraint} "
                        f"({type(exc).__name__}); {constraint} is hashed, so the value is not "
                        "shown") from None
    cost = audit.Cost((("GetItem", 1),))
    now = time.time()
    if as_json:
        data = {"lock": lock.to_dict() if lock else None, "cost": cost.to_dict()}
        _graced(data["lock"], now)
        click.echo(to_json(data))
        return
    output = Output()
    if lock is None:
        output.note(f"No lock: {_asked(model, constraint, values)} is free.")
    else:
        output.table(_LOCK_COLUMNS, [_lock_row(lock)])
        note = _intent_note(lock, now)
        if note is not None:
            output.note(note, "yellow")
    output.note(f"cost: {cost.describe()}", "dim")


def _print_owner(result: audit.OwnerLocks, owner: str, as_json: bool) -> None:
    now = time.time()
    if as_json:
        data = result.to_dict()
        for lock in data["locks"]:
            _graced(lock["stored"], now)
        click.echo(to_json(data))
        return
    output = Output()
    if result.record is None:
        output.note(f"No record has key {owner!r}.")
    elif not result.locks:
        output.note(f"{result.record.label} requires no lock.")
    else:
        rows = []
        for expected in result.locks:
            stored = expected.stored
            status = {"held": Text("held", "green"), "missing": Text("missing", "red"),
                      "foreign": Text("held by another record", "red"),
                      "pending": Text("pending intent", "yellow")}[expected.status]
            value = "hashed" if expected.lock.hashed else _shown(expected.lock.value)
            rows.append((expected.lock.constraint, value, status,
                         stored.owner_label if stored else "-",
                         _created(stored.created) if stored else "-",
                         _when(stored.expires) if stored else "-"))
        output.table(("constraint", "value", "status", "lock owner", "created", "expiry"), rows,
                     title=f"Locks of {result.record.model} {result.record.label}")
        for expected in result.locks:
            note = _intent_note(expected.stored, now) if expected.stored else None
            if note is not None:
                output.note(note, "yellow")
    output.note(f"cost: {result.cost.describe()}", "dim")


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return " / ".join(str(v) for v in value)
    return str(value)


def _print_listing(listing: audit.LockListing, as_json: bool) -> None:
    if as_json:
        click.echo(to_json(listing.to_dict()))
        return
    output = Output()
    if listing.locks or not output.terminal:  # piped: the header line even with no row
        output.table(_LOCK_COLUMNS, [_lock_row(lock) for lock in listing.locks])
    output.note(f"{len(listing.locks)} lock(s)")
    output.note(f"cost: {listing.cost.describe()}", "dim")


# --- check ---------------------------------------------------------------------------------------


@contextmanager
def _progress(enabled: bool, label: str = "scanning"
              ) -> Iterator[Callable[[int, int | None], None] | None]:
    """A rich progress bar on stderr, labelled ``label``, when it is a terminal; None (no bar)
    otherwise."""
    console = Console(file=sys.stderr)
    if not enabled or not console.is_terminal:
        yield None
        return
    with progress_bar(console, transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=max(total, done) if total else None)

        yield update


def _run_check(models: Sequence[type[Model]], segments: int,
               as_json: bool) -> audit.AuditReport:
    with _progress(not as_json) as progress:
        return audit.check(models, segments=segments, progress=progress)


_FINDING_COLUMNS = ("kind", "constraint", "value", "lock owner", "records holding it", "why")


def _print_secret_warnings(warnings: Sequence[audit.SecretWarning], output: Output) -> None:
    for warning in warnings:
        output.note(f"WARNING: {warning.message}", "bold red")


def _print_report(report: audit.AuditReport, output: Output) -> None:
    for summary in report.tables:
        output.note(f"Checked {summary.table}: {summary.items_scanned} items — "
                    f"{summary.records} records, {summary.locks} locks")
    _print_secret_warnings(report.secret_warnings, output)
    if report.clean and not report.findings:
        if not output.terminal:
            output.table(_FINDING_COLUMNS, [])
        output.note("No findings: locks and records agree.", "green")
        return
    output.table(_FINDING_COLUMNS, [
        (_KIND_LABELS[finding.kind], finding.constraint or "-", finding.shown_value,
         finding.lock.owner_label if finding.lock else "-",
         [h.label for h in finding.holders], finding.detail)
        for finding in report.findings
    ])
    counts = ", ".join(f"{n} {_KIND_LABELS[k]}" for k, n in report.counts().items() if n)
    if report.clean:   # only writes in flight (an MRSC table's pending intents)
        output.note(f"{len(report.findings)} write(s) in flight ({counts}); nothing else: locks "
                    "and records agree.", "green")
        return
    output.note(f"{len(report.findings)} finding(s): {counts}", "red")


@click.command("check")
@click.argument("module")
@click.option("--segments", default=None, type=click.IntRange(1, 1000000), metavar="N",
              help="Scan each table as N parallel segments (one thread each; default 1, or "
                   "[tool.dynaunique] segments).")
@click.option("--export", "export", metavar="PATH",
              help="Read a DynamoDB export to S3 (its folder, or s3://bucket/prefix) instead of "
                   "scanning; each suspect is confirmed on the live table.")
@click.option("--s3-endpoint", envvar="AWS_ENDPOINT_URL_S3", metavar="URL",
              help="S3 endpoint URL for an s3:// --export (also AWS_ENDPOINT_URL_S3).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--regions", metavar="R1,R2", default=None,
              help="A global table: compare the lock items of these regions' replicas instead "
                   "(exit 0 when they agree: replication has drained and no region granted a "
                   "value another one holds).")
@endpoint_option
def check_command(module: str, segments: int | None, export: str | None,
                  s3_endpoint: str | None, as_json: bool, regions: str | None,
                  endpoint: str | None) -> None:
    """Check that MODULE's locks and records agree: exit 0 when clean, 1 with findings.

    Finds orphan locks (owner gone or no longer holding the value), missing locks, locks held
    by a record that no longer holds the value while another one does, duplicates (records
    sharing a normalized value) and locks of constraints no model declares; on an MRSC table,
    pending intents (writes in flight: exit 0 if nothing else) and confirmable ones. Costs one
    scan of each table plus one TransactGetItems (MRSC: a few GetItems) per suspicious lock key;
    with --export, no scan: the export's table is read from the export, and only its suspects
    from the table.
    """
    if export is not None and segments is not None:
        raise click.UsageError("--segments splits a scan; --export reads no table")
    if regions is not None:
        with _reported():
            compare_regions(_models(module, endpoint, segments)[0], regions, as_json)
        return
    with _reported():
        models, scan_segments = _models(module, endpoint, segments)
        if export is not None:
            with _progress(not as_json, "reading the export") as progress:
                report: audit.AuditReport = audit.check_export(
                    models, export, s3_endpoint=s3_endpoint, progress=progress)
        else:
            report = _run_check(models, scan_segments, as_json)
    if as_json:
        click.echo(to_json(report.to_dict()))
    else:
        output = Output()
        if isinstance(report, audit.ExportReport):
            read = report.export
            output.note(f"Read export {read.export_arn.rsplit('/', 1)[-1]} (taken "
                        f"{read.exported_at or 'at an unknown time'}) from {read.where}")
        print_modes(models, output)   # a global table: its mode and regions
        _print_report(report, output)
        if isinstance(report, audit.ExportReport):
            output.note(f"{report.export.suspects} suspect(s) in the export, "
                        f"{report.export.cleared} cleared by a consistent read of the table")
        output.note(f"cost: {report.cost.describe()}", "dim")
    click.get_current_context().exit(0 if report.clean else 1)


# --- repair --------------------------------------------------------------------------------------


def _print_plan(plan: audit.RepairPlan, output: Output) -> None:
    if plan.waiting:
        output.table(("kind", "constraint", "value", "lock owner", "why"), [
            (_KIND_LABELS[f.kind], f.constraint, f.shown_value,
             f.lock.owner_label if f.lock else "-", f.detail) for f in plan.waiting
        ], title=f"Writes in flight, left alone ({len(plan.waiting)})")
    if plan.actions:
        output.table(("fix", "constraint", "value", "guarded write"), [
            (action.kind.replace("_", " "), action.finding.constraint,
             action.finding.shown_value, action.description)
            for action in plan.actions
        ], title=f"Planned fixes ({len(plan.actions)})")
    _print_unfixable(plan.unfixable, output, plan.other_secret)


def _print_unfixable(findings: Sequence[audit.Finding], output: Output,
                     other_secret: Sequence[audit.Finding] = ()) -> None:
    if not findings:
        return
    output.table(("kind", "constraint", "value", "records holding it", "what to do"), [
        (_KIND_LABELS[finding.kind], finding.constraint or "-", finding.shown_value,
         [h.label for h in finding.holders],
         audit.remedy(finding, other_secret=finding in other_secret))
        for finding in findings
    ], title=f"Left for a person ({len(findings)})")


def _print_result(result: audit.RepairResult, output: Output) -> None:
    if result.outcomes:
        output.table(("status", "fix", "constraint", "value", "detail"), [
            (Text(outcome.status.replace("_", " "), _STATUS_STYLES[outcome.status]),
             outcome.action.kind.replace("_", " "), outcome.action.finding.constraint,
             outcome.action.finding.shown_value, outcome.message)
            for outcome in result.outcomes
        ], title="Results")
    counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in result.counts().items() if n)
    output.note(f"{counts or 'nothing to do'}; {len(result.unfixable)} left for a person")


@click.command("repair")
@click.argument("module")
@click.option("--yes", is_flag=True, help="Apply the fixes (without it nothing is changed).")
@click.option("--drop-unknown", multiple=True, metavar="NAME",
              help="Also delete the locks of constraint NAME, which no loaded model declares "
                   "(repeatable).")
@click.option("--segments", default=None, type=click.IntRange(1, 1000000), metavar="N",
              help="Scan each table as N parallel segments (default 1, or [tool.dynaunique] "
                   "segments).")
@click.option("--accept-other-secret", is_flag=True,
              help="Repair hashed locks that the current lock secret did not make as if it "
                   "had (after retiring a secret on purpose); without it, repair refuses.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan and results as JSON.")
@endpoint_option
def repair_command(module: str, yes: bool, drop_unknown: tuple[str, ...], segments: int | None,
                   accept_other_secret: bool, as_json: bool, endpoint: str | None) -> None:
    """Fix lock drift in MODULE's tables; records are never modified.

    Runs a check, prints the fixes, and applies them only with --yes: orphan locks are deleted,
    missing locks written, locks handed from a record that no longer holds the value to the one
    that does — each in one TransactWriteItems guarded on the lock's owner and on the records
    being exactly as read, so it is safe while the application keeps writing. Duplicates are
    reported, never resolved. On an MRSC table a lock the protocol wrote is settled by its own
    single-item writes conditioned on its token, and a pending intent (a write in flight) is
    left alone. Exit 0 when everything planned was fixed, 1 otherwise.

    Hashed locks the current lock secret did not make (a wrong DYNAUNIQUE_LOCK_SECRET, or a
    retired one) are never deleted: with them --yes refuses (exit 2) unless
    --accept-other-secret is given.
    """
    with _reported():
        models, scan_segments = _models(module, endpoint, segments)
        report = _run_check(models, scan_segments, as_json)
        plan = audit.plan_repair(report, drop_unknown=drop_unknown,
                                 accept_other_secret=accept_other_secret)
        result = audit.apply_repair(plan, drop_unknown=drop_unknown) if yes else None
    if as_json:
        click.echo(to_json({"applied": yes, "plan": plan.to_dict(),
                            "result": result.to_dict() if result is not None else None}))
    else:
        output = Output()
        if not report.findings:
            output.note("No findings: nothing to repair.", "green")
        else:
            _print_secret_warnings(plan.secret_warnings, output)
            _print_plan(plan, output)
        if result is not None:
            _print_result(result, output)
        elif plan.actions:
            output.note(f"Dry run: nothing was changed. Run again with --yes to apply "
                        f"{len(plan.actions)} fix(es).")
        cost = report.cost.describe()
        if result is not None and result.cost.total:
            cost += f", then {result.cost.describe()}"
        output.note(f"cost: {cost}", "dim")
    ok = result.ok if result is not None else not plan.unfixable
    click.get_current_context().exit(0 if ok else 1)


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [locks_command, check_command, repair_command]
