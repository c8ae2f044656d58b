"""What went over the wire: requests captured from botocore's before-send event, summarized.

The recorder sees the serialized HTTP request, so a captured :class:`Sent` is exactly what
DynamoDB received; :func:`summarize` turns one into a line per item for reading.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from dynaunique._lock.locks import CREATED_ATTR, OWNER_ATTR, untyped
from dynaunique._write.render import to_json


@attrs.frozen
class Sent:
    """One HTTP request to DynamoDB, as its body went over the wire."""

    operation: str
    body: dict[str, Any]

    @property
    def json(self) -> str:
        """The body as indented JSON."""
        return to_json(self.body)


class WireRecorder:
    """Records the requests a botocore client sends, from botocore's ``before-send`` event.

    The handler sees the serialized HTTP request, so what it records is exactly what DynamoDB
    received (one entry per attempt, resends included).
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._id = f"dynaunique-demo-{uuid.uuid4().hex}"
        self._lock = threading.Lock()
        self._active: list[list[Sent]] = []

    def __enter__(self) -> WireRecorder:
        self._client.meta.events.register("before-send.dynamodb", self._on_send,
                                          unique_id=self._id)
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.meta.events.unregister("before-send.dynamodb", unique_id=self._id)

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        with self._lock:
            if not self._active:
                return
            target = request.headers.get("X-Amz-Target", b"")
            if isinstance(target, bytes):
                target = target.decode("ascii")
            body = request.body
            if isinstance(body, bytes):
                body = body.decode("utf-8")
            sent = Sent(str(target).rpartition(".")[2], json.loads(body or "{}"))
            for window in self._active:
                window.append(sent)

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Sent]]:
        """Collect every request sent while the block runs."""
        window: list[Sent] = []
        with self._lock:
            self._active.append(window)
        try:
            yield window
        finally:
            with self._lock:
                self._active.remove(window)


def comparable(request: Mapping[str, Any]) -> Any:
    """``request`` without what legitimately differs between a dry run and the real send.

    That is the per-call ``ClientRequestToken`` and the lock items' ``created`` time (taken when
    the write is planned). Everything else must be identical.
    """
    body = json.loads(to_json(request))
    body.pop("ClientRequestToken", None)
    body.pop("Operation", None)
    for entry in body.get("TransactItems", []):
        for operation in entry.values():
            item = operation.get("Item")
            if isinstance(item, dict) and CREATED_ATTR in item and OWNER_ATTR in item:
                item[CREATED_ATTR] = {"S": "<created>"}
    return body


@attrs.frozen
class ItemSummary:
    """One item of a request in a line: its action, the item's hash key, its condition."""

    action: str
    key: str
    #: The ConditionExpression with its placeholders filled in, for reading (not for sending).
    condition: str


_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def readable_condition(params: Mapping[str, Any]) -> str:
    """A request item's ConditionExpression with names and values substituted.

    ``attribute_not_exists(#g0) OR (#g1.#g0 = :g0 ...)`` →
    ``attribute_not_exists(PK) OR (owner.PK = 'ACCT#a1f9c3' ...)``.
    """
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})

    def fill(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in names:
            return str(names[token])
        if token in values:
            return repr(untyped(values[token]))
        return token

    return _PLACEHOLDER.sub(fill, str(params.get("ConditionExpression", "")))


def summarize(request: Mapping[str, Any], hash_attr: str) -> tuple[ItemSummary, ...]:
    """The items of a TransactWriteItems (or single write) request, one summary each.

    ``hash_attr`` is the table's hash-key attribute name, which identifies each item.
    """
    entries: list[tuple[str, Mapping[str, Any]]] = []
    if "TransactItems" in request:
        for entry in request["TransactItems"]:
            ((action, params),) = entry.items()
            entries.append((action, params))
    else:
        action = str(request.get("Operation", "?")).removesuffix("Item")
        entries.append((action, request))
    out = []
    for action, params in entries:
        key = params.get("Key") or params.get("Item") or {}
        shown = str(untyped(key[hash_attr])) if hash_attr in key else "?"
        out.append(ItemSummary(action, shown, readable_condition(params)))
    return tuple(out)
