"""The same lock-item pattern written by hand with boto3: the bar dynaunique is measured against.

This is what a careful engineer writes without a library: one TransactWriteItems per write that
touches a unique value (record + lock puts/deletes, each guarded), a plain conditional write when no
lock changes, a ClientRequestToken on every transaction, TransactionConflict retried, a failed
condition mapped to "taken" or "changed". It writes the very layout dynaunique writes (lock key
``UNIQ#<NAME>#<value>``, range key ``LOCK``, ``owner`` map, model, constraint, value, created), so
payloads are the same size. What it leaves out, a library must not: values containing ``#`` are
not escaped, there is no size guard, and errors carry no structured owner.
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

Item = dict[str, Any]

_LOCK_GUARD_NEW = "attribute_not_exists(PK)"
_OWNED = "#o.PK = :opk AND #o.SK = :osk"


class Taken(Exception):
    """A unique value is held by another record."""

    def __init__(self, field: str, owner: Any) -> None:
        super().__init__(f"{field} is taken (held by {owner})")
        self.field = field
        self.owner = owner


class Changed(Exception):
    """The record changed (or exists, or is gone) since it was read."""


def make_client(endpoint: str, *, tuned: bool = False) -> Any:
    """A boto3 DynamoDB client: boto3's defaults, or ``tuned`` like dynaunique's own client
    (parameter validation and botocore's retries off)."""
    config = Config(parameter_validation=False, retries={"total_max_attempts": 1}) if tuned \
        else None
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                        config=config)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class HandWritten:
    """Accounts with unique email (case-folded) and username, written with raw boto3 calls."""

    FIELDS = (("email", "EMAIL"), ("username", "USERNAME"))

    def __init__(self, client: Any, table: str, model: str = "BenchAccount") -> None:
        self.client = client
        self.table = table
        self.model = model

    # --- building blocks ---------------------------------------------------------------------

    @staticmethod
    def normalized(field: str, value: str) -> str:
        """The value a lock protects: emails compare case-insensitively."""
        return value.casefold() if field == "email" else value

    def lock_key(self, field: str, value: str) -> Item:
        name = dict(self.FIELDS)[field]
        return {"PK": {"S": f"UNIQ#{name}#{self.normalized(field, value)}"}, "SK": {"S": "LOCK"}}

    def _lock_put(self, field: str, value: str, owner: Item, now: str) -> Item:
        normalized = self.normalized(field, value)
        item = {
            **self.lock_key(field, value),
            "owner": {"M": owner},
            "model": {"S": self.model},
            "constraint": {"S": dict(self.FIELDS)[field]},
            "value": {"S": normalized},
            "created": {"S": now},
        }
        return {"Put": {"TableName": self.table, "Item": item,
                        "ConditionExpression": _LOCK_GUARD_NEW,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}

    def _lock_delete(self, field: str, value: str, owner: Item) -> Item:
        return {"Delete": {"TableName": self.table, "Key": self.lock_key(field, value),
                           "ConditionExpression": f"attribute_not_exists(PK) OR ({_OWNED})",
                           "ExpressionAttributeNames": {"#o": "owner"},
                           "ExpressionAttributeValues": {":opk": owner["PK"],
                                                         ":osk": owner["SK"]}}}

    @staticmethod
    def _unchanged(item: Item) -> dict[str, Any]:
        """Guard: the record still holds the unique values it was read with."""
        return {"ConditionExpression": "attribute_exists(PK) AND #e = :e AND #u = :u",
                "ExpressionAttributeNames": {"#e": "email", "#u": "username"},
                "ExpressionAttributeValues": {":e": item["email"], ":u": item["username"]}}

    def _transact(self, items: list[Item], fields: list[str | None]) -> None:
        """Send one transaction; ``fields[i]`` names the unique field slot *i* locks, if any."""
        token = uuid.uuid4().hex
        for attempt in range(8):
            try:
                self.client.transact_write_items(TransactItems=items, ClientRequestToken=token)
                return
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
                reasons = exc.response.get("CancellationReasons", [])
                codes = [r.get("Code") for r in reasons]
                if "ConditionalCheckFailed" in codes:
                    for slot, reason in enumerate(reasons):
                        if reason.get("Code") == "ConditionalCheckFailed" and fields[slot]:
                            owner = reason.get("Item", {}).get("owner")
                            raise Taken(fields[slot] or "", owner) from exc
                    raise Changed("the record changed since it was read") from exc
                if "TransactionConflict" not in codes:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2 ** attempt))
        raise Changed("kept conflicting")

    # --- operations --------------------------------------------------------------------------

    def create(self, pk: str, email: str, username: str, name: str | None = None) -> Item:
        """Create an account and its two locks: one transaction, 3 items."""
        key = {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}
        item: Item = {**key, "email": {"S": email}, "username": {"S": username}}
        if name is not None:
            item["name"] = {"S": name}
        now = _now()
        self._transact(
            [{"Put": {"TableName": self.table, "Item": item,
                      "ConditionExpression": "attribute_not_exists(PK)"}},
             self._lock_put("email", email, key, now),
             self._lock_put("username", username, key, now)],
            [None, "email", "username"],
        )
        return item

    def change_email(self, item: Item, email: str) -> Item:
        """Move a loaded record to a new email: record put + new lock put + old lock delete."""
        old = item["email"]["S"]
        new_item = {**item, "email": {"S": email}}
        key = {"PK": item["PK"], "SK": item["SK"]}
        if self.normalized("email", old) == self.normalized("email", email):
            self.client.put_item(TableName=self.table, Item=new_item, **self._unchanged(item))
            return new_item
        self._transact(
            [{"Put": {"TableName": self.table, "Item": new_item, **self._unchanged(item)}},
             self._lock_put("email", email, key, _now()),
             self._lock_delete("email", old, key)],
            [None, "email", None],
        )
        return new_item

    def rename(self, item: Item, name: str) -> Item:
        """Change a field no lock depends on: one plain UpdateItem, no transaction."""
        self.client.update_item(
            TableName=self.table, Key={"PK": item["PK"], "SK": item["SK"]},
            UpdateExpression="SET #n = :n", ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeNames={"#n": "name"}, ExpressionAttributeValues={":n": {"S": name}},
        )
        return {**item, "name": {"S": name}}

    def delete(self, item: Item) -> None:
        """Delete a loaded record and its locks: one transaction, 3 items."""
        key = {"PK": item["PK"], "SK": item["SK"]}
        self._transact(
            [{"Delete": {"TableName": self.table, "Key": key, **self._unchanged(item)}},
             self._lock_delete("email", item["email"]["S"], key),
             self._lock_delete("username", item["username"]["S"], key)],
            [None, None, None],
        )

    def delete_by_key(self, pk: str) -> None:
        """Delete a record known only by its key: a consistent read for its values, then delete."""
        got = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                   Key={"PK": {"S": pk}, "SK": {"S": "PROFILE"}})
        if "Item" in got:
            self.delete(got["Item"])

    def get_by_email(self, email: str) -> Item | None:
        """Consistent lookup through the lock: lock, then owner (checked to still hold it)."""
        lock = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                    Key=self.lock_key("email", email)).get("Item")
        if lock is None:
            return None
        record = self.client.get_item(TableName=self.table, ConsistentRead=True,
                                      Key=lock["owner"]["M"]).get("Item")
        if record is None or self.normalized("email", record["email"]["S"]) != \
                self.normalized("email", email):
            return None
        return dict(record)

    def swap_emails(self, a: Item, b: Item) -> tuple[Item, Item]:
        """Two loaded records exchange emails: 2 record puts + 2 lock owner transfers."""
        a_key = {"PK": a["PK"], "SK": a["SK"]}
        b_key = {"PK": b["PK"], "SK": b["SK"]}
        new_a = {**a, "email": b["email"]}
        new_b = {**b, "email": a["email"]}
        now = _now()

        def transfer(value: str, old_owner: Item, new_owner: Item) -> Item:
            put = self._lock_put("email", value, new_owner, now)["Put"]
            put["ConditionExpression"] = _OWNED
            put["ExpressionAttributeNames"] = {"#o": "owner"}
            put["ExpressionAttributeValues"] = {":opk": old_owner["PK"], ":osk": old_owner["SK"]}
            return {"Put": put}

        self._transact(
            [{"Put": {"TableName": self.table, "Item": new_a, **self._unchanged(a)}},
             {"Put": {"TableName": self.table, "Item": new_b, **self._unchanged(b)}},
             transfer(a["email"]["S"], a_key, b_key),
             transfer(b["email"]["S"], b_key, a_key)],
            [None, None, None, None],
        )
        return new_a, new_b
