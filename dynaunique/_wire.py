"""The library's requests made, signed, sent and read cheaply, below PynamoDB's ``dispatch``.

:class:`FastSerializer` replaces a client's serializer and :class:`FastPath` its
``_make_api_call`` (``dynaunique._clients.install``). The fast path builds botocore's very
request (URL, headers, SigV4, User-Agent, body) without its pipeline, emits ``before-send``,
sends through the client's endpoint and decodes a success by a decoder compiled from the
output shape; errors go to botocore's parser and events; botocore's steps take the call
whenever anything is not as checked (docs/decisions.md). :func:`start` gives a call as steps.
Every answer is checked against ``x-amz-crc32``. What one request does is all here; what is
done once per client, operation or shape is ``dynaunique._codec``'s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import uuid
import zlib
from collections.abc import Callable
from typing import Any, NoReturn

import botocore.auth as _auth
import botocore.context as _ctx
import botocore.handlers as _handlers
from botocore.awsrequest import AWSPreparedRequest, HeadersDict
from botocore.client import BaseClient
from botocore.exceptions import ChecksumError
from botocore.history import get_global_history_recorder
from botocore.hooks import first_non_none_response

from dynaunique import _botocore, _codec
from dynaunique._botocore import HEADER_KEY, LOGGERS
from dynaunique._codec import OPERATIONS, Op, signing_key

__all__ = ["OPERATIONS", "FastPath", "FastSerializer", "body", "start"]


def _blob(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        # botocore's Serializer._get_base64.
        return base64.b64encode(value).strip().decode("utf-8")
    raise TypeError(f"not a DynamoDB request value: {type(value).__name__}")


#: ``json.dumps``'s own settings (botocore's), with blobs as base64: the C encoder does it all.
_ENCODER = json.JSONEncoder(default=_blob, check_circular=False)


def body(parameters: Any) -> bytes:
    """The JSON body botocore's serializer makes of ``parameters`` (blobs given as bytes: its
    walk over the shapes changes only those, so one ``json.dumps`` is the same body)."""
    return _ENCODER.encode(parameters).encode("utf-8")


class FastSerializer:
    """A botocore serializer: the library's requests made by :func:`body`, the rest by
    botocore. Wraps the client's own serializer (``inner``); for each known operation the URL,
    method and headers are botocore's own, taken once from ``inner`` (``_codec.template``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._templates: dict[str, _codec.Template | None] = {}

    def _template(self, operation_model: Any) -> _codec.Template | None:
        made = _codec.template(self.inner, operation_model)
        self._templates[operation_model.name] = made
        return made

    def serialize_to_request(self, parameters: Any, operation_model: Any) -> dict[str, Any]:
        """What ``inner.serialize_to_request`` returns, made without the walk when it can be."""
        name = operation_model.name
        template = self._templates[name] if name in self._templates else \
            self._template(operation_model)
        if template is None or not isinstance(parameters, dict) \
                or not parameters.keys() <= template.members:
            return self.inner.serialize_to_request(parameters, operation_model)  # type: ignore
        try:
            encoded = body(parameters)
        except (TypeError, ValueError, RecursionError):
            return self.inner.serialize_to_request(parameters, operation_model)  # type: ignore
        request = dict(template.request)
        request["headers"] = dict(template.request["headers"])
        request["body"] = encoded
        return request

    def __getattr__(self, name: str) -> Any:
        # Anything else botocore (or a plugin) asks of its serializer.
        return getattr(self.inner, name)


_ORIGINAL = BaseClient._make_api_call


