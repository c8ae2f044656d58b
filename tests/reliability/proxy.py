"""A fault-injecting HTTP proxy on 127.0.0.1 that sits between boto3 and the local server.

Point a model at :attr:`FaultProxy.url` (``dynaunique.testing.use_endpoint``) and every DynamoDB
request passes through it. Each request is recorded (operation, parsed JSON body, the fault
applied) and, when a queued :class:`Rule` matches its operation, one fault is injected:

* ``DROP_BEFORE`` — read the request, then close the connection without forwarding it: the
  server never sees the write, the client sees a dropped connection;
* ``DROP_AFTER`` — forward it, let the server apply it, then close without replying: the write
  happened, the client cannot know;
* ``DELAY_BEFORE`` / ``DELAY_AFTER`` — sleep before forwarding / before replying (longer than
  the client's read timeout, this is a timeout before or after the server applied the write).

A rule may carry ``on_applied``, a callable run after the server answered and before the
response is dropped or delayed: another client's write slipped in between an applied write and
its resend. The proxy binds 127.0.0.1 only and forwards to one upstream URL.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import attrs

#: The DynamoDB operations that write.
WRITE_OPERATIONS = frozenset({"TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem",
                              "BatchWriteItem"})
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server",
               "date", "proxy-connection", "te", "trailer", "upgrade"}


class Fault(enum.Enum):
    """What the proxy does to one matching request."""

    DROP_BEFORE = "drop-before"
    DROP_AFTER = "drop-after"
    DELAY_BEFORE = "delay-before"
    DELAY_AFTER = "delay-after"


@attrs.define
class Rule:
    """Inject ``fault`` into the next ``times`` requests whose operation is in ``operations``."""

    fault: Fault
    times: int = 1
    operations: frozenset[str] = WRITE_OPERATIONS
    delay: float = 0.0
    on_applied: Callable[[], None] | None = None
    #: The probability that a matching request gets the fault (and uses up one of ``times``).
    chance: float = 1.0


@attrs.frozen
class Recorded:
    """One request that reached the proxy."""

    seq: int
    operation: str
    body: dict[str, Any]
    fault: Fault | None
    #: The upstream's HTTP status, or None when the request was never forwarded.
    status: int | None

    @property
    def token(self) -> str | None:
        """The request's ``ClientRequestToken`` (TransactWriteItems only)."""
        token = self.body.get("ClientRequestToken")
        return token if isinstance(token, str) else None


class FaultProxy:
    """A threaded loopback proxy in front of ``upstream`` that can drop or delay requests."""

    def __init__(self, upstream: str, *, seed: int = 0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
            raise ValueError(f"the proxy only forwards to a loopback server, not {upstream!r}")
        self._upstream = (parsed.hostname, parsed.port)
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._random = random.Random(seed)
        self._records: list[Recorded] = []
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: How many faults of each kind were injected since the proxy started.
        self.injected: dict[Fault, int] = dict.fromkeys(Fault, 0)
        #: Exceptions raised by ``on_applied`` hooks (a test should assert this stays empty).
        self.hook_errors: list[BaseException] = []

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The proxy's endpoint URL, ``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> str:
        """Bind a free port on 127.0.0.1, serve in a daemon thread, return :attr:`url`."""
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fault-proxy", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- control ---------------------------------------------------------------------------------

    def inject(self, fault: Fault, *, times: int = 1,
               operations: Iterable[str] = WRITE_OPERATIONS, delay: float = 0.0,
               on_applied: Callable[[], None] | None = None, chance: float = 1.0) -> Rule:
        """Queue a rule; rules are consumed in order, each request consuming at most one.

        With ``chance`` below 1 each matching request gets the fault with that probability (a
        lossy network: ``inject(Fault.DROP_AFTER, times=10**9, chance=0.02)``).
        """
        rule = Rule(fault, times, frozenset(operations), delay, on_applied, chance)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Forget queued rules and recorded requests."""
        with self._lock:
            self._rules.clear()
            self._records.clear()
            self.hook_errors.clear()

    def pending_faults(self) -> int:
        """How many injections are still queued."""
        with self._lock:
            return sum(r.times for r in self._rules)

    def records(self, operations: Iterable[str] | None = None) -> list[Recorded]:
        """The recorded requests, oldest first, optionally only those of ``operations``."""
        wanted = set(operations) if operations is not None else None
        with self._lock:
            return [r for r in self._records if wanted is None or r.operation in wanted]

    def writes(self) -> list[Recorded]:
        """The recorded write requests."""
        return self.records(WRITE_OPERATIONS)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until no request is being held or forwarded (a delayed one may still land)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self._in_flight} requests still in flight")
                self._idle.wait(remaining)

    # --- used by the handler -------------------------------------------------------------------

    def _begin(self, operation: str) -> Rule | None:
        with self._lock:
            self._in_flight += 1
            for rule in self._rules:
                if rule.times > 0 and operation in rule.operations:
                    if rule.chance < 1.0 and self._random.random() >= rule.chance:
                        continue
                    rule.times -= 1
                    self.injected[rule.fault] += 1
                    return rule
            return None

    def _record(self, operation: str, body: dict[str, Any], rule: Rule | None,
                status: int | None) -> None:
        # Recorded before the client hears anything, so a test that has its answer sees it.
        with self._lock:
            self._records.append(Recorded(len(self._records), operation, body,
                                          rule.fault if rule is not None else None, status))

    def _hook_failed(self, exc: BaseException) -> None:
        with self._lock:
            self.hook_errors.append(exc)

    def _end(self) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r.times > 0]
            self._in_flight -= 1
            self._idle.notify_all()

    def _forward(self, method: str, path: str, body: bytes,
                 headers: list[tuple[str, str]]) -> tuple[int, list[tuple[str, str]], bytes]:
        host, port = self._upstream
        connection = http.client.HTTPConnection(host, port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=dict(headers))
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, applies the matching fault, forwards, and replies (or does not)."""

    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the proxy records what the tests need."""

    def do_POST(self) -> None:
        """Every DynamoDB request is a POST."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        target = self.headers.get("X-Amz-Target") or ""
        operation = target.rpartition(".")[2]
        try:
            parsed = json.loads(body) if body else {}
        except ValueError:
            parsed = {}
        proxy = self.owner
        rule = proxy._begin(operation)
        try:
            fault = rule.fault if rule is not None else None
            if fault is Fault.DROP_BEFORE:
                proxy._record(operation, parsed, rule, None)
                self._drop()
                return
            if fault is Fault.DELAY_BEFORE and rule is not None:
                time.sleep(rule.delay)
            headers = [(k, v) for k, v in self.headers.items()
                       if k.lower() not in ("connection", "keep-alive", "proxy-connection")]
            status, response_headers, response_body = proxy._forward("POST", self.path, body,
                                                                     headers)
            if rule is not None and rule.on_applied is not None:
                try:
                    rule.on_applied()
                except Exception as exc:  # surfaced to the test through hook_errors
                    proxy._hook_failed(exc)
            proxy._record(operation, parsed, rule, status)
            if fault is Fault.DROP_AFTER:
                self._drop()
                return
            if fault is Fault.DELAY_AFTER and rule is not None:
                time.sleep(rule.delay)
            self._reply(status, response_headers, response_body)
        finally:
            proxy._end()

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        with contextlib.suppress(OSError):  # the client may have timed out and gone
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in _HOP_BY_HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

    def _drop(self) -> None:
        # Close without a single byte of response: the client cannot tell whether it applied.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.shutdown(2)
