"""The one module that touches botocore's privates: the library's requests, made cheaply.

:func:`install` puts ``_codec.FastSerializer`` in front of a client's serializer and a
:class:`FastPath` in place of its ``_make_api_call`` (which PynamoDB's ``_make_api_call``, under
``dispatch``, still calls). The fast path builds botocore's very request (URL, headers, SigV4
signature, User-Agent, body) without its event pipeline, endpoint ruleset or request objects,
emits ``before-send`` and sends through the client's endpoint; a success is decoded by a
decoder compiled from the output shape, errors and failed sends go to botocore's parser and
events. It leaves the call to botocore whenever anything is not as it checked (docs/decisions.md,
"A request path below dispatch"). :func:`start` gives a call as steps for ``dynaunique.aio``.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any, NoReturn
from urllib.parse import quote, urlsplit

import botocore.auth as _auth
import botocore.context as _ctx
import botocore.handlers as _handlers
import botocore.httpchecksum as _checksum
from botocore.awsrequest import AWSPreparedRequest, HeadersDict, prepare_request_dict
from botocore.client import BaseClient
from botocore.compress import maybe_compress_request
from botocore.endpoint import convert_to_response_dict
from botocore.history import get_global_history_recorder
from botocore.hooks import first_non_none_response
from botocore.retries import standard as _standard
from botocore.signers import RequestSigner
from botocore.useragent import UserAgentString
from botocore.utils import normalize_url_path
from pynamodb.connection import Connection

from dynaunique import _codec
from dynaunique._codec import OPERATIONS, FastSerializer, body

__all__ = ["OPERATIONS", "FastConnection", "FastPath", "FastSerializer", "body", "start"]


def install(client: Any) -> bool:
    """Serialize ``client``'s requests with :class:`FastSerializer` and send them through a
    :class:`FastPath`; False (``client`` left as it is) when the private hooks are missing."""
    inner = getattr(client, "_serializer", None)
    if not isinstance(inner, FastSerializer):
        from botocore.serialize import JSONSerializer
        if not isinstance(inner, JSONSerializer) or not hasattr(inner, "serialize_to_request"):
            return False
        client._serializer = FastSerializer(inner)
    if not isinstance(client.__dict__.get("_make_api_call"), FastPath):
        client._make_api_call = FastPath(client)
    return True


class FastConnection(Connection):
    """PynamoDB's ``Connection``, its botocore client wired by :func:`install` (``dispatch``,
    the signals, the settings and ``_make_api_call``, what PynamoDB's tests mock, are its own)."""

    _wired: Any = None

    @property
    def client(self) -> Any:
        """PynamoDB's botocore client (made on first use), with the fast path installed."""
        client = super().client
        if client is not self._wired:
            install(client)
            self._wired = client
        return client


_ORIGINAL = BaseClient._make_api_call


#: botocore's own handlers of each event the fast path does not emit (it does their work).
_KNOWN: dict[str, frozenset[Any]] = {
    "provide-client-params": frozenset(), "before-sign": frozenset(),
    "before-endpoint-resolution": frozenset(),
    "response-received": frozenset(), "before-parse": frozenset(),
    "before-parameter-build": frozenset({
        _handlers.generate_idempotent_uuid,
        getattr(_handlers, "_handle_request_validation_mode_member", None)}),
    "before-call": frozenset({_handlers.add_recursion_detection_header,
                              _handlers.inject_api_version_header_if_needed}),
    "request-created": frozenset({
        RequestSigner.handler, getattr(_standard.MaxAttemptsSeeder, "seed_max_attempts", None),
        UserAgentString.rebuild_and_replace_user_agent_handler, _handlers.add_retry_headers}),
    "choose-signer": frozenset({_handlers.set_operation_specific_signer,
                                getattr(_handlers, "_set_auth_scheme_preference_signer", None)}),
    "needs-retry": frozenset({_standard.RetryHandler.needs_retry}),
}
_LOGGERS = tuple(logging.getLogger(f"botocore.{n}") for n in (
    "endpoint", "hooks", "auth", "parsers", "client", "regions", "retries.standard", "utils"))
def _request_context(client: Any, model: Any) -> dict[str, Any]:
    # botocore's _make_api_call's request context (no auth scheme preference: checked).
    meta = client.meta
    return {"client_region": meta.region_name, "client_config": meta.config,
            "has_streaming_input": model.has_streaming_input,
            "auth_type": model.resolved_auth_type, "unsigned_payload": model.unsigned_payload,
            "auth_options": meta.service_model.metadata.get("auth")}


