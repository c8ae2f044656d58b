"""Run a local DynamoDB-compatible server for tests and demos, and point PynamoDB models at it.

The server is moto's DynamoDB in *server mode* (real HTTP on ``127.0.0.1``, so boto3 and
PynamoDB run unchanged), started in a child process with every request serialized by one lock.
Stock moto lets concurrent transactions interleave — duplicate winners, partial transactions,
HTTP 500s — so a race test against it proves nothing; the lock makes each request atomic, which
is the guarantee DynamoDB itself gives. In the child, moto is patched so that a request costs
what it touches, not the table's size (:mod:`dynaunique._moto_patch`), and DynamoDB's rules that
moto lacks — ``ClientRequestToken`` idempotency, the transaction, batch and item size limits — are
enforced in front of it (:mod:`dynaunique._server_rules`), which also lets a test inject
``TransactionConflict`` cancellations (:func:`set_conflict_rate`).

Public API:

- :func:`local_dynamodb` / :class:`LocalDynamoDB` — start and stop the server.
- :func:`reset_local_dynamodb` — wipe every table (``POST /moto-api/reset``); also forgets
  remembered tokens and stops injected conflicts.
- :func:`set_conflict_rate` — cancel a fraction of transactions with ``TransactionConflict``.
- :func:`set_token_window` — shorten how long a ``ClientRequestToken`` is remembered.
- :func:`use_endpoint` and :func:`create_tables` — retarget model classes and create their tables.
- pytest fixtures ``dynaunique_endpoint`` (session) and ``dynamodb`` (per test, clean slate);
  this module is registered as a ``pytest11`` plugin, so they are available wherever dynaunique
  is installed.

moto, werkzeug and flask (the ``[local]`` extra) are imported only inside the server process, so
importing this module needs neither them nor pytest.

Run ``python -m dynaunique.testing --port 8000`` to serve in the foreground (until stdin closes,
SIGTERM or Ctrl-C; add ``--ignore-stdin`` when stdin is not a terminal or pipe you control).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any, Protocol

from dynaunique._server_rules import drain
from dynaunique.errors import DynauniqueError

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from pynamodb.models import Model
    from werkzeug.serving import BaseWSGIServer

    class _DispatcherLike(Protocol):
        """The part of moto's DomainDispatcherApplication that :func:`_warm_up` uses."""

        def get_application(self, environ: dict[str, Any], /) -> object: ...


__all__ = [
    "FAKE_AWS_ENV",
    "LOCAL_HOST",
    "READY_PREFIX",
    "STOCK_MOTO_ENV",
    "LocalDynamoDB",
    "LocalServerError",
    "create_tables",
    "local_dynamodb",
    "reset_local_dynamodb",
    "set_conflict_rate",
    "set_token_window",
    "use_endpoint",
]

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

_DEFAULT_REGION = "us-east-1"
_STDERR_TAIL_CHARS = 4000


class LocalServerError(DynauniqueError, RuntimeError):
    """The local DynamoDB-compatible server could not be started, reached or reset."""


