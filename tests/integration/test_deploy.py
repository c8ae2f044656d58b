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
from support.log_events import configured_by_the_application
from support.migrations_workspace import Workspace

from dynaunique import Model, UniqueViolation, atomic, normalizers
from dynaunique._transport import regions as _regions
from dynaunique.attributes import NumberAttribute, TTLAttribute, UnicodeAttribute
from dynaunique.cli import cli
from dynaunique.testing import create_tables, reset_local_dynamodb, use_endpoint

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
    _regions.forget()   # a process that did not create the table asks DescribeTable once
    proxy.clear()
    application_workload()
    operations = {r.operation for r in proxy.records()}
    # The workload really exercised the transaction kinds the policy is about.
    assert {"TransactWriteItems", "GetItem", "Query", "Scan", "DescribeTable"} <= operations, \
        operations
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




# --- the stream guard's roles ---------------------------------------------------------------------

#: The Streams API's operations (X-Amz-Target DynamoDBStreams_20120810.*): authorized on the
#: stream's ARN, ``<table ARN>/stream/<label>``, not on the table's.
_STREAM_OPERATIONS = frozenset({"DescribeStream", "GetShardIterator", "GetRecords",
                                "ListStreams"})
_STREAM_ARN = f"{TABLE_ARN}/stream/*"
#: What Lambda's poller of a DynamoDB event source mapping needs on the function's role (AWS
#: Lambda's documentation, "Execution role permissions"): not requests our code sends, so they
#: cannot be recorded here; the policy must hold exactly these beside what the handler sends.
LAMBDA_POLLER_ACTIONS = {"dynamodb:DescribeStream", "dynamodb:GetRecords",
                         "dynamodb:GetShardIterator", "dynamodb:ListStreams"}


def by_resource(policy: Mapping[str, Any]) -> dict[str, set[str]]:
    """A policy's actions per resource (each statement names one)."""
    granted: dict[str, set[str]] = {}
    for statement in policy["Statement"]:
        (resource,) = statement["Resource"]
        granted.setdefault(resource, set()).update(statement["Action"])
    return granted


def needed_by_resource(records: Iterable[Recorded], table: str) -> dict[str, set[str]]:
    """The actions the recorded requests need, per resource: the table's, or its stream's."""
    records = list(records)
    stream = [r for r in records if r.operation in _STREAM_OPERATIONS]
    rest = [r for r in records if r.operation not in _STREAM_OPERATIONS]
    assert set().union(*map(tables_of, rest)) == {table}
    for record in stream:  # every stream request is about this table's stream
        where = record.body.get("StreamArn") or record.body.get("ShardIterator", "")
        assert f":table/{table}/stream/" in where, record
    needed = {TABLE_ARN: set(iam_actions(rest))}
    if stream:
        needed[_STREAM_ARN] = set(iam_actions(stream))
    return needed


def assert_grants_exactly(granted: Mapping[str, set[str]],
                          needed: Mapping[str, set[str]]) -> None:
    """Per resource, nothing missing and nothing unused; and the check can fail."""
    assert set(granted) == set(needed)
    for resource, actions in needed.items():
        assert verdict(actions, granted[resource]) == {"missing": [], "unused": []}, resource
        for action in sorted(granted[resource]):
            assert verdict(actions, granted[resource] - {action}) == {
                "missing": [action], "unused": []}


def _stream_drift(endpoint: str) -> Any:
    import support.stream_models as sm

    use_endpoint(endpoint, *sm.MODELS)
    create_tables(*sm.MODELS)
    raw = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    sm.StreamAccount(pk="ACCT#1", email="old@x.io", username="ada", phone="+15550001").save()
    sm.StreamAccount(pk="ACCT#9", email="gone@x.io").save()
    raw.update_item(TableName=sm.TABLE, Key=sm.account_key("ACCT#1"),
                    UpdateExpression="SET email = :e",
                    ExpressionAttributeValues={":e": {"S": "new@x.io"}})       # orphan + missing
    raw.delete_item(TableName=sm.TABLE, Key=sm.account_key("ACCT#9"))       # orphan
    raw.put_item(TableName=sm.TABLE, Item={**sm.account_key("ACCT#2"),       # foreign owner
                                           "email": {"S": "gone@x.io"}})
    return sm


