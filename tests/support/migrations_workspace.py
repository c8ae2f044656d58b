"""Helpers for the migrations tests: a throw-away models package per test, raw table reads.

Each test gets a package with a unique name under ``tmp_path`` (so import caching never mixes
two tests' models), rewrites its ``models.py`` to simulate a deploy, and inspects the table with
raw boto3 calls rather than through dynaunique.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

if TYPE_CHECKING:
    import pytest

#: Model module source; ``{table}``, ``{email}`` (extra UnicodeAttribute options for email)
#: ``{meta}`` (extra Meta lines) and ``{extra}`` (extra class body) are filled in.
MODELS = '''\
"""Test models (generated)."""

from dynaunique import Model, UniqueConstraint, normalizers
from dynaunique.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute


def active_only(account):
    return account.status == "active"


def strip_casefold(value):
    return normalizers.casefold(normalizers.strip(value))


class Account(Model):
    class Meta:
        table_name = "{table}"
        region = "us-east-1"
{meta}
    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(null=True{email})
    handle = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True)
    version = VersionAttribute(null=True)
{extra}
'''


#: ``dynaunique`` in a process of its own (a worker a test can kill, or time out).
DYNAUNIQUE = [sys.executable, "-c", "from dynaunique.cli import cli; cli(prog_name='dynaunique')"]

#: The ``email`` options of a casefolded unique constraint (for :meth:`Workspace.deploy`).
UNIQUE_EMAIL = ", unique=True, normalize=normalizers.casefold"


class Workspace:
    """A models package in ``root`` (on ``sys.path``) whose ``models.py`` can be redeployed."""

    def __init__(self, root: Path, endpoint: str, table: str) -> None:
        self.root = root
        self.endpoint = endpoint
        self.table = table
        self.package = f"migpkg_{uuid.uuid4().hex[:10]}"
        self.module = f"{self.package}.models"
        self.directory = root / self.package
        self.directory.mkdir()
        (self.directory / "__init__.py").write_text("", encoding="utf-8")
        self.migrations = self.directory / "dynamigrations"
        self.client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")

    def deploy(self, *, email: str = "", meta: str = "", extra: str = "") -> Any:
        """Write ``models.py`` with these options and (re)import it; returns the module."""
        return self.deploy_source(MODELS.format(
            table=self.table, email=email, meta=textwrap.indent(meta, " " * 8) if meta else "",
            extra=textwrap.indent(extra, " " * 4) if extra else ""))

    def deploy_source(self, source: str) -> Any:
        """Write ``source`` as ``models.py``, (re)import it and point its models at the server;
        returns the module."""
        (self.directory / "models.py").write_text(source, encoding="utf-8")
        sys.modules.pop(self.module, None)
        importlib.invalidate_caches()
        module = importlib.import_module(self.module)
        for value in vars(module).values():
            meta_class = getattr(value, "Meta", None)
            if meta_class is not None and getattr(meta_class, "table_name", None):
                meta_class.host = self.endpoint
                value._connection = None
        return module

    def seed_unique_email(self, records: int) -> Any:
        """``records`` accounts ``ACCT#000``.. with distinct emails, written raw (data from
        before the constraint, 25 to a BatchWriteItem); then the constraint deployed and its
        migration written. Returns the models module."""
        self.put_raw_many({f"ACCT#{i:03d}": {"email": f"user{i}@x.io"} for i in range(records)})
        module = self.deploy(email=UNIQUE_EMAIL)
        assert self.project().make_migrations().changed
        return module

    def process_env(self, **extra: str) -> dict[str, str]:
        """The environment of a ``dynaunique`` process run on this workspace: this checkout's
        package first on ``PYTHONPATH``, the endpoint in ``AWS_ENDPOINT_URL_DYNAMODB``."""
        return self.environment(self.endpoint, **extra)

    @staticmethod
    def environment(endpoint: str, **extra: str) -> dict[str, str]:
        """:meth:`process_env` for any workspace on ``endpoint`` (the same start-up variables:
        what a module-scoped :class:`support.cli_process.Forker` is started with)."""
        import dynaunique

        env = dict(os.environ, AWS_ENDPOINT_URL_DYNAMODB=endpoint, **extra)
        root = str(Path(dynaunique.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
        return env

    def project(self, **settings: Any) -> Any:
        """A migrations Project over this workspace's models module."""
        from dynaunique._user_models import load_models
        from dynaunique.migrations import Project, Settings

        return Project(self.module, load_models(self.module), settings=Settings(**settings))

    def create_table(self) -> None:
        """The table with a string hash key ``PK`` and range key ``SK``."""
        self.client.create_table(
            TableName=self.table,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                       {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                  {"AttributeName": "SK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def put_raw(self, pk: str, **attributes: Any) -> None:
        """Write a record with a plain PutItem (as data written before any constraint)."""
        self.client.put_item(TableName=self.table, Item=_raw_item(pk, attributes))

    def put_raw_many(self, records: dict[str, dict[str, Any]]) -> None:
        """Write records (PK → attributes) as :meth:`put_raw` does, 25 to a BatchWriteItem: the
        same items, a twenty-fifth of the requests (seeding thousands of records)."""
        self._batch_write([{"PutRequest": {"Item": _raw_item(pk, attributes)}}
                           for pk, attributes in records.items()])

    def delete_raw_many(self, items: list[dict[str, Any]]) -> None:
        """Delete these raw items (their ``PK`` and ``SK``), 25 to a BatchWriteItem."""
        self._batch_write([{"DeleteRequest": {"Key": {"PK": item["PK"], "SK": item["SK"]}}}
                           for item in items])

    def _batch_write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), 25):
            pending: dict[str, Any] = {self.table: requests[start:start + 25]}
            while pending:
                pending = self.client.batch_write_item(RequestItems=pending)["UnprocessedItems"]

    def scan(self) -> list[dict[str, Any]]:
        """Every item of the table (raw)."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            page = self.client.scan(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def locks(self, items: list[dict[str, Any]] | None = None) -> dict[str, str]:
        """Every lock item: hash key → the owner's PK (of ``items``, one :meth:`scan`, if given:
        a table of thousands is then scanned once for both this and :meth:`expected_locks`)."""
        return {
            item["PK"]["S"]: item["owner"]["M"]["PK"]["S"]
            for item in (self.scan() if items is None else items)
            if item["PK"]["S"].startswith("UNIQ#") and not item["PK"]["S"].startswith("UNIQ#~")
        }

    def lock_count(self) -> int:
        """How many lock items there are (the count :meth:`locks` would give), read with a
        counting scan: what a test polls while a migration runs, without reading every item."""
        count = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table, "ConsistentRead": True, "Select": "COUNT",
            "FilterExpression": "begins_with(PK, :lock) AND NOT begins_with(PK, :ledger)",
            "ExpressionAttributeValues": {":lock": {"S": "UNIQ#"}, ":ledger": {"S": "UNIQ#~"}}}
        while True:
            page = self.client.scan(**kwargs)
            count += page["Count"]
            if "LastEvaluatedKey" not in page:
                return count
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def ledger(self) -> set[str]:
        """The hash keys of every ledger item."""
        return {i["PK"]["S"] for i in self.scan() if i["PK"]["S"].startswith("UNIQ#~")}

    def applied_only(self) -> set[str]:
        """The ledger once ``0001_initial`` is applied and nothing of a run is left."""
        return {f"UNIQ#~MIGRATION#{self.module}#0001_initial"}

    def records(self, items: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
        """Every record (non-dynaunique item): PK → plain attribute values."""
        out = {}
        for item in (self.scan() if items is None else items):
            pk = item["PK"]["S"]
            if pk.startswith("UNIQ#"):
                continue
            out[pk] = {k: next(iter(v.values())) for k, v in item.items()}
        return out

    def expected_locks(self, name: str = "EMAIL", field: str = "email",
                       normalize: Any = str.casefold, when: Any = None,
                       items: list[dict[str, Any]] | None = None) -> dict[str, str]:
        """The locks the records require: lock key → owner PK."""
        out = {}
        for pk, record in self.records(items).items():
            value = record.get(field)
            if value is None or (when is not None and not when(record)):
                continue
            out[f"UNIQ#{name}#{normalize(value)}"] = pk
        return out


def _raw_item(pk: str, attributes: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}
    for name, value in attributes.items():
        item[name] = {"N": str(value)} if isinstance(value, int) else {"S": value}
    return item


def proxied_fixtures(table: str) -> tuple[Any, Any]:
    """The ``proxy`` and ``ws`` fixtures of a file whose workspace (on ``table``) sends every
    request through a :class:`reliability.proxy.FaultProxy`: ``proxy, ws = proxied_fixtures(T)``."""
    import pytest
    from reliability.proxy import FaultProxy

    @pytest.fixture
    def proxy(dynaunique_db: str) -> Iterator[FaultProxy]:
        with FaultProxy(dynaunique_db) as running:
            yield running

    @pytest.fixture
    def ws(proxy: FaultProxy, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
        """A workspace whose every request goes through the proxy."""
        yield open_workspace(tmp_path, proxy.url, table, monkeypatch)

    return proxy, ws


def open_workspace(root: Path, endpoint: str, table: str,
                   monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A :class:`Workspace` in ``root`` with its table created; ``root`` is the current directory
    and first on ``sys.path`` for the test, and no bytecode is written (a redeployed
    ``models.py`` must be read again, not its cached bytecode)."""
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    workspace = Workspace(root, endpoint, table)
    workspace.create_table()
    return workspace


