"""The local server's process: moto in server mode, serialized, patched, started and stopped.

Both sides live here: the child (``_serve_main``: one lock around every request, the moto patch,
DynamoDB's rules in front, a ready line on stdout) and the parent's plumbing (environment,
output pump, shutdown, the reset/config POSTs). :mod:`dynaunique.testing` is the public face.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import select
import signal
import site
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

from dynaunique.errors import DynauniqueError
from dynaunique.testing._server_rules import drain

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from werkzeug.serving import BaseWSGIServer

    class _DispatcherLike(Protocol):
        """The part of moto's DomainDispatcherApplication that :func:`_warm_up` uses."""

        def get_application(self, environ: dict[str, Any], /) -> object: ...


#: The server binds this address only; it is never reachable from another machine.
LOCAL_HOST = "127.0.0.1"

#: The server process prints this word, a space and its endpoint URL on one line once it listens.
READY_PREFIX = "DYNAUNIQUE-LOCAL-READY"

#: Fake credentials and region, used wherever the environment has none. moto accepts any value.
FAKE_AWS_ENV: dict[str, str] = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

#: Set to ``1`` in the server's environment to run stock moto, without the speed patch (used to
#: measure what the patch is worth; the DynamoDB rules are enforced either way).
STOCK_MOTO_ENV = "DYNAUNIQUE_STOCK_MOTO"



class LocalServerError(DynauniqueError, RuntimeError):
    """The local DynamoDB-compatible server could not be started, reached or reset."""



# --- parent side helpers ----------------------------------------------------------------------


def _post_local(endpoint: str, path: str, body: bytes, what: str, timeout: float) -> None:
    """POST ``body`` to ``endpoint + path``; raise :class:`LocalServerError` unless HTTP 200."""
    url = endpoint.rstrip("/") + path
    if not url.startswith(("http://", "https://")):
        raise LocalServerError(f"not an http(s) endpoint: {endpoint!r}")
    request = urllib.request.Request(url, data=body, method="POST")
    # Never route a request for a local server through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            response.read()
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        raise LocalServerError(
            f"could not {what} the local server at {endpoint}: HTTP {exc.code} {detail}"
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise LocalServerError(f"could not {what} the local server at {endpoint}: {exc}") from exc
    if status != 200:
        raise LocalServerError(f"could not {what} the local server at {endpoint}: HTTP {status}")


def _child_env() -> dict[str, str]:
    """The server process's environment: ours, plus fake AWS settings and our import path."""
    env = dict(os.environ)
    for name, value in FAKE_AWS_ENV.items():
        if not env.get(name):
            env[name] = value
    # Make the child import this very copy of dynaunique (e.g. a source checkout that was put
    # on sys.path at runtime), but never put a site-packages directory ahead of the stdlib.
    package_parent = str(Path(__file__).resolve().parent.parent)
    site_dirs = {
        str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]
    }
    if package_parent not in site_dirs:
        existing = env.get("PYTHONPATH")
        env["PYTHONPATH"] = package_parent + (os.pathsep + existing if existing else "")
    return env


def _pump_lines(stream: IO[bytes] | None, lines: queue.Queue[bytes]) -> None:
    """Copy lines from ``stream`` into ``lines``; an empty bytes object marks end of file."""
    try:
        if stream is not None:
            for line in iter(stream.readline, b""):
                lines.put(line)
    except (OSError, ValueError):  # the pipe was closed under us during shutdown
        pass
    finally:
        lines.put(b"")


