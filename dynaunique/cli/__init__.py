"""The ``dynaunique`` command: parse, delegate to the library, print. Nothing else.

Each group of commands lives in its own module (``locks``, ``migrations``, ``ui``; the demo, with
its scenario, in the ``_demo`` package) and only parses options, calls the Python API and prints
its report objects (or serves a page).
"""

from __future__ import annotations

import importlib
import sys

import click

from dynaunique.cli._common import Commands, exit_code_of
from dynaunique.errors import DynauniqueError

#: Each command: the module that defines it (imported only when the command runs, or its own
#: ``--help`` is asked for) and the first paragraph of its help, which ``dynaunique --help``
#: lists without importing anything (``tests/unit/test_cli_lazy.py`` checks both agree).
LAZY: dict[str, tuple[str, str]] = {
    "check": ("_locks", "Check that MODULE's locks and records agree: exit 0 when clean, 1 "
                        "with findings."),
    "demo": ("_demo.command", "Show dynaunique keeping emails unique, with real requests."),
    "locks": ("_locks", "List lock items of MODULE's models, look one value up, or show a "
                        "record's locks."),
    "makemigrations": ("_migrations", "Write the next migration of MODULE's unique constraints "
                                      "(a dotted module path)."),
    "migrate": ("_migrations", "Apply MODULE's migrations up to TARGET (default: the latest; "
                               "`zero`: unapply all)."),
    "repair": ("_locks", "Fix lock drift in MODULE's tables; records are never modified."),
    "serve": ("_serve", "Serve a local DynamoDB (moto, with DynamoDB's rules) until Ctrl-C."),
    "showmigrations": ("_migrations", "List MODULE's migrations: [X] applied, [ ] not, and any "
                                      "partly applied one."),
    "ui": ("_ui", "Serve a local page to inspect MODULE's locks: who holds what, what drifted."),
    "watch": ("_watch", "Check what is written to MODULE's tables, from their DynamoDB "
                        "streams (the stream guard): exit 0 when nothing was found, 1 with "
                        "findings."),
}


class LazyCommands(Commands):
    """The group: a command's module is imported when that command is looked up to run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, none imported."""
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported (with the commands it defines) on first use; an
        unknown name imports them all, for click's "Did you mean" to choose among."""
        if cmd_name not in self.commands:
            wanted = [LAZY[cmd_name][0]] if cmd_name in LAZY else sorted(
                {module for module, _ in LAZY.values()})
            for name in wanted:
                for command in importlib.import_module(f"dynaunique.cli.{name}").COMMANDS:
                    self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list ``--help`` prints, from :data:`LAZY`'s help lines: click shortens them
        exactly as it shortens the commands' own help."""
        placeholders = {name: click.Command(name, help=help_) for name, (_, help_) in LAZY.items()}
        listed = click.Group(self.name, commands={**placeholders, **self.commands})
        listed.format_commands(ctx, formatter)


@click.group(cls=LazyCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dynaunique")
def cli() -> None:
    """dynaunique: unique constraints for DynamoDB, kept by lock items."""


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
