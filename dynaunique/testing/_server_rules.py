"""DynamoDB's rules that moto does not enforce, checked in front of it by the local server.

:class:`DynamoRules` is a WSGI middleware the local server (:mod:`dynaunique.testing`) puts between
its request lock and moto. It reads each JSON request and:

- refuses what DynamoDB refuses, with DynamoDB's error type and message: the parameters' and
  values' rules of :mod:`dynaunique.testing._request_rules` (limits: 100 actions per transaction,
  25 writes per batch, 100 keys per batch get), then 4 MB of items in a ``TransactWriteItems``,
  an item over 400 KB (counted as DynamoDB counts them, by :mod:`dynaunique._lock.sizes`), and a
  string that is not valid UTF-8 (a lone surrogate, which botocore sends as a ``\\udXXX`` escape);
- mends moto's answer where DynamoDB's differs (:mod:`dynaunique.testing._answer_rules`);
- honours ``ClientRequestToken`` on ``TransactWriteItems``: a token that succeeded is remembered
  for a window (10 minutes, as DynamoDB); the same token with the same ``TransactItems`` gets the
  first answer again without applying anything, with other ``TransactItems`` an
  ``IdempotentParameterMismatchException``. A cancelled or failed request does not consume its
  token, so a retry after ``TransactionConflict`` is applied normally;
- spells every number of a request as DynamoDB stores it (``"1.0"`` as ``"1"``:
  :mod:`dynaunique.testing._numbers`);
- cancels a chosen fraction of ``TransactWriteItems`` with ``TransactionConflict``, deterministic
  for a seed, when a test asks through the control endpoint.

Control endpoint (JSON in, JSON state out): ``POST /dynaunique-api/conflicts``
``{"fraction": 0.3, "seed": 7}``, ``POST /dynaunique-api/token-window`` ``{"seconds": 600}``,
``GET /dynaunique-api/state``. ``POST /moto-api/reset`` also resets all of it. Imports only the
standard library, :mod:`dynaunique._lock.sizes` and the rule modules (pure); it runs inside the
server process, behind the server's one request lock, so its state needs no lock of its own.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from dynaunique._lock.sizes import (
    MAX_ITEM_BYTES,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    attribute_value_size,
    item_size,
    transaction_size,
)
from dynaunique.testing._answer_rules import amend
from dynaunique.testing._numbers import NUMBER_OPERATIONS, canonical_request, might_hold_numbers
from dynaunique.testing._request_rules import MAX_BATCH_WRITE_REQUESTS, check_request
from dynaunique.testing._value_rules import Refusal, validation

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "CONTROL_PREFIX",
    "MAX_BATCH_WRITE_REQUESTS",
    "MAX_ITEM_BYTES",
    "MAX_TRANSACTION_ACTIONS",
    "MAX_TRANSACTION_BYTES",
    "TOKEN_WINDOW_SECONDS",
    "DynamoRules",
    "attribute_value_size",
    "drain",
    "item_size",
]

TOKEN_WINDOW_SECONDS = 600.0
CONTROL_PREFIX = "/dynaunique-api/"

_TARGET_PREFIX = "DynamoDB_20120810."
_ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
_JSON = "application/x-amz-json-1.0"
# Fields of a TransactWriteItems request that may differ between a call and its resend: they
# change what the answer reports, not what is written.
# Operations that never create, delete or replace a table: the key names known stay true.
_TABLES_UNCHANGED = frozenset({
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
    "BatchWriteItem", "TransactGetItems", "TransactWriteItems", "DescribeTable", "ListTables",
})
_NOT_COMPARED = frozenset(
    {"ClientRequestToken", "ReturnConsumedCapacity", "ReturnItemCollectionMetrics"}
)


# --- the checks ----------------------------------------------------------------------------------


def _check_item(item: dict[str, Any]) -> int:
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise validation("Item size has exceeded the maximum allowed size")
    return size


def _check_transaction(request: dict[str, Any]) -> None:
    actions = request.get("TransactItems") or []
    for action in actions:
        put = action.get("Put")
        if put is not None:
            _check_item(put.get("Item") or {})
    if transaction_size(actions) > MAX_TRANSACTION_BYTES:
        raise validation("Transaction request cannot be larger than 4 MB")


def _check_batch_write(request: dict[str, Any]) -> None:
    for requests in (request.get("RequestItems") or {}).values():
        for write in requests:
            put = write.get("PutRequest")
            if put is not None:
                _check_item(put.get("Item") or {})


def _check_put(request: dict[str, Any]) -> None:
    _check_item(request.get("Item") or {})


# A JSON escape of a UTF-16 surrogate (\\ud800 to \\udfff): how botocore sends one (its JSON is
# ASCII); a pair is one character once decoded, a lone one is not UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _check_utf8(body: bytes) -> None:
    """Refuse a request holding a string that is not valid UTF-8 (a lone surrogate), in any
    attribute value, name, key or expression, as DynamoDB does. Costs one regular-expression
    scan of the body; only a body holding a surrogate escape is decoded."""
    if _SURROGATE_ESCAPE.search(body) is None:
        return
    try:
        request = json.loads(body)
    except ValueError:  # moto answers malformed JSON its own way
        return
    try:
        json.dumps(request, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise validation("One or more parameter values were invalid: a string is not valid "
                          "UTF-8 (it holds a lone surrogate)") from None


_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "TransactWriteItems": _check_transaction,
    "BatchWriteItem": _check_batch_write,
    "PutItem": _check_put,
}


# --- the middleware ------------------------------------------------------------------------------


class _Answer:
    """A finished response: status line, headers and body, replayable."""

    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @classmethod
    def json(cls, status: str, payload: dict[str, Any]) -> _Answer:
        body = json.dumps(payload).encode("utf-8")
        headers = [("Content-Type", _JSON), ("Content-Length", str(len(body)))]
        return cls(status, headers, body)

    @classmethod
    def refusal(cls, refusal: Refusal) -> _Answer:
        payload = {"__type": _ERROR_PREFIX + refusal.code, "message": refusal.message}
        payload.update(refusal.extra)
        return cls.json("400 Bad Request", payload)

    def send(self, start_response: StartResponse) -> list[bytes]:
        start_response(self.status, list(self.headers))
        return [self.body]


class DynamoRules:
    """WSGI middleware enforcing DynamoDB's limits, token idempotency and injected conflicts.

    Args:
        app: the WSGI application behind it (moto's dispatcher).
        token_window: seconds a successful ``ClientRequestToken`` is remembered.
        clock: monotonic seconds; injectable so tests need not wait out a window.
        about: facts about the server reported as they are by ``GET /dynaunique-api/state``.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        token_window: float = TOKEN_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        about: dict[str, Any] | None = None,
    ) -> None:
        self._app = app
        self._about = dict(about or {})
        self._clock = clock
        self._default_window = token_window
        self.reset()

    def reset(self) -> None:
        """Forget every token; stop injecting conflicts; restore the default token window."""
        self.token_window = self._default_window
        # token -> (digest of the compared request fields, when it succeeded, the answer)
        self._tokens: dict[str, tuple[str, float, _Answer]] = {}
        # (credentials, table) -> its key attribute names; forgotten when a table may change.
        self._keys: dict[tuple[str, str], tuple[str, ...] | None] = {}
        self.conflict_fraction = 0.0
        self.conflict_seed: int | None = None
        self._random = random.Random(0)
        self.conflicts_injected = 0

    def set_conflicts(self, fraction: float, seed: int | None) -> None:
        """Cancel ``fraction`` (0 to 1) of later transactions with ``TransactionConflict``."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be between 0 and 1, not {fraction!r}")
        self.conflict_fraction = fraction
        self.conflict_seed = seed
        self._random = random.Random(seed)

    def state(self) -> dict[str, Any]:
        """What the control endpoint reports."""
        return {
            **self._about,
            "conflicts": {"fraction": self.conflict_fraction, "seed": self.conflict_seed},
            "token_window": self.token_window,
            "tokens": len(self._tokens),
            "conflicts_injected": self.conflicts_injected,
        }

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL_PREFIX):
            return self._control(path[len(CONTROL_PREFIX):], environ).send(start_response)
        if path == "/moto-api/reset":
            self.reset()
            return self._app(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(_TARGET_PREFIX):
            return self._app(environ, start_response)
        operation = target[len(_TARGET_PREFIX):]
        if operation not in _TABLES_UNCHANGED:
            self._keys.clear()
        body = _read_body(environ)
        try:
            _check_utf8(body)
        except Refusal as refusal:
            return _Answer.refusal(refusal).send(start_response)
        if operation in NUMBER_OPERATIONS and might_hold_numbers(body):
            body = _spell_numbers(body, environ)
        try:
            request = json.loads(body or b"{}")
        except ValueError:  # moto answers malformed JSON its own way
            return self._app(environ, start_response)
        if not isinstance(request, dict):
            return self._app(environ, start_response)
        try:
            check_request(operation, request, lambda table: self._key_names(environ, table))
            check = _CHECKS.get(operation)
            if check is not None:
                check(request)
        except Refusal as refusal:
            return _Answer.refusal(refusal).send(start_response)
        except (AttributeError, TypeError, ValueError):  # malformed: moto answers it its own way
            return self._app(environ, start_response)
        try:
            answer = (self._transact(request, environ) if operation == "TransactWriteItems"
                      else _call(self._app, environ))
        except Refusal as refusal:
            return _Answer.refusal(refusal).send(start_response)
        amended = amend(operation, request, answer.status, answer.body,
                        lambda table: _describe(self._app, environ, table))
        if amended is not None:
            answer = _Answer(answer.status, [(k, v) for k, v in answer.headers
                                             if k.lower() != "content-length"]
                             + [("Content-Length", str(len(amended)))], amended)
        return answer.send(start_response)

    def _key_names(self, environ: WSGIEnvironment, table: str) -> tuple[str, ...] | None:
        """The key attribute names of ``table`` (``None``: no such table), asked of moto once
        per table and account (a DescribeTable costs moto more than a small batch)."""
        scope = environ.get("HTTP_AUTHORIZATION", "").split("/", 3)  # key id, date, region
        cached = (scope[0] + "/" + scope[2] if len(scope) > 2 else scope[0], table)
        if cached not in self._keys:
            described = _describe(self._app, environ, table)
            self._keys[cached] = None if described is None else tuple(
                element["AttributeName"] for element in described["KeySchema"])
        return self._keys[cached]

    def _transact(self, request: dict[str, Any], environ: WSGIEnvironment) -> _Answer:
        token = request.get("ClientRequestToken")
        now = self._clock()
        self._tokens = {
            t: entry for t, entry in self._tokens.items() if now - entry[1] < self.token_window
        }
        compared = {k: v for k, v in request.items() if k not in _NOT_COMPARED}
        digest = hashlib.sha256(json.dumps(compared, sort_keys=True).encode("utf-8")).hexdigest()
        if token is not None and token in self._tokens:
            first_digest, _, first_answer = self._tokens[token]
            if first_digest != digest:
                raise Refusal(
                    "IdempotentParameterMismatchException",
                    "Request parameters do not match the original request for this "
                    "ClientRequestToken",
                )
            return first_answer
        if self.conflict_fraction and self._random.random() < self.conflict_fraction:
            self.conflicts_injected += 1
            raise self._conflict(len(request.get("TransactItems") or []))
        answer = _call(self._app, environ)
        if token is not None and answer.status.startswith("200"):
            self._tokens[token] = (digest, now, answer)
        return answer

    def _conflict(self, actions: int) -> Refusal:
        """A cancellation as DynamoDB sends it when another transaction holds one of the items."""
        slot = self._random.randrange(actions) if actions else 0
        reasons: list[dict[str, str]] = [{"Code": "None"} for _ in range(actions)]
        codes = ["None"] * actions
        if actions:
            reasons[slot] = {
                "Code": "TransactionConflict",
                "Message": "Transaction is ongoing for the item",
            }
            codes[slot] = "TransactionConflict"
        message = (
            "Transaction cancelled, please refer cancellation reasons for specific reasons "
            f"[{', '.join(codes)}]"
        )
        return Refusal(
            "TransactionCanceledException", message, CancellationReasons=reasons, Message=message
        )

    def _control(self, command: str, environ: WSGIEnvironment) -> _Answer:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            payload = json.loads(_read_body(environ) or b"{}") if method == "POST" else {}
            if method == "POST" and command == "conflicts":
                seed = payload.get("seed")
                self.set_conflicts(float(payload.get("fraction", 0.0)),
                                   None if seed is None else int(seed))
            elif method == "POST" and command == "token-window":
                seconds = float(payload["seconds"])
                if seconds < 0:
                    raise ValueError(f"seconds must not be negative, not {seconds!r}")
                self.token_window = seconds
            elif not (method == "GET" and command == "state"):
                return _Answer.json("404 Not Found", {"error": f"no {method} {command!r}"})
        except (ValueError, KeyError, TypeError) as exc:
            return _Answer.json("400 Bad Request", {"error": str(exc)})
        return _Answer.json("200 OK", self.state())


def _spell_numbers(body: bytes, environ: WSGIEnvironment) -> bytes:
    """The body with its numbers spelled as DynamoDB stores them, put back for moto."""
    try:
        request = json.loads(body)
    except ValueError:  # moto answers malformed JSON its own way
        return body
    if not isinstance(request, dict):
        return body
    spelled = canonical_request(request)
    if spelled == request:
        return body
    body = json.dumps(spelled).encode("utf-8")
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def _describe(app: WSGIApplication, environ: WSGIEnvironment,
              table: str) -> dict[str, Any] | None:
    """DescribeTable's ``Table`` for ``table``, asked of ``app`` with the request's credentials
    (so the same account and region); ``None`` when there is no such table."""
    body = json.dumps({"TableName": table}).encode("utf-8")
    inner = {**environ, "HTTP_X_AMZ_TARGET": _TARGET_PREFIX + "DescribeTable",
             "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))}
    answer = _call(app, inner)
    if not answer.status.startswith("200"):
        return None
    described: dict[str, Any] = json.loads(answer.body)["Table"]
    return described


def _read_body(environ: WSGIEnvironment) -> bytes:
    """Read the request body and put it back, so the application behind can read it too."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def _call(app: WSGIApplication, environ: WSGIEnvironment) -> _Answer:
    """Run ``app`` to completion and keep its whole response."""
    captured: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured[:] = [status, headers]
        return lambda data: None

    body = drain(app(environ, start_response))
    return _Answer(captured[0], list(captured[1]), body)


def drain(result: Iterable[bytes]) -> bytes:
    """Consume a WSGI response iterable whole (lazy work included) and close it."""
    try:
        return b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
