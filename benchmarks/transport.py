"""Transports that do no server work, so a timing shows the client's own cost.

``stub(client)``: a botocore ``before-send`` handler answers every request with ``{}`` before any
socket is touched — the request is still built, serialized and signed, and the answer parsed.
``NullServer``: a separate process on 127.0.0.1 answering ``{}`` with HTTP 200 at once (real
HTTP keep-alive round trips on loopback, no DynamoDB work).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from botocore.awsrequest import AWSResponse

_HEADERS = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "null"}
_EMPTY = b"{}"


class _Raw:
    """The raw stream AWSResponse reads its body from."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield _EMPTY


def _answer(request: Any, **_: Any) -> AWSResponse:
    return AWSResponse(request.url, 200, _HEADERS, _Raw())


def stub(client: Any) -> Any:
    """Make ``client`` answer every DynamoDB request with ``{}`` without sending it."""
    client.meta.events.register_last("before-send.dynamodb", _answer)
    return client


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: no connection set-up per request
    # Headers and body go out in two writes; without this, Nagle + delayed ACK add ~40 ms.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        for name, value in _HEADERS.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(_EMPTY)))
        self.end_headers()
        self.wfile.write(_EMPTY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve() -> None:
    """Entry point of the child: bind a free port, print it, serve until stdin closes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


class NullServer:
    """The null HTTP server in a child process: ``with NullServer() as endpoint: ...``."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        root = str(Path(__file__).resolve().parent.parent)
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from benchmarks.transport import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        assert self._process.stdout is not None
        port = self._process.stdout.readline().strip()
        if not port:
            raise RuntimeError("the null HTTP server did not start")
        return f"http://127.0.0.1:{port}"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        process = self._process
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
