"""Global tables in the local server: replicas per region, replicated as DynamoDB replicates them.

:class:`Replicas` is a WSGI middleware the local server puts in front of
:class:`dynaunique.testing._server_rules.DynamoRules`, inside its one request lock. moto keeps one
backend per region (the region of a request's SigV4 credential scope), so a replica is the same
table name in another region's backend; this middleware only ever talks to moto through its JSON
API, with the credential scope rewritten to the replica's region.

- ``UpdateTable`` with ``ReplicaUpdates: [{"Create": {"RegionName": R}}]`` makes a table global:
  the table is created in ``R`` with the same keys, indexes and stream setting, and its items are
  copied. ``{"Delete": {"RegionName": R}}`` drops a replica. ``MultiRegionConsistency``
  (``"EVENTUAL"``, the default, or ``"STRONG"``) is taken with the first replica, as on AWS.
- ``DescribeTable`` and ``UpdateTable`` answers of a replica carry ``Replicas`` (the other
  regions, ``ACTIVE``), ``GlobalTableVersion`` ``2019.11.21`` and ``MultiRegionConsistency``.
- After each successful write (``PutItem``, ``UpdateItem``, ``DeleteItem``, ``BatchWriteItem``,
  ``TransactWriteItems``), the new state of every written item is read back in the region that
  wrote it and replicated to every other replica: at once for ``STRONG``; for ``EVENTUAL`` after
  the replication delay (``POST /dynaunique-api/replication`` ``{"delay": seconds}``, default 0;
  a new delay applies to the versions in flight too), applied before the first request served
  once it is due. Conflicts are settled last writer
  wins: a replicated version is dropped where the item was written later. A replicated write is
  an ordinary write of the replica, so its stream carries it.
- On a ``STRONG`` table ``TransactWriteItems`` and ``TransactGetItems`` are refused with a
  ``ValidationException``, as AWS refuses them.

Only the standard library; no state outside this object (reset with ``POST /moto-api/reset``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dynaunique.testing._replica_parts import (
    REPLICATION_PATH,
    SCOPE,
    Group,
    Pending,
    call_as,
    operation_of,
    region_of,
    tables_of,
    validation,
    written_keys,
)
from dynaunique.testing._server_rules import _Answer, _call, _read_body

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = ["Replicas"]

_WRITES = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_STRONG_REFUSED = frozenset({"TransactWriteItems", "TransactGetItems"})
_STRONG_MESSAGE = ("{operation} is not supported for global tables configured with "
                   "multi-Region strong consistency (MRSC): table {table}")
_MODES = ("EVENTUAL", "STRONG")

class Replicas:
    """WSGI middleware simulating DynamoDB global tables (see the module's docstring).

    Args:
        app: the application behind it (the DynamoDB rules, then moto).
        clock: monotonic seconds; injectable.
    """

    def __init__(self, app: WSGIApplication, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._app = app
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget every global table and pending replication; delay back to 0."""
        self.delay = 0.0
        self._groups: dict[str, Group] = {}
        self._pending: list[Pending] = []
        self._versions: dict[tuple[str, str, str], tuple[int, str]] = {}
        self._sequence = 0
        self.replicated = 0

    # --- the WSGI entry --------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:  # noqa: C901  # the WSGI entry: one dispatch, in order
        path = environ.get("PATH_INFO", "")
        if path == REPLICATION_PATH:
            return self._control(environ).send(start_response)
        if path == "/moto-api/reset":
            self.reset()   # and moto resets behind
        operation = operation_of(environ)
        if operation is None:   # not a DynamoDB request
            return self._app(environ, start_response)
        self._apply_due(environ)
        if not self._groups and operation != "UpdateTable":
            return self._app(environ, start_response)
        region = region_of(environ)
        body = _read_body(environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._app(environ, start_response)
        if not isinstance(request, dict) or region is None:
            return self._app(environ, start_response)
        if operation == "UpdateTable" and "ReplicaUpdates" in request:
            return self._update_replicas(request, region, environ).send(start_response)
        tables = tables_of(operation, request)
        global_tables = [t for t in tables if self._member(t, region)]
        if not global_tables:
            return self._app(environ, start_response)
        if operation in _STRONG_REFUSED:
            for table in global_tables:
                if self._groups[table].mode == "STRONG":
                    return _Answer.json("400 Bad Request", {
                        "__type": "com.amazonaws.dynamodb.v20120810#ValidationException",
                        "message": _STRONG_MESSAGE.format(operation=operation, table=table),
                    }).send(start_response)
        answer = _call(self._app, environ)
        if answer.status.startswith("200"):
            if operation in ("DescribeTable", "UpdateTable"):
                answer = self._describe(answer, global_tables[0], region)
            elif operation == "DeleteTable":
                self._leave(global_tables[0], region)
            elif operation in _WRITES:
                self._replicate(operation, request, region, environ)
        return answer.send(start_response)

    def _member(self, table: str, region: str) -> bool:
        group = self._groups.get(table)
        return group is not None and region in group.regions

    # --- control ---------------------------------------------------------------------------

    def _control(self, environ: WSGIEnvironment) -> _Answer:
        self._apply_due(environ)
        try:
            if environ.get("REQUEST_METHOD") == "POST":
                delay = float(json.loads(_read_body(environ) or b"{}")["delay"])
                if not delay >= 0:
                    raise ValueError(f"delay must not be negative, not {delay!r}")
                self.delay = delay
                for version in self._pending:   # in flight: due ``delay`` after its write
                    version.due = version.written + delay
        except (ValueError, KeyError, TypeError) as exc:
            return _Answer.json("400 Bad Request", {"error": str(exc)})
        return _Answer.json("200 OK", self.state())

    def state(self) -> dict[str, Any]:
        """The replication delay, the global tables and how many versions are still pending."""
        return {
            "delay": self.delay,
            "tables": {name: {"regions": sorted(g.regions), "mode": g.mode}
                       for name, g in sorted(self._groups.items())},
            "pending": len(self._pending),
            "replicated": self.replicated,
        }

    # --- making a table global -------------------------------------------------------------

    def _update_replicas(self, request: dict[str, Any], region: str,
                         environ: WSGIEnvironment) -> _Answer:
        table = str(request.get("TableName", ""))
        rest = {k: v for k, v in request.items()
                if k not in ("ReplicaUpdates", "MultiRegionConsistency")}
        if len(rest) > 1:  # other settings change too: moto applies them first
            answer = self._inner(environ, "UpdateTable", rest, region)
            if not answer.status.startswith("200"):
                return answer
        described = self._inner(environ, "DescribeTable", {"TableName": table}, region)
        if not described.status.startswith("200"):
            return described
        source = json.loads(described.body)["Table"]
        group = self._groups.get(table)
        mode = request.get("MultiRegionConsistency")
        if mode is not None and mode not in _MODES:
            return validation(f"MultiRegionConsistency must be one of {list(_MODES)}, "
                               f"not {mode!r}")
        if group is not None and mode is not None and mode != group.mode:
            return validation("MultiRegionConsistency can only be set when the first replica "
                               f"is created; table {table} is {group.mode}")
        if group is None:
            scope = SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
            group = Group({region}, mode or "EVENTUAL", scope.group(1) if scope else "testing",
                           [k["AttributeName"] for k in source["KeySchema"]])
        for update in request.get("ReplicaUpdates") or []:
            if "Create" in update:
                target = str(update["Create"].get("RegionName", ""))
                if target in group.regions:
                    return validation(f"Failed to create a the new replica of table with name: "
                                       f"'{table}' because one or more replicas already "
                                       f"existed as tables.")
                failed = self._create_replica(source, target, region, environ)
                if failed is not None:
                    return failed
                group.regions.add(target)
            elif "Delete" in update:
                target = str(update["Delete"].get("RegionName", ""))
                if target not in group.regions:
                    return validation(f"Replica in region {target} of table {table} not found")
                self._inner(environ, "DeleteTable", {"TableName": table}, target)
                group.regions.discard(target)
        self._groups[table] = group
        if len(group.regions) < 2:
            del self._groups[table]
        answer = self._inner(environ, "DescribeTable", {"TableName": table}, region)
        payload = json.loads(answer.body)
        return self._describe(
            _Answer.json("200 OK", {"TableDescription": payload["Table"]}), table, region)

    def _create_replica(self, source: dict[str, Any], target: str, region: str,
                        environ: WSGIEnvironment) -> _Answer | None:
        table = source["TableName"]
        create: dict[str, Any] = {
            "TableName": table,
            "KeySchema": source["KeySchema"],
            "AttributeDefinitions": source["AttributeDefinitions"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        for field in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if source.get(field):
                create[field] = [
                    {k: v for k, v in index.items() if k in ("IndexName", "KeySchema",
                                                                "Projection")}
                    for index in source[field]]
        if source.get("StreamSpecification"):
            create["StreamSpecification"] = source["StreamSpecification"]
        answer = self._inner(environ, "CreateTable", create, target)
        if not answer.status.startswith("200"):
            return answer
        start: dict[str, Any] | None = None
        while True:
            scan: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
            if start:
                scan["ExclusiveStartKey"] = start
            page = json.loads(self._inner(environ, "Scan", scan, region).body)
            for item in page.get("Items", []):
                self._inner(environ, "PutItem", {"TableName": table, "Item": item}, target)
            start = page.get("LastEvaluatedKey")
            if not start:
                return None

    def _describe(self, answer: _Answer, table: str, region: str) -> _Answer:
        group = self._groups.get(table)
        if group is None:
            return answer
        payload = json.loads(answer.body)
        for root in ("Table", "TableDescription"):
            if root in payload:
                payload[root]["Replicas"] = [
                    {"RegionName": r, "ReplicaStatus": "ACTIVE"}
                    for r in sorted(group.regions) if r != region]
                payload[root]["GlobalTableVersion"] = "2019.11.21"
                payload[root]["MultiRegionConsistency"] = group.mode
        return _Answer.json(answer.status, payload)

    def _leave(self, table: str, region: str) -> None:
        group = self._groups[table]
        group.regions.discard(region)
        if len(group.regions) < 2:
            del self._groups[table]

    # --- replication -----------------------------------------------------------------------

    def _replicate(self, operation: str, request: dict[str, Any], region: str,
                   environ: WSGIEnvironment) -> None:
        for table, key in written_keys(operation, request, self._groups, region):
            group = self._groups[table]
            self._sequence += 1
            stamp = (self._sequence, region)
            key_text = json.dumps(key, sort_keys=True)
            self._versions[(region, table, key_text)] = stamp
            got = json.loads(self._inner(environ, "GetItem", {
                "TableName": table, "Key": key, "ConsistentRead": True}, region).body)
            item = got.get("Item")
            written = self._clock()
            due = written + (0.0 if group.mode == "STRONG" else self.delay)
            for other in sorted(group.regions - {region}):
                self._pending.append(Pending(due, stamp, other, table, key, item, written))
        if any(self._groups[t].mode == "STRONG" for t in tables_of(operation, request)
               if t in self._groups):
            self._apply_due(environ)

    def _apply_due(self, environ: WSGIEnvironment) -> None:
        if not self._pending:
            return
        now = self._clock()
        due = [p for p in self._pending if p.due <= now]
        if not due:
            return
        self._pending = [p for p in self._pending if p.due > now]
        for version in due:
            group = self._groups.get(version.table)
            if group is None or version.region not in group.regions:
                continue
            slot = (version.region, version.table, json.dumps(version.key, sort_keys=True))
            if self._versions.get(slot, (0, "")) > version.stamp:
                continue  # the replica was written later: last writer wins
            self._versions[slot] = version.stamp
            if version.item is None:
                self._inner(environ, "DeleteItem", {"TableName": version.table,
                            "Key": version.key}, version.region, group.access_key)
            else:
                self._inner(environ, "PutItem", {"TableName": version.table,
                            "Item": version.item}, version.region, group.access_key)
            self.replicated += 1

    def _inner(self, environ: WSGIEnvironment, operation: str, request: dict[str, Any],
               region: str, access_key: str | None = None) -> _Answer:
        """Call the application behind with one request, signed for ``region``."""
        return call_as(self._app, environ, operation, request, region, access_key)
