"""Run a local DynamoDB-compatible server for tests and demos, and point PynamoDB models at it.

The server is moto's DynamoDB in *server mode* (real HTTP on ``127.0.0.1``, so boto3 and PynamoDB
run unchanged), started in a child process with every request serialized by one lock. Stock moto
lets concurrent transactions interleave — duplicate winners, partial transactions, HTTP 500s — so a
race test against it proves nothing; the lock makes each request atomic, which is the guarantee
DynamoDB itself gives. In the child, moto is patched so that a request costs what it touches, not
the table's size (:mod:`dynaunique.testing._moto_patch`), and DynamoDB's rules that moto lacks —
``ClientRequestToken`` idempotency, the transaction, batch and item size limits — are enforced in
front of it (:mod:`dynaunique.testing._server_rules`), which also lets a test inject
``TransactionConflict`` cancellations (:func:`set_conflict_rate`).

Public API:

- :func:`local_dynamodb` / :class:`LocalDynamoDB` — start and stop the server.
- :func:`reset_local_dynamodb` — wipe every table (``POST /moto-api/reset``); also forgets
  remembered tokens and stops injected conflicts.
- :func:`set_conflict_rate` — cancel a fraction of transactions with ``TransactionConflict``.
- :func:`set_token_window` — shorten how long a ``ClientRequestToken`` is remembered.
- :func:`set_replication_delay`, :func:`replication_state` — global tables' replication.
- :func:`use_endpoint` and :func:`create_tables` — retarget model classes and create their tables.
- pytest fixtures ``dynaunique_endpoint`` (session) and ``dynaunique_db`` (per test, clean slate);
  :mod:`dynaunique.testing._pytest_plugin` is registered as a ``pytest11`` plugin, so they are
  available wherever dynaunique is installed; ``dynaunique_aio_db`` (async) is in
  :mod:`dynaunique.testing.aio`.

This package is the testing kit, as ``sqlalchemy.testing`` is SQLAlchemy's: this module is its
public face; ``_local_server`` (the server process), ``_server_rules`` (DynamoDB's rules moto
lacks), ``_moto_patch`` and ``_moto_fast`` (the speed patch and the check of the moto it fits) and
``_pytest_plugin`` are its internals.

moto, werkzeug and flask (the ``[local]`` extra) are imported only inside the server process, so
importing this module needs neither them nor pytest.

Run ``python -m dynaunique.testing --port 8000`` to serve in the foreground (until stdin closes,
SIGTERM or Ctrl-C; add ``--ignore-stdin`` when stdin is not a terminal or pipe you control).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from types import TracebackType
from typing import IO, TYPE_CHECKING

from dynaunique._transport import regions as _regions
from dynaunique.testing import _local_server
from dynaunique.testing._local_server import (
    LocalServerError,
    _child_env,
    _post_local,
    _pump_lines,
    _shutdown,
)
from dynaunique.testing._replica_control import replication_state, set_replication_delay

if TYPE_CHECKING:
    from pynamodb.models import Model


__all__ = [
    "FAKE_AWS_ENV",
    "LOCAL_HOST",
    "READY_PREFIX",
    "STOCK_MOTO_ENV",
    "LocalDynamoDB",
    "LocalServerError",
    "create_tables",
    "local_dynamodb",
    "replication_state",
    "reset_local_dynamodb",
    "set_conflict_rate",
    "set_replication_delay",
    "set_token_window",
    "use_endpoint",
]


#: The server binds this address only; it is never reachable from another machine.
LOCAL_HOST = _local_server.LOCAL_HOST

#: The server process prints this word, a space and its endpoint URL on one line once it listens.
READY_PREFIX = _local_server.READY_PREFIX

#: Fake credentials and region, used wherever the environment has none. moto accepts any value.
FAKE_AWS_ENV = _local_server.FAKE_AWS_ENV

#: Set to ``1`` in the server's environment to run stock moto, without the speed patch (used to
#: measure what the patch is worth; the DynamoDB rules are enforced either way).
STOCK_MOTO_ENV = _local_server.STOCK_MOTO_ENV

_DEFAULT_REGION = "us-east-1"
_STDERR_TAIL_CHARS = 4000

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
    _regions.forget(endpoint)  # its tables are gone: their modes are learned anew


def set_conflict_rate(
    endpoint: str, fraction: float, *, seed: int | None = None, timeout: float = 10.0
) -> None:
    """Make a local server cancel ``fraction`` of ``TransactWriteItems`` with a conflict.

    Each cancelled transaction fails with ``TransactionCanceledException`` whose
    ``CancellationReasons`` carry ``TransactionConflict`` for one item (``None`` for the rest),
    as DynamoDB answers when another transaction holds one of the items; nothing is applied.
    Which transactions are cancelled is drawn from a generator seeded with ``seed``, so a
    sequence of requests meets the same cancellations every run. ``0`` turns it off, as does
    :func:`reset_local` (and so the ``dynaunique_db`` fixture).

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
    unset, so it works on a machine with no AWS credentials or config, and, when any of these
    changed, drops the class's cached connection so the next call connects to the new host
    (botocore event handlers registered on the old connection's client are not on the new
    one: register them after re-pointing; one WARNING names any that are dropped). Pointing a
    model where it already points keeps its connection and its handlers. This lets tests
    retarget models that were defined (and maybe used) at import time. A ``Meta`` class
    shared by several models is changed for all of them.
    """
    from dynaunique._transport.endpoint import pointing

    for model in models:
        meta = model.Meta
        before = pointing(meta)
        meta.host = endpoint
        if getattr(meta, "region", None) is None:
            meta.region = _DEFAULT_REGION
        if getattr(meta, "aws_access_key_id", None) is None:
            meta.aws_access_key_id = FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"]
            meta.aws_secret_access_key = FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"]
        if pointing(meta) != before:
            _drop_connection(model)


def _drop_connection(model: type[Model]) -> None:
    """Drop a model's PynamoDB connection (made again, with a new client, on its next call);
    one WARNING when handlers a user registered on the old client are dropped with it."""
    from dynaunique._transport.botocore import user_handlers

    table = getattr(model, "_connection", None)     # PynamoDB's TableConnection
    client = getattr(getattr(table, "connection", None), "_client", None)
    dropped = user_handlers(client) if client is not None else []
    model._connection = None
    if dropped:
        logging.getLogger("dynaunique.testing").warning(
            "use_endpoint re-pointed %s: its new botocore client does not have the handlers "
            "registered on the old one (%s); register them after use_endpoint",
            model.__name__, ", ".join(dropped))


def create_tables(*models: type[Model]) -> None:
    """Create each model's table, with ``PAY_PER_REQUEST`` billing, unless it already exists.

    Several models may share one table (as lock items and records do): each table is created
    once, from the first model that names it, so list the model whose key schema and indexes
    describe the whole table first. Blocks until every table is active.

    A table is created with one ``CreateTable`` when the server answers it ``ACTIVE`` (the local
    server always does); PynamoDB's ``Model.create_table(wait=True)`` would also send a
    ``DescribeTable`` before (does it exist?) and one after (is it active?). A table that exists
    already, or is still being created, is left to ``Model.create_table(wait=True)``.
    """
    seen: set[tuple[str | None, str | None, str]] = set()
    for model in models:
        key = (model.Meta.host, model.Meta.region, model.Meta.table_name)
        if key in seen:
            continue
        seen.add(key)
        if _create_active(model):
            model.update_ttl(ignore_update_ttl_errors=False)
        else:
            model.create_table(wait=True, billing_mode=_BILLING_MODE)


_BILLING_MODE = "PAY_PER_REQUEST"


def _create_active(model: type[Model]) -> bool:
    """Send the ``CreateTable`` that ``Model.create_table`` sends (the same arguments, built the
    same way from the model's schema and ``Meta``); whether the table it answers is ``ACTIVE``.
    ``False`` if the table exists already."""
    from pynamodb.exceptions import TableError

    meta = model.Meta
    schema = model._get_schema()
    arguments: dict[str, object] = {
        "attribute_definitions": schema["attribute_definitions"],
        "key_schema": schema["key_schema"],
        "global_secondary_indexes": schema["global_secondary_indexes"],
        "local_secondary_indexes": schema["local_secondary_indexes"],
    }
    for name in ("read_capacity_units", "write_capacity_units", "tags"):
        if hasattr(meta, name):
            arguments[name] = getattr(meta, name)
    if hasattr(meta, "stream_view_type"):
        arguments["stream_specification"] = {"stream_enabled": True,
                                             "stream_view_type": meta.stream_view_type}
    arguments["billing_mode"] = _BILLING_MODE
    try:
        answer = model._get_connection().create_table(**arguments)  # type: ignore[arg-type]
    except TableError as error:
        if error.cause_response_code == "ResourceInUseException":
            return False
        raise
    described = (answer or {}).get("TableDescription", {})
    region = model._get_connection().connection.client.meta.region_name  # botocore's, if unset
    _regions.remember(meta.table_name, str(region), meta.host, described)  # no replica yet
    return bool(described.get("TableStatus") == "ACTIVE")

