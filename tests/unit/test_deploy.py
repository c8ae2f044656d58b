"""deploy/ without a server: the CloudFormation template passes cfn-lint and grants the proven
policies, the Terraform module parses and agrees."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cfn_render import Refused, render
from support.deploy_policies import DEPLOY, TABLE_ARN, load_policy, policy_actions

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

# --- the templates --------------------------------------------------------------------------------

TEMPLATE = DEPLOY / "cloudformation" / "dynaunique-table.yaml"


TERRAFORM = DEPLOY / "terraform"


def lint(template: Path) -> list[tuple[str, str]]:
    """cfn-lint's findings (rule id, message) on a template, warnings included."""
    from cfnlint.api import lint_file

    return [(match.rule.id, match.message) for match in lint_file(template)]


def _hcl(name: str) -> dict[str, Any]:
    import hcl2

    with (TERRAFORM / name).open() as handle:
        parsed: dict[str, Any] = hcl2.load(handle)
    return parsed


def test_cloudformation_template_passes_cfn_lint() -> None:
    """No error and no warning; cfn-lint also checks the IAM action names."""
    assert lint(TEMPLATE) == []


def test_cfn_lint_catches_a_broken_template(tmp_path: Path) -> None:
    """The lint can fail: a non-boolean PITR flag and a misspelt IAM action are both reported."""
    broken = TEMPLATE.read_text().replace(
        "PointInTimeRecoveryEnabled: true", "PointInTimeRecoveryEnabled: sometimes", 1
    ).replace("- dynamodb:ConditionCheckItem", "- dynamodb:ConditionCheckItems", 1)
    (tmp_path / "broken.yaml").write_text(broken)
    assert sorted(rule for rule, _ in lint(tmp_path / "broken.yaml")) == ["E3012", "W3037"]


def _table_template() -> dict[str, Any]:
    from cfnlint.decode import decode

    template, problems = decode(str(TEMPLATE))
    assert problems == []
    return dict(template)


def _lint_rendered(rendered: dict[str, Any], region: str) -> list[tuple[str, str]]:
    from cfnlint.api import lint as lint_text

    return [(m.rule.id, m.message) for m in lint_text(json.dumps(rendered), regions=[region])]


#: The one-region stack's resources and outputs, as before global tables (the default).
_ONE_REGION_RESOURCES = {"Table", "ApplicationPolicy", "OperatorPolicy", "MigratorPolicy",
                         "StreamGuardPolicy", "StreamGuardRepairPolicy"}
_ONE_REGION_OUTPUTS = {"TableName", "TableArn", "ApplicationPolicyArn", "OperatorPolicyArn",
                       "MigratorPolicyArn", "StreamArn", "StreamGuardPolicyArn",
                       "StreamGuardRepairPolicyArn"}


