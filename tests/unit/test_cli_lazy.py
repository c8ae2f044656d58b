"""The ``dynaunique`` command imports a command's module only when that command is looked up,
and ``--help`` / ``--version`` import no model, no migrations, no botocore client."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys

import click

from dynaunique.cli import LAZY, cli

MODULES = ("_locks", "_migrations", "_serve", "_ui", "_watch", "_demo.command")


def _by_module() -> dict[str, tuple[str, click.Command]]:
    return {command.name or "": (name, command) for name in MODULES
            for command in importlib.import_module(f"dynaunique.cli.{name}").COMMANDS}


def _defined() -> dict[str, click.Command]:
    return {name: command for name, (_, command) in _by_module().items()}


def test_the_lazy_map_names_every_command_and_its_module() -> None:
    assert {name: module for name, (module, _) in LAZY.items()} == {
        name: module for name, (module, _) in _by_module().items()}


def test_the_listed_help_is_each_commands_own_at_every_width() -> None:
    for name, command in _defined().items():
        listed = click.Command(name, help=LAZY[name][1])
        assert command.help is not None and not command.hidden and command.short_help is None
        assert " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split()) == LAZY[name][1]
        for limit in range(10, 160):
            assert listed.get_short_help_str(limit) == command.get_short_help_str(limit), limit


def test_every_command_is_found_and_an_unknown_one_is_not() -> None:
    with click.Context(cli) as ctx:
        assert cli.list_commands(ctx) == sorted(LAZY)
        assert {name: cli.get_command(ctx, name) for name in LAZY} == _defined()
        assert cli.get_command(ctx, "nope") is None


_PROBE = """
import json, sys
sys.argv = ["dynaunique", *sys.argv[1:]]
import dynaunique.cli
try:
    dynaunique.cli.main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _imported(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                          text=True, check=True, timeout=60)
    return set(json.loads(done.stderr.splitlines()[-1]))


def test_help_and_version_import_no_model_and_no_botocore_client() -> None:
    heavy = {"botocore.client", "botocore.session", "pynamodb.connection", "dynaunique.model",
             "dynaunique.migrations", "dynaunique.audit", "rich", *(
                 f"dynaunique.cli.{name}" for name in MODULES)}
    for args in (("--help",), ("--version",)):
        assert _imported(*args) & heavy == set(), args


def test_a_command_imports_its_own_module_only() -> None:
    imported = _imported("check", "--help")
    assert "dynaunique.cli._locks" in imported
    assert {"dynaunique.cli._migrations", "dynaunique.cli._watch", "dynaunique.cli._ui",
            "dynaunique.cli._demo", "dynaunique.migrations"} & imported == set()


def test_a_misspelt_command_is_still_offered_the_close_ones() -> None:
    done = subprocess.run([sys.executable, "-m", "dynaunique.cli", "chek"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "Error: No such command 'chek'. Did you mean 'check'?"