def _shutdown(
    process: subprocess.Popen[bytes],
    stderr: IO[bytes],
    reader: threading.Thread,
    timeout: float,
) -> None:
    """Stop the server process for certain and release its pipes (runs at most once)."""
    try:
        if process.poll() is None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            with contextlib.suppress(OSError):
                process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        reader.join(timeout=2.0)
        for stream in (process.stdin, process.stdout, stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# --- the server process -----------------------------------------------------------------------


class _SerializedApp:
    """A WSGI wrapper that runs one request at a time, response body included.

    moto's backends are not thread-safe: under concurrent TransactWriteItems stock moto lets two
    transactions both pass ``attribute_not_exists`` on the same key (duplicate winners), applies
    transactions partially and raises HTTP 500s. This lock is the fix: each request — the whole
    WSGI call *and* the full consumption of its response iterable, where lazy work may happen —
    runs alone, so every request is atomic, as DynamoDB's are. Only the socket I/O of writing the
    response happens outside the lock.
    """

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with self._lock:
            body = drain(self._app(environ, start_response))
        return [body]


def _make_server(
    port: int, *, stock_moto: bool = False, host: str = LOCAL_HOST
) -> BaseWSGIServer:
    """Bind moto's DynamoDB server (serialized, threaded) to ``host:port`` (``127.0.0.1`` unless
    ``dynaunique serve --host`` asks for another address).

    Unless ``stock_moto``, moto is patched first (a moto whose internals moved raises
    :class:`dynaunique.testing._moto_patch.MotoPatchError`, so the server refuses to start).
    Either way, DynamoDB's rules run in front of moto, inside the request lock.
    """
    import importlib.metadata
    import logging

    from moto.moto_server import werkzeug_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    from dynaunique.testing import _corpus, _moto_patch
    from dynaunique.testing._moto_front import install_header_parser, keep_alive_handler
    from dynaunique.testing._replicas import Replicas
    from dynaunique.testing._server_rules import DynamoRules

    if not stock_moto:
        _moto_patch.apply()
    _lift_transact_get_limit()
    # The front's pieces fit this Python and werkzeug, or are left out (not pinned: no refusal).
    front = _moto_patch.fitting_front() if _moto_patch.is_applied() else frozenset()
    about = {"moto": importlib.metadata.version("moto"), "moto_patched": _moto_patch.is_applied(),
             "front": sorted(front)}

    # One log line per request would only fill the stderr file; errors are still logged.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    dispatcher = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
    _warm_up(dispatcher)
    # moto 5.2.5's handler keeps S3's underscored header names; DynamoDB has none, and older
    # releases (5.2.0 to 5.2.4, which the patch also fits) serve with werkzeug's own handler.
    handler = getattr(werkzeug_app, "MotoRequestHandler", WSGIRequestHandler)
    if "keep_alive" in front:  # the lean front is part of the patch (stock: werkzeug's own)
        handler = keep_alive_handler(handler)
    if "header_parser" in front:
        install_header_parser()
    return make_server(
        host,
        port,
        _SerializedApp(_corpus.wrap(Replicas(DynamoRules(dispatcher, about=about)))),
        threaded=True,
        request_handler=handler,
    )


def _lift_transact_get_limit() -> None:
    """Let moto answer a TransactGetItems of up to 100 items, as DynamoDB does (moto refuses
    above 25); above 100 the server's rules refuse it first, with DynamoDB's message."""
    from moto.dynamodb import responses

    from dynaunique.testing._request_rules import MAX_TRANSACTION_ACTIONS

    if getattr(responses, "TRANSACTION_MAX_ITEMS", None) is not None:
        responses.TRANSACTION_MAX_ITEMS = MAX_TRANSACTION_ACTIONS


def _warm_up(dispatcher: _DispatcherLike) -> None:
    """Build moto's DynamoDB and moto-api apps before serving, so no request pays for it."""
    credential = "Credential=testing/20240101/us-east-1/dynamodb/aws4_request"
    environs: list[dict[str, Any]] = [
        {"PATH_INFO": "/moto-api/reset"},
        {
            "PATH_INFO": "/",
            "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 {credential}, SignedHeaders=host, Signature=0",
            "HTTP_X_AMZ_TARGET": "DynamoDB_20120810.ListTables",
        },
    ]
    for environ in environs:
        with contextlib.suppress(Exception):  # an optimisation only: moto builds apps lazily too
            dispatcher.get_application(environ)


class _StopRequest:
    """Why the server should stop (``"SIGTERM"``, ``"SIGINT"``, ``"stdin closed"``), and a wait
    for it that a signal always ends.

    A signal handler runs in the main thread between two of its bytecodes, whatever lock that
    thread holds at that moment, so the handler takes none: it only records the signal's name.
    The wake-up is a byte on a socket pair, written by the C-level handler itself
    (:func:`signal.set_wakeup_fd`), from whichever thread the kernel interrupted. (The handler
    used to call ``threading.Event.set()`` while the main thread polled ``Event.wait(0.5)``: a
    signal that arrived while ``wait`` held the Event's lock deadlocked the process, which then
    ignored every further SIGTERM.)
    """

    def __init__(self) -> None:
        self.reason: str | None = None
        self._signalled = False
        self._reader, self._writer = socket.socketpair()
        for end in (self._reader, self._writer):
            end.setblocking(False)
        self._wakeup_fd: int | None = None

    def install(self) -> None:
        """Handle SIGTERM and SIGINT from now until the process exits (main thread only)."""
        self._wakeup_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self._signalled:
            self._signalled = True
            self.reason = self.reason or signal.Signals(signum).name
            return
        # A second signal (Ctrl-C twice): the signal's own default at once, killed by it, as
        # one arriving while Python exits would be (Python puts the defaults back then).
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def request(self, reason: str) -> None:
        """Ask for a stop from any thread."""
        if self.reason is None:
            self.reason = reason
        with contextlib.suppress(OSError):
            self._writer.send(b"\0")

    def wait(self) -> str:
        """Block until a stop is requested; its reason."""
        while self.reason is None:
            # The wake-up byte ends the select at once; the timeout only bounds the wait for a
            # handler that has not run yet (the byte came from another thread's interruption).
            select.select([self._reader], [], [], 0.5)
            with contextlib.suppress(OSError):
                while self._reader.recv(4096):
                    pass
        return self.reason

    def close(self) -> None:
        """Put back the previous wake-up fd (nothing may write to a closed, reusable fd) and
        close the socket pair; the handlers stay."""
        if self._wakeup_fd is not None:
            signal.set_wakeup_fd(self._wakeup_fd)
        self._reader.close()
        self._writer.close()


def _watch_stdin(stream: IO[bytes], stop: _StopRequest) -> None:
    """Request a stop when ``stream`` reaches end of file (the parent closed it or died)."""
    with contextlib.suppress(OSError, ValueError):
        while stream.read(4096):
            pass
    stop.request("stdin closed")


def _serve_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dynaunique.testing``: serve until told to stop.

    Binds ``--host`` (``127.0.0.1``) and ``--port`` (``0`` = a free port), prints
    ``DYNAUNIQUE-LOCAL-READY <url>`` on stdout and flushes, then serves until stdin reaches end
    of file (unless ``--ignore-stdin``), or SIGTERM/SIGINT arrives. Then it stops accepting,
    closes its socket, prints ``local server stopped (SIGTERM)`` (the reason) on stderr and
    returns 0; requests still in flight are cut off when the process exits. A stop requested
    while it starts ends it before the ready line, also with 0. A second signal kills it at
    once (the signal's default action).
    """
    parser = argparse.ArgumentParser(
        prog="python -m dynaunique.testing",
        description="Serve moto's DynamoDB on 127.0.0.1, one request at a time.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = any free port)")
    parser.add_argument("--host", default=LOCAL_HOST,
                        help=f"address to bind (default {LOCAL_HOST}: this machine only)")
    parser.add_argument(
        "--ignore-stdin",
        action="store_true",
        help="do not stop when stdin closes; stop on SIGTERM/SIGINT only",
    )
    parser.add_argument(
        "--stock-moto",
        action="store_true",
        default=os.environ.get(STOCK_MOTO_ENV) == "1",
        help=f"do not patch moto (slow on large tables; also set by {STOCK_MOTO_ENV}=1)",
    )
    args = parser.parse_args(argv)

    for name, value in FAKE_AWS_ENV.items():
        if not os.environ.get(name):
            os.environ[name] = value

    stop = _StopRequest()
    stop.install()
    try:
        return _serve_until_stopped(args, stop)
    finally:
        stop.close()


def _serve_until_stopped(args: argparse.Namespace, stop: _StopRequest) -> int:
    """Build the server, print the ready line, serve until ``stop``; 0 once it is closed."""
    server = _make_server(args.port, stock_moto=args.stock_moto, host=args.host)
    if stop.reason is not None:  # stopped while starting: no ready line for a server that is gone
        server.server_close()
        print(f"local server stopped ({stop.reason}) before it was ready", file=sys.stderr,
              flush=True)
        return 0
    port = server.server_port
    os.environ.setdefault("MOTO_PORT", str(port))  # moto's own self-calls, if any, go here
    serving = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="serve", daemon=True
    )
    serving.start()
    if not args.ignore_stdin:
        threading.Thread(
            target=_watch_stdin, args=(sys.stdin.buffer, stop), name="stdin", daemon=True
        ).start()

    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"{READY_PREFIX} http://{shown_host}:{port}", flush=True)
    # The parent reads stdout only up to the ready line; anything printed later (moto prints
    # now and then) goes to stderr instead, so an unread pipe can never fill up and block us.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    try:
        reason = stop.wait()
    finally:
        server.shutdown()
        server.server_close()
    print(f"local server stopped ({reason})", file=sys.stderr, flush=True)
    return 0
