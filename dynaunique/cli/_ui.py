"""The ``ui`` command: parse, load the models, hand them to :func:`dynaunique.ui.serve`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import click

from dynaunique._user_models import load_models, settings_for
from dynaunique.cli._common import endpoint_option

if TYPE_CHECKING:
    from dynaunique.model import Model


@click.command("ui")
@click.argument("module")
@endpoint_option
@click.option("--port", default=8737, show_default=True, type=click.IntRange(0, 65535),
              metavar="N", help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--allow-repair", is_flag=True,
              help="Offer repairs on the page (each behind a confirmation); read-only without.")
def ui_command(module: str, endpoint: str | None, port: int, allow_repair: bool) -> None:
    """Serve a local page to inspect MODULE's locks: who holds what, what drifted.

    The page answers on 127.0.0.1 only, and only to requests carrying the access token in the
    URL it prints. Without --endpoint (or [tool.dynaunique] endpoint) an embedded local server
    is started, with the models' tables created empty. Needs the ui extra:
    pip install -e '/path/to/clone[ui]'.
    """
    try:
        from dynaunique import ui
    except ImportError as exc:
        raise click.ClickException(f"dynaunique ui needs the ui extra ({exc}): "
                                   "pip install -e '/path/to/clone[ui]'") from exc
    settings = settings_for(module)
    models = load_models(module)
    ui.serve(models, module=module, endpoint=endpoint or settings.endpoint, port=port,
             allow_repair=allow_repair, echo=click.echo, start_server=embedded_server)


@contextlib.contextmanager
def embedded_server(models: Sequence[type[Model]]) -> Iterator[str]:
    """The testing kit's local server for the page, the models pointed at it and their tables
    created, empty: the CLI (a tool) hands it to :func:`dynaunique.ui.serve`, which imports no
    tool (tests/unit/test_package.py)."""
    from dynaunique._transport.endpoint import point_models
    from dynaunique.testing import create_tables, local_dynamodb

    with local_dynamodb() as endpoint:
        point_models(models, endpoint)
        create_tables(*models)
        yield endpoint


#: The click commands this module adds to ``dynaunique``.
COMMANDS: list[click.Command] = [ui_command]
