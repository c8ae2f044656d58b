"""The pieces of the local server's global tables (:mod:`dynaunique.testing._replicas`).

What a request names and writes, a global table's group and a pending replicated version, and
how a request is sent to the application behind, signed for a region. Only the standard library.
"""

from __future__ import annotations

import io
import json
import re
from typing import TYPE_CHECKING, Any

from dynaunique.testing._server_rules import _Answer, _call

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

__all__ = [
    "REPLICATION_PATH",
    "SCOPE",
    "Group",
    "Pending",
    "call_as",
    "operation_of",
    "region_of",
    "tables_of",
    "validation",
    "written_keys",
]

#: ``POST`` ``{"delay": seconds}`` here to set the replication delay of eventual consistency.
REPLICATION_PATH = "/dynaunique-api/replication"
#: The access key and region of a SigV4 ``Authorization`` header's credential scope.
SCOPE = re.compile(r"Credential=([^/,\s]+)/(\d{8})/([a-z0-9-]+)/")


class Group:
    """One global table: its regions and its mode."""

    def __init__(self, regions: set[str], mode: str, access_key: str,
                 key_names: list[str]) -> None:
        self.regions = regions
        self.mode = mode
        self.access_key = access_key
        self.key_names = key_names


class Pending:
    """One replicated version of one item, on its way to one region."""

    def __init__(self, due: float, stamp: tuple[int, str], region: str, table: str,
                 key: dict[str, Any], item: dict[str, Any] | None, written: float) -> None:
        self.due = due
        #: When the write it replicates was made (a new delay makes it due that long after).
        self.written = written
        self.stamp = stamp
        self.region = region
        self.table = table
        self.key = key
        self.item = item

def validation(message: str) -> _Answer:
    return _Answer.json("400 Bad Request", {
        "__type": "com.amazonaws.dynamodb.v20120810#ValidationException", "message": message})


def operation_of(environ: WSGIEnvironment) -> str | None:
    """The DynamoDB operation of a request (``PutItem``), or None: not a DynamoDB request."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    prefix = "DynamoDB_20120810."
    return target[len(prefix):] if target.startswith(prefix) else None


def region_of(environ: WSGIEnvironment) -> str | None:
    scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return scope.group(3) if scope else None


def tables_of(operation: str, request: dict[str, Any]) -> list[str]:
    """The tables a request names."""
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return list(request.get("RequestItems") or {})
    if operation in ("TransactWriteItems", "TransactGetItems"):
        names = []
        for action in request.get("TransactItems") or []:
            for body in action.values():
                if isinstance(body, dict) and "TableName" in body:
                    names.append(str(body["TableName"]))
        return list(dict.fromkeys(names))
    name = request.get("TableName")
    return [str(name)] if name else []


def written_keys(operation: str, request: dict[str, Any], groups: dict[str, Group],  # noqa: C901  # one branch per write operation
                  region: str) -> list[tuple[str, dict[str, Any]]]:
    """(table, key) of every item a successful write request wrote, on a global table."""
    written: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = []
    if operation == "PutItem":
        written.append((request["TableName"], None, request.get("Item")))
    elif operation in ("UpdateItem", "DeleteItem"):
        written.append((request["TableName"], request.get("Key"), None))
    elif operation == "BatchWriteItem":
        for table, writes in (request.get("RequestItems") or {}).items():
            for write in writes:
                if "PutRequest" in write:
                    written.append((table, None, write["PutRequest"].get("Item")))
                elif "DeleteRequest" in write:
                    written.append((table, write["DeleteRequest"].get("Key"), None))
    elif operation == "TransactWriteItems":
        for action in request.get("TransactItems") or []:
            if "Put" in action:
                written.append((action["Put"]["TableName"], None, action["Put"].get("Item")))
            for kind in ("Update", "Delete"):
                if kind in action:
                    written.append((action[kind]["TableName"], action[kind].get("Key"), None))
    keys = []
    for table, key, item in written:
        group = groups.get(table)
        if group is None or region not in group.regions:
            continue
        if key is None:
            key = {name: (item or {})[name] for name in group.key_names}
        keys.append((table, key))
    return keys


def call_as(app: WSGIApplication, environ: WSGIEnvironment, operation: str,
            request: dict[str, Any], region: str, access_key: str | None = None) -> _Answer:
    """Call ``app`` with one DynamoDB request, signed for ``region`` (and the access key of
    ``environ``'s request unless ``access_key``), on a copy of ``environ``."""
    body = json.dumps(request).encode("utf-8")
    if access_key is None:
        scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        access_key = scope.group(1) if scope else "testing"
    inner = {k: v for k, v in environ.items() if k != "wsgi.input"}
    inner.update({
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/x-amz-json-1.0",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_X_AMZ_TARGET": "DynamoDB_20120810." + operation,
        "HTTP_AUTHORIZATION": (
            f"AWS4-HMAC-SHA256 Credential={access_key}/20240101/{region}/dynamodb/"
            "aws4_request, SignedHeaders=host, Signature=0"),
        "wsgi.input": io.BytesIO(body),
    })
    return _call(app, inner)