def test_the_table_stack_without_regions_is_the_one_region_stack() -> None:
    """Default parameters: the AWS::DynamoDB::Table as before (no GlobalTable, no new output),
    and the rendered template passes cfn-lint."""
    template = _table_template()
    rendered = render(template, {"TableName": "accounts", "RangeKeyName": "SK"},
                      region="eu-west-1")
    assert set(rendered["Resources"]) == _ONE_REGION_RESOURCES
    assert set(rendered["Outputs"]) == _ONE_REGION_OUTPUTS
    table = rendered["Resources"]["Table"]
    assert (table["Type"], table["DeletionPolicy"]) == ("AWS::DynamoDB::Table", "Retain")
    assert table["Properties"]["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                                                {"AttributeName": "SK", "KeyType": "RANGE"}]
    assert "TimeToLiveSpecification" not in table["Properties"]
    assert _lint_rendered(rendered, "eu-west-1") == []


def _replicas(rendered: dict[str, Any]) -> list[str]:
    table = rendered["Resources"]["GlobalTable"]["Properties"]
    for replica in table["Replicas"]:
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert replica["DeletionProtectionEnabled"] is True
    return [replica["Region"] for replica in table["Replicas"]]


def test_a_strong_global_table_of_three_regions_renders_and_lints() -> None:
    """STRONG with three replicas of the US region set: one AWS::DynamoDB::GlobalTable with a
    replica per region (PITR, deletion protection each), the stream the guard reads, no witness;
    every policy and output names it; the rendered template passes cfn-lint."""
    rendered = render(_table_template(), {
        "TableName": "accounts", "TtlAttributeName": "ttl", "SecondRegion": "us-east-2",
        "ThirdRegion": "us-west-2", "MultiRegionConsistency": "STRONG"}, region="us-east-1")
    resources = rendered["Resources"]
    assert set(resources) == _ONE_REGION_RESOURCES - {"Table"} | {"GlobalTable"}
    table = resources["GlobalTable"]
    assert (table["Type"], table["DeletionPolicy"], table["UpdateReplacePolicy"]) == (
        "AWS::DynamoDB::GlobalTable", "Retain", "Retain")
    properties = table["Properties"]
    assert properties["MultiRegionConsistency"] == "STRONG"
    assert properties["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert "GlobalTableWitnesses" not in properties
    assert _replicas(rendered) == ["us-east-1", "us-east-2", "us-west-2"]
    for name in _ONE_REGION_RESOURCES - {"Table"}:
        for statement in resources[name]["Properties"]["PolicyDocument"]["Statement"]:
            assert "GlobalTable" in json.dumps(statement["Resource"]), name
    outputs = rendered["Outputs"]
    assert set(outputs) == _ONE_REGION_OUTPUTS | {"Regions"}  # no home region on MRSC
    assert outputs["Regions"]["Value"] == "us-east-1,us-east-2,us-west-2"
    assert outputs["StreamArn"]["Value"] == {"Fn::GetAtt": ["GlobalTable", "StreamArn"]}
    assert _lint_rendered(rendered, "us-east-1") == []


def test_a_strong_global_table_with_a_witness_and_an_eventual_one_with_a_home() -> None:
    """Two replicas and a witness (EU set); and an EVENTUAL table of two regions whose home
    region is the other one, output for the applications' DYNAUNIQUE_HOME_REGION."""
    template = _table_template()
    witnessed = render(template, {
        "TableName": "accounts", "SecondRegion": "eu-west-2", "WitnessRegion": "eu-central-1",
        "MultiRegionConsistency": "STRONG"}, region="eu-west-1")
    assert _replicas(witnessed) == ["eu-west-1", "eu-west-2"]
    assert witnessed["Resources"]["GlobalTable"]["Properties"]["GlobalTableWitnesses"] == [
        {"Region": "eu-central-1"}]
    assert witnessed["Outputs"]["Regions"]["Value"] == "eu-west-1,eu-west-2"
    assert _lint_rendered(witnessed, "eu-west-1") == []
    eventual = render(template, {"TableName": "accounts", "SecondRegion": "eu-west-1",
                                 "HomeRegion": "eu-west-1"}, region="us-east-1")
    properties = eventual["Resources"]["GlobalTable"]["Properties"]
    assert properties["MultiRegionConsistency"] == "EVENTUAL"
    assert _replicas(eventual) == ["us-east-1", "eu-west-1"]
    assert (eventual["Outputs"]["Regions"]["Value"], eventual["Outputs"]["HomeRegion"]["Value"]
            ) == ("us-east-1,eu-west-1", "eu-west-1")
    default_home = render(template, {"TableName": "accounts", "SecondRegion": "eu-west-1"},
                          region="us-east-1")
    assert default_home["Outputs"]["HomeRegion"]["Value"] == "us-east-1"
    assert _lint_rendered(eventual, "us-east-1") == []


@pytest.mark.parametrize(("parameters", "refused_by"), [
    # A home region that holds no replica, or on an MRSC table (which has none); this stack's
    # own region is named by leaving HomeRegion empty (the rules cannot name it, see below).
    ({"SecondRegion": "eu-west-1", "HomeRegion": "ap-south-1"}, "HomeRegionHoldsAReplica"),
    ({"HomeRegion": "eu-west-1"}, "HomeRegionHoldsAReplica"),
    ({"SecondRegion": "eu-west-1", "HomeRegion": "us-east-1"}, "HomeRegionHoldsAReplica"),
    ({"SecondRegion": "us-east-2", "ThirdRegion": "us-west-2", "HomeRegion": "us-east-2",
      "MultiRegionConsistency": "STRONG"}, "HomeRegionHoldsAReplica"),
    # MRSC: exactly three regions, of one region set.
    ({"SecondRegion": "us-east-2", "MultiRegionConsistency": "STRONG"},
     "StrongIsThreeRegionsOfOneSet"),
    ({"MultiRegionConsistency": "STRONG"}, "StrongIsThreeRegionsOfOneSet"),
    ({"SecondRegion": "us-east-2", "ThirdRegion": "us-west-2", "WitnessRegion": "us-west-1",
      "MultiRegionConsistency": "STRONG"}, "StrongIsThreeRegionsOfOneSet"),
    ({"SecondRegion": "eu-west-1", "ThirdRegion": "us-west-2",
      "MultiRegionConsistency": "STRONG"}, "StrongIsThreeRegionsOfOneSet"),
    ({"SecondRegion": "us-east-2", "WitnessRegion": "us-west-1",
      "MultiRegionConsistency": "STRONG"}, "StrongIsThreeRegionsOfOneSet"),
    # A witness only for MRSC, and never a replica's region.
    ({"SecondRegion": "us-east-2", "WitnessRegion": "us-west-2"}, "WitnessOnlyWithStrong"),
    ({"SecondRegion": "us-east-2", "WitnessRegion": "us-east-2",
      "MultiRegionConsistency": "STRONG"}, "WitnessOnlyWithStrong"),
    # One replica per region, named in order.
    ({"ThirdRegion": "us-west-2"}, "ThirdRegionNeedsSecond"),
    ({"SecondRegion": "us-east-2", "ThirdRegion": "us-east-2"}, "ThirdRegionNeedsSecond"),
    # Not a region name, not a mode.
    ({"SecondRegion": "us-east-2,us-west-2"}, "SecondRegion"),
    ({"SecondRegion": "us-east-2", "MultiRegionConsistency": "strong"},
     "MultiRegionConsistency"),
])
def test_the_table_stack_refuses_what_aws_or_dynaunique_would_refuse(
        parameters: dict[str, str], refused_by: str) -> None:
    """Each refused before anything is created (the Rules, or a parameter's pattern), in a stack
    deployed in us-east-1."""
    with pytest.raises(Refused) as refused:
        render(_table_template(), {"TableName": "accounts", **parameters}, region="us-east-1")
    assert refused.value.name == refused_by


def test_the_global_table_example_of_the_docs_is_accepted() -> None:
    """docs/deploying.md's `aws cloudformation deploy` of a global table, rendered in its region
    with its parameters: a global table, not a refusal."""
    page = (DEPLOY.parent / "docs" / "deploying.md").read_text()
    [command] = [block for block in re.findall(r"```console\n(.*?)```", page, re.S)
                 if "SecondRegion=" in block and "dynaunique-table.yaml" in block]
    words = command.replace("\\\n", " ").split()
    region = words[words.index("--region") + 1]
    overrides = words[words.index("--parameter-overrides") + 1:]
    rendered = render(_table_template(), dict(w.split("=", 1) for w in overrides), region=region)
    assert _replicas(rendered) == [region, "eu-west-1"]
    assert rendered["Outputs"]["HomeRegion"]["Value"] == region


def test_the_rules_name_parameters_only() -> None:
    """CloudFormation documents its rule functions over parameters, not pseudo parameters such as
    AWS::Region: a rule naming one might make the whole template invalid, one-region stacks
    included. What involves the stack's own region (SecondRegion equal to it, a region set) is
    left to AWS, which refuses the table when it creates it."""
    template = _table_template()
    refs = re.findall(r"'Ref': '([^']+)'", str(template["Rules"]))
    assert refs and set(refs) <= set(template["Parameters"])


def test_the_refusals_are_the_templates_rules() -> None:
    """Without its rule, the template would take a home region holding no replica: the refusal
    above is the template's, not the renderer's."""
    template = _table_template()
    parameters = {"TableName": "accounts", "SecondRegion": "eu-west-1", "HomeRegion": "ap-south-1"}
    del template["Rules"]["HomeRegionHoldsAReplica"]
    rendered = render(template, parameters, region="us-east-1")
    assert rendered["Outputs"]["HomeRegion"]["Value"] == "ap-south-1"


def test_cloudformation_policies_are_the_proven_ones() -> None:
    """Each managed policy in the template grants exactly the actions of deploy/iam/<role>.json,
    on the table the template creates; the table has PITR on and string keys."""
    template = _table_template()
    resources = render(template, {"TableName": "accounts"}, region="us-east-1")["Resources"]
    for role in ("application", "operator", "migrator"):
        document = resources[f"{role.capitalize()}Policy"]["Properties"]["PolicyDocument"]
        assert policy_actions(document) == policy_actions(load_policy(role)), role
        assert [s["Resource"] for s in document["Statement"]] == [{"Fn::GetAtt": ["Table", "Arn"]}]
    resources = template["Resources"]
    table = resources["Table"]["Properties"]
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    definitions = table["AttributeDefinitions"]["Fn::If"][1:]
    assert {d["AttributeType"] for both in definitions for d in both} == {"S"}


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
    dynamic = {name.strip('"'): block[name] for block in table["dynamic"] for name in block
               if name != "__is_block__"}
    assert dynamic["ttl"]["for_each"] == "${var.ttl_attribute == null ? [] : [var.ttl_attribute]}"
    # A global table: a replica per region named (none by default), each with PITR and deletion
    # protection (the provider's replica defaults are off), and a witness only when named.
    assert dynamic["replica"]["for_each"] == "${var.replica_regions}"
    [replica] = dynamic["replica"]["content"]
    assert (replica["consistency_mode"], replica["point_in_time_recovery"],
            replica["deletion_protection_enabled"]) == (
        "${var.multi_region_consistency}", True, True)
    assert dynamic["global_table_witness"]["for_each"] == (
        "${var.witness_region == null ? [] : [var.witness_region]}")
    [variables] = [block for block in files["variables.tf"]["variable"]
                   if '"replica_regions"' in block]
    assert variables['"replica_regions"']["default"] == []
    [lifecycle] = table["lifecycle"]
    assert len(lifecycle["precondition"]) == 5  # each proven by test_terraform_plan_refuses
    [locals_block] = main["locals"]
    roles = set(locals_block["roles"])
    assert roles == {"application", "operator", "migrator", "stream-guard",
                     "stream-guard-repair"}
    assert table["stream_enabled"] is True
    assert table["stream_view_type"] == '"NEW_AND_OLD_IMAGES"'
    placeholder = locals_block["placeholder_arn"].strip('"')
    assert placeholder == TABLE_ARN
    assert 'file("${path.module}/../iam/${each.key}.json")' in text
    for role in roles:
        assert placeholder in (DEPLOY / "iam" / f"{role}.json").read_text()


# --- the Step Functions migration ---------------------------------------------------------------

MIGRATE_TEMPLATE = DEPLOY / "cloudformation" / "dynaunique-migrate.yaml"
ASL = DEPLOY / "stepfunctions" / "migrate.asl.json"
MIGRATE_TERRAFORM = TERRAFORM / "migrate"


def _asl() -> dict[str, Any]:
    definition: dict[str, Any] = json.loads(ASL.read_text())
    return definition


def test_the_migrate_stack_passes_cfn_lint() -> None:
    assert lint(MIGRATE_TEMPLATE) == []


def test_the_state_machine_is_one_definition_and_its_function_the_proven_migrator() -> None:
    """The stack's state machine is deploy/stepfunctions/migrate.asl.json (Terraform reads the
    file), its function runs the package's handler, and the function's role grants exactly the
    migrator's actions."""
    from cfnlint.decode import decode

    from dynaunique.migrations import aws_lambda

    template, problems = decode(str(MIGRATE_TEMPLATE))
    assert problems == []
    resources = template["Resources"]
    machine = resources["StateMachine"]["Properties"]
    assert machine["Definition"] == _asl()
    assert machine["DefinitionSubstitutions"] == {
        "MigrateFunctionArn": {"Fn::GetAtt": ["Function", "Arn"]}}
    function = resources["Function"]["Properties"]
    module, name = function["Handler"].rsplit(".", 1)
    assert (module, name) == (aws_lambda.__name__, "handler")
    [policy] = resources["FunctionRole"]["Properties"]["Policies"]
    assert policy_actions(policy["PolicyDocument"]) == policy_actions(load_policy("migrator"))
    text = (MIGRATE_TERRAFORM / "main.tf").read_text()
    assert 'templatefile("${path.module}/../../stepfunctions/migrate.asl.json"' in text
    assert 'file("${path.module}/../../iam/migrator.json")' in text
    assert '"dynaunique.migrations.aws_lambda.handler"' in text


def test_the_state_machine_maps_over_the_segments_and_loops_on_more() -> None:
    """Status, then a Distributed Map over its segments whose items invoke the handler until
    the answer is not "more" (a Wait in between), then Status again: phase after phase, until
    the status says done. Only transient Lambda errors are retried (a duplicates report fails
    the execution)."""
    asl = _asl()
    states = asl["States"]
    assert asl["StartAt"] == "Status"
    assert states["Status"]["Parameters"]["Payload"] == {"action": "status"}
    assert states["Status"]["Next"] == "Applied?"
    assert states["Applied?"]["Choices"] == [
        {"Variable": "$.done", "BooleanEquals": True, "Next": "Migrated"}]
    assert states["Applied?"]["Default"] == "Segments"
    mapped = states["Segments"]
    assert (mapped["ItemsPath"], mapped["Next"], mapped["ResultPath"]) == (
        "$.segments", "Status", None)
    assert mapped["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    inner = mapped["ItemProcessor"]["States"]
    assert inner["Unit"]["Parameters"]["Payload"] == {"segment.$": "$.segment"}
    assert inner["More?"]["Choices"] == [
        {"Variable": "$.status", "StringEquals": "more", "Next": "Pause"}]
    assert (inner["Pause"]["Next"], inner["More?"]["Default"]) == ("Unit", "Settled")
    for task in (states["Status"], inner["Unit"]):
        retried = {e for r in task["Retry"] for e in r["ErrorEquals"]}
        assert "DuplicatesFound" not in retried and "States.ALL" not in retried
    for graph in (states, inner):
        targets = {s.get("Next") for s in graph.values()} | {
            c["Next"] for s in graph.values() for c in s.get("Choices", [])} | {
            s.get("Default") for s in graph.values()}
        assert targets - {None} <= set(graph)


def _submodule(folder: str) -> tuple[dict[str, Any], str]:
    """A Terraform submodule of deploy/terraform, checked offline: its four files parse, every
    variable used is declared and every declared one used, its versions are the root's. Its
    parsed files and its whole text."""
    directory = TERRAFORM / folder
    files = {path.name: _hcl(f"{folder}/{path.name}") for path in sorted(directory.glob("*.tf"))}
    assert sorted(files) == ["main.tf", "outputs.tf", "variables.tf", "versions.tf"]
    declared = {name.strip('"') for block in files["variables.tf"]["variable"] for name in block}
    text = "".join(path.read_text() for path in directory.glob("*.tf"))
    assert set(re.findall(r"\bvar\.(\w+)", text)) == declared
    assert files["versions.tf"] == _hcl("versions.tf")
    return files, text


def test_the_terraform_migrate_module_parses_and_is_consistent() -> None:
    _submodule("migrate")


# --- the worker templates: Kubernetes Indexed Job, AWS Batch array job ---------------------------


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_indexed_job_runs_one_worker_per_index_and_reruns_more_to_do() -> None:
    import yaml

    manifest = yaml.safe_load((DEPLOY / "kubernetes" / "migrate-indexed-job.yaml").read_text())
    spec = manifest["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    args = [str(a) for a in container["args"]]
    assert (spec["completionMode"], pod["restartPolicy"]) == ("Indexed", "Never")
    assert int(_option(args, "--total-segments")) == spec["completions"]
    assert _option(args, "--segment") == "$(SEGMENT)"
    [segment] = container["env"]
    assert segment["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    rules = {r["action"]: r["onExitCodes"]["values"] for r in spec["podFailurePolicy"]["rules"]}
    assert rules == {"Ignore": [75], "FailJob": [1, 2]}
    assert float(_option(args, "--wait-seconds")) >= 60  # a retried index outwaits a lease


def test_the_batch_job_definition_starts_at_the_array_index_and_retries_more_to_do() -> None:
    definition = json.loads((DEPLOY / "batch" / "migrate-job-definition.json").read_text())
    command = definition["containerProperties"]["command"]
    assert command[:2] == ["sh", "-c"]
    assert '--segment "${AWS_BATCH_JOB_ARRAY_INDEX:-0}"' in command[2]
    retry = definition["retryStrategy"]
    actions = [(e.get("onExitCode"), e["action"]) for e in retry["evaluateOnExit"]]
    assert actions[0] == ("75", "RETRY") and actions[-1] == ("*", "EXIT")
    assert ("137", "RETRY") in actions  # a killed child is retried
    max_seconds = float(command[2].split("--max-seconds ")[1].split()[0])
    assert definition["timeout"]["attemptDurationSeconds"] > max_seconds + 300


# --- the stream guard ----------------------------------------------------------------------------

STREAM_GUARD_TEMPLATE = DEPLOY / "cloudformation" / "dynaunique-stream-guard.yaml"


def _by_sid(document: dict[str, Any]) -> dict[str, set[str]]:
    return {s["Sid"]: set(s["Action"]) for s in document["Statement"]}


def test_the_table_has_a_new_and_old_images_stream_and_the_stream_guards_policies() -> None:
    """The table template enables the stream the guard needs, and its two stream guard policies
    are deploy/iam/stream-guard.json and stream-guard-repair.json, statement by statement, on
    the table and on its stream."""
    template = render(_table_template(), {"TableName": "accounts"}, region="us-east-1")
    resources = template["Resources"]
    assert resources["Table"]["Properties"]["StreamSpecification"] == {
        "StreamViewType": "NEW_AND_OLD_IMAGES"}
    for name, role in (("StreamGuardPolicy", "stream-guard"),
                       ("StreamGuardRepairPolicy", "stream-guard-repair")):
        document = resources[name]["Properties"]["PolicyDocument"]
        assert _by_sid(document) == _by_sid(load_policy(role)), role
    guard = resources["StreamGuardPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert [s["Resource"] for s in guard] == [{"Fn::GetAtt": ["Table", "Arn"]},
                                              {"Fn::Sub": "${Table.Arn}/stream/*"}]
    assert template["Outputs"]["StreamArn"]["Value"] == {"Fn::GetAtt": ["Table", "StreamArn"]}


def test_the_stream_guard_stack_passes_cfn_lint() -> None:
    assert lint(STREAM_GUARD_TEMPLATE) == []


def test_the_stream_guard_stack_maps_the_stream_to_the_handler_reporting_item_failures() -> None:
    """An event source mapping on the stream with ReportBatchItemFailures, the package's
    handler, and a role that is exactly deploy/iam/stream-guard-lambda.json (plus the repair
    policy when asked, and the failure queue)."""
    from cfnlint.decode import decode

    from dynaunique.streams import aws_lambda

    template, problems = decode(str(STREAM_GUARD_TEMPLATE))
    assert problems == []
    resources = template["Resources"]
    mapping = resources["Mapping"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["EventSourceArn"] == {"Ref": "StreamArn"}
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": ["FailedRecords", "Arn"]}}}
    function = resources["Function"]["Properties"]
    module, name = function["Handler"].rsplit(".", 1)
    assert (module, name) == (aws_lambda.__name__, "handler")
    variables = function["Environment"]["Variables"]
    assert set(variables) == {"DYNAUNIQUE_MODULE", "DYNAUNIQUE_REPAIR", "DYNAUNIQUE_REGIONS",
                              "DYNAUNIQUE_HOME_REGION"}
    # A one-region stack's function is configured as before: the global settings only when set.
    assert variables["DYNAUNIQUE_REGIONS"] == {"Fn::If": [
        "HasRegions", {"Ref": "Regions"}, {"Ref": "AWS::NoValue"}]}
    assert variables["DYNAUNIQUE_HOME_REGION"] == {"Fn::If": [
        "HasHomeRegion", {"Ref": "HomeRegion"}, {"Ref": "AWS::NoValue"}]}
    guard, repair = resources["FunctionRole"]["Properties"]["Policies"]
    *unconditional, queue = guard["PolicyDocument"]["Statement"]
    [when_regions] = [s for s in unconditional if "Fn::If" in s]
    condition, replicas, otherwise = when_regions["Fn::If"]
    assert (condition, otherwise) == ("HasRegions", {"Ref": "AWS::NoValue"})
    assert _by_sid({"Statement": [s for s in unconditional if s is not when_regions]}) == (
        _by_sid(load_policy("stream-guard-lambda")))
    assert _by_sid({"Statement": [replicas]}) == _by_sid(load_policy("stream-guard-regions"))
    assert replicas["Resource"] == {"Fn::Sub": "arn:${AWS::Partition}:dynamodb:*:"
                                               "${AWS::AccountId}:table/${TableName}"}
    assert replicas["Condition"] == {"StringEquals": {
        "aws:RequestedRegion": {"Fn::Split": [",", {"Ref": "Regions"}]}}}
    assert (queue["Sid"], queue["Action"]) == ("FailedRecordsGoToTheQueue", ["sqs:SendMessage"])
    condition, when_repairing, otherwise = repair["Fn::If"]
    assert (condition, otherwise) == ("Repairs", {"Ref": "AWS::NoValue"})
    assert _by_sid(when_repairing["PolicyDocument"]) == _by_sid(load_policy("stream-guard-repair"))
    [writes] = when_repairing["PolicyDocument"]["Statement"]
    # The writes in the home region (this stack's own when none is named); DescribeTable,
    # asked by the reads too, is the read policy's.
    assert writes["Resource"]["Fn::Sub"][1] == {
        "Home": {"Fn::If": ["HasHomeRegion", {"Ref": "HomeRegion"}, {"Ref": "AWS::Region"}]}}
    assert ":dynamodb:${Home}:" in writes["Resource"]["Fn::Sub"][0]
    pattern = re.compile(template["Parameters"]["Regions"]["AllowedPattern"])
    assert [v for v in ("", "us-east-1,eu-west-1", "a,b,c", "us-east-1", "a, b", "a,")
            if pattern.fullmatch(v)] == ["", "us-east-1,eu-west-1", "a,b,c"]


def test_the_terraform_stream_guard_module_parses_and_is_consistent() -> None:
    files, text = _submodule("stream-guard")
    assert 'file("${path.module}/../../iam/stream-guard-lambda.json")' in text
    assert 'file("${path.module}/../../iam/stream-guard-repair.json")' in text
    assert '"dynaunique.streams.aws_lambda.handler"' in text
    [mapping] = [r['"aws_lambda_event_source_mapping"'] for r in files["main.tf"]["resource"]
                 if '"aws_lambda_event_source_mapping"' in r]
    assert mapping['"stream"']["function_response_types"] == ['"ReportBatchItemFailures"']
    assert 'file("${path.module}/../../iam/stream-guard-regions.json")' in text
    # The function's settings, the empty ones left out; the regions policy only with regions.
    assert set(re.findall(r"\b(DYNAUNIQUE_\w+)\s*=", text)) == {
        "DYNAUNIQUE_MODULE", "DYNAUNIQUE_REPAIR", "DYNAUNIQUE_REGIONS", "DYNAUNIQUE_HOME_REGION"}
    assert 'name => value if value != ""' in text
    [regions] = [r['"aws_iam_role_policy"']['"regions"'] for r in files["main.tf"]["resource"]
                 if '"regions"' in r.get('"aws_iam_role_policy"', {})]
    assert regions["count"] == "${length(var.regions) > 0 ? 1 : 0}"
    # The placeholders the module replaces are the ones the policy files really contain.
    [local_values] = files["main.tf"]["locals"]
    placeholders = {name: local_values[name].strip('"')
                    for name in ("placeholder_arn", "placeholder_any_region_arn")}
    assert placeholders == {"placeholder_arn": TABLE_ARN,
                            "placeholder_any_region_arn": TABLE_ARN.replace(":REGION:", ":*:")}
    assert placeholders["placeholder_any_region_arn"] in (
        DEPLOY / "iam" / "stream-guard-regions.json").read_text()
    assert '"REGIONS"' in (DEPLOY / "iam" / "stream-guard-regions.json").read_text()
    assert "Resource = [local.home_table_arn]" in text
    assert [s["Sid"] for s in load_policy("stream-guard-repair")["Statement"]] == [
        "DynauniqueStreamGuardRepair"]


#: The handler's settings a deployment sets (the others keep their defaults: page size, margin,
#: target and migrations folder are per-run choices, passed in the event when needed).
_DEPLOYED_SETTINGS = {"module", "total_segments", "lease_seconds", "max_wcu", "max_rcu",
                      "concurrency"}


def _handler_settings() -> set[str]:
    import inspect

    from dynaunique.migrations import aws_lambda

    return set(re.findall(r'_setting\(event, "(\w+)"', inspect.getsource(aws_lambda)))


def test_the_migrate_stack_and_module_set_the_handlers_throughput_settings() -> None:
    """The stack's and the Terraform module's function environment set exactly the handler's
    deployed settings (``--concurrency``, ``--max-wcu`` and ``--max-rcu`` among them), each one a
    name the handler reads."""
    from cfnlint.decode import decode

    assert _handler_settings() >= _DEPLOYED_SETTINGS
    expected = {f"DYNAUNIQUE_{name.upper()}" for name in _DEPLOYED_SETTINGS}
    template, problems = decode(str(MIGRATE_TEMPLATE))
    assert problems == []
    variables = template["Resources"]["Function"]["Properties"]["Environment"]["Variables"]
    assert set(variables) == expected
    parameters = template["Parameters"]
    assert {"MaxWcu", "MaxRcu", "Concurrency"} <= set(parameters)
    for name in ("MaxWcu", "MaxRcu"):
        pattern = re.compile(parameters[name]["AllowedPattern"])
        assert [v for v in ("", "40", "2.5") if pattern.fullmatch(v)] == ["", "40", "2.5"]
        assert [v for v in ("-1", "ten", "1e3") if pattern.fullmatch(v)] == []
    text = (MIGRATE_TERRAFORM / "main.tf").read_text()
    assert set(re.findall(r"\b(DYNAUNIQUE_\w+)\s*=", text)) == expected
