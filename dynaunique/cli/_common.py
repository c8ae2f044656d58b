"""What commands share: loading the user's models, pointing them at an endpoint, exit status 2."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from dynaunique.errors import ConfigurationError
from dynaunique.model import Model


class CannotRun(click.ClickException):
    """A command could not run at all (bad module, unreachable endpoint, no credentials).

    Exit status 2, like a usage error, so that 1 keeps the meaning each command gives it
    (``check``: findings; ``demo``: a promise broken).
    """

    exit_code = 2


#: ``--endpoint``: any DynamoDB endpoint; defaults to the standard AWS environment variable.
endpoint_option = click.option(
    "--endpoint",
    envvar="AWS_ENDPOINT_URL_DYNAMODB",
    default=None,
    metavar="URL",
    help="DynamoDB endpoint URL (also AWS_ENDPOINT_URL_DYNAMODB).",
)


def load_models(module_path: str) -> list[type[Model]]:
    """Import ``module_path`` (a dotted path) and return its dynaunique models with a table.

    The current directory is put on ``sys.path`` first, as ``python -m`` would.
    """
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_path)
    except Exception as exc:  # the user's module may raise anything while it is imported
        # One line, exit status 2 (a usage error), never a traceback: for `check`, status 1
        # means "findings".
        raise ConfigurationError(
            f"cannot import {module_path!r}: {type(exc).__name__}: {exc}"
        ) from exc
    models = [
        value
        for _, value in inspect.getmembers(module, inspect.isclass)
        if issubclass(value, Model) and value is not Model and value._du_info is not None
    ]
    if not models:
        raise ConfigurationError(f"{module_path!r} defines no dynaunique model with a table")
    return sorted(models, key=lambda m: m.__name__)


def point_at(models: Sequence[type[Model]], endpoint: str | None) -> None:
    """Send every request of ``models`` to ``endpoint`` (no-op for None)."""
    if endpoint is None:
        return
    for model in models:
        model.Meta.host = endpoint
        if getattr(model.Meta, "region", None) is None:
            model.Meta.region = "us-east-1"
        model._connection = None
