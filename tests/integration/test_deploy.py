"""The deployment kit (deploy/): least-privilege IAM policies proven against real requests.

Each role's workload runs against the local server through a recording HTTP proxy
(tests/reliability/proxy.py, no fault injected), so what is collected is every DynamoDB request
that actually left the process, whichever client sent it. Each request maps to the IAM actions
DynamoDB authorizes it with (a TransactWriteItems needs the action of each of its items), and the
role's policy must grant exactly those: an action missing means the workload would fail in AWS
with AccessDenied; an action granted and never used is privilege the role does not need.

Table setup (CreateTable, seed data) also goes through the proxy but is forgotten
(``proxy.clear()``) before the workload starts: creating tables is the deployer's job, not a
role's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
import support.audit_models as fm
from click.testing import CliRunner, Result
from reliability.proxy import FaultProxy, Recorded
from support.deploy_policies import TABLE_ARN, load_policy, policy_actions
from support.migrations_workspace import Workspace

from dynaunique import Model, UniqueViolation, atomic, normalizers
from dynaunique.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from dynaunique.cli import cli
from dynaunique.testing import create_tables, use_endpoint

# The item kinds of a TransactWriteItems, and the action DynamoDB checks for each.
_TRANSACT_WRITE_ACTIONS = {"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem",
                           "Delete": "dynamodb:DeleteItem",
                           "ConditionCheck": "dynamodb:ConditionCheckItem"}


def iam_actions(records: Iterable[Recorded]) -> dict[str, set[str]]:
    """The IAM actions each recorded request needs, as action → the operations that needed it.

    Every DynamoDB operation is authorized by the action of the same name, except the two
    transactions: TransactWriteItems by the action of each of its items (PutItem, UpdateItem,
    DeleteItem, ConditionCheckItem), TransactGetItems by GetItem.
    """
    needed: dict[str, set[str]] = {}
    for record in records:
        if not record.operation:
            raise AssertionError(f"a request without X-Amz-Target reached the proxy: {record}")
        if record.operation == "TransactWriteItems":
            actions = {_TRANSACT_WRITE_ACTIONS[kind]
                       for item in record.body["TransactItems"] for kind in item}
        elif record.operation == "TransactGetItems":
            actions = {"dynamodb:GetItem"}
        else:
            actions = {f"dynamodb:{record.operation}"}
        for action in actions:
            needed.setdefault(action, set()).add(record.operation)
    return needed


def tables_of(record: Recorded) -> set[str]:
    """The tables one request addresses (a transaction or batch may address several)."""
    body = record.body
    if "TransactItems" in body:
        return {item[kind]["TableName"] for item in body["TransactItems"] for kind in item}
    if "RequestItems" in body:
        return set(body["RequestItems"])
    return {body["TableName"]}


def verdict(needed: Iterable[str], granted: Iterable[str]) -> dict[str, list[str]]:
    """What a policy lacks for a workload, and what it grants that the workload never used."""
    need, grant = set(needed), set(granted)
    return {"missing": sorted(need - grant), "unused": sorted(grant - need)}


@pytest.fixture
def proxy(dynaunique_db: str) -> Iterator[FaultProxy]:
    with FaultProxy(dynaunique_db) as recording:
        yield recording


def assert_policy_is_exact(role: str, records: Iterable[Recorded], table: str) -> None:
    """The role's policy grants exactly what its workload sent; removing any action breaks it.

    Every request addressed ``table`` itself (no index, no other table), which is why each
    policy's one resource is the table's ARN.
    """
    records = list(records)
    assert set().union(*map(tables_of, records)) == {table}
    policy = load_policy(role)
    assert [s["Resource"] for s in policy["Statement"]] == [[TABLE_ARN]]
    needed = iam_actions(records)
    granted = policy_actions(policy)
    sent = "; ".join(f"{a} <- {', '.join(sorted(ops))}" for a, ops in sorted(needed.items()))
    assert verdict(needed, granted) == {"missing": [], "unused": []}, f"{role} needs: {sent}"
    # The check can fail: the policy with any one action removed is reported lacking exactly
    # that action, and the policy with one more action is reported granting it unused.
    for action in sorted(granted):
        assert verdict(needed, policy_actions(edited(policy, remove=action))) == {
            "missing": [action], "unused": []}
    assert verdict(needed, policy_actions(edited(policy, add="dynamodb:DeleteTable"))) == {
        "missing": [], "unused": ["dynamodb:DeleteTable"]}


def edited(policy: Mapping[str, Any], *, remove: str | None = None,
           add: str | None = None) -> dict[str, Any]:
    """A copy of ``policy``: ``remove`` out of every statement, ``add`` into the first."""
    copy: dict[str, Any] = json.loads(json.dumps(policy))
    for statement in copy["Statement"]:
        statement["Action"] = [a for a in statement["Action"] if a != remove]
    if add is not None:
        copy["Statement"][0]["Action"].append(add)
    return copy


# --- the application role -------------------------------------------------------------------------


class IamAccount(Model):
    """The application's model: two unique fields, a TTL, a plain field."""

    class Meta:
        table_name = "iam_app_accounts"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    handle = UnicodeAttribute(null=True, unique=True)
    visits = NumberAttribute(default=0)
    expires = TTLAttribute(null=True)


