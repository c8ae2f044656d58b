"""Adding a unique constraint to a table that already holds records: makemigrations + migrate.

Run it: ``python examples/add_constraint.py`` (the embedded local server; ``--endpoint URL``, or
``AWS_ENDPOINT_URL_DYNAMODB=URL``, for another DynamoDB). It writes a small app in a scratch folder,
fills the table before the email is unique (one email twice), then runs the commands a deployment
runs:

1. ``dynaunique makemigrations shop.models`` writes ``shop/dynamigrations/0001_initial.py``;
2. ``dynaunique migrate shop.models`` backfills the locks and stops on the duplicate, with a
   report, changing no record (exit status 1);
3. the duplicate is fixed through the model, ``migrate`` runs again and finishes;
4. ``dynaunique showmigrations shop.models`` shows it applied.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from _local import connected

BEFORE = '''
from dynaunique import Model
from dynaunique.attributes import UnicodeAttribute


class Customer(Model):
    class Meta:
        table_name = "example-shop-customers"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute()
'''
AFTER = BEFORE.replace("email = UnicodeAttribute()",
                       "email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)"
                       ).replace("import Model", "import Model, normalizers")


def dynaunique(folder: Path, endpoint: str, *args: str) -> int:
    """Run one ``dynaunique`` command in ``folder``, as a deployment would; its exit status."""
    print(f"\n$ dynaunique {' '.join(args)}", flush=True)
    path = os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        if endpoint.startswith("http://127.0.0.1"):
            env.setdefault(name, value)  # the embedded server takes any credentials
    command = [sys.executable, "-c", "from dynaunique.cli import main; main()", *args]
    if args[0] in ("migrate", "showmigrations"):
        command += ["--endpoint", endpoint]
    return subprocess.run(command, cwd=folder, env=env, check=False,
                          stderr=subprocess.STDOUT).returncode


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="dynaunique-example-"))
    (folder / "shop").mkdir()
    (folder / "shop" / "__init__.py").write_text("")
    models = folder / "shop" / "models.py"
    models.write_text(textwrap.dedent(BEFORE))
    sys.path.insert(0, str(folder))
    from shop.models import Customer  # the app before the constraint

    with connected(__doc__.splitlines()[0], Customer) as endpoint:
        for number in range(1, 6):
            Customer(pk=f"CUST#{number}", email=f"customer{number}@shop.io").save()
        Customer(pk="CUST#dup", email="Customer3@Shop.io").save()  # the same email, other case
        print(f"{Customer.count()} customers, two of them with customer3@shop.io")

        models.write_text(textwrap.dedent(AFTER))  # the new declaration
        assert dynaunique(folder, endpoint, "makemigrations", "shop.models") == 0
        status = dynaunique(folder, endpoint, "migrate", "shop.models")
        print(f"migrate: exit status {status} (the duplicate stopped it)")
        assert status == 1

        # A person decides: the duplicate gets another address. Through the model, so its locks
        # stay right (the record has none yet, and gets it from the rerun).
        duplicate = Customer.get("CUST#dup", consistent_read=True)
        duplicate.email = "customer3+second@shop.io"
        duplicate.save()
        status = dynaunique(folder, endpoint, "migrate", "shop.models")
        print(f"migrate: exit status {status}")
        assert status == 0
        assert dynaunique(folder, endpoint, "showmigrations", "shop.models") == 0


if __name__ == "__main__":
    main()
