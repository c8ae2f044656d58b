"""A fault-injecting HTTP proxy on 127.0.0.1 that sits between boto3 and the local server.

Point a model at :attr:`FaultProxy.url` (``dynaunique.testing.use_endpoint``) and every DynamoDB
request passes through it. Each request is recorded (operation, parsed JSON body, the fault
applied) and, when a queued :class:`Rule` matches its operation, one fault is injected:

* ``DROP_BEFORE`` — read the request, then close the connection without forwarding it: the
  server never sees the write, the client sees a dropped connection;
* ``DROP_AFTER`` — forward it, let the server apply it, then close without replying: the write
  happened, the client cannot know;
* ``DELAY_BEFORE`` / ``DELAY_AFTER`` — sleep before forwarding / before replying (longer than
  the client's read timeout, this is a timeout before or after the server applied the write; a
  reply held back stops waiting once the client has closed its connection);
* ``THROTTLE`` — answer ``400 ProvisionedThroughputExceededException`` without forwarding, as
  DynamoDB does when a request exceeds the table's capacity: nothing was applied;
* ``CORRUPT`` — forward it, then reply with ``rule.body`` (default ``{}``: an empty item) under
  the true answer's headers, its ``x-amz-crc32`` included: an answer damaged on the way.

Every forwarded request is recorded with its answer's parsed JSON (``Recorded.response``) and
the time it came back (``Recorded.at``, ``time.monotonic()``): the consumed capacity a request
reports, and when.

A rule may carry ``on_applied``, a callable run after the server answered and before the
response is dropped or delayed: another client's write slipped in between an applied write and
its resend. The proxy binds 127.0.0.1 only and forwards to one upstream URL.

**Interleavings.** ``with proxy.intercept(adversary, before=k) as call: obj.save()`` runs
``adversary`` — another writer, typically dynaunique's own API on the same model classes —
*before forwarding* the k-th request of the call under test (or the first request ``when``
matches), then forwards that request: the adversary acts in the gap between two requests of one
call. While the adversary runs, every request that reaches the proxy is its own and passes
straight through (no fault, no count): a re-entrancy flag, so the harness is for one client
thread at a time. ``call.requests`` lists the call's own requests (operation and body), so a test
can assert how many a call sent and what each carried.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import json
import random
import re
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
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
    THROTTLE = "throttle"
    CORRUPT = "corrupt"


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
    #: Only requests this picks (operation, parsed body) match; None: every one of
    #: ``operations``.
    when: Callable[[str, dict[str, Any]], bool] | None = None
    #: The body ``CORRUPT`` replies with instead of the server's.
    body: bytes = b"{}"


@attrs.frozen
class Recorded:
    """One request that reached the proxy."""

    seq: int
    operation: str
    body: dict[str, Any]
    fault: Fault | None
    #: The upstream's HTTP status, or None when the request was never forwarded.
    status: int | None
    #: Sent by an interleaved adversary (``FaultProxy.intercept``), not by the call under test.
    adversary: bool = False
    #: The upstream's answer, parsed (None: not forwarded, or not JSON).
    response: dict[str, Any] | None = None
    #: When the request was recorded (``time.monotonic()``: its answer came back).
    at: float = 0.0
    #: The region the request was signed for (its Authorization header's credential scope).
    region: str | None = None

    @property
    def token(self) -> str | None:
        """The request's ``ClientRequestToken`` (TransactWriteItems only)."""
        token = self.body.get("ClientRequestToken")
        return token if isinstance(token, str) else None


#: Picks the request of the call under test to run the adversary before: (operation, body, its
#: 1-based index in the call).
RequestMatch = Callable[[str, dict[str, Any], int], bool]


