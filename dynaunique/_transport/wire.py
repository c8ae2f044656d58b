"""The library's requests made, signed, sent and read without botocore's pipeline, below
PynamoDB's ``dispatch``; every botocore private it reads is read through
``dynaunique._transport.botocore``.

:class:`FastSerializer` replaces a client's serializer and :class:`FastPath` its
``_make_api_call`` (``dynaunique._transport.clients.install``). For each call the fast path builds
botocore's very request (URL, headers, SigV4, User-Agent, body) itself, emits ``before-send``,
sends through the client's endpoint and decodes a success with a decoder compiled from the
operation's output shape; error answers go to botocore's parser and events. Whenever the client,
the operation or the call is not one it has checked, the call takes botocore's own steps
(:func:`botocore_steps`) instead (docs/decisions.md, "Requests"). :func:`start` gives a call as
steps, for the sync path and the asyncio driver alike. Every answer is checked against
``x-amz-crc32``.

What is worked out once is kept: per client, whether it is one the fast path knows
(:func:`check_client`); per operation, its :class:`Compiled` (request template, where its table
names are, the events it skips or emits, the answer's decoder: :func:`compile_operation`,
:func:`decoder`);
per table names and account, its endpoint (:func:`resolve`); per features, the User-Agent
(:func:`user_agent`); per day, the SigV4 key (:func:`signing_key`). Each gives exactly what
botocore gives (``tests/unit/test_wire.py`` and ``tests/unit/test_fastpath.py`` compare them).
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
from functools import lru_cache
from typing import Any, NoReturn
from urllib.parse import quote, urlsplit

import botocore.auth as _auth
import botocore.context as _ctx
import botocore.handlers as _handlers
import botocore.httpchecksum as _checksum
from botocore.awsrequest import AWSPreparedRequest, prepare_request_dict
from botocore.compress import maybe_compress_request
from botocore.endpoint import convert_to_response_dict
from botocore.exceptions import ChecksumError
from botocore.hooks import first_non_none_response
from botocore.utils import normalize_url_path

from dynaunique._transport import botocore as _botocore
from dynaunique._transport.botocore import KNOWN, LOGGERS, Convert, max_attempts

__all__ = ["OPERATIONS", "FastPath", "FastSerializer", "body", "start"]

#: The operations the library sends: their bodies are made by ``_wire.body``.
OPERATIONS = frozenset({
    "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "GetItem", "BatchGetItem",
    "BatchWriteItem", "Query", "Scan", "TransactGetItems",
})

#: What the JSON of a ResourceArnList operation context parameter may be (DynamoDB's model).
ARN_LISTS = {"keys(RequestItems)": "RequestItems",
             "TransactItems[*].Get.TableName": "TransactItems",
             "TransactItems[*].[ConditionCheck.TableName, Put.TableName, Delete.TableName, "
             "Update.TableName][]": "TransactItems"}

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


class Template:
    """The parameter-independent part of one operation's serialized request."""

    __slots__ = ("members", "request")

    def __init__(self, request: dict[str, Any], members: frozenset[str]) -> None:
        self.request = request
        self.members = members


def template(inner: Any, operation_model: Any) -> Template | None:
    """``inner`` (botocore's serializer)'s request for ``operation_model`` without parameters:
    URL, method and headers, which do not depend on them (DynamoDB's operations have no host
    prefix); None: not an operation whose body ``_wire.body`` makes."""
    shape = operation_model.input_shape
    if (operation_model.name in OPERATIONS and shape is not None
            and operation_model.endpoint is None
            and operation_model.metadata.get("protocol") == "json"):
        request = inner.serialize_to_request({}, operation_model)
        if request.get("body") == b"{}" and "host_prefix" not in request:
            return Template(request, frozenset(shape.members))
    return None


