"""``dynaunique demo``: :func:`open_demo` runs the seed story on a DynamoDB; the command prints it.

The package is the CLI's, not the library's API. Its modules, one job each:

- ``target``: where the demo runs (an endpoint ``Target``), described for the reader;
- ``cast``: the README's ``Account`` model and the accounts of the story;
- ``tables``: the two demo tables, created, read back and deleted;
- ``wire``: the requests captured on the wire, summarized item by item;
- ``reports``: what each step measured and which promises it broke (the race's in ``race``);
- ``race``: the threads racing on one email, through dynaunique and naively, and their report;
- ``scenario``: the story, step by step, one report each;
- ``show``: the reports printed with rich;
- ``command``: the click command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import botocore.exceptions
from pynamodb.exceptions import PynamoDBException

from dynaunique._transport.endpoint import target_for
from dynaunique.cli._demo.cast import ADA_KEY, GRACE_KEY
from dynaunique.cli._demo.race import RaceOutcome, RaceReport, RaceRound
from dynaunique.cli._demo.scenario import DEFAULT_RACERS, DEFAULT_ROUNDS, Demo
from dynaunique.cli._demo.target import (
    DemoUnavailableError,
    describe,
    is_loopback,
    moto_available,
    region_for,
    remote_target,
)
from dynaunique.cli._demo.wire import ItemSummary, Sent, comparable, readable_condition, summarize

__all__ = [
    "ADA_KEY",
    "DEFAULT_RACERS",
    "DEFAULT_ROUNDS",
    "GRACE_KEY",
    "Demo",
    "DemoUnavailableError",
    "ItemSummary",
    "RaceOutcome",
    "RaceReport",
    "RaceRound",
    "Sent",
    "comparable",
    "describe",
    "is_loopback",
    "moto_available",
    "open_demo",
    "readable_condition",
    "region_for",
    "summarize",
]


@contextlib.contextmanager
def open_demo(endpoint: str | None, *, racers: int = DEFAULT_RACERS,
              rounds: int = DEFAULT_ROUNDS) -> Iterator[Demo]:
    """A :class:`Demo` with its tables created; they are deleted when the block exits.

    ``endpoint=None`` starts the embedded local server (needs the ``[local]`` extra) and stops
    it afterwards; otherwise the demo uses that endpoint with the usual AWS credentials.

    :raises DemoUnavailableError: moto is missing for the embedded server, or no credentials.
    """
    with contextlib.ExitStack() as stack:
        if endpoint is None:
            # Looked up here, in the package, so that a test can pretend moto is missing.
            if not moto_available():
                raise DemoUnavailableError(
                    "the embedded DynamoDB server needs moto: install it with "
                    "pip install -e '/path/to/clone[local]', or point the demo at a DynamoDB with "
                    "--endpoint URL"
                )
            from dynaunique.testing import local_dynamodb

            url = stack.enter_context(local_dynamodb())
            target = target_for(url)  # the one decision: a server on this machine
        else:
            target = remote_target(endpoint)
        demo = Demo(target, embedded=endpoint is None, racers=racers, rounds=rounds)
        with demo.recorder:
            try:
                demo.tables.create()
                yield demo
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError,
                    PynamoDBException) as exc:
                raise DemoUnavailableError(
                    f"DynamoDB at {demo.description} failed: {exc}"
                ) from exc
            finally:
                demo.tables.delete()
