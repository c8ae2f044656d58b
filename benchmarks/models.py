"""The one model every benchmark writes, and helpers to point it at a server.

Two unique values (k = 2: ``email``, normalized, and ``username``) and one plain field (``name``),
on a table with a hash and a range key, as in the README's example. The hand-written boto3
implementation (``benchmarks/handwritten.py``) writes exactly this layout.
"""

from __future__ import annotations

import os
from typing import Any

from dynaunique import Model, normalizers
from dynaunique._transport import clients
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import FAKE_AWS_ENV, create_tables, reset_local_dynamodb, use_endpoint

TABLE = "bench_accounts"
#: Unique values per record (email and username): a create writes K + 1 items.
K = 2


class BenchAccount(Model):
    """An account with two unique values and one field that no lock depends on."""

    class Meta:
        table_name = TABLE
        region = "us-east-1"
        host = "http://127.0.0.1:9"  # replaced by point_at() before any request

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)
    username = UnicodeAttribute(unique=True)
    name = UnicodeAttribute(null=True)


def fake_credentials() -> None:
    """Give botocore credentials and a region where the environment has none."""
    for name, value in FAKE_AWS_ENV.items():
        os.environ.setdefault(name, value)


def point_at(endpoint: str) -> Any:
    """Point BenchAccount at ``endpoint``; return its client (the one dynaunique sends through).
    Already pointed there: the same client, so handlers registered on it keep counting."""
    if BenchAccount.Meta.host != endpoint:
        use_endpoint(endpoint, BenchAccount)
    return clients.client_for(BenchAccount)


def fresh_table(endpoint: str) -> None:
    """Wipe the local server and create the benchmark table (moto's cost grows with its size)."""
    reset_local_dynamodb(endpoint)
    point_at(endpoint)
    create_tables(BenchAccount)