class LocalDynamoDB:
    """A moto DynamoDB server on ``127.0.0.1``, running in a child Python process.

    The child runs ``python -m dynaunique.testing --port PORT``: a separate process, so the
    server never competes for the GIL with the client threads of a race test, and it can be
    stopped for certain. Use it as a context manager (or call :meth:`start` and :meth:`stop`);
    an instance starts at most once. If it is never stopped, the child is still terminated when
    the instance is garbage-collected or the interpreter exits; the child also exits by itself
    when its stdin (a pipe held by this object) closes, e.g. if the parent is killed.

    Args:
        port: TCP port to bind; ``0`` (the default) picks a free one.
        startup_timeout: seconds to wait for the server to report that it listens.
        stop_timeout: seconds to wait for a graceful exit before the child is killed.
        stock_moto: run moto without the speed patch (each transaction then costs O(table
            size)); for measuring the patch, not for tests.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        startup_timeout: float = 60.0,
        stop_timeout: float = 5.0,
        stock_moto: bool = False,
    ) -> None:
        self._port = port
        self._stock_moto = stock_moto
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._endpoint: str | None = None
        self._finalizer: weakref.finalize[..., LocalDynamoDB] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL, ``http://127.0.0.1:<port>``; raises if the server is not running."""
        if self._endpoint is None or not self.running:
            raise LocalServerError("the local DynamoDB server is not running")
        return self._endpoint

    @property
    def pid(self) -> int | None:
        """The child process id, or ``None`` before :meth:`start`."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The child's exit status once it has exited, else ``None``."""
        return None if self._process is None else self._process.poll()

    def start(self) -> str:
        """Start the child process, wait until it listens, and return its endpoint URL.

        Raises:
            LocalServerError: the server did not report readiness within ``startup_timeout``
                or exited first; the message carries the tail of the child's stderr.
        """
        if self._process is not None:
            raise LocalServerError("this LocalDynamoDB has already been started")
        # Lives as long as the child; closed by _shutdown. A file, not a pipe: nobody drains it.
        stderr = tempfile.TemporaryFile()  # noqa: SIM115
        command = [sys.executable, "-m", "dynaunique.testing", "--port", str(self._port)]
        if self._stock_moto:
            command.append("--stock-moto")
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=_child_env(),
                close_fds=True,
            )
        except BaseException:
            stderr.close()
            raise
        self._process = process
        self._stderr = stderr
        lines: queue.Queue[bytes] = queue.Queue()
        reader = threading.Thread(
            target=_pump_lines,
            args=(process.stdout, lines),
            name=f"dynaunique-local-{process.pid}-stdout",
            daemon=True,
        )
        reader.start()
        self._finalizer = weakref.finalize(
            self, _shutdown, process, stderr, reader, self._stop_timeout
        )
        try:
            self._endpoint = self._await_ready(lines)
        except BaseException:
            self.stop()
            raise
        return self._endpoint

    def stop(self) -> None:
        """Stop the child: close its stdin, SIGTERM, wait, and kill it if it lingers.

        Safe to call more than once, and before :meth:`start`.
        """
        if self._finalizer is not None:
            self._finalizer()

    def reset(self) -> None:
        """Delete every table and item on this server (see :func:`reset_local_dynamodb`)."""
        reset_local_dynamodb(self.endpoint)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalDynamoDB {self._endpoint or 'not started'} pid={self.pid} {state}>"

    def _await_ready(self, lines: queue.Queue[bytes]) -> str:
        """Read the child's stdout until the ready line; return the endpoint it announces."""
        assert self._process is not None
        deadline = time.monotonic() + self._startup_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LocalServerError(
                    f"the local DynamoDB server did not start within {self._startup_timeout:g} s"
                    + self._stderr_tail()
                )
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if not line:  # EOF: the child closed stdout without announcing itself
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(timeout=self._stop_timeout)
                raise LocalServerError(
                    "the local DynamoDB server exited before it was ready "
                    f"(exit status {self._process.poll()})" + self._stderr_tail()
                )
            text = line.decode("utf-8", "replace").strip()
            prefix = READY_PREFIX + " "
            if text.startswith(prefix):
                return text[len(prefix) :]

    def _stderr_tail(self) -> str:
        """The end of the child's stderr, formatted for an error message."""
        if self._stderr is None or self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace")[-_STDERR_TAIL_CHARS:].strip()
        return f"\n--- server stderr ---\n{text}" if text else "\n(the server wrote no stderr)"


@contextlib.contextmanager
def local_dynamodb(*, port: int = 0) -> Iterator[str]:
    """Run a local DynamoDB-compatible server for the duration of a ``with`` block.

    Yields the endpoint URL, ``http://127.0.0.1:<port>``; pass it as ``endpoint_url`` to boto3
    or to :func:`use_endpoint`. The server runs in a child process that is stopped (and killed
    if need be) when the block exits, also on an exception.

    Args:
        port: TCP port to bind; ``0`` (the default) picks a free one.

    Raises:
        LocalServerError: the server failed to start; the message includes its stderr.
    """
    with LocalDynamoDB(port=port) as endpoint:
        yield endpoint


def reset_local_dynamodb(endpoint: str, *, timeout: float = 10.0) -> None:
    """Delete every table and item on a local server: ``POST {endpoint}/moto-api/reset``.

    This resets all of moto's in-memory state (every service, account and region). It also
    forgets every remembered ``ClientRequestToken``, stops injected conflicts and restores the
    10-minute token window. Model classes need no re-targeting afterwards, but their tables must
    be created again.

    Raises:
        LocalServerError: the server could not be reached or refused the reset.
    """
    _post_local(endpoint, "/moto-api/reset", b"", "reset", timeout)


def set_conflict_rate(
    endpoint: str, fraction: float, *, seed: int | None = None, timeout: float = 10.0
) -> None:
    """Make a local server cancel ``fraction`` of ``TransactWriteItems`` with a conflict.

    Each cancelled transaction fails with ``TransactionCanceledException`` whose
    ``CancellationReasons`` carry ``TransactionConflict`` for one item (``None`` for the rest),
    as DynamoDB answers when another transaction holds one of the items; nothing is applied.
    Which transactions are cancelled is drawn from a generator seeded with ``seed``, so a
    sequence of requests meets the same cancellations every run. ``0`` turns it off, as does
    :func:`reset_local_dynamodb` (and so the ``dynamodb`` fixture).

    Raises:
        LocalServerError: the server could not be reached, or ``fraction`` is not in [0, 1].
    """
    body = json.dumps({"fraction": fraction, "seed": seed}).encode("utf-8")
    _post_local(endpoint, "/dynaunique-api/conflicts", body, "set the conflict rate of", timeout)


def set_token_window(endpoint: str, seconds: float, *, timeout: float = 10.0) -> None:
    """Set how long a local server remembers a successful ``ClientRequestToken`` (default 600 s).

    Lets a test see a token expire without waiting ten minutes. Reset restores the default.

    Raises:
        LocalServerError: the server could not be reached, or ``seconds`` is negative.
    """
    body = json.dumps({"seconds": seconds}).encode("utf-8")
    _post_local(endpoint, "/dynaunique-api/token-window", body, "set the token window of", timeout)


