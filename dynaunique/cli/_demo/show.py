"""The demo's reports printed with rich: one section per step of the story.

Facts are printed on one line whatever the terminal's width (``soft_wrap``), so that they can be
copied and grepped; item lists and counts as tables, and with ``--verbose`` the signup's request
as the JSON that went over the wire.
"""

from __future__ import annotations

import functools

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from dynaunique.cli._demo.race import RaceReport
from dynaunique.cli._demo.reports import (
    ChangeReport,
    DeleteReport,
    LockTable,
    SignupReport,
    ViolationReport,
)
from dynaunique.cli._demo.wire import ItemSummary, Sent


def say(console: Console, text: str, style: str | None = None) -> None:
    """Print ``text`` as one line (no wrapping, no highlighting), in ``style``."""
    # soft_wrap: facts stay on one line whatever the width, so they can be copied and grepped.
    console.print(text, style=style, soft_wrap=True, highlight=False)


def _section(console: Console, title: str) -> None:
    console.print()
    console.rule(f"[bold]{title}", align="left")


def _table(*columns: str, right: tuple[str, ...] = ()) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


def _items_table(items: tuple[ItemSummary, ...]) -> Table:
    table = _table("#", "action", "item (hash key)", right=("#",))
    table.add_column("ConditionExpression", overflow="fold")
    for number, item in enumerate(items):
        table.add_row(str(number), item.action, item.key, item.condition)
    return table


def _requests(sent: tuple[Sent, ...]) -> str:
    names = ", ".join(s.operation for s in sent) or "nothing"
    return f"{len(sent)} request{'s' if len(sent) != 1 else ''} ({names})"


@functools.singledispatch
def show(report: object, console: Console, verbose: bool = False) -> None:
    """Print one step's ``report`` as its section of the story (``verbose``: with the
    signup's request as JSON)."""
    raise TypeError(f"no way to show {type(report).__name__}")


@show.register
def _show_signup(report: SignupReport, console: Console, verbose: bool = False) -> None:
    _section(console, "1. ada signs up")
    say(console, f"Account(pk={report.key!r}, email={report.email!r}, username='ada', "
                 "tenant='t1', slug='home').save()")
    say(console, f"sent {_requests(report.sent)}; ada now holds the locks "
                 f"{', '.join(report.locks)}.")
    request = report.request
    if request is None:
        return
    if verbose:
        say(console, "The request exactly as it went over the wire (captured from botocore's "
                     "before-send event):")
        console.print(Syntax(request.json, "json", background_color="default"), soft_wrap=True)
    else:
        say(console, "Its items (`dynaunique demo --verbose` prints the request exactly as it "
                     "went over the wire, as JSON):")
        console.print(_items_table(report.items))
    if report.matches_dry_run:
        say(console, "It is what ada.save(dry_run=True) returned just before, apart from the "
                     "per-call ClientRequestToken and the locks' created time.")
    else:
        say(console, "It DIFFERS from what ada.save(dry_run=True) returned.", "bold red")


@show.register
def _show_violation(report: ViolationReport, console: Console, verbose: bool = False) -> None:
    _section(console, "2. the same email again, in other case")
    say(console, f"Account(pk={report.key!r}, email={report.email!r}, username='countess', "
                 "...).save()")
    if not report.message:
        say(console, "It was NOT refused.", "bold red")
        return
    say(console, "raises dynaunique.UniqueViolation:")
    say(console, f"  {report.message}", "bold")
    say(console, f"  .fields={report.fields!r} .constraint={report.constraint!r} "
                 f".value={report.value!r} .owner={report.owner!r}")
    written = "yes" if report.record_written else "no"
    say(console, f"Nothing of the refused signup landed: record written: {written}, "
                 f"locks written: {report.locks_written}.")


@show.register
def _show_race(report: RaceReport, console: Console, verbose: bool = False) -> None:
    _section(console, f"3. {report.racers} threads sign up with one email at the same moment")
    say(console, "dynaunique: account.save() (record + locks, one transaction).")
    say(console, "naive: scan the table for the email (strongly consistent), and put the "
                 "record if nobody has it — plain boto3, same server, same threads.")
    counts = ("dynaunique\nwinners", "dynaunique\nrecords", "naive\nwinners", "naive\nrecords")
    table = _table("round", "email", *counts, right=("round", *counts))
    for r in report.rounds:
        table.add_row(str(r.number), r.email, str(r.guarded.winners), str(r.guarded.records),
                      str(r.naive.winners), str(r.naive.records))
    console.print(table)
    rounds = len(report.rounds)
    if report.guarded_exactly_one:
        say(console, f"dynaunique: exactly one winner in each of {rounds} rounds; the others got "
                     "UniqueViolation and left no lock behind.", "green")
    else:
        say(console, "dynaunique: NOT exactly one winner per round (see below).", "bold red")
    duplicated = report.naive_duplicate_rounds
    if duplicated:
        say(console, f"naive: the email was stored more than once in {duplicated} of {rounds} "
                     f"rounds ({report.naive_duplicates} duplicate records).", "red")
    else:
        say(console, f"naive: no duplicate in this run's {rounds} rounds — the race depends on "
                     "timing and did not strike this time; it is still a race (more --racers "
                     "or --rounds make it likelier).", "yellow")
    errors = [e for r in report.rounds for e in r.naive.errors]
    if errors:
        say(console, f"naive: {len(errors)} attempts failed: {errors[0]}", "yellow")


@show.register
def _show_change(report: ChangeReport, console: Console, verbose: bool = False) -> None:
    _section(console, "4. ada changes her email")
    say(console, f"ada.email = {report.new_email!r}; ada.save()  →  sent "
                 f"{_requests(report.sent)}:")
    console.print(_items_table(report.items))
    say(console, f"The old email is free again: {report.taker} signed up with "
                 f"{report.old_email!r}.")
    say(console, f"get_by_unique('email', {report.old_email.upper()!r}) → "
                 f"{report.old_email_holder}; get_by_unique('email', {report.new_email!r}) → "
                 f"{report.new_email_holder}.")


@show.register
def _show_delete(report: DeleteReport, console: Console, verbose: bool = False) -> None:
    _section(console, "5. ada is deleted")
    say(console, f"ada.delete()  →  sent {_requests(report.sent)}:")
    console.print(_items_table(report.items))
    left = ", ".join(report.locks_left) if report.locks_left else "none"
    say(console, f"Locks ada held: {', '.join(report.held)}. Left after the delete: {left}; "
                 f"record left: {'yes' if report.record_left else 'no'}.")


@show.register
def _show_locks(report: LockTable, console: Console, verbose: bool = False) -> None:
    _section(console, f"6. the lock items on table {report.table}")
    table = _table("constraint", "value", "owner", "model")
    table.add_column("owner holds it", justify="center")
    for row in report.rows:
        table.add_row(row.constraint, repr(row.value), row.owner, row.model,
                      "yes" if row.owner_holds_it else "NO")
    console.print(table)
    say(console, f"{len(report.rows)} lock items; each one's owner exists and holds that value: "
                 f"{'yes' if not report.problems else 'NO'}.")
