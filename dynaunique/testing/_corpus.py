"""Recording what the local server was asked and answered: the corpus of the simulation's model.

When ``DYNAUNIQUE_RECORD_CORPUS`` names a directory in the server's environment, the local server
wraps its application (inside its one request lock, so lines are in the order requests were
applied) in :class:`Recorder`, which appends one JSON line per request to
``<directory>/server-<pid>.jsonl``:

- ``{"case": NAME}``: a new test case begins (the server started, was reset, or the pytest
  plugin named the test it is about to serve: ``POST /dynaunique-corpus/case`` with the name);
- ``{"op": OPERATION, "request": {...}, "status": 200, "answer": {...}}``: one DynamoDB request
  (its ``X-Amz-Target`` operation and JSON body) and the server's answer (its JSON body);
- ``{"control": COMMAND, "request": {...}}``: a ``/dynaunique-api/`` control request (injected
  conflicts, the token window): a case holding one is not replayed as is.

Only the standard library: it runs in the server process.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dynaunique.testing._server_rules import CONTROL_PREFIX, _call, _read_body

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: The server's environment variable naming the directory the corpus is written to.
RECORD_ENV = "DYNAUNIQUE_RECORD_CORPUS"
#: ``POST`` a test case's name here (the body, UTF-8) to mark where it begins.
CASE_PATH = "/dynaunique-corpus/case"

_TARGET_PREFIX = "DynamoDB_20120810."


class Recorder:
    """WSGI middleware appending each request and its answer to a JSON-lines file."""

    def __init__(self, app: WSGIApplication, directory: str) -> None:
        self._app = app
        Path(directory).mkdir(parents=True, exist_ok=True)
        path = Path(directory) / f"server-{os.getpid()}.jsonl"
        self._out: IO[str] = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._write({"case": f"server {os.getpid()} started"})

    def _write(self, line: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(line, sort_keys=True) + "\n")
            self._out.flush()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == CASE_PATH:
            self._write({"case": _read_body(environ).decode("utf-8", "replace")})
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        if path == "/moto-api/reset":
            self._write({"case": "reset"})
            return self._app(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if path.startswith(CONTROL_PREFIX):
            body = _read_body(environ)
            self._write({"control": path[len(CONTROL_PREFIX):], "request": _loads(body)})
            return self._app(environ, start_response)
        if not target.startswith(_TARGET_PREFIX):
            return self._app(environ, start_response)
        request = _loads(_read_body(environ))
        answer = _call(self._app, environ)
        self._write({"op": target[len(_TARGET_PREFIX):], "request": request,
                     "status": int(answer.status.split()[0]), "answer": _loads(answer.body)})
        return answer.send(start_response)


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body or b"{}")
    except ValueError:
        return {"unreadable": body.decode("utf-8", "replace")}


def wrap(app: WSGIApplication) -> WSGIApplication:
    """``app`` recorded into the corpus directory the environment names, else ``app`` itself."""
    directory = os.environ.get(RECORD_ENV)
    return Recorder(app, directory) if directory else app
