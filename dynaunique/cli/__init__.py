"""The ``dynaunique`` command: parse, delegate to the library, print. Nothing else.

Each group of commands lives in its own module (``locks``, ``migrations``, ``ui``; the demo, with
its scenario, in the ``_demo`` package) and only parses options, calls the Python API and prints
its report objects (or serves a page).
"""

from __future__ import annotations

import sys

import click

from dynaunique.cli._common import Commands, exit_code_of
from dynaunique.errors import DynauniqueError


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dynaunique")
def cli() -> None:
    """dynaunique: unique constraints for DynamoDB, kept by lock items."""


def _register() -> None:
    from dynaunique.cli import _locks as locks
    from dynaunique.cli import _migrations as migrations
    from dynaunique.cli import _ui as ui
    from dynaunique.cli import _watch as watch
    from dynaunique.cli._demo import command as demo

    for module in (demo, locks, migrations, ui, watch):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point: errors dynaunique knows print as one line with their code."""
    try:
        # Without standalone mode click returns ctx.exit(n)'s code instead of exiting.
        code = cli(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        sys.exit(1)
    except DynauniqueError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(exit_code_of(exc))
    sys.exit(code if isinstance(code, int) else 0)
