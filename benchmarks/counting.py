"""Count the DynamoDB requests a client really sends: operation, items written, items read.

A ``before-send`` handler sees every HTTP attempt after signing (a retry is a second round trip),
so the counts are what went over the wire, not what the library meant to send.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

_WRITE_OPS = {"PutItem", "UpdateItem", "DeleteItem"}
_READ_OPS = {"GetItem"}


@attrs.frozen
class Sent:
    """One request as it went over the wire."""

    operation: str
    #: Items written: 1 for a plain write, the Put/Update/Delete slots of a transaction.
    written: int
    #: Items read: 1 for GetItem, the items of a TransactGetItems or BatchGetItem.
    read: int
    transactional: bool
    #: Each condition-check slot of a transaction (costs like a write, writes nothing).
    checks: int = 0
    #: Capacity units for items up to 1 KB (writes) / 4 KB (reads): a transactional item costs
    #: 2, a plain write 1, a consistent read 1, an eventually consistent read 0.5.
    wcu: float = 0.0
    rcu: float = 0.0


def parse(operation: str, body: bytes | str | None) -> Sent:
    """What one request body asks DynamoDB to do."""
    payload: dict[str, Any] = json.loads(body or b"{}")
    if operation == "TransactWriteItems":
        slots = payload.get("TransactItems", [])
        checks = sum(1 for s in slots if "ConditionCheck" in s)
        return Sent(operation, len(slots) - checks, 0, True, checks, wcu=2.0 * len(slots))
    if operation == "TransactGetItems":
        slots = len(payload.get("TransactItems", []))
        return Sent(operation, 0, slots, True, rcu=2.0 * slots)
    if operation in _WRITE_OPS:
        return Sent(operation, 1, 0, False, wcu=1.0)
    if operation in _READ_OPS:
        return Sent(operation, 0, 1, False, rcu=1.0 if payload.get("ConsistentRead") else 0.5)
    if operation == "BatchGetItem":
        tables = payload.get("RequestItems", {}).values()
        rcu = sum(len(t.get("Keys", [])) * (1.0 if t.get("ConsistentRead") else 0.5)
                  for t in tables)
        keys = sum(len(t.get("Keys", [])) for t in payload.get("RequestItems", {}).values())
        return Sent(operation, 0, keys, False, rcu=rcu)
    if operation == "BatchWriteItem":
        writes = sum(len(t) for t in payload.get("RequestItems", {}).values())
        return Sent(operation, writes, 0, False, wcu=float(writes))
    return Sent(operation, 0, 0, False)


class RequestLog:
    """Records every request of the clients attached to it (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: list[Sent] = []
        self._attached: dict[int, Any] = {}
        #: Items read by Scan and Query requests (their ScannedCount), in total.
        self.scanned = 0

    def attach(self, client: Any) -> None:
        """Count ``client``'s requests from now on (attaching twice counts once)."""
        with self._lock:
            if id(client) in self._attached:
                return
            self._attached[id(client)] = client
        client.meta.events.register("before-send.dynamodb", self._on_send)
        client.meta.events.register("after-call.dynamodb", self._on_answer)

    def close(self) -> None:
        """Stop counting: unregister from every client (clients are shared and cached)."""
        with self._lock:
            clients = list(self._attached.values())
            self._attached.clear()
        for client in clients:
            client.meta.events.unregister("before-send.dynamodb", self._on_send)
            client.meta.events.unregister("after-call.dynamodb", self._on_answer)

    def __enter__(self) -> RequestLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _on_send(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        if isinstance(target, bytes):
            target = target.decode("ascii")
        operation = target.rsplit(".", 1)[-1]
        sent = parse(operation, request.body)
        with self._lock:
            self._sent.append(sent)

    def _on_answer(self, parsed: Any = None, **_: Any) -> None:
        scanned = parsed.get("ScannedCount") if isinstance(parsed, dict) else None
        if scanned:
            with self._lock:
                self.scanned += int(scanned)

    @contextmanager
    def window(self) -> Iterator[list[Sent]]:
        """The requests sent inside the ``with`` block (filled in when it ends)."""
        with self._lock:
            start = len(self._sent)
        captured: list[Sent] = []
        try:
            yield captured
        finally:
            with self._lock:
                captured.extend(self._sent[start:])