def workspace_fixture(table: str) -> Any:
    """The ``ws`` fixture of a migrations test file: ``ws = workspace_fixture(TABLE)`` gives each
    test an :func:`open_workspace` on the server, its table ``table``."""
    import pytest

    @pytest.fixture
    def ws(dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
        return open_workspace(tmp_path, dynaunique_db, table, monkeypatch)

    return ws


class LiveWriters:
    """The application writing while a migration runs: ``threads`` threads that move records
    ``ACCT#000``.. to new emails, create ``NEW#`` accounts and delete records, through the
    model (so every write keeps the constraint's locks), until the block ends.

    ``ops`` counts the writes done; :meth:`wait_for` blocks until that many were (woken by each
    write, not polling); errors other than the expected races are re-raised when the block ends.
    """

    def __init__(self, account: Any, records: int, *, threads: int = 2) -> None:
        self.account = account
        self.records = records
        self.ops = 0
        self._done = threading.Condition()
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._threads = [threading.Thread(target=self._write, args=(seed,), daemon=True)
                         for seed in range(threads)]

    def _write(self, seed: int) -> None:
        from dynaunique.errors import ConcurrentModificationError

        account = self.account
        rng = random.Random(seed)
        i = 0
        try:
            while not self._stop.is_set() or i < 5:
                i += 1
                action = rng.random()
                pk = f"ACCT#{rng.randrange(self.records):03d}"
                try:
                    if action < 0.6:
                        record = account.get(pk, "PROFILE", consistent_read=True)
                        record.email = f"w{seed}-{i}@X.io"
                        record.save()
                    elif action < 0.8:
                        account(pk=f"NEW#{seed}-{i}", email=f"new{seed}-{i}@x.io").save()
                    else:
                        account.get(pk, "PROFILE", consistent_read=True).delete()
                except (account.DoesNotExist, ConcurrentModificationError):
                    pass
                with self._done:
                    self.ops += 1
                    self._done.notify_all()
        except BaseException as exc:  # surfaced when the block ends
            with self._done:
                self._errors.append(exc)
                self._done.notify_all()

    def wait_for(self, ops: int) -> None:
        """Block until ``ops`` writes were done (the application is really writing)."""
        with self._done:
            self._done.wait_for(lambda: self.ops >= ops or bool(self._errors))

    def __enter__(self) -> LiveWriters:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._errors:
            raise self._errors[0]


def email_lock_puts(operation: str, body: dict[str, Any]) -> list[str]:
    """The EMAIL locks a request puts (a backfill puts each with a PutItem of its own; a
    transaction's puts count too)."""
    if operation == "PutItem":
        keys = [body.get("Item", {}).get("PK", {}).get("S", "")]
    elif operation == "TransactWriteItems":
        keys = [entry["Put"]["Item"]["PK"]["S"] for entry in body.get("TransactItems", [])
                if "Put" in entry]
    else:
        return []
    return [key for key in keys if key.startswith("UNIQ#EMAIL#")]
