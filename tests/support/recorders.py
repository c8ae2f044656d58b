"""Recorders of what botocore sent: the operation and body of each request, as the tests compare
them with what they expect.

They listen to botocore's events on the clients a test names (``before-send`` fires once per
HTTP request, every attempt, for both senders; ``before-parameter-build`` once per call with the
parameters as the caller passed them), and stop listening when the block or test ends.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

SEND = "before-send.dynamodb"
PARAMS = "before-parameter-build.dynamodb"
#: The operations that only read, left out of :meth:`Wire.writes`.
READS = ("GetItem", "Query", "Scan", "DescribeTable")


def target_of(request: Any) -> str:
    """The request's ``X-Amz-Target`` header as text (``DynamoDB_20120810.PutItem``)."""
    target = request.headers.get("X-Amz-Target", b"")
    return target.decode() if isinstance(target, bytes) else str(target)


def operation_of(request: Any) -> str:
    """The DynamoDB operation a request calls (``PutItem``)."""
    return target_of(request).rsplit(".", 1)[-1]


def body_of(request: Any) -> Any:
    """The request's JSON body, parsed."""
    body = request.body.decode() if isinstance(request.body, bytes) else request.body
    return json.loads(body or "{}")


@contextlib.contextmanager
def listening(clients: Iterable[Any], handler: Callable[..., Any], *, event: str = SEND,
              last: bool = False) -> Iterator[None]:
    """Call ``handler`` on ``event`` of each of ``clients`` (after the other handlers when
    ``last``) until the block ends."""
    registered = []
    try:
        for client in clients:
            events = client.meta.events
            (events.register_last if last else events.register)(event, handler)
            registered.append(events)
        yield
    finally:
        for events in registered:
            events.unregister(event, handler)


@contextlib.contextmanager
def requests_sent(client: Any, event: str = SEND, *,
                  last: bool = False) -> Iterator[list[tuple[str, Any]]]:
    """(operation, parsed body) of every request ``client`` sends inside the block."""
    sent: list[tuple[str, Any]] = []

    def record(request: Any, **_: Any) -> None:
        sent.append((operation_of(request), body_of(request)))

    with listening([client], record, event=event, last=last):
        yield sent


class Wire:
    """Every request the hooked clients send, in order: the operation of each HTTP request
    (``sent``) and the parameters of each call as the caller passed them (``calls``)."""

    def __init__(self) -> None:
        #: Operation names, one per HTTP request (botocore 'before-send').
        self.sent: list[str] = []
        #: (operation, parameters as passed) (botocore 'before-parameter-build').
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.clients: list[Any] = []
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget what was recorded so far (the setup's requests)."""
        self.sent.clear()
        self.calls.clear()

    def on_send(self, request: Any, **_: Any) -> None:
        with self._lock:
            self.sent.append(operation_of(request))

    def on_params(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.calls.append((model.name, copy.deepcopy(dict(params))))

    def writes(self) -> list[str]:
        """The operations sent, reads left out."""
        return [op for op in self.sent if op not in READS]

    def all(self, operation: str) -> list[dict[str, Any]]:
        """The parameters of every call of ``operation``."""
        return [params for op, params in self.calls if op == operation]

    def last(self, operation: str) -> dict[str, Any]:
        """The parameters of the last call of ``operation`` (one must have been sent)."""
        found = self.all(operation)
        assert found, f"no {operation} was sent; sent: {self.sent}"
        return found[-1]

    def hook(self, client: Any) -> None:
        """Record what ``client`` sends until :meth:`unhook`."""
        if any(c is client for c in self.clients):
            return
        client.meta.events.register(SEND, self.on_send, unique_id="support-wire-send")
        client.meta.events.register(PARAMS, self.on_params, unique_id="support-wire-params")
        self.clients.append(client)

    def unhook(self) -> None:
        """Stop recording."""
        for client in self.clients:
            client.meta.events.unregister(SEND, unique_id="support-wire-send")
            client.meta.events.unregister(PARAMS, unique_id="support-wire-params")
        self.clients.clear()
