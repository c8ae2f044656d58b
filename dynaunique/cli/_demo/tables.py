"""The demo's two tables on one target: created, read back consistently, and deleted.

One table holds the ``Account`` records and their locks (written through dynaunique); the other
holds the naive pattern's records, written with a plain botocore client as an application
without dynaunique would.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import botocore.config
import botocore.exceptions
import botocore.session

from dynaunique._lock.items import locks_of
from dynaunique._lock.locks import OWNER_ATTR, RESERVED_PREFIX, lock_primary_key, untyped
from dynaunique._transport.clients import client_for
from dynaunique._transport.endpoint import Target
from dynaunique.cli._demo.cast import PROFILE, account_model
from dynaunique.cli._demo.wire import ItemSummary, Sent, summarize
from dynaunique.model import Model

if TYPE_CHECKING:
    from dynaunique.cli._demo.cast import DemoAccount


class DemoTables:
    """The demo table (records and locks) and the naive pattern's table, with fresh names."""

    def __init__(self, target: Target, *, racers: int) -> None:
        self.target = target
        suffix = uuid.uuid4().hex[:8]
        #: The dynaunique table (records and locks) and the naive pattern's table.
        self.table = f"dynaunique-demo-{suffix}"
        self.naive_table = f"dynaunique-demo-{suffix}-naive"
        self.Account = account_model(self.table, target)
        info = self.Account._du_info
        assert info is not None
        self.info = info
        self.client = client_for(self.Account)
        credentials: dict[str, str] = {}
        if target.credentials is not None:
            credentials = {"aws_access_key_id": target.credentials[0],
                           "aws_secret_access_key": target.credentials[1]}
        # The naive side is a plain AWS SDK client, as an application without dynaunique would
        # write it: the very botocore client `boto3.client("dynamodb", ...)` returns, built
        # without boto3 so that the package does not need boto3 for it.
        self.naive = botocore.session.get_session().create_client(
            "dynamodb", endpoint_url=target.endpoint, region_name=target.region,
            config=botocore.config.Config(max_pool_connections=max(10, racers * 2),
                                          retries={"mode": "standard", "max_attempts": 3}),
            **credentials,
        )
        #: Why a table could not be deleted at the end (empty when both were).
        self.cleanup_errors: list[str] = []

    def create(self) -> None:
        """Create the demo table and the naive pattern's table (on-demand billing)."""
        self.Account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        self.naive.create_table(
            TableName=self.naive_table,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.naive.get_waiter("table_exists").wait(TableName=self.naive_table,
                                                   WaiterConfig={"Delay": 1, "MaxAttempts": 120})

    def delete(self) -> None:
        """Delete both demo tables; what could not be deleted is noted in ``cleanup_errors``.

        A table that does not exist (never created) is fine.
        """
        self.cleanup_errors.clear()
        for table in (self.table, self.naive_table):
            try:
                self.naive.delete_table(TableName=table)
            except self.naive.exceptions.ResourceNotFoundException:
                pass
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                self.cleanup_errors.append(f"{table}: {exc}")

    # --- reads (all strongly consistent: the demo reports what is stored, not what was) ------

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """The item at ``key`` on the demo table, or None."""
        item = self.client.get_item(TableName=self.table, Key=dict(key),
                                    ConsistentRead=True).get("Item")
        return dict(item) if item is not None else None

    def lock(self, lock_key: str) -> dict[str, Any] | None:
        """The lock item ``lock_key``, or None."""
        return self.get(lock_primary_key(self.info.key_attributes, lock_key))

    def record_exists(self, pk: str) -> bool:
        """Whether the account ``pk`` is stored."""
        return self.get(self.info.typed_key(pk, PROFILE)) is not None

    def owns_lock(self, lock_key: str, pk: str) -> bool:
        """Whether the lock ``lock_key`` is stored and names the account ``pk`` as its owner."""
        lock = self.lock(lock_key)
        return lock is not None and untyped(lock[OWNER_ATTR]).get("PK") == pk

    def scan(self, client: Any, table: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of ``table`` (through ``client``) that ``params`` let through."""
        items: list[dict[str, Any]] = []
        for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True,
                                                          **params):
            items.extend(page.get("Items", []))
        return items

    def with_email(self, client: Any, table: str, email: str) -> list[dict[str, Any]]:
        """The records of ``table`` holding ``email``."""
        return self.scan(client, table, FilterExpression="email = :e",
                         ExpressionAttributeValues={":e": {"S": email}})

    def lock_items(self) -> list[dict[str, Any]]:
        """Every lock item on the demo table."""
        return self.scan(self.client, self.table, FilterExpression="begins_with(PK, :p)",
                         ExpressionAttributeValues={":p": {"S": RESERVED_PREFIX}})

    def holder(self, email: str) -> str | None:
        """The key of the account holding ``email``, looked up through its lock."""
        try:
            found = self.Account.get_by_unique("email", email)
        except self.Account.DoesNotExist:
            return None
        return str(found.pk)

    def load(self, pk: str) -> DemoAccount:
        """The account ``pk`` as stored."""
        return self.Account.get(pk, PROFILE, consistent_read=True)

    # --- what a write is made of ---------------------------------------------------------------

    def items(self, sent: list[Sent]) -> tuple[ItemSummary, ...]:
        """The items of the requests ``sent``, one summary each."""
        return tuple(i for s in sent for i in summarize(s.body, self.info.hash_attr))

    def lock_keys(self, instance: Model) -> tuple[str, ...]:
        """The lock keys ``instance``'s current values require, sorted."""
        return tuple(sorted(lock.key for lock in locks_of(self.info, instance).values()))