@attrs.define
class Interception:
    """One call under test (see :meth:`FaultProxy.intercept`): its requests, and the adversary
    run in one of its gaps."""

    adversary: Callable[[], None] | None = None
    before: int | None = None
    when: RequestMatch | None = None
    #: The requests of the call under test, oldest first (the adversary's are not here).
    requests: list[Recorded] = attrs.field(factory=list)
    #: The requests the adversary sent, oldest first.
    adversary_requests: list[Recorded] = attrs.field(factory=list)
    #: The 1-based index of the call's request the adversary ran before (None: it did not run).
    fired_before: int | None = None
    #: What the adversary raised, if anything (the call's request is forwarded regardless).
    adversary_error: BaseException | None = None
    _arrived: int = 0

    @property
    def fired(self) -> bool:
        """Whether the adversary ran."""
        return self.fired_before is not None

    def operations(self) -> list[str]:
        """The operations of the call's requests, in order."""
        return [r.operation for r in self.requests]

    def writes(self) -> list[Recorded]:
        """The call's write requests."""
        return [r for r in self.requests if r.operation in WRITE_OPERATIONS]


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
        self._scheme = "http"
        self._thread: threading.Thread | None = None
        #: How many faults of each kind were injected since the proxy started.
        self.injected: dict[Fault, int] = dict.fromkeys(Fault, 0)
        #: Exceptions raised by ``on_applied`` hooks (a test should assert this stays empty).
        self.hook_errors: list[BaseException] = []
        self._interception: Interception | None = None
        # Set while an adversary runs: every request then is the adversary's own.
        self._attacking = False

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def upstream(self) -> str:
        """The URL of the server the proxy forwards to."""
        host, port = self._upstream
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        """The proxy's endpoint URL, ``http://127.0.0.1:<port>``."""
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"{self._scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self, tls: ssl.SSLContext | None = None) -> str:
        """Bind a free port on 127.0.0.1, serve in a daemon thread, return :attr:`url`
        (``https://`` with a server-side ``tls`` context: the proxy is then a TLS endpoint)."""
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
            self._scheme = "https"
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
               on_applied: Callable[[], None] | None = None, chance: float = 1.0,
               when: Callable[[str, dict[str, Any]], bool] | None = None,
               body: bytes = b"{}") -> Rule:
        """Queue a rule; rules are consumed in order, each request consuming at most one.

        With ``chance`` below 1 each matching request gets the fault with that probability (a
        lossy network: ``inject(Fault.DROP_AFTER, times=10**9, chance=0.02)``). ``when`` narrows
        the rule to the requests it picks by operation and parsed body.
        """
        rule = Rule(fault, times, frozenset(operations), delay, on_applied, chance, when, body)
        with self._lock:
            self._rules.append(rule)
        return rule

    @contextlib.contextmanager
    def intercept(self, adversary: Callable[[], None] | None = None, *,
                  before: int | None = None,
                  when: RequestMatch | None = None) -> Iterator[Interception]:
        """Record the requests of the call made inside the block; run ``adversary`` before
        forwarding its ``before``-th request (1-based), or the first one ``when`` matches.

        The adversary runs at most once, in the proxy's handler thread, while the call waits
        for its answer; its own requests pass straight through. With no adversary the block
        only records (how many requests does this call send, and what do they carry?).
        """
        if adversary is not None and before is None and when is None:
            raise ValueError("say which request to run the adversary before: before= or when=")
        if before is not None and before < 1:
            raise ValueError("requests are counted from 1")
        call = Interception(adversary, before, when)
        with self._lock:
            if self._interception is not None:
                raise RuntimeError("one interception at a time")
            self._interception = call
        try:
            yield call
        finally:
            with self._lock:
                self._interception = None

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

    def _arrive(self, operation: str, body: dict[str, Any]) -> tuple[bool, int | None]:
        """Classify one arriving request: (the adversary's own?, its index in the call)."""
        with self._lock:
            if self._attacking:
                return True, None
            call = self._interception
            if call is None:
                return False, None
            call._arrived += 1
            index = call._arrived
            due = call.adversary is not None and call.fired_before is None and (
                (call.before is not None and index == call.before)
                or (call.when is not None and call.when(operation, body, index)))
            if due:
                call.fired_before = index
                self._attacking = True
        if due:
            assert call.adversary is not None
            try:
                call.adversary()
            except Exception as exc:  # the test reads it from the interception
                call.adversary_error = exc
            finally:
                with self._lock:
                    self._attacking = False
        return False, index

    def _begin(self, operation: str, adversary: bool = False,
               body: dict[str, Any] | None = None) -> Rule | None:
        with self._lock:
            self._in_flight += 1
            if adversary:
                return None  # the adversary's requests pass straight through
            for rule in self._rules:
                if rule.times > 0 and operation in rule.operations:
                    if rule.when is not None and not rule.when(operation, body or {}):
                        continue
                    if rule.chance < 1.0 and self._random.random() >= rule.chance:
                        continue
                    rule.times -= 1
                    self.injected[rule.fault] += 1
                    return rule
            return None

    def _record(self, operation: str, body: dict[str, Any], rule: Rule | None,
                status: int | None, adversary: bool = False, in_call: bool = False,
                response: bytes | None = None, region: str | None = None) -> None:
        # Recorded before the client hears anything, so a test that has its answer sees it.
        parsed = None
        if response:
            with contextlib.suppress(ValueError):
                parsed = json.loads(response)
        with self._lock:
            recorded = Recorded(len(self._records), operation, body,
                                rule.fault if rule is not None else None, status, adversary,
                                parsed if isinstance(parsed, dict) else None, time.monotonic(),
                                region)
            self._records.append(recorded)
            call = self._interception
            if call is not None and adversary:
                call.adversary_requests.append(recorded)
            elif call is not None and in_call:
                call.requests.append(recorded)

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
    # TCP_NODELAY: the reply is written as its header block, then its body; with Nagle's
    # algorithm the body waited for the client's (delayed, ~40 ms) ACK of the headers: 47 ms a
    # request through the proxy against 2.5 direct, most of the reliability tests' wall time.
    disable_nagle_algorithm = True

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
        adversary, index = proxy._arrive(operation, parsed)
        in_call = index is not None
        rule = proxy._begin(operation, adversary, parsed)
        try:
            fault = rule.fault if rule is not None else None
            if fault is Fault.DROP_BEFORE:
                proxy._record(operation, parsed, rule, None, adversary, in_call)
                self._drop()
                return
            if fault is Fault.THROTTLE:
                proxy._record(operation, parsed, rule, 400, adversary, in_call)
                self._reply(400, [("Content-Type", "application/x-amz-json-1.0")], json.dumps({
                    "__type": "com.amazonaws.dynamodb.v20120810#"
                              "ProvisionedThroughputExceededException",
                    "message": "The level of configured provisioned throughput for the table "
                               "was exceeded (injected by the fault proxy)"}).encode())
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
            scope = re.search(r"Credential=[^/]+/[^/]+/([^/]+)/",
                              self.headers.get("Authorization") or "")
            proxy._record(operation, parsed, rule, status, adversary, in_call, response_body,
                          scope.group(1) if scope else None)
            if fault is Fault.DROP_AFTER:
                self._drop()
                return
            if fault is Fault.DELAY_AFTER and rule is not None:
                self._hold_reply(rule.delay)
            if fault is Fault.CORRUPT and rule is not None:
                response_body = rule.body
            self._reply(status, response_headers, response_body)
        finally:
            proxy._end()

    def _hold_reply(self, seconds: float) -> None:
        """Sleep ``seconds`` before the reply, or until the client has closed its connection
        (it timed out, or its task was cancelled): the reply can no longer reach it, and what
        the server applied is recorded already, so holding on would only make ``wait_idle``
        (and the test) wait out the rest of the delay for nothing."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], remaining)
            if not readable:
                return
            try:
                if not self.connection.recv(1, socket.MSG_PEEK):
                    return  # end of stream: the client is gone
            except OSError:
                return
            # Bytes from a client that sends again before its answer (not HTTP/1.1 as boto3
            # and httpx speak it): keep the answer held for the whole delay.
            time.sleep(remaining)

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