class FastSerializer:
    """A botocore serializer: the library's requests made by :func:`body`, the rest by
    botocore. Wraps the client's own serializer (``inner``); for each known operation the URL,
    method and headers are botocore's own, taken once from ``inner`` (:func:`template`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._templates: dict[str, Template | None] = {}

    def _template(self, operation_model: Any) -> Template | None:
        made = template(self.inner, operation_model)
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


# --- the client and its operations ---------------------------------------------------------------


def request_context(client: Any, model: Any) -> dict[str, Any]:
    """botocore's ``_make_api_call``'s request context (no auth scheme preference: checked)."""
    meta = client.meta
    return {"client_region": meta.region_name, "client_config": meta.config,
            "has_streaming_input": model.has_streaming_input,
            "auth_type": model.resolved_auth_type, "unsigned_payload": model.unsigned_payload,
            "auth_options": meta.service_model.metadata.get("auth")}


class Compiled:
    """One botocore operation of one client compiled for the fast path: what it needs of it
    (request context, where the table names are, event names, decoder), computed once."""

    __slots__ = ("attempts", "checked", "context", "decode", "endpoints", "events", "forwarded",
                 "member",
                 "model")

    def __init__(self, client: Any, model: Any, member: str | None, decode: Any) -> None:
        # Where its table names are (None: none); its answers' decoder (None: botocore's parser).
        self.model, self.member, self.decode = model, member, decode
        self.context = request_context(client, model)   # copied for each call
        self.endpoints: dict[Any, Any] = {}
        self.events = {e: f"{e}.dynamodb.{model.name}" for e in (
            *KNOWN, "before-send", "after-call", "after-call-error")}
        self.events["before-endpoint-resolution"] = "before-endpoint-resolution.dynamodb"
        self.checked: Any = None      # the emitter's lookup cache the handlers were checked for
        #: For a client that runs another's handlers (``_botocore.Forward``): that client's
        #: lookup cache they were checked for.
        self.forwarded: Any = None
        #: The client's attempts a call (its retry headers say ``max=`` that; sent once here).
        self.attempts = max_attempts(client)


def check_client(path: FastPath) -> bool:
    """Whether the fast path ``path``'s client is one it knows: botocore's mirrored functions
    unchanged (:func:`dynaunique._transport.botocore.fence`), DynamoDB's JSON protocol, SigV4, no
    auth-scheme preference, no User-Agent plugin, the client's parts wired as botocore wires
    them. Sets ``path.privates`` and the JSON parser's converters."""
    client = path.client
    if _botocore.fence():       # botocore changed what the fast path mirrors (warned once)
        return False
    try:
        path.privates = privates = _botocore.Client(client)
        path.blob, path.timestamp = privates.converters()
        changed = [what for what, same in (
            ("the wiring of a client's emitter, signer and endpoint", privates.known()),
            ("HeadersDict's keys", _botocore.headers_known()),
            (", ".join(_botocore.MISSING), not _botocore.MISSING)) if not same]
    except Exception as exc:  # a private is missing: named in the warning
        changed = [f"what the fast path reads ({type(exc).__name__}: {exc})"]
    if changed:
        _botocore.stand_aside("; ".join(changed))
        return False
    return (client.meta.service_model.resolved_protocol == "json"
            and client.meta.service_model.service_id.hyphenize() == "dynamodb"
            and _auth.AUTH_TYPE_MAPS.get("v4") is _auth.SigV4Auth
            and _botocore.default_user_agent()
            and not client.meta.config.auth_scheme_preference)


def compile_operation(path: FastPath, name: str) -> Compiled | None:
    """The :class:`Compiled` of ``name`` for the fast path ``path`` (None: botocore's path)."""
    client = path.client
    model = client.meta.service_model.operation_model(name)
    member = {p.name: p.member_name for p in model.context_parameters}
    lists = model.operation_context_parameters or {}
    if not (name in OPERATIONS and path.ready and not model.static_context_parameters
            and member in ({}, {"ResourceArn": "TableName"})
            and all(k == "ResourceArnList" and v.get("path") in ARN_LISTS
                    for k, v in lists.items()) and not (member and lists)
            and not model.has_streaming_input and not model.has_streaming_output
            and not model.has_event_stream_output and not model.http_checksum
            and not model.request_compression and not model.unsigned_payload
            and not model.is_endpoint_discovery_operation and model.endpoint is None
            and model.resolved_auth_type in (None, "v4")):
        return None
    try:
        decode = decoder(model.output_shape, path.blob, path.timestamp)
    except Unsupported:
        decode = None
    where = next((ARN_LISTS[v["path"]] for v in lists.values()),
                 "TableName" if member else None)
    return Compiled(client, model, where, decode)


def handlers_known(path: FastPath, op: Compiled) -> bool:
    """Only botocore's own handlers on every event the fast path skips (checked again after
    any handler is registered or removed: botocore then drops its lookup cache)."""
    privates = path.privates
    cache: object = privates.lookup_cache()
    for event, known in KNOWN.items():
        for handler in privates.handlers(op.events[event]):
            if isinstance(handler, _botocore.Forward):
                # The model's own client's handlers, run on this one (a home-region client):
                # none may be on a skipped event (checked again after a registration there).
                path.source = handler.source
                if handler.handlers(op.events[event]):
                    return False
                continue
            owner: Any = getattr(handler, "__self__", None)
            if getattr(handler, "__func__", handler) not in known:
                return False
            kind = type(owner).__name__
            if (kind == "RequestSigner" and owner is not privates.signer) or (
                    kind == "UserAgentString" and owner is not privates.ua) or (
                    kind == "MaxAttemptsSeeder"
                    and _botocore.seeder_attempts(owner) != op.attempts):
                return False
    # The retry handler itself is never asked on the fast path: a call is sent once.
    if privates.signer_for(op.model.name, dict(op.context)) != "v4":
        return False
    op.checked = cache
    op.forwarded = None if path.source is None else path.source.lookup_cache()
    return True