class FastPath:
    """``client._make_api_call`` for the library's operations (see the module's docstring)."""

    # The client's privates it uses, set by ``_codec.check_client``.
    emitter: Any
    signer: Any
    endpoint: Any
    ua: Any
    blob: Any
    timestamp: Any

    def __init__(self, client: Any) -> None:
        self.client = client
        self.ops: dict[str, Op | None] = {}
        self.uas: dict[Any, str] = {}         # the User-Agent per features
        self.keys: dict[str, Any] = {}        # botocore's HeadersDict key per header name
        self.ready = _codec.check_client(self)
        #: The client makes one attempt a call: any call may take this path.
        self.single = _botocore.max_attempts(client) == 1

    def __call__(self, operation_name: str, api_params: dict[str, Any]) -> Any:
        client, method = self.client, type(self.client)._make_api_call
        if method is not _ORIGINAL or not (_botocore.once.get() or self.single):
            # botocore's method is patched (a mock), or a call of PynamoDB's own on a client
            # that retries: botocore's whole path
            return method(client, operation_name, api_params)
        return start(client, operation_name, api_params).send(client._endpoint._send)

    def begin(self, operation_name: str, params: dict[str, Any]) -> _Call | None:
        """The call's request, built and signed as botocore would; None: botocore's path."""
        ops = self.ops
        op = ops[operation_name] if operation_name in ops else ops.setdefault(
            operation_name, _codec.operation(self, operation_name, _MAKERS))
        if op is None or (op.checked is not self.emitter._lookup_cache
                          and not _codec.handlers_known(self, op)):
            return None
        credentials = self.signer._credentials
        if credentials is None or (getattr(credentials, "refresh_needed", None) is not None
                                   and credentials.refresh_needed()):
            return None
        if get_global_history_recorder()._enabled:
            return None
        for log in LOGGERS:
            if log.isEnabledFor(logging.DEBUG):
                return None
        frozen = credentials.get_frozen_credentials()
        model = op.model
        context = dict(op.context)
        _handlers.generate_idempotent_uuid(params=params, model=model)
        try:
            key = (tables(params, op.member), frozen.account_id)
            where = op.endpoints.get(key)
        except Exception:  # not the shape the model has: botocore says what is wrong
            return None
        if where is None:
            where = _codec.resolve(self.client, op, params, context, key)
        if not where:
            return None
        url, host, path, features = where
        request_dict = self.client._serializer.serialize_to_request(params, model)
        if request_dict.get("url_path") != "/" or request_dict.get("query_string") \
                or request_dict.get("method") != "POST" or "host_prefix" in request_dict:
            return None
        headers = request_dict["headers"]
        outer = _ctx.get_context()
        ua = (features, None if outer is None else frozenset(outer.features))
        headers["User-Agent"] = self.uas[ua] if ua in self.uas else _codec.user_agent(
            self, ua, outer)
        request_dict["url"] = url
        request_dict["context"] = context
        _handlers.add_recursion_detection_header(request_dict)
        invocation = str(uuid.uuid4())
        context["retries"] = {"attempt": 1, "invocation-id": invocation, "max": op.attempts}
        stamp = context["timestamp"] = _auth.get_current_datetime().strftime(
            _auth.SIGV4_TIMESTAMP)
        payload = request_dict["body"]
        sent = signed(headers, host, path, payload, stamp, frozen, self.signer._region_name,
                      self.signer._signing_name, _auth.SIGNED_HEADERS_BLACKLIST, invocation,
                      op.attempts)
        # botocore's HeadersDict of them, its keys made once per header name.
        keys = self.keys
        prepared = HeadersDict()
        prepared._dict = {(keys[k] if k in keys else keys.setdefault(k, HEADER_KEY(k))): v
                          for k, v in sent.items()}
        request = AWSPreparedRequest("POST", url, prepared, payload, False, context)
        return _Call(self.client, op, request_dict, request)


