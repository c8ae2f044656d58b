"""Helpers shared by the tests of the local server (tests/integration/test_local_server*.py)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import boto3
from botocore.config import Config


def client(endpoint: str, *, pool: int = 10) -> Any:
    """A boto3 DynamoDB client for ``endpoint`` that never retries (so no error is hidden)."""
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(max_pool_connections=pool, retries={"total_max_attempts": 1}),
    )


def create_table(ddb: Any, name: str, *, range_key: bool = False) -> None:
    """A PAY_PER_REQUEST table keyed on ``PK`` (string), plus ``SK`` (string) if ``range_key``."""
    keys = [("PK", "HASH"), ("SK", "RANGE")] if range_key else [("PK", "HASH")]
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": a, "KeyType": k} for a, k in keys],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a, _ in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def server_state(endpoint: str) -> dict[str, Any]:
    """What the server reports at ``GET /dynaunique-api/state``."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(endpoint + "/dynaunique-api/state", timeout=10) as response:
        state: dict[str, Any] = json.loads(response.read())
    return state
