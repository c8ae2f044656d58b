"""The ``dynaunique demo`` command: run the seed story (``dynaunique.demo``), print its reports."""

from __future__ import annotations

import time

import click
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from dynaunique import demo as scenario
from dynaunique.cli._common import endpoint_option
from dynaunique.errors import DynauniqueError


class _CannotRun(click.ClickException):
    """The demo could not run where it was pointed (exit status 2, like a configuration error)."""

    exit_code = 2


def _section(console: Console, title: str) -> None:
    console.print()
    console.rule(f"[bold]{title}", align="left")


def _say(console: Console, text: str, style: str | None = None) -> None:
    # soft_wrap: facts stay on one line whatever the width, so they can be copied and grepped.
    console.print(text, style=style, soft_wrap=True, highlight=False)


def _items_table(items: tuple[scenario.ItemSummary, ...]) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("action")
    table.add_column("item (hash key)")
    table.add_column("ConditionExpression", overflow="fold")
    for number, item in enumerate(items):
        table.add_row(str(number), item.action, item.key, item.condition)
    return table


def _requests(sent: tuple[scenario.Sent, ...]) -> str:
    names = ", ".join(s.operation for s in sent) or "nothing"
    return f"{len(sent)} request{'s' if len(sent) != 1 else ''} ({names})"


def _show_signup(console: Console, report: scenario.SignupReport) -> None:
    _section(console, "1. ada signs up")
    _say(console, f"Account(pk={report.key!r}, email={report.email!r}, username='ada', "
                  "tenant='t1', slug='home').save()")
    _say(console, f"sent {_requests(report.sent)}; ada now holds the locks "
                  f"{', '.join(report.locks)}.")
    request = report.request
    if request is None:
        return
    _say(console, "The request exactly as it went over the wire (captured from botocore's "
                  "before-send event):")
    console.print(Syntax(request.json, "json", background_color="default"), soft_wrap=True)
    if report.matches_dry_run:
        _say(console, "It is what ada.save(dry_run=True) returned just before, apart from the "
                      "per-call ClientRequestToken and the locks' created time.")
    else:
        _say(console, "It DIFFERS from what ada.save(dry_run=True) returned.", "bold red")


def _show_violation(console: Console, report: scenario.ViolationReport) -> None:
    _section(console, "2. the same email again, in other case")
    _say(console, f"Account(pk={report.key!r}, email={report.email!r}, username='countess', "
                  "...).save()")
    if not report.message:
        _say(console, "It was NOT refused.", "bold red")
        return
    _say(console, "raises dynaunique.UniqueViolation:")
    _say(console, f"  {report.message}", "bold")
    _say(console, f"  .fields={report.fields!r} .constraint={report.constraint!r} "
                  f".value={report.value!r} .owner={report.owner!r}")
    written = "yes" if report.record_written else "no"
    _say(console, f"Nothing of the refused signup landed: record written: {written}, "
                  f"locks written: {report.locks_written}.")


def _show_race(console: Console, report: scenario.RaceReport) -> None:
    _section(console, f"3. {report.racers} threads sign up with one email at the same moment")
    _say(console, "dynaunique: account.save() (record + locks, one transaction).")
    _say(console, "naive: scan the table for the email (strongly consistent), and put the "
                  "record if nobody has it — plain boto3, same server, same threads.")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("round", justify="right")
    table.add_column("email")
    table.add_column("dynaunique\nwinners", justify="right")
    table.add_column("dynaunique\nrecords", justify="right")
    table.add_column("naive\nwinners", justify="right")
    table.add_column("naive\nrecords", justify="right")
    for r in report.rounds:
        table.add_row(str(r.number), r.email, str(r.guarded.winners), str(r.guarded.records),
                      str(r.naive.winners), str(r.naive.records))
    console.print(table)
    rounds = len(report.rounds)
    if report.guarded_exactly_one:
        _say(console, f"dynaunique: exactly one winner in each of {rounds} rounds; the others got "
                      "UniqueViolation and left no lock behind.", "green")
    else:
        _say(console, "dynaunique: NOT exactly one winner per round (see below).", "bold red")
    duplicated = report.naive_duplicate_rounds
    if duplicated:
        _say(console, f"naive: the email was stored more than once in {duplicated} of {rounds} "
                      f"rounds ({report.naive_duplicates} duplicate records).", "red")
    else:
        _say(console, f"naive: no duplicate in this run's {rounds} rounds — the race depends on "
                      "timing and did not strike this time; it is still a race (more --racers "
                      "or --rounds make it likelier).", "yellow")
    errors = [e for r in report.rounds for e in r.naive.errors]
    if errors:
        _say(console, f"naive: {len(errors)} attempts failed: {errors[0]}", "yellow")


