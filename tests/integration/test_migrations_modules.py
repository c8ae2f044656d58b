"""Two models modules in one package keep their migrations apart (issue 40, trap 2).

``myapp/models.py`` then ``myapp/people.py``: each module's migrations are its own (keyed by its
app label, the key of its ledger), so one module's ``makemigrations`` never writes an operation
on the other's constraints, and ``migrate`` of each applies only its own.
"""

from __future__ import annotations

import copy
import sys

from click.testing import CliRunner, Result
from support.migrations_workspace import UNIQUE_EMAIL, Workspace, workspace_fixture

from dynaunique.cli import cli

TABLE = "mig_mod_accounts"
PEOPLE_TABLE = "mig_mod_people"

PEOPLE = f'''\
"""A second models module of the package (generated)."""

from dynaunique import Model
from dynaunique.attributes import UnicodeAttribute


class Person(Model):
    class Meta:
        table_name = "{PEOPLE_TABLE}"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    phone = UnicodeAttribute(null=True, unique=True)
'''


ws = workspace_fixture(TABLE)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _people(ws: Workspace) -> str:
    (ws.directory / "people.py").write_text(PEOPLE, encoding="utf-8")
    module = f"{ws.package}.people"
    sys.modules.pop(module, None)
    return module


def test_a_second_models_module_writes_its_own_initial_migration(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    assert run("makemigrations", ws.module).exit_code == 0
    people = _people(ws)

    result = run("makemigrations", people)

    assert result.exit_code == 0, result.output
    own = ws.directory / "dynamigrations_people"
    assert result.stdout == (f"Wrote {own / '0001_initial.py'}\n"
                             "  + Add unique constraint PHONE (phone) to Person\n")
    assert "Remove" not in result.stdout
    # models.py's migrations are untouched, and each module finds nothing more to write.
    assert sorted(p.name for p in ws.migrations.iterdir()) == ["0001_initial.py", "__init__.py"]
    for module in (ws.module, people):
        assert "No changes detected" in run("makemigrations", module).stdout


def test_each_module_migrates_its_own_constraints_into_its_own_ledger(ws: Workspace) -> None:
    ws.put_raw("ACCT#1", email="ada@x.io")
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    people = _people(ws)
    run("makemigrations", people)
    people_table = copy.copy(ws)  # the workspace's table helper, for the people's table
    people_table.table = PEOPLE_TABLE
    people_table.create_table()

    for module in (people, ws.module):
        result = run("migrate", module, "--endpoint", ws.endpoint)
        assert result.exit_code == 0, result.output
        assert "Applied 0001_initial" in result.stdout

    # Account's lock was backfilled and survived the people module's migration.
    assert "UNIQ#EMAIL#ada@x.io" in ws.locks()


def test_a_migrations_directory_of_another_module_is_refused(ws: Workspace) -> None:
    ws.deploy(email=UNIQUE_EMAIL)
    run("makemigrations", ws.module)
    people = _people(ws)

    result = CliRunner().invoke(
        cli, ["makemigrations", people, "--migrations-dir", str(ws.migrations)])

    assert result.exit_code == 2
    assert "0001_initial.py is a migration of " + ws.module in result.stderr
    assert f"not of {people}" in result.stderr
    assert sorted(p.name for p in ws.migrations.iterdir()) == ["0001_initial.py", "__init__.py"]


def test_the_ledger_table_error_says_what_to_set_and_why(ws: Workspace) -> None:
    source = (ws.directory / "models.py")
    ws.deploy(email=UNIQUE_EMAIL)
    source.write_text(source.read_text(encoding="utf-8") + (
        "\n\nclass Page(Model):\n"
        "    class Meta:\n"
        "        table_name = 'mig_mod_pages'\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    slug = UnicodeAttribute(unique=True)\n"), encoding="utf-8")
    sys.modules.pop(ws.module, None)
    run("makemigrations", ws.module)

    result = run("migrate", ws.module, "--plan", "--endpoint", ws.endpoint)

    assert result.exit_code == 2
    message = result.stderr
    # What went wrong, why it matters, and what to set, where.
    assert f"{ws.module} spans tables ['mig_mod_accounts', 'mig_mod_pages']" in message
    assert "records which of its migrations are applied in one table" in message
    assert (f'ledger_table = "mig_mod_accounts" under [tool.dynaunique.modules."{ws.module}"]'
            in message)