def test_stream_guard_policy_grants_exactly_what_watch_sends(proxy: FaultProxy) -> None:
    """`dynaunique watch --once` on drift, then again (a restart: it reads its checkpoints):
    every request is allowed by deploy/iam/stream-guard.json — the table's reads and the
    checkpoints on the table, the Streams API on its stream — and nothing more."""
    sm = _stream_drift(proxy.url)
    proxy.clear()
    runs = [CliRunner().invoke(cli, ["watch", sm.__name__, "--once", "--endpoint", proxy.url])
            for _ in range(2)]
    assert [r.exit_code for r in runs] == [1, 0], runs[0].output
    needed = needed_by_resource(proxy.records(), sm.TABLE)
    assert_grants_exactly(by_resource(load_policy("stream-guard")), needed)


def _lambda_event(endpoint: str, table: str) -> dict[str, Any]:
    """The table's stream records so far, as Lambda delivers them to the function."""
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name="us-east-1")
    raw = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    arn = raw.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    event: dict[str, Any] = json.loads(json.dumps(
        {"Records": [{**r, "eventSourceARN": arn} for r in records]}, default=str))
    return event


def merged(*policies: Mapping[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for policy in policies:
        for resource, actions in policy.items():
            out.setdefault(resource, set()).update(actions)
    return out


def test_stream_guard_repair_policy_adds_exactly_what_repair_sends(
        proxy: FaultProxy, dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler with DYNAUNIQUE_REPAIR=1 deletes an orphan, writes a missing lock and hands
    a lock over: beyond its reads it sends exactly what deploy/iam/stream-guard-repair.json
    grants; `watch --once --repair` on the same drift sends exactly what stream-guard.json and
    stream-guard-repair.json grant together."""
    from dynaunique.streams import aws_lambda

    sm = _stream_drift(proxy.url)
    event = _lambda_event(proxy.url, sm.TABLE)
    monkeypatch.setenv("DYNAUNIQUE_MODULE", sm.__name__)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
    monkeypatch.setenv("DYNAUNIQUE_REPAIR", "1")
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    configured_by_the_application(aws_lambda.streams_logger, monkeypatch)
    _regions.forget()   # a function's process did not create the table: its route asks first
    proxy.clear()
    assert aws_lambda.handler(event, None) == {"batchItemFailures": []}
    repairs = [r.body["TransactItems"] for r in proxy.records()
               if r.operation == "TransactWriteItems"]
    assert len(repairs) == 3  # delete_orphan, put_missing, transfer
    lambda_table = by_resource(load_policy("stream-guard-lambda"))[TABLE_ARN]
    needed = needed_by_resource(proxy.records(), sm.TABLE)
    assert_grants_exactly(by_resource(load_policy("stream-guard-repair")),
                          {TABLE_ARN: needed[TABLE_ARN] - lambda_table})

    reset_local_dynamodb(dynaunique_db)
    sm = _stream_drift(proxy.url)  # the same drift again, on a fresh table
    _regions.forget()
    proxy.clear()
    result = CliRunner().invoke(cli, ["watch", sm.__name__, "--once", "--json", "--repair",
                                      "--endpoint", proxy.url])
    assert result.exit_code == 1, result.output
    kinds = sorted(json.loads(line)["repair"]["action"]["kind"]
                   for line in result.stdout.splitlines() if '"repair"' in line)
    assert kinds == ["delete_orphan", "put_missing", "transfer"]
    assert_grants_exactly(merged(by_resource(load_policy("stream-guard")),
                                 by_resource(load_policy("stream-guard-repair"))),
                          needed_by_resource(proxy.records(), sm.TABLE))


def test_stream_guard_lambda_policy_is_the_handler_and_lambdas_poller(
        proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler, invoked with the event Lambda delivers, sends only consistent reads of the
    table; the function's role (deploy/iam/stream-guard-lambda.json) grants those plus what
    Lambda's poller needs on the stream, nothing more."""
    from dynaunique.streams import aws_lambda

    sm = _stream_drift(proxy.url)
    event = _lambda_event(proxy.url, sm.TABLE)
    monkeypatch.setenv("DYNAUNIQUE_MODULE", sm.__name__)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    configured_by_the_application(aws_lambda.streams_logger, monkeypatch)
    _regions.forget()   # a fresh function: it asks the table's mode (an MRSC table's reads differ)
    proxy.clear()
    assert aws_lambda.handler(event, None) == {"batchItemFailures": []}
    needed = needed_by_resource(proxy.records(), sm.TABLE)
    assert needed == {TABLE_ARN: {"dynamodb:DescribeTable", "dynamodb:GetItem"}}
    assert_grants_exactly(by_resource(load_policy("stream-guard-lambda")), {
        **needed, _STREAM_ARN: LAMBDA_POLLER_ACTIONS - {"dynamodb:ListStreams"},
        "*": {"dynamodb:ListStreams"}})


# --- the stream guard on a global table -----------------------------------------------------------

#: stream-guard-regions.json's resource: the table in any region, its condition naming which.
_ANY_REGION_ARN = TABLE_ARN.replace(":REGION:", ":*:")


def in_region(arn: str, region: str) -> str:
    return arn.replace(":REGION:", f":{region}:", 1)


def needed_by_region(records: Iterable[Recorded], table: str) -> dict[str, set[str]]:
    """The actions the recorded requests need, per table ARN of the region each was signed for
    (the handler sends no Streams request: Lambda's poller reads the stream)."""
    needed: dict[str, set[str]] = {}
    for record in records:
        assert record.operation not in _STREAM_OPERATIONS, record
        assert tables_of(record) == {table}, record
        assert record.region, record
        for action in iam_actions([record]):
            needed.setdefault(in_region(TABLE_ARN, record.region), set()).add(action)
    return needed


def granted_by_region(policy: Mapping[str, Any], *, here: str, home: str,
                      regions: Iterable[str]) -> dict[str, set[str]]:
    """What a policy file grants a function running in ``here``, per concrete resource, as the
    templates fill it in: REGION is ``here`` except in the repair's writes, which name the home
    region; the regions policy's table in any region is limited by ``aws:RequestedRegion`` to
    ``regions`` (a request's region is its table's)."""
    granted: dict[str, set[str]] = {}
    for statement in policy["Statement"]:
        (resource,) = statement["Resource"]
        if "Condition" in statement:
            assert statement["Condition"] == {
                "StringEquals": {"aws:RequestedRegion": ["REGIONS"]}}
            assert resource == _ANY_REGION_ARN
            arns = [in_region(TABLE_ARN, region) for region in regions]
        else:
            arns = [in_region(resource, home if statement["Sid"] == "DynauniqueStreamGuardRepair"
                              else here)]
        for arn in arns:
            granted.setdefault(arn, set()).update(statement["Action"])
    return granted


def _global_drift(endpoint: str) -> None:
    """The global table of support/deploy_global_models.py (eu-west-1, a replica in
    us-east-1), with a record missing its lock and an orphan lock written in eu-west-1."""
    import support.deploy_global_models as dgm
    from support.global_tables import EAST, WEST, make_global, regional_client

    use_endpoint(endpoint, *dgm.MODELS)
    make_global(dgm.GuardedMember, endpoint, regions=(EAST,))
    west = regional_client(endpoint, WEST)
    west.put_item(TableName=dgm.TABLE, Item={"PK": {"S": "M1"}, "email": {"S": "ada@x.io"}})
    west.put_item(TableName=dgm.TABLE, Item={"PK": {"S": "UNIQ#EMAIL#gone@x.io"},
                                             "owner": {"M": {"PK": {"S": "M9"}}}})


@pytest.mark.parametrize("repair", [False, True], ids=["reads", "repairs"])
def test_stream_guard_lambda_policies_on_a_global_table_grant_each_region_exactly(
        proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch, repair: bool) -> None:
    """The function of eu-west-1 (its replica's stream, the models there), with
    DYNAUNIQUE_REGIONS naming both replicas and DYNAUNIQUE_HOME_REGION us-east-1, fed a missing
    lock and an orphan: it reads the table in both regions; repairing, it also asks
    DescribeTable in eu-west-1 (where is the home region?) and writes in us-east-1. Per region,
    stream-guard-lambda.json (here) + stream-guard-regions.json (each named region) [+
    stream-guard-repair.json: the writes at home, DescribeTable here] grant exactly that."""
    import support.deploy_global_models as dgm
    from support.global_tables import EAST, WEST, regional_client, replica_stream

    from dynaunique.streams import aws_lambda

    _global_drift(proxy.url)
    event: dict[str, Any] = json.loads(json.dumps(
        {"Records": replica_stream(proxy.url, WEST, dgm.TABLE)}, default=str))
    monkeypatch.setenv("DYNAUNIQUE_MODULE", dgm.__name__)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
    monkeypatch.setenv("DYNAUNIQUE_REGIONS", f"{EAST},{WEST}")
    monkeypatch.setenv("DYNAUNIQUE_HOME_REGION", EAST)
    monkeypatch.setenv("DYNAUNIQUE_REPAIR", "1" if repair else "")
    monkeypatch.setattr(aws_lambda, "_checkers", {})
    configured_by_the_application(aws_lambda.streams_logger, monkeypatch)
    _regions.forget()
    proxy.clear()
    assert aws_lambda.handler(event, None) == {"batchItemFailures": []}
    needed = needed_by_region(proxy.records(), dgm.TABLE)
    east, here = in_region(TABLE_ARN, EAST), in_region(TABLE_ARN, WEST)
    # Each region's table mode is asked once (an MRSC table is read without transactions).
    reads = {east: {"dynamodb:DescribeTable", "dynamodb:GetItem"},
             here: {"dynamodb:DescribeTable", "dynamodb:GetItem"}}
    if not repair:
        assert needed == reads
    else:
        assert needed == merged(reads, {east: {
            "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}})
        # Both repairs landed in the home region.
        lock = regional_client(proxy.url, EAST).get_item(
            TableName=dgm.TABLE, Key={"PK": {"S": "UNIQ#EMAIL#ada@x.io"}}, ConsistentRead=True)
        assert lock["Item"]["owner"] == {"M": {"PK": {"S": "M1"}}}
        assert "Item" not in regional_client(proxy.url, EAST).get_item(
            TableName=dgm.TABLE, Key={"PK": {"S": "UNIQ#EMAIL#gone@x.io"}}, ConsistentRead=True)
    roles = ["stream-guard-lambda", "stream-guard-regions"] + (
        ["stream-guard-repair"] if repair else [])
    granted = merged(*(granted_by_region(load_policy(role), here=WEST, home=EAST,
                                         regions=[EAST, WEST]) for role in roles))
    stream = in_region(_STREAM_ARN, WEST)
    assert_grants_exactly(granted, {
        **needed, stream: LAMBDA_POLLER_ACTIONS - {"dynamodb:ListStreams"},
        "*": {"dynamodb:ListStreams"}})


def test_watch_regions_policies_on_a_global_table_grant_each_region_exactly(
        proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dynaunique watch --once --regions us-east-1,eu-west-1 --repair` (models in eu-west-1,
    home us-east-1) reads each replica's stream, keeps its checkpoints in each replica and
    reads every lock key in both: stream-guard.json once per named region, plus
    stream-guard-repair.json (the writes at home, DescribeTable where the models point), grant
    exactly what it sends, per region."""
    import support.deploy_global_models as dgm
    from support.global_tables import EAST, WEST

    _global_drift(proxy.url)
    monkeypatch.setenv("DYNAUNIQUE_HOME_REGION", EAST)
    _regions.forget()
    proxy.clear()
    result = CliRunner().invoke(cli, ["watch", dgm.__name__, "--once", "--json", "--repair",
                                      "--regions", f"{EAST},{WEST}", "--endpoint", proxy.url])
    assert result.exit_code == 1, result.output
    needed: dict[str, set[str]] = {}
    for record in proxy.records():
        assert record.region in (EAST, WEST), record
        streamed = record.operation in _STREAM_OPERATIONS
        if streamed:
            where = record.body.get("StreamArn") or record.body.get("ShardIterator", "")
            assert f":table/{dgm.TABLE}/stream/" in where, record
        else:
            assert tables_of(record) == {dgm.TABLE}, record
        arn = in_region(_STREAM_ARN if streamed else TABLE_ARN, record.region)
        needed.setdefault(arn, set()).update(iam_actions([record]))
    kinds = sorted(json.loads(line)["repair"]["action"]["kind"]
                   for line in result.stdout.splitlines() if '"repair"' in line)
    assert kinds == ["delete_orphan", "put_missing"]
    assert {r.region for r in proxy.records(["TransactWriteItems"])} == {EAST}   # at home
    granted = merged(*(granted_by_region(load_policy("stream-guard"), here=region, home=EAST,
                                         regions=[]) for region in (EAST, WEST)),
                     granted_by_region(load_policy("stream-guard-repair"), here=WEST, home=EAST,
                                       regions=[]))
    assert_grants_exactly(granted, needed)
