"""deploy/terraform planned by Terraform itself, offline: the table module's global-table
variables (replica_regions, multi_region_consistency, witness_region, home_region) are planned
and refused as the CloudFormation stack's are.

It needs the ``terraform`` program and the AWS provider in a filesystem mirror
(``DYNAUNIQUE_TF_PLUGIN_DIR``, else /opt/tf-plugins), since the Terraform registry is out of reach;
it is skipped without them. The provider is configured with fake credentials and every endpoint
on a closed local port: a plan of new resources sends no request.

When the mirror's provider is older than the module asks (6.22, for ``global_table_witness``),
the module is planned from a copy without the three arguments that version lacks (the replicas'
``consistency_mode`` and ``deletion_protection_enabled``, the ``global_table_witness`` block) and
with the provider's region read as that version names it: what is proven then is the variables'
validations, the preconditions and the outputs, not those three arguments (the offline HCL test
pins them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.deploy_policies import DEPLOY

# Drives another program (tests/README.md, "Two runs"): CI's second pytest step.
pytestmark = pytest.mark.external

_PROVIDER = """
provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  endpoints {
    dynamodb = "http://127.0.0.1:9"
    iam      = "http://127.0.0.1:9"
    sts      = "http://127.0.0.1:9"
  }
}
"""

#: Planned in us-east-1: scenario → the module's arguments, as HCL.
_VALID = {
    "one_region": "",
    "strong_three": 'replica_regions = ["us-east-2", "us-west-2"]\n'
                    'multi_region_consistency = "STRONG"',
    "strong_witness": 'replica_regions = ["us-east-2"]\nmulti_region_consistency = "STRONG"\n'
                      'witness_region = "us-west-2"',
    "eventual_home": 'replica_regions = ["eu-west-1"]\nhome_region = "eu-west-1"',
}

#: Refused in us-east-1: scenario → (the module's arguments, how its error messages begin).
_REFUSED: dict[str, tuple[str, str | tuple[str, ...]]] = {
    "home_outside": ('replica_regions = ["eu-west-1"]\nhome_region = "ap-south-1"',
                     "home_region: a region holding a replica"),
    "home_on_strong": ('replica_regions = ["us-east-2", "us-west-2"]\n'
                       'multi_region_consistency = "STRONG"\nhome_region = "us-east-2"',
                       "home_region: a region holding a replica"),
    "strong_two": ('replica_regions = ["us-east-2"]\nmulti_region_consistency = "STRONG"',
                   "STRONG takes exactly three regions"),
    "strong_four": ('replica_regions = ["us-east-2", "us-west-2"]\n'
                    'multi_region_consistency = "STRONG"\nwitness_region = "us-west-1"',
                    ("STRONG takes exactly three regions",  # and four are never of one set:
                     "STRONG's three regions must be of one region set")),
    "strong_two_sets": ('replica_regions = ["eu-west-1", "us-west-2"]\n'
                        'multi_region_consistency = "STRONG"',
                        "STRONG's three regions must be of one region set"),
    "witness_eventual": ('replica_regions = ["us-east-2"]\nwitness_region = "us-west-2"',
                         "witness_region: for STRONG only"),
    "replica_here": ('replica_regions = ["us-east-1"]',
                     "replica_regions: name the other regions"),
}

#: Refused by a variable's own validation, which Terraform checks before any precondition (so
#: planned apart: one refusal there would hide the preconditions' above).
_REFUSED_BY_VARIABLES: dict[str, tuple[str, str | tuple[str, ...]]] = {
    "replica_twice": ('replica_regions = ["us-east-2", "us-east-2"]',
                      "replica_regions: region names"),
    "replica_typo": ('replica_regions = ["eu-west"]', "replica_regions: region names"),
    "mode_lowercase": ('multi_region_consistency = "strong"',
                       "multi_region_consistency: EVENTUAL or STRONG"),
}

#: What an AWS provider older than 6 lacks, taken out of the planned copy (see the docstring).
_NEWER_THAN_MIRROR = (
    re.compile(r"^\s*consistency_mode\s*=.*\n", re.M),
    re.compile(r"^\s*deletion_protection_enabled\s*=.*\n(?=\s*}\n\s*}\n\n\s*dynamic \"global)",
               re.M),
    re.compile(r'^\s*dynamic "global_table_witness" \{.*?\n  \}\n', re.M | re.S),
)


def _mirror() -> tuple[str, Path, tuple[int, ...]]:
    terraform = shutil.which("terraform")
    mirror = Path(os.environ.get("DYNAUNIQUE_TF_PLUGIN_DIR", "/opt/tf-plugins"))
    versions = sorted(tuple(int(p) for p in path.name.split("."))
                      for path in (mirror / "registry.terraform.io/hashicorp/aws").glob("*.*.*"))
    if terraform is None or not versions:
        pytest.skip("needs terraform and the AWS provider in a filesystem mirror")
    return terraform, mirror, versions[-1]


def _copy(tmp_path: Path, name: str, version: tuple[int, ...]) -> None:
    """deploy/ copied as tmp_path/<name> (one copy per scenario: Terraform's diagnostics name
    the file, not the module instance), made plannable with the mirror's provider."""
    module = shutil.copytree(DEPLOY, tmp_path / name) / "terraform"
    if version >= (6, 22):
        return
    main = (module / "main.tf").read_text()
    for pattern in _NEWER_THAN_MIRROR:
        main, found = pattern.subn("", main)
        assert found, pattern.pattern
    if version < (6,):
        main = main.replace("data.aws_region.current.region", "data.aws_region.current.name")
    (module / "main.tf").write_text(main)
    floor = ".".join(map(str, version))
    for versions in module.rglob("versions.tf"):
        versions.write_text(versions.read_text().replace('">= 6.22"', f'">= {floor}"'))