class _Call:
    """One call's steps after its request is built: ``before_send``, then ``finish`` with the
    answer, or ``failed`` with what the sending raised — botocore's events and parsing."""

    __slots__ = ("answered", "client", "op", "request", "request_dict")

    def __init__(self, client: Any, op: Op, request_dict: dict[str, Any], request: Any,
                 answered: Any = None) -> None:
        self.client, self.op, self.request_dict = client, op, request_dict
        self.request, self.answered = request, answered

    def before_send(self) -> Any:
        """The answer of a ``before-send`` handler (moto, a stub), or None: send it."""
        return first_non_none_response(self.client.meta.events.emit(
            self.op.events["before-send"], request=self.request))

    def send(self, sender: Callable[[Any], Any]) -> Any:
        """The call made with ``sender`` (botocore's ``Endpoint._send``): its parsed answer."""
        if self.request is None:             # a before-call handler answered
            return self.finish(None)
        try:
            response = self.before_send()
            if response is None:
                response = sender(self.request)
        except Exception as exc:
            self.failed(exc)
        return self.finish(response)

    def finish(self, http: Any) -> Any:
        """The parsed answer; botocore's ClientError for an error answer; botocore's
        ``ChecksumError`` for an answer whose body is not the one its ``x-amz-crc32`` says."""
        context = self.request_dict["context"]
        model = self.op.model
        if self.answered is not None:        # a before-call handler answered (botocore's path)
            http, parsed = self.answered
        else:
            try:
                check_crc32(http)
            except ChecksumError as exc:
                _codec.emit(self, "after-call-error", exception=exc, context=context)
                raise
            parsed = None
            decode = self.op.decode
            if http.status_code < 300 and decode is not None:
                try:
                    content = http.content
                    parsed = decode(json.loads(content.decode("utf-8")) if content else {})
                    parsed["ResponseMetadata"] = metadata(http.headers, http.status_code,
                                                          self.op.attempts == 1)
                except Exception:  # not what the model says: botocore's parser says what it says
                    parsed = None
            if parsed is None:
                parsed = _codec.parse(self, http)   # botocore's parser and events
        self.client.meta.events.emit(self.op.events["after-call"], http_response=http,
                                     parsed=parsed, model=model, context=context)
        if http.status_code >= 300:
            code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
            raise self.client.exceptions.from_code(code)(parsed, model.name)
        return parsed

    def failed(self, exc: Exception) -> NoReturn:
        """The sending raised ``exc``: botocore's events for it, then ``exc`` raised."""
        _codec.failed(self, exc)
        raise exc


def start(client: Any, operation_name: str, api_params: dict[str, Any]) -> _Call:
    """One call of ``client`` as steps: the fast path's, or botocore's ``_make_api_call`` step
    by step (its HTTP send left to the caller)."""
    fast = client.__dict__.get("_make_api_call")
    if isinstance(fast, FastPath) and type(client)._make_api_call is _ORIGINAL:
        call = fast.begin(operation_name, api_params)
        if call is not None:
            return call
    with _ctx.start_as_current_context():  # botocore's: the call's user-agent features apart
        op, request_dict, request, answered = _codec.botocore_steps(
            client, operation_name, api_params)
    return _Call(client, op, request_dict, request, answered)


# --- the request: table names, signature ---------------------------------------------------------

def tables(params: dict[str, Any], member: str | None) -> Any:
    """The table names a request names where ``member`` says (the endpoint ruleset's input)."""
    if member is None:
        return None
    value = params.get(member)
    if member == "TableName":
        return value
    if member == "RequestItems":
        return tuple(value or ())
    # Each item's kinds and tables, in order: all the ResourceArnList paths can depend on.
    key: list[Any] = []
    for item in value or ():
        key.append(len(item))
        for kind, slot in item.items():
            key.append(kind)
            key.append(slot.get("TableName"))
    return tuple(key)