def _show_change(console: Console, report: scenario.ChangeReport) -> None:
    _section(console, "4. ada changes her email")
    _say(console, f"ada.email = {report.new_email!r}; ada.save()  →  sent "
                  f"{_requests(report.sent)}:")
    console.print(_items_table(report.items))
    _say(console, f"The old email is free again: {report.taker} signed up with "
                  f"{report.old_email!r}.")
    _say(console, f"get_by_unique('email', {report.old_email.upper()!r}) → "
                  f"{report.old_email_holder}; get_by_unique('email', {report.new_email!r}) → "
                  f"{report.new_email_holder}.")


def _show_delete(console: Console, report: scenario.DeleteReport) -> None:
    _section(console, "5. ada is deleted")
    _say(console, f"ada.delete()  →  sent {_requests(report.sent)}:")
    console.print(_items_table(report.items))
    left = ", ".join(report.locks_left) if report.locks_left else "none"
    _say(console, f"Locks ada held: {', '.join(report.held)}. Left after the delete: {left}; "
                  f"record left: {'yes' if report.record_left else 'no'}.")


def _show_locks(console: Console, report: scenario.LockTable) -> None:
    _section(console, f"6. the lock items on table {report.table}")
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("constraint")
    table.add_column("value")
    table.add_column("owner")
    table.add_column("model")
    table.add_column("owner holds it", justify="center")
    for row in report.rows:
        table.add_row(row.constraint, repr(row.value), row.owner, row.model,
                      "yes" if row.owner_holds_it else "NO")
    console.print(table)
    _say(console, f"{len(report.rows)} lock items; each one's owner exists and holds that value: "
                  f"{'yes' if not report.problems else 'NO'}.")


@click.command()
@endpoint_option
@click.option("--racers", type=click.IntRange(2, 200), default=scenario.DEFAULT_RACERS,
              show_default=True, help="Threads racing on one email per round.")
@click.option("--rounds", type=click.IntRange(1, 100), default=scenario.DEFAULT_ROUNDS,
              show_default=True, help="Race rounds (one fresh email each).")
def demo(endpoint: str | None, racers: int, rounds: int) -> None:
    """Show dynaunique keeping emails unique, with real requests.

    Without --endpoint it starts an embedded local DynamoDB (needs dynaunique[local]). With
    --endpoint URL (or AWS_ENDPOINT_URL_DYNAMODB) it runs against that DynamoDB, real AWS
    included, with the usual AWS credentials: it creates two uniquely named tables and deletes
    them at the end.
    """
    console = Console()
    start = time.monotonic()
    try:
        with scenario.open_demo(endpoint, racers=racers, rounds=rounds) as run:
            _say(console, f"dynaunique demo against {run.target.description}", "bold")
            _say(console, f"tables: {run.table} (records and locks), {run.naive_table} "
                          "(the naive pattern); both are deleted at the end.")
            signup = run.sign_up()
            _show_signup(console, signup)
            violation = run.duplicate_signup()
            _show_violation(console, violation)
            race = run.race()
            _show_race(console, race)
            change = run.change_email()
            _show_change(console, change)
            deletion = run.delete()
            _show_delete(console, deletion)
            locks = run.lock_items()
            _show_locks(console, locks)
    except scenario.DemoUnavailableError as exc:
        raise _CannotRun(str(exc)) from exc
    except DynauniqueError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    if run.cleanup_errors:
        _say(console, f"Could not delete the demo tables {run.table}, {run.naive_table}: "
                      f"{run.cleanup_errors[0]} — delete them yourself.", "bold yellow")
    else:
        _say(console, f"Demo tables {run.table} and {run.naive_table} deleted.")
    problems = [*signup.problems, *violation.problems, *race.problems, *change.problems,
                *deletion.problems, *locks.problems]
    console.print()
    if problems:
        for problem in problems:
            _say(console, f"BROKEN: {problem}", "bold red")
        raise click.exceptions.Exit(1)
    _say(console, f"Done in {time.monotonic() - start:.1f} s.", "bold green")


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [demo]