def resolve(privates: _botocore.Client, op: Compiled, params: dict[str, Any],
            context: dict[str, Any], key: Any) -> Any:
    """Where ``op``'s request for these table names and account goes: (URL, host, path,
    User-Agent features), or False (botocore's path) — botocore's own resolution, in a context
    of its own to see which user-agent features it registers; kept per ``key``."""
    scratch = _ctx.ClientContext()
    token = _ctx.set_context(scratch)
    try:
        url, headers, properties = privates.resolve_endpoint(op.model, params, dict(context))
    finally:
        _ctx.reset_context(token)
    where: Any = False
    if not headers and not properties:
        probe: dict[str, Any] = {"url_path": "/", "query_string": "", "headers": {}}
        prepare_request_dict(probe, endpoint_url=url)
        full = probe["url"]
        if not urlsplit(full).query:
            where = (full, _botocore.host_from_url(full),
                     quote(normalize_url_path(urlsplit(full).path), safe="/~"),
                     tuple(scratch.features))
    if len(op.endpoints) > 256:
        op.endpoints.clear()
    op.endpoints[key] = where
    return where


def user_agent(path: FastPath, key: tuple[tuple[str, ...], frozenset[str] | None],
               outer: Any) -> str:
    """The User-Agent botocore sends with the features ``key`` names (kept in ``path.uas``)."""
    scratch = _ctx.ClientContext(set(() if outer is None else outer.features))
    scratch.features.update(key[0])
    token = _ctx.set_context(scratch)
    try:
        made: str = path.privates.ua.to_string()
        path.uas[key] = made
    finally:
        _ctx.reset_context(token)
    return made


def botocore_steps(client: Any, operation_name: str,
                   api_params: dict[str, Any]) -> tuple[Compiled, dict[str, Any], Any, Any]:
    """botocore's ``_make_api_call`` up to its send: (the operation, the request dict, the
    request to send — None when a ``before-call`` handler answered —, that answer)."""
    privates = _botocore.Client(client)
    op = Compiled(client, client.meta.service_model.operation_model(operation_name), None, None)
    model = op.model
    context = dict(op.context)
    api_params = privates.emit_api_params(api_params, model, context)
    url, headers, properties = privates.resolve_endpoint(model, api_params, context)
    if properties:
        context["endpoint_properties"] = properties
    request_dict = privates.request_dict(api_params, model, url, context, headers)
    _checksum.resolve_checksum_context(request_dict, model, api_params)
    _, answered = client.meta.events.emit_until_response(
        op.events["before-call"], model=model, params=request_dict,
        request_signer=privates.signer, context=context)
    if answered is not None:
        return op, request_dict, None, answered
    maybe_compress_request(client.meta.config, request_dict, model)
    _checksum.apply_request_checksum(request_dict)
    privates.first_attempt(context)
    return op, request_dict, privates.create_request(request_dict, model), None


