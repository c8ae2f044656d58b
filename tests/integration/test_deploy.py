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
import re
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
from support.migrations_workspace import Workspace

from dynaunique import Model, UniqueViolation, atomic, normalizers
from dynaunique.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from dynaunique.cli import cli
from dynaunique.testing import create_tables, use_endpoint

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
#: The placeholder the policy files use for the table's ARN (the templates substitute it).
TABLE_ARN = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"

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


def policy_actions(policy: Mapping[str, Any]) -> set[str]:
    """Every action an IAM policy document allows (its Deny statements grant nothing)."""
    actions: set[str] = set()
    for statement in policy["Statement"]:
        if statement["Effect"] == "Allow":
            listed = statement["Action"]
            actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def load_policy(role: str) -> dict[str, Any]:
    """deploy/iam/<role>.json."""
    policy: dict[str, Any] = json.loads((DEPLOY / "iam" / f"{role}.json").read_text())
    return policy


def verdict(needed: Iterable[str], granted: Iterable[str]) -> dict[str, list[str]]:
    """What a policy lacks for a workload, and what it grants that the workload never used."""
    need, grant = set(needed), set(granted)
    return {"missing": sorted(need - grant), "unused": sorted(grant - need)}


@pytest.fixture
def proxy(dynamodb: str) -> Iterator[FaultProxy]:
    with FaultProxy(dynamodb) as recording:
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
    assert {"TransactWriteItems", "GetItem", "Query"} <= operations, operations
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
    """`makemigrations`, `migrate` (a backfill, then a change of normalizer: sweep and fill) and
    `showmigrations`: every request is allowed by deploy/iam/migrator.json, nothing more."""
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

    def migrate_to(email_options: str) -> None:
        ws.deploy(email=email_options)
        run("makemigrations", ws.module)
        run("migrate", ws.module, "--endpoint", ws.endpoint)

    migrate_to(", unique=True")
    migrate_to(", unique=True, normalize=normalizers.casefold")
    shown = run("showmigrations", ws.module, "--endpoint", ws.endpoint).output
    sent = proxy.records()
    # The test's own inspection (a scan) comes after the workload's requests were taken.
    assert "[X] 0002" in shown, shown
    assert ws.locks() == ws.expected_locks()
    assert_policy_is_exact("migrator", sent, ws.table)


# --- the templates --------------------------------------------------------------------------------

TEMPLATE = DEPLOY / "cloudformation" / "dynaunique-table.yaml"
TERRAFORM = DEPLOY / "terraform"


def lint(template: Path) -> list[tuple[str, str]]:
    """cfn-lint's findings (rule id, message) on a template, warnings included."""
    from cfnlint.api import lint_file

    return [(match.rule.id, match.message) for match in lint_file(template)]


def test_cloudformation_template_passes_cfn_lint() -> None:
    """No error and no warning; cfn-lint also checks the IAM action names."""
    assert lint(TEMPLATE) == []


def test_cfn_lint_catches_a_broken_template(tmp_path: Path) -> None:
    """The lint can fail: a non-boolean PITR flag and a misspelt IAM action are both reported."""
    broken = TEMPLATE.read_text().replace(
        "PointInTimeRecoveryEnabled: true", "PointInTimeRecoveryEnabled: sometimes"
    ).replace("- dynamodb:ConditionCheckItem", "- dynamodb:ConditionCheckItems", 1)
    (tmp_path / "broken.yaml").write_text(broken)
    assert sorted(rule for rule, _ in lint(tmp_path / "broken.yaml")) == ["E3012", "W3037"]


def test_cloudformation_policies_are_the_proven_ones() -> None:
    """Each managed policy in the template grants exactly the actions of deploy/iam/<role>.json,
    on the table the template creates; the table has PITR on and string keys."""
    from cfnlint.decode import decode

    template, problems = decode(str(TEMPLATE))
    assert problems == []
    resources = template["Resources"]
    for role in ("application", "operator", "migrator"):
        document = resources[f"{role.capitalize()}Policy"]["Properties"]["PolicyDocument"]
        assert policy_actions(document) == policy_actions(load_policy(role)), role
        assert [s["Resource"] for s in document["Statement"]] == [{"Fn::GetAtt": ["Table", "Arn"]}]
    table = resources["Table"]["Properties"]
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    definitions = table["AttributeDefinitions"]["Fn::If"][1:]
    assert {d["AttributeType"] for both in definitions for d in both} == {"S"}


def _hcl(name: str) -> dict[str, Any]:
    import hcl2

    with (TERRAFORM / name).open() as handle:
        parsed: dict[str, Any] = hcl2.load(handle)
    return parsed


def test_terraform_module_parses_and_is_consistent() -> None:
    """`terraform validate` needs the AWS provider from the Terraform registry, which this
    machine cannot reach (docs/deploying.md), so this checks what can be checked offline: every
    file parses as HCL2, every variable used is declared and every declared one used, the table
    has PITR on, TTL only when an attribute is named, and each role's policy is read from
    deploy/iam/<role>.json with the placeholder ARN the file really contains."""
    files = {path.name: _hcl(path.name) for path in sorted(TERRAFORM.glob("*.tf"))}
    assert sorted(files) == ["main.tf", "outputs.tf", "variables.tf", "versions.tf"]
    declared = {name.strip('"') for block in files["variables.tf"]["variable"] for name in block}
    text = "".join(path.read_text() for path in TERRAFORM.glob("*.tf"))
    used = set(re.findall(r"\bvar\.(\w+)", text))
    assert used == declared
    main = files["main.tf"]
    [table_block] = [r['"aws_dynamodb_table"'] for r in main["resource"]
                     if '"aws_dynamodb_table"' in r]
    table = table_block['"this"']
    assert table["point_in_time_recovery"] == [{"enabled": True, "__is_block__": True}]
    assert table["hash_key"] == "${var.hash_key}"
    [ttl] = table["dynamic"][1:]
    assert ttl['"ttl"']["for_each"] == "${var.ttl_attribute == null ? [] : [var.ttl_attribute]}"
    [locals_block] = main["locals"]
    roles = set(locals_block["roles"])
    assert roles == {"application", "operator", "migrator"}
    placeholder = locals_block["placeholder_arn"].strip('"')
    assert placeholder == TABLE_ARN
    assert 'file("${path.module}/../iam/${each.key}.json")' in text
    for role in roles:
        assert placeholder in (DEPLOY / "iam" / f"{role}.json").read_text()