class _Op:
    """One operation of one client: what the fast path needs of it, computed once."""

    __slots__ = ("checked", "decode", "endpoints", "events", "member", "model")

    def __init__(self, model: Any, member: str | None, decode: Any) -> None:
        # Where its table names are (None: none); its answers' decoder (None: botocore's parser).
        self.model, self.member, self.decode = model, member, decode
        self.endpoints: dict[Any, Any] = {}
        self.events = {e: f"{e}.dynamodb.{model.name}" for e in (
            *_KNOWN, "before-send", "after-call", "after-call-error")}
        self.events["before-endpoint-resolution"] = "before-endpoint-resolution.dynamodb"
        self.checked: Any = None      # the emitter's lookup cache the handlers were checked for


class FastPath:
    """``client._make_api_call`` for the library's operations (see the module's docstring)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._ops: dict[str, _Op | None] = {}
        self._uas: dict[Any, str] = {}        # the User-Agent per features
        self._ready = self._check_client()

    def _check_client(self) -> bool:
        client = self.client
        try:
            events = client.meta.events
            self.emitter = events._emitter
            self.signer = client._request_signer
            self.endpoint = client._endpoint
            self.ua = client._user_agent_creator
            parser = self.endpoint._response_parser_factory.create_parser("json")
            self.blob, self.timestamp = parser._blob_parser, parser._timestamp_parser
            from botocore import useragent
            return (client.meta.service_model.resolved_protocol == "json"
                    and client.meta.service_model.service_id.hyphenize() == "dynamodb"
                    and self.endpoint._event_emitter is events
                    and self.signer._event_emitter._emitter is self.emitter
                    and client._ruleset_resolver is not None
                    and _auth.AUTH_TYPE_MAPS.get("v4") is _auth.SigV4Auth
                    and useragent.modify_components is useragent._default_modify_components
                    and not client.meta.config.auth_scheme_preference
                    and hasattr(self.emitter, "_lookup_cache")
                    and callable(getattr(self.emitter._handlers, "prefix_search", None))
                    and None not in set().union(*_KNOWN.values()))
        except Exception:  # a private is missing or changed: botocore's path
            return False

    def _op(self, name: str) -> _Op | None:
        if name in self._ops:
            return self._ops[name]
        op = None
        model = self.client.meta.service_model.operation_model(name)
        member = {p.name: p.member_name for p in model.context_parameters}
        lists = model.operation_context_parameters or {}
        if (name in OPERATIONS and self._ready and not model.static_context_parameters
                and member in ({}, {"ResourceArn": "TableName"})
                and all(k == "ResourceArnList" and v.get("path") in _codec.ARN_LISTS
                        for k, v in lists.items()) and not (member and lists)
                and not model.has_streaming_input and not model.has_streaming_output
                and not model.has_event_stream_output and not model.http_checksum
                and not model.request_compression and not model.unsigned_payload
                and not model.is_endpoint_discovery_operation and model.endpoint is None
                and model.resolved_auth_type in (None, "v4")):
            try:
                decode = _codec.decoder(model.output_shape, self.blob, self.timestamp)
            except _codec.Unsupported:
                decode = None
            where = next((_codec.ARN_LISTS[v["path"]] for v in lists.values()),
                         "TableName" if member else None)
            op = _Op(model, where, decode)
        self._ops[name] = op
        return op

    def _handlers_known(self, op: _Op) -> bool:
        """Only botocore's own handlers on every event the fast path skips (checked again
        after any handler is registered or removed: botocore then drops its lookup cache)."""
        cache = self.emitter._lookup_cache
        if op.checked is cache:
            return True
        for event, known in _KNOWN.items():
            for handler in self.emitter._handlers.prefix_search(op.events[event]):
                owner: Any = getattr(handler, "__self__", None)
                if getattr(handler, "__func__", handler) not in known:
                    return False
                kind = type(owner).__name__
                if (kind == "RequestSigner" and owner is not self.signer) or (
                        kind == "UserAgentString" and owner is not self.ua) or (
                        kind == "MaxAttemptsSeeder" and owner._max_attempts != 1) or (
                        kind == "RetryHandler" and owner._retry_policy._retry_checker
                        ._max_attempts_checker._max_attempts != 1):
                    return False
        context = _request_context(self.client, op.model)
        if self.signer._choose_signer(op.model.name, "standard", context) != "v4":
            return False
        op.checked = cache
        return True

    def __call__(self, operation_name: str, api_params: dict[str, Any]) -> Any:
        client, method = self.client, type(self.client)._make_api_call
        if method is not _ORIGINAL:            # botocore's method is patched (a mock): use it
            return method(client, operation_name, api_params)
        call = self.begin(operation_name, api_params)
        if call is None:
            return method(client, operation_name, api_params)
        try:
            response = call.before_send()
            if response is None:
                response = self.endpoint._send(call.request)
        except Exception as exc:
            call.failed(exc)
        return call.finish(response)

    def begin(self, operation_name: str, params: dict[str, Any]) -> _Call | None:
        """The call's request, built and signed as botocore would; None: botocore's path."""
        op = self._ops[operation_name] if operation_name in self._ops else self._op(operation_name)
        if op is None or not self._handlers_known(op):
            return None
        credentials = self.signer._credentials
        if credentials is None or (getattr(credentials, "refresh_needed", None) is not None
                                   and credentials.refresh_needed()):
            return None
        if get_global_history_recorder()._enabled or any(
                log.isEnabledFor(logging.DEBUG) for log in _LOGGERS):
            return None
        frozen = credentials.get_frozen_credentials()
        model = op.model
        context = _request_context(self.client, model)
        _handlers.generate_idempotent_uuid(params=params, model=model)
        try:
            key = (_codec.tables(params, op.member), frozen.account_id)
            where = op.endpoints.get(key)
        except Exception:  # not the shape the model has: botocore says what is wrong
            return None
        if where is None:
            where = self._resolve(op, params, context, key)
        if not where:
            return None
        url, host, path, features = where
        request_dict = self.client._serializer.serialize_to_request(params, model)
        if request_dict.get("url_path") != "/" or request_dict.get("query_string") \
                or request_dict.get("method") != "POST" or "host_prefix" in request_dict:
            return None
        headers = request_dict["headers"]
        outer = _ctx.get_context()   # the User-Agent's cache read here: no excursion per call
        ua = (features, None if outer is None else frozenset(outer.features))
        headers["User-Agent"] = self._uas[ua] if ua in self._uas else self._user_agent(ua, outer)
        request_dict["url"] = url
        request_dict["context"] = context
        _handlers.add_recursion_detection_header(request_dict)
        invocation = str(uuid.uuid4())
        context["retries"] = {"attempt": 1, "invocation-id": invocation, "max": 1}
        stamp = context["timestamp"] = _auth.get_current_datetime().strftime(
            _auth.SIGV4_TIMESTAMP)
        payload = request_dict["body"]
        prepared = HeadersDict(_codec.signed(
            headers, host, path, payload, stamp, frozen, self.signer._region_name,
            self.signer._signing_name, _auth.SIGNED_HEADERS_BLACKLIST, invocation))
        request = AWSPreparedRequest("POST", url, prepared, payload, False, context)
        return _Call(self.client, op, request_dict, request)

    def _resolve(self, op: _Op, params: dict[str, Any], context: dict[str, Any],
                 key: Any) -> Any:
        # botocore's own resolution, in a context of its own to see which user-agent features
        # it registers; kept per operation, table names and account (the ruleset's inputs).
        scratch = _ctx.ClientContext()
        token = _ctx.set_context(scratch)
        try:
            url, headers, properties = self.client._resolve_endpoint_ruleset(
                op.model, params, dict(context))
        finally:
            _ctx.reset_context(token)
        where: Any = False
        if not headers and not properties:
            probe: dict[str, Any] = {"url_path": "/", "query_string": "", "headers": {}}
            prepare_request_dict(probe, endpoint_url=url)
            full = probe["url"]
            if not urlsplit(full).query:
                where = (full, _auth._host_from_url(full),
                         quote(normalize_url_path(urlsplit(full).path), safe="/~"),
                         tuple(scratch.features))
        if len(op.endpoints) > 256:
            op.endpoints.clear()
        op.endpoints[key] = where
        return where

    def _user_agent(self, key: tuple[tuple[str, ...], frozenset[str] | None], outer: Any) -> str:
        scratch = _ctx.ClientContext(set(() if outer is None else outer.features))
        scratch.features.update(key[0])
        token = _ctx.set_context(scratch)
        try:
            made: str = self.ua.to_string()
            self._uas[key] = made
        finally:
            _ctx.reset_context(token)
        return made


class _Call:
    """One call's steps after its request is built: ``before_send``, then ``finish`` with the
    answer, or ``failed`` with what the sending raised — botocore's events and parsing."""

    __slots__ = ("answered", "client", "op", "request", "request_dict")

    def __init__(self, client: Any, op: _Op, request_dict: dict[str, Any], request: Any,
                 answered: Any = None) -> None:
        self.client, self.op, self.request_dict = client, op, request_dict
        self.request, self.answered = request, answered

    def _emit(self, event: str, **kwargs: Any) -> Any:
        return self.client.meta.events.emit(self.op.events[event], **kwargs)

    def before_send(self) -> Any:
        """The answer of a ``before-send`` handler (moto, a stub), or None: send it."""
        return first_non_none_response(self._emit("before-send", request=self.request))

    def finish(self, http: Any) -> Any:
        """The parsed answer; botocore's ClientError for an error answer."""
        context = self.request_dict["context"]
        model = self.op.model
        if self.answered is not None:        # a before-call handler answered (botocore's path)
            http, parsed = self.answered
        else:
            parsed = None
            if http.status_code < 300 and self.op.decode is not None:
                parsed = self._decode(http)
            if parsed is None:
                parsed = self._parse(http)
        self._emit("after-call", http_response=http, parsed=parsed, model=model, context=context)
        if http.status_code >= 300:
            code = context.get("error_code_override") or parsed.get("Error", {}).get("Code")
            raise self.client.exceptions.from_code(code)(parsed, model.name)
        return parsed

    def _decode(self, http: Any) -> Any:
        try:
            content = http.content
            parsed = self.op.decode(json.loads(content.decode("utf-8")) if content else {})
        except Exception:  # not what the model says: botocore's parser says what it says
            return None
        parsed["ResponseMetadata"] = _codec.metadata(http.headers, http.status_code)
        return parsed

    def _parse(self, http: Any) -> Any:
        # botocore's Endpoint._do_get_response after the send, and the retry check (1 attempt).
        endpoint, model = self.client._endpoint, self.op.model
        context = self.request_dict["context"]
        response_dict = convert_to_response_dict(http, model)
        _checksum.handle_checksum_body(http, response_dict, context, model)
        customized: dict[str, Any] = {}
        self._emit("before-parse", operation_model=model, response_dict=response_dict,
                   customized_response_dict=customized)
        parser = endpoint._response_parser_factory.create_parser(
            model.service_model.resolved_protocol)
        parsed = parser.parse(response_dict, model.output_shape)
        parsed.update(customized)
        if http.status_code >= 300:
            endpoint._add_modeled_error_fields(response_dict, parsed, model, parser)
        self._emit("response-received", response_dict=convert_to_response_dict(http, model),
                   parsed_response=parsed, context=context, exception=None)
        self._retried((http, parsed), None)
        if "ResponseMetadata" in parsed:
            parsed["ResponseMetadata"]["RetryAttempts"] = 0
        return parsed

    def _retried(self, response: Any, exception: Any) -> None:
        self._emit("needs-retry", response=response, endpoint=self.client._endpoint,
                   operation=self.op.model, attempts=1, caught_exception=exception,
                   request_dict=self.request_dict)

    def failed(self, exc: Exception) -> NoReturn:
        """The sending raised ``exc``: botocore's events for it, then ``exc`` raised."""
        context = self.request_dict["context"]
        self._emit("response-received", response_dict=None, parsed_response=None,
                   context=context, exception=exc)
        self._retried(None, exc)
        self._emit("after-call-error", exception=exc, context=context)
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
        return _steps(client, operation_name, api_params)


def _steps(client: Any, operation_name: str, api_params: dict[str, Any]) -> _Call:
    op = _Op(client.meta.service_model.operation_model(operation_name), None, None)
    model = op.model
    context = _request_context(client, model)
    api_params = client._emit_api_params(api_params=api_params, operation_model=model,
                                         context=context)
    url, headers, properties = client._resolve_endpoint_ruleset(model, api_params, context)
    if properties:
        context["endpoint_properties"] = properties
    request_dict = client._convert_to_request_dict(
        api_params=api_params, operation_model=model, endpoint_url=url, context=context,
        headers=headers)
    _checksum.resolve_checksum_context(request_dict, model, api_params)
    _, answered = client.meta.events.emit_until_response(
        op.events["before-call"], model=model, params=request_dict,
        request_signer=client._request_signer, context=context)
    if answered is not None:
        return _Call(client, op, request_dict, None, answered)
    maybe_compress_request(client.meta.config, request_dict, model)
    _checksum.apply_request_checksum(request_dict)
    client._endpoint._update_retries_context(context, 1)
    return _Call(client, op, request_dict, client._endpoint.create_request(request_dict, model))