def _workspace(tmp_path: Path, scenarios: dict[str, str]) -> tuple[str, dict[str, str]]:
    terraform, mirror, version = _mirror()
    for name in scenarios:
        _copy(tmp_path, name, version)
    root = tmp_path / "root"
    root.mkdir()
    (root / "provider.tf").write_text(_PROVIDER)
    for name, arguments in scenarios.items():
        (root / f"{name}.tf").write_text(
            f'module "{name}" {{\n  source = "../{name}/terraform"\n  table_name = "accounts"\n'
            f"{arguments}\n}}\n"
            f'output "{name}" {{\n'
            f"  value = [module.{name}.regions, module.{name}.home_region]\n}}\n")
    (tmp_path / "terraformrc").write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path = "{mirror}"\n  }}\n}}\n')
    env = {**os.environ, "TF_CLI_CONFIG_FILE": str(tmp_path / "terraformrc"),
           "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
    init = subprocess.run([terraform, f"-chdir={root}", "init", "-backend=false", "-input=false",
                           "-no-color"], env=env, capture_output=True, text=True, timeout=600)
    assert init.returncode == 0, init.stdout + init.stderr
    return terraform, {**env, "ROOT": str(root)}


def _plan(terraform: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([terraform, f"-chdir={env['ROOT']}", "plan", "-input=false",
                           "-refresh=false", "-no-color", *extra],
                          env=env, capture_output=True, text=True, timeout=600)


def test_terraform_plans_the_one_region_and_the_global_tables(tmp_path: Path) -> None:
    """One region by default (no replica); three STRONG replicas; two and a witness; EVENTUAL
    with its home region: each planned, with the regions and home region it outputs."""
    terraform, env = _workspace(tmp_path, _VALID)
    planned = _plan(terraform, env, "-out=plan")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    shown = subprocess.run([terraform, f"-chdir={env['ROOT']}", "show", "-json", "plan"],
                           env=env, capture_output=True, text=True, timeout=600, check=True)
    plan: dict[str, Any] = json.loads(shown.stdout)
    outputs = {name: change["after"] for name, change in plan["output_changes"].items()}
    assert outputs == {"one_region": [None, None],
                       "strong_three": [["us-east-1", "us-east-2", "us-west-2"], None],
                       "strong_witness": [["us-east-1", "us-east-2"], None],
                       "eventual_home": [["us-east-1", "eu-west-1"], "eu-west-1"]}
    replicas = {}
    for module in plan["planned_values"]["root_module"]["child_modules"]:
        [table] = [r for r in module["resources"] if r["type"] == "aws_dynamodb_table"]
        values = table["values"]
        assert (values["stream_enabled"], values["stream_view_type"]) == (
            True, "NEW_AND_OLD_IMAGES")
        assert [r["point_in_time_recovery"] for r in values["replica"]] == [True] * len(
            values["replica"])
        replicas[module["address"]] = sorted(r["region_name"] for r in values["replica"])
    assert replicas == {"module.one_region": [], "module.strong_three": ["us-east-2", "us-west-2"],
                        "module.strong_witness": ["us-east-2"],
                        "module.eventual_home": ["eu-west-1"]}


@pytest.mark.parametrize("refused", [_REFUSED, _REFUSED_BY_VARIABLES],
                         ids=["preconditions", "variables"])
def test_terraform_plan_refuses_what_aws_or_dynaunique_would_refuse(
        tmp_path: Path, refused: dict[str, tuple[str, str | tuple[str, ...]]]) -> None:
    """Every refused scenario fails the plan with its own message, and only with it (the
    precondition or the variable's validation that names it)."""
    terraform, env = _workspace(tmp_path, {name: args for name, (args, _) in refused.items()})
    planned = _plan(terraform, env, "-json")
    assert planned.returncode == 1
    found: dict[str, list[str]] = {}
    for line in planned.stdout.splitlines():
        message = json.loads(line)
        diagnostic = message.get("diagnostic", {})
        if diagnostic.get("severity") != "error":
            continue
        where = Path(diagnostic["range"]["filename"])
        scenario = where.parts[1] if where.parts[0] == ".." else where.stem
        found.setdefault(scenario, []).append(" ".join(diagnostic["detail"].split()))
    assert sorted(found) == sorted(refused)
    for name, (_, begins) in refused.items():
        expected = sorted([begins] if isinstance(begins, str) else begins)
        assert len(found[name]) == len(expected), (name, found[name])
        assert [detail[:len(b)] for detail, b in zip(sorted(found[name]), expected, strict=True)
                ] == expected, (name, found[name])