def application_workload() -> None:
    """What an application does: create, read, change, move a value, atomic units, delete."""
    ada = IamAccount(pk="ACCT#1", email="ada@x.io", handle="ada",
                     expires=datetime.now(timezone.utc) + timedelta(days=1))
    ada.save()
    with pytest.raises(UniqueViolation):
        IamAccount(pk="ACCT#2", email="ADA@x.io").save()
    ada = IamAccount.get("ACCT#1")
    ada.email = "ada@lovelace.io"
    ada.save()
    ada.update(actions=[IamAccount.visits.set(IamAccount.visits + 1)])  # no lock involved
    ada.update(actions=[IamAccount.handle.set("countess")])  # moves a lock
    assert IamAccount.get_by_unique("email", "ADA@LOVELACE.IO").pk == "ACCT#1"
    assert [a.pk for a in IamAccount.query("ACCT#1")] == ["ACCT#1"]
    # count() on a table holding locks is a Scan that leaves them out (DescribeTable's count
    # would include them): the application role needs Scan.
    assert IamAccount.count() == 1
    with atomic() as tx:
        tx.condition_check(IamAccount, "ACCT#1", condition=IamAccount.pk.exists())
        IamAccount(pk="ACCT#3", email="grace@x.io").save()
    IamAccount(pk="ACCT#3").delete()  # never loaded: read first, then deleted with its locks
    ada.delete()


def test_application_policy_grants_exactly_what_the_application_sends(
        proxy: FaultProxy) -> None:
    """saves, a violation, updates (plain and lock-moving), get_by_unique, query, atomic with a
    condition check, deletes: every request is allowed by deploy/iam/application.json, and
    nothing more is granted."""
    use_endpoint(proxy.url, IamAccount)
    create_tables(IamAccount)
    proxy.clear()
    application_workload()
    operations = {r.operation for r in proxy.records()}
    # The workload really exercised the transaction kinds the policy is about.
    assert {"TransactWriteItems", "GetItem", "Query", "Scan"} <= operations, operations
    assert_policy_is_exact("application", proxy.records(), IamAccount.Meta.table_name)


# --- the operator role ----------------------------------------------------------------------------


def operator_run(endpoint: str, *args: str) -> Result:
    # As at a terminal (rich honours TTY_COMPATIBLE): check and repair then show a progress bar,
    # whose estimate is one more request (DescribeTable) the operator's policy must allow.
    runner = CliRunner(env={"TTY_COMPATIBLE": "1"})
    return runner.invoke(cli, [*args[:1], fm.__name__, *args[1:], "--endpoint", endpoint],
                         terminal_width=200)


def test_operator_policy_grants_exactly_what_locks_check_and_repair_send(
        proxy: FaultProxy) -> None:
    """`dynaunique locks` (a value, an owner, a listing), `check` and `repair --yes` on a
    drifted table: every request is allowed by deploy/iam/operator.json, nothing more granted."""
    use_endpoint(proxy.url, *fm.MODELS)
    create_tables(*fm.MODELS)
    fm.seed_drift(boto3.client("dynamodb", endpoint_url=proxy.url, region_name="us-east-1"))
    proxy.clear()
    commands = [
        ("locks", "--constraint", "EMAIL", "--value", "ok@x.io", "--exact"),
        ("locks", "--owner", "ACCT#OK", "--model", "AuditAccount"),
        ("locks", "--constraint", "EMAIL"),
        ("check", "--segments", "2"),
        ("repair", "--yes", "--drop-unknown", "OLDNAME"),
        ("check",),
    ]
    codes = [operator_run(proxy.url, *args).exit_code for args in commands]
    # Drift found, repaired except the duplicate (which needs a human), found again.
    assert codes == [0, 0, 0, 1, 1, 1]
    assert_policy_is_exact("operator", proxy.records(), fm.TABLE)


# --- the migrator role ----------------------------------------------------------------------------


def test_migrator_policy_grants_exactly_what_migrations_send(
        proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`makemigrations`, `migrate` (a backfill, then a change of normalizer: sweep and fill, run
    by a worker, which takes segment leases) and `showmigrations`: every request is allowed by
    deploy/iam/migrator.json, nothing more."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    # A lease short enough to be renewed (an UpdateItem) during these small migrations, which
    # max_wcu slows to about a second each: a long migration renews its lease, so must this one.
    (tmp_path / "pyproject.toml").write_text(
        "[tool.dynaunique]\nlease_seconds = 1.5\nmax_wcu = 12\n", encoding="utf-8")
    ws = Workspace(tmp_path, proxy.url, "iam_mig_accounts")
    ws.create_table()
    for i in range(30):
        ws.put_raw(f"ACCT#{i:03d}", email=f"User{i}@x.io")
    proxy.clear()

    def run(*args: str) -> Result:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    def migrate_to(email_options: str, *worker: str) -> None:
        ws.deploy(email=email_options)
        run("makemigrations", ws.module)
        run("migrate", ws.module, "--endpoint", ws.endpoint, *worker)

    migrate_to(", unique=True")
    migrate_to(", unique=True, normalize=normalizers.casefold", "--segment", "1",
               "--total-segments", "2")
    shown = run("showmigrations", ws.module, "--endpoint", ws.endpoint).output
    sent = proxy.records()
    # The test's own inspection (a scan) comes after the workload's requests were taken.
    assert "[X] 0002" in shown, shown
    assert ws.locks() == ws.expected_locks()
    assert_policy_is_exact("migrator", sent, ws.table)


