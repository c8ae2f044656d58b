"""The ``dynaunique demo`` command: parse, run the story (``open_demo``), print each report.

Exit status 0 when every step kept its promises, 1 when one did not (each broken promise is
printed), 2 when the demo could not run where it was pointed.
"""

from __future__ import annotations

import time

import click
from rich.console import Console

from dynaunique._user_models import settings_for
from dynaunique.cli import _demo as scenario
from dynaunique.cli._common import CannotRun, endpoint_option
from dynaunique.cli._demo.show import say, show
from dynaunique.errors import DynauniqueError


@click.command()
@endpoint_option
@click.option("--racers", type=click.IntRange(2, 200), default=scenario.DEFAULT_RACERS,
              show_default=True, help="Threads racing on one email per round.")
@click.option("--rounds", type=click.IntRange(1, 100), default=scenario.DEFAULT_ROUNDS,
              show_default=True, help="Race rounds (one fresh email each).")
@click.option("--verbose", "-v", is_flag=True,
              help="Also print the signup's request as the JSON that went over the wire.")
def demo(endpoint: str | None, racers: int, rounds: int, verbose: bool) -> None:
    """Show dynaunique keeping emails unique, with real requests.

    Without --endpoint it starts an embedded local DynamoDB (needs dynaunique[local]). With
    --endpoint URL (or AWS_ENDPOINT_URL_DYNAMODB, or [tool.dynaunique] endpoint) it runs
    against that DynamoDB, real AWS included, with the usual AWS credentials: it creates two
    uniquely named tables and deletes them at the end.
    """
    console = Console()
    endpoint = endpoint or settings_for("").endpoint
    start = time.monotonic()
    problems: list[str] = []
    try:
        with scenario.open_demo(endpoint, racers=racers, rounds=rounds) as run:
            say(console, f"dynaunique demo against {run.description}", "bold")
            say(console, f"tables: {run.table} (records and locks), {run.naive_table} "
                         "(the naive pattern); both are deleted at the end.")
            for report in run.story():
                show(report, console, verbose)
                problems.extend(report.problems)
    except scenario.DemoUnavailableError as exc:
        raise CannotRun(str(exc)) from exc
    except DynauniqueError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    if run.cleanup_errors:
        say(console, f"Could not delete the demo tables {run.table}, {run.naive_table}: "
                     f"{run.cleanup_errors[0]} — delete them yourself.", "bold yellow")
    else:
        say(console, f"Demo tables {run.table} and {run.naive_table} deleted.")
    console.print()
    if problems:
        for problem in problems:
            say(console, f"BROKEN: {problem}", "bold red")
        raise click.exceptions.Exit(1)
    say(console, f"Done in {time.monotonic() - start:.1f} s.", "bold green")


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [demo]
