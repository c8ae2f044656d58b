"""The IAM policies of deploy/iam, read as the deploy tests compare them (unit and integration)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

#: The placeholder the policy files use for the table's ARN (the templates substitute it).
TABLE_ARN = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"


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