def authorization(headers: dict[str, str], host: str, path: str, payload: bytes, stamp: str,
                  credentials: Any, region: str, service: str, unsigned: Any) -> str:
    """SigV4's ``Authorization`` header of a POST, as botocore's ``SigV4Auth.add_auth`` makes it:
    every header but the ``unsigned`` ones (lower-cased names), plus ``host``; the payload
    hashed; the key derived once per day (``_codec.signing_key``)."""
    signed = {}
    for name, value in headers.items():
        low = name.lower()
        if low not in unsigned:
            signed[low] = value
    signed.setdefault("host", host)
    names = sorted(signed)
    signed_names = ";".join(names)
    canonical = "\n".join((
        "POST", path, "", "".join([f"{n}:{' '.join(signed[n].split())}\n" for n in names]),
        signed_names, hashlib.sha256(payload).hexdigest()))
    day = stamp[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    hashed = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashed}"
    signature = hmac.new(signing_key(credentials.secret_key, day, region, service),
                         to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    return (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}")


def signed(headers: dict[str, str], host: str, path: str, payload: bytes, stamp: str,
           credentials: Any, region: str, service: str, unsigned: Any,
           invocation: str, attempts: int = 1) -> dict[str, Any]:
    """The headers botocore sends a POST with, in its order: the request's, the SigV4 ones
    (``X-Amz-Date``, the session token, ``Authorization``), the SDK's retry headers of a first
    attempt, values as UTF-8 bytes, and ``Content-Length``."""
    sent = dict(headers)
    sent["X-Amz-Date"] = stamp
    if credentials.token:
        sent["X-Amz-Security-Token"] = credentials.token
    sent["Authorization"] = authorization(sent, host, path, payload, stamp, credentials, region,
                                          service, unsigned)
    sent["amz-sdk-invocation-id"] = invocation
    sent["amz-sdk-request"] = f"attempt=1; max={attempts}"
    out: dict[str, Any] = {}
    for name, value in sent.items():
        out[name] = value.encode("utf-8") if isinstance(value, str) else value
    out["Content-Length"] = str(len(payload))
    return out


# --- the answer ----------------------------------------------------------------------------------


def check_crc32(http: Any) -> None:
    """Raise botocore's ``ChecksumError`` when DynamoDB's ``x-amz-crc32`` header is not the
    CRC32 of the body received, as botocore's retry handler compares them (no header: no
    check)."""
    expected = {k.lower(): v for k, v in http.headers.items()}.get("x-amz-crc32")
    actual = zlib.crc32(http.content) & 0xFFFFFFFF
    if expected is not None and str(actual) != str(expected).strip():
        raise ChecksumError(checksum_type="crc32", expected_checksum=expected,
                            actual_checksum=actual)


def metadata(headers: Any, status: int, last: bool = True) -> dict[str, Any]:
    """The ``ResponseMetadata`` botocore gives an answer at its first attempt (its retry handler
    says ``MaxAttemptsReached`` when that is the ``last``: attempt 1 of 1)."""
    if type(headers) is HeadersDict:       # botocore's lowercase_dict, read from its keys
        lowered = {key._lower: value for key, value in headers._dict.items()}
    else:
        lowered = {key.lower(): headers[key] for key in headers}
    meta: dict[str, Any] = {}
    if "x-amzn-requestid" in lowered:
        meta["RequestId"] = lowered["x-amzn-requestid"]
    meta["HTTPStatusCode"] = status
    meta["HTTPHeaders"] = lowered
    if last:
        meta["MaxAttemptsReached"] = True
    meta["RetryAttempts"] = 0
    return meta


def _structure(members: list[tuple[str, str, Any]]) -> Any:
    def structure(node: Any) -> Any:
        if node is None:
            return None
        out: dict[str, Any] = {}
        get = node.get
        for name, wire, convert in members:
            value = get(wire)
            if value is not None:
                out[name] = value if convert is None else convert(value)
        return out
    return structure


def _attribute_value(blob: Any) -> Any:
    plain = frozenset({"S", "N", "SS", "NS", "NULL", "BOOL"})

    def value(node: Any) -> Any:
        if len(node) == 1:
            for tag, inner in node.items():
                if inner is not None:
                    if tag in plain:
                        return node
                    if tag == "M":
                        return {"M": {k: None if v is None else value(v)
                                      for k, v in inner.items()}}
                    if tag == "L":
                        return {"L": [None if v is None else value(v) for v in inner]}
                    if tag == "B":
                        return {"B": blob(inner)}
        # The general case, as botocore's _handle_structure: members in order, None left out.
        out: dict[str, Any] = {}
        for tag in _codec.ATTRIBUTE_VALUE:
            inner = node.get(tag)
            if inner is None:
                continue
            if tag == "M":
                out[tag] = {k: None if v is None else value(v) for k, v in inner.items()}
            elif tag == "L":
                out[tag] = [None if v is None else value(v) for v in inner]
            elif tag == "B":
                out[tag] = blob(inner)
            elif tag == "BS":
                out[tag] = [None if v is None else blob(v) for v in inner]
            else:
                out[tag] = inner
        return out
    return value


#: The converters ``_codec.decoder`` compiles a shape's decoder from: they run here.
_MAKERS = _codec.Makers(
    _structure, _attribute_value,
    lambda item: lambda node: [None if v is None else item(v) for v in node],
    lambda value: lambda node: {k: value(v) for k, v in node.items()})