class FastPath:
    """``client._make_api_call`` for the library's operations (see the module's docstring)."""

    # Set by ``check_client``: the client's privates it reads, the JSON parser's converters.
    privates: _botocore.Client
    blob: Convert
    timestamp: Convert

    def __init__(self, client: Any) -> None:
        self.client = client
        self.ops: dict[str, Compiled | None] = {}
        #: The client whose handlers this one runs too (a ``_botocore.Forward`` on it), if any.
        self.source: _botocore.Client | None = None
        self.uas: dict[Any, str] = {}         # the User-Agent per features
        self.keys: dict[str, Any] = {}        # botocore's HeadersDict key per header name
        self.ready = check_client(self)
        #: The client makes one attempt a call: any call may take this path.
        self.single = _botocore.max_attempts(client) == 1

    def __call__(self, operation_name: str, api_params: dict[str, Any]) -> Any:
        client, method = self.client, _botocore.class_call(self.client)
        if method is not _botocore.ORIGINAL_CALL or not (_botocore.once.get() or self.single):
            # botocore's method is patched (a mock), or a call of PynamoDB's own on a client
            # that retries: botocore's whole path
            return method(client, operation_name, api_params)
        return start(client, operation_name, api_params).send(_botocore.sender(client))

    def begin(self, operation_name: str, params: dict[str, Any]) -> _Call | None:
        """The call's request, built and signed as botocore would; None: botocore's path."""
        ops = self.ops
        op = ops[operation_name] if operation_name in ops else ops.setdefault(
            operation_name, compile_operation(self, operation_name))
        if op is None:
            return None
        privates = self.privates
        source = self.source
        if (op.checked is not privates.lookup_cache() or (
                source is not None and op.forwarded is not source.lookup_cache())) \
                and not handlers_known(self, op):
            return None
        credentials: Any = privates.credentials()
        if credentials is None or (getattr(credentials, "refresh_needed", None) is not None
                                   and credentials.refresh_needed()):
            return None
        if _botocore.history_enabled():
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
            where = resolve(privates, op, params, context, key)
        if not where:
            return None
        url, host, path, features = where
        request_dict = _botocore.serializer(self.client).serialize_to_request(params, model)
        if request_dict.get("url_path") != "/" or request_dict.get("query_string") \
                or request_dict.get("method") != "POST" or "host_prefix" in request_dict:
            return None
        headers = request_dict["headers"]
        outer = _ctx.get_context()
        ua = (features, None if outer is None else frozenset(outer.features))
        headers["User-Agent"] = self.uas[ua] if ua in self.uas else user_agent(
            self, ua, outer)
        request_dict["url"] = url
        request_dict["context"] = context
        _handlers.add_recursion_detection_header(request_dict)
        invocation = str(uuid.uuid4())
        context["retries"] = {"attempt": 1, "invocation-id": invocation, "max": op.attempts}
        stamp = context["timestamp"] = _auth.get_current_datetime().strftime(
            _auth.SIGV4_TIMESTAMP)
        payload = request_dict["body"]
        region, service = privates.signing()
        sent = signed(headers, host, path, payload, stamp, frozen, region, service,
                      _auth.SIGNED_HEADERS_BLACKLIST, invocation, op.attempts)
        # botocore's HeadersDict of them, its keys made once per header name.
        prepared = _botocore.headers_dict(sent, self.keys)
        request = AWSPreparedRequest("POST", url, prepared, payload, False, context)
        return _Call(self.client, op, request_dict, request)