def use_endpoint(endpoint: str, *models: type[Model]) -> None:
    """Point PynamoDB model classes at ``endpoint``, e.g. one from :func:`local_dynamodb`.

    For each model: sets ``Meta.host``, sets ``Meta.region`` to ``us-east-1`` when it is unset,
    sets fake credentials (which the local server accepts) when ``Meta.aws_access_key_id`` is
    unset, so it works on a machine with no AWS credentials or config, and drops the class's
    cached connection so the next call connects to the new host. This lets
    tests retarget models that were defined (and maybe used) at import time. A ``Meta`` class
    shared by several models is changed for all of them.
    """
    for model in models:
        meta = model.Meta
        meta.host = endpoint
        if getattr(meta, "region", None) is None:
            meta.region = _DEFAULT_REGION
        if getattr(meta, "aws_access_key_id", None) is None:
            meta.aws_access_key_id = FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"]
            meta.aws_secret_access_key = FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"]
        model._connection = None


def create_tables(*models: type[Model]) -> None:
    """Create each model's table, with ``PAY_PER_REQUEST`` billing, unless it already exists.

    Several models may share one table (as lock items and records do): each table is created
    once, from the first model that names it, so list the model whose key schema and indexes
    describe the whole table first. Blocks until every table is active.
    """
    seen: set[tuple[str | None, str | None, str]] = set()
    for model in models:
        key = (model.Meta.host, model.Meta.region, model.Meta.table_name)
        if key in seen:
            continue
        seen.add(key)
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


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


def _make_server(port: int, *, stock_moto: bool = False) -> BaseWSGIServer:
    """Bind moto's DynamoDB server (serialized, threaded) to ``127.0.0.1:port``.

    Unless ``stock_moto``, moto is patched first (a moto whose internals moved raises
    :class:`dynaunique._moto_patch.MotoPatchError`, so the server refuses to start). Either way,
    DynamoDB's rules run in front of moto, inside the request lock.
    """
    import importlib.metadata
    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from dynaunique import _moto_patch
    from dynaunique._server_rules import DynamoRules

    if not stock_moto:
        _moto_patch.apply()
    about = {"moto": importlib.metadata.version("moto"), "moto_patched": _moto_patch.is_applied()}

    # One log line per request would only fill the stderr file; errors are still logged.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    dispatcher = DomainDispatcherApplication(create_backend_app)
    _warm_up(dispatcher)
    return make_server(
        LOCAL_HOST,
        port,
        _SerializedApp(DynamoRules(dispatcher, about=about)),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


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


def _watch_stdin(stream: IO[bytes], stop: threading.Event) -> None:
    """Set ``stop`` when ``stream`` reaches end of file (the parent closed it or died)."""
    with contextlib.suppress(OSError, ValueError):
        while stream.read(4096):
            pass
    stop.set()


def _serve_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dynaunique.testing``: serve until told to stop.

    Binds ``127.0.0.1:--port`` (``0`` = a free port), prints ``DYNAUNIQUE-LOCAL-READY <url>`` on
    stdout and flushes, then serves until stdin reaches end of file (unless ``--ignore-stdin``),
    or SIGTERM/SIGINT arrives. Returns the exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m dynaunique.testing",
        description="Serve moto's DynamoDB on 127.0.0.1, one request at a time.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = any free port)")
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

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    server = _make_server(args.port, stock_moto=args.stock_moto)
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

    print(f"{READY_PREFIX} http://{LOCAL_HOST}:{port}", flush=True)
    # The parent reads stdout only up to the ready line; anything printed later (moto prints
    # now and then) goes to stderr instead, so an unread pipe can never fill up and block us.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


# --- pytest plugin (registered through the pytest11 entry point) ------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional; the fixtures simply do not exist
    _HAVE_PYTEST = False
else:
    _HAVE_PYTEST = True

if _HAVE_PYTEST:

    @pytest.fixture(scope="session")
    def dynaunique_endpoint() -> Iterator[str]:
        """The endpoint URL of one local DynamoDB server shared by the whole test session.

        Also sets fake ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
        ``AWS_DEFAULT_REGION`` for the session where they are unset, and restores the
        environment afterwards. Prefer the ``dynamodb`` fixture, which also resets the server.
        """
        with pytest.MonkeyPatch.context() as patch:
            for name, value in FAKE_AWS_ENV.items():
                if not os.environ.get(name):
                    patch.setenv(name, value)
            with local_dynamodb() as endpoint:
                yield endpoint

    @pytest.fixture
    def dynamodb(dynaunique_endpoint: str) -> str:
        """The session's local DynamoDB endpoint, reset before this test: no tables, no items.

        Typical use: ``use_endpoint(dynamodb, MyModel); create_tables(MyModel)``.
        """
        reset_local_dynamodb(dynaunique_endpoint)
        return dynaunique_endpoint

    from dynaunique.testing_async import aio_dynamodb  # noqa: F401 - async fixtures


if __name__ == "__main__":
    sys.exit(_serve_main())