class _Call:
    """One call's steps after its request is built: ``before_send``, then ``finish`` with the
    answer, or ``failed`` with what the sending raised — botocore's events and parsing."""

    __slots__ = ("answered", "client", "op", "request", "request_dict")

    def __init__(self, client: Any, op: Compiled, request_dict: dict[str, Any], request: Any,
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
                emit(self, "after-call-error", exception=exc, context=context)
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
                parsed = parse(self, http)   # botocore's parser and events
        self.client.meta.events.emit(self.op.events["after-call"], http_response=http,
                                     parsed=parsed, model=model, context=context)
        if http.status_code >= 300:
            code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
            raise self.client.exceptions.from_code(code)(parsed, model.name)
        return parsed

    def failed(self, exc: Exception) -> NoReturn:
        """The sending raised ``exc``: botocore's events for it, then ``exc`` raised."""
        failed(self, exc)
        raise exc


def start(client: Any, operation_name: str, api_params: dict[str, Any]) -> _Call:
    """One call of ``client`` as steps: the fast path's, or botocore's ``_make_api_call`` step
    by step (its HTTP send left to the caller)."""
    fast = _botocore.installed_call(client)
    if isinstance(fast, FastPath) and _botocore.class_call(client) is _botocore.ORIGINAL_CALL:
        call = fast.begin(operation_name, api_params)
        if call is not None:
            return call
    with _ctx.start_as_current_context():  # botocore's: the call's user-agent features apart
        op, request_dict, request, answered = botocore_steps(
            client, operation_name, api_params)
    return _Call(client, op, request_dict, request, answered)


def emit(call: Any, event: str, **kwargs: Any) -> Any:
    """Emit ``event`` of ``call``'s operation on its client."""
    return call.client.meta.events.emit(call.op.events[event], **kwargs)


def parse(call: Any, http: Any) -> Any:
    """botocore's ``Endpoint._do_get_response`` after the send of ``call`` (a ``_wire`` call)
    and its retry check (1 attempt): an error answer, or one the decoder did not fit."""
    privates, model = _botocore.Client(call.client), call.op.model
    context = call.request_dict["context"]
    response_dict = convert_to_response_dict(http, model)
    _checksum.handle_checksum_body(http, response_dict, context, model)
    customized: dict[str, Any] = {}
    emit(call, "before-parse", operation_model=model, response_dict=response_dict,
          customized_response_dict=customized)
    parser = privates.parser(model.service_model.resolved_protocol)
    parsed = parser.parse(response_dict, model.output_shape)
    parsed.update(customized)
    if http.status_code >= 300:
        privates.add_error_fields(response_dict, parsed, model, parser)
    emit(call, "response-received", response_dict=convert_to_response_dict(http, model),
          parsed_response=parsed, context=context, exception=None)
    _retried(call, (http, parsed), None)
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return parsed


def _retried(call: Any, response: Any, exception: Any) -> None:
    emit(call, "needs-retry", response=response, endpoint=_botocore.Client(call.client).endpoint,
          operation=call.op.model, attempts=1, caught_exception=exception,
          request_dict=call.request_dict)


def failed(call: Any, exc: Exception) -> None:
    """botocore's events for a send of ``call`` that raised ``exc``."""
    context = call.request_dict["context"]
    emit(call, "response-received", response_dict=None, parsed_response=None,
          context=context, exception=exc)
    _retried(call, None, exc)
    emit(call, "after-call-error", exception=exc, context=context)


@lru_cache(maxsize=32)
def signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    """SigV4's key derived for the ``day`` (kept: the cache answers without running this)."""
    key = hmac.new(f"AWS4{secret}".encode(), day.encode("utf-8"), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


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
    hashed; the key derived once per day (:func:`signing_key`)."""
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
    lowered = _botocore.lowered_headers(headers)
    meta: dict[str, Any] = {}
    if "x-amzn-requestid" in lowered:
        meta["RequestId"] = lowered["x-amzn-requestid"]
    meta["HTTPStatusCode"] = status
    meta["HTTPHeaders"] = lowered
    if last:
        meta["MaxAttemptsReached"] = True
    meta["RetryAttempts"] = 0
    return meta


# --- answers -------------------------------------------------------------------------------------

#: DynamoDB's AttributeValue: its members and their types, as the service model has them.
ATTRIBUTE_VALUE = {"S": "string", "N": "string", "B": "blob", "SS": "list", "NS": "list",
                   "BS": "list", "M": "map", "L": "list", "NULL": "boolean", "BOOL": "boolean"}


class Unsupported(Exception):
    """A shape :func:`decoder` does not compile (botocore's parser handles it)."""


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


def _listing(item: Convert) -> Convert:
    return lambda node: [None if v is None else item(v) for v in node]


def _mapping(value: Convert) -> Convert:
    return lambda node: {k: value(v) for k, v in node.items()}


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
        for tag in ATTRIBUTE_VALUE:
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


def _is_attribute_value(shape: Any) -> bool:
    members = getattr(shape, "members", None)
    return (shape.type_name == "structure" and shape.name == "AttributeValue"
            and not shape.is_tagged_union and members is not None
            and {k: m.type_name for k, m in members.items()} == ATTRIBUTE_VALUE
            and all(not m.serialization.get("name") for m in members.values())
            and members["M"].value.name == "AttributeValue"
            and members["L"].member.name == "AttributeValue"
            and members["BS"].member.type_name == "blob")


def decoder(shape: Any, blob: Convert, timestamp: Convert) -> Convert:
    """What botocore's JSON parser does to a decoded answer of ``shape``, as one function.

    ``blob`` and ``timestamp`` are the parser's own converters. :raises Unsupported: a shape
    this does not compile (a document, a union, a recursion other than AttributeValue's)."""
    compiled: dict[str, Convert | None] = {}

    def compile_(shape: Any) -> Convert | None:   # None: the value is kept as it is
        kind = shape.type_name
        if kind == "structure":
            if shape.name in compiled:
                done = compiled[shape.name]
                if done is None:
                    raise Unsupported(f"recursive shape {shape.name}")
                return done
            compiled[shape.name] = None
            if _is_attribute_value(shape):
                made: Convert = _attribute_value(blob)
            elif shape.is_document_type or shape.is_tagged_union:
                raise Unsupported(f"{shape.name}: a document or a union")
            else:
                made = _structure([(name, member.serialization.get("name", name),
                                          compile_(member))
                                         for name, member in shape.members.items()])
            compiled[shape.name] = made
            return made
        if kind == "list":
            item = compile_(shape.member)
            return list if item is None else _listing(item)
        if kind == "map":
            if shape.key.type_name != "string":
                raise Unsupported(f"{shape.name}: a map keyed by {shape.key.type_name}")
            value = compile_(shape.value)
            return dict if value is None else _mapping(value)
        if kind == "blob":
            return blob
        if kind == "timestamp":
            return timestamp
        return None

    made = compile_(shape) if shape is not None else None
    if made is None:
        raise Unsupported("no output structure")
    return made
