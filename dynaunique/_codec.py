"""The request path's set-up: what ``dynaunique._wire`` computes once, not per request.

``dynaunique._wire`` makes and reads the library's requests; everything it decides or compiles
once per client, per operation or per shape is here, so that a request's own work stays in one
module (one excursion per request, and none here unless something is seen for the first time):

* :func:`check_client` — whether a botocore client is one the fast path knows (its privates as
  checked, DynamoDB's JSON protocol, SigV4);
* :func:`operation` — one operation's :class:`Op`: its serialized request's template
  (:func:`template`: what does not depend on the parameters), where its table names are, the
  events the fast path skips or emits, its answers' decoder (:func:`decoder`);
* :func:`handlers_known` — that only botocore's own handlers are on the skipped events (again
  after any registration); :func:`resolve` — the endpoint, by botocore's ruleset, per table
  names and account; :func:`user_agent` — the User-Agent per features;
* :func:`botocore_steps` — botocore's ``_make_api_call`` step by step, for the asyncio driver
  when the fast path stands aside; :func:`parse` and :func:`failed` — botocore's parser and
  events for an error answer or a failed send; :func:`signing_key` — SigV4's key per day.

Each gives exactly what botocore gives (``tests/unit/test_wire.py`` and
``tests/unit/test_fastpath.py`` compare them). Nothing here imports ``dynaunique._wire``: the
converters a decoder is made of are handed in (:class:`Makers`), so their code lives, and runs,
in ``_wire``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

import botocore.auth as _auth
import botocore.context as _ctx
import botocore.httpchecksum as _checksum
from botocore.awsrequest import HeadersDict, prepare_request_dict
from botocore.compress import maybe_compress_request
from botocore.endpoint import convert_to_response_dict
from botocore.utils import normalize_url_path

from dynaunique import _botocore
from dynaunique._botocore import HEADER_KEY, KNOWN, max_attempts

Convert = Callable[[Any], Any]

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

# --- serializing ---------------------------------------------------------------------------------


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


# --- the client and its operations ---------------------------------------------------------------


def request_context(client: Any, model: Any) -> dict[str, Any]:
    """botocore's ``_make_api_call``'s request context (no auth scheme preference: checked)."""
    meta = client.meta
    return {"client_region": meta.region_name, "client_config": meta.config,
            "has_streaming_input": model.has_streaming_input,
            "auth_type": model.resolved_auth_type, "unsigned_payload": model.unsigned_payload,
            "auth_options": meta.service_model.metadata.get("auth")}


class Op:
    """One operation of one client: what the fast path needs of it, computed once."""

    __slots__ = ("attempts", "checked", "context", "decode", "endpoints", "events", "member",
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
        #: The client's attempts a call (its retry headers say ``max=`` that; sent once here).
        self.attempts = max_attempts(client)


def check_client(path: Any) -> bool:
    """Set on the fast path ``path`` the privates of its client it uses; whether the client is
    one it knows."""
    client = path.client
    if _botocore.fence():       # botocore changed what the fast path mirrors (warned once)
        return False
    try:
        events = client.meta.events
        path.emitter = events._emitter
        path.signer = client._request_signer
        path.endpoint = client._endpoint
        path.ua = client._user_agent_creator
        parser = path.endpoint._response_parser_factory.create_parser("json")
        path.blob, path.timestamp = parser._blob_parser, parser._timestamp_parser
        from botocore import useragent
        return (client.meta.service_model.resolved_protocol == "json"
                and client.meta.service_model.service_id.hyphenize() == "dynamodb"
                and path.endpoint._event_emitter is events
                and path.signer._event_emitter._emitter is path.emitter
                and client._ruleset_resolver is not None
                and _auth.AUTH_TYPE_MAPS.get("v4") is _auth.SigV4Auth
                and useragent.modify_components is useragent._default_modify_components
                and not client.meta.config.auth_scheme_preference
                and hasattr(path.emitter, "_lookup_cache")
                and callable(getattr(path.emitter._handlers, "prefix_search", None))
                and None not in set().union(*KNOWN.values())
                and HEADER_KEY is not None and HEADER_KEY("A")._lower == "a"
                and vars(HeadersDict({"A": 1})) == {"_dict": {HEADER_KEY("a"): 1}})
    except Exception:  # a private is missing or changed: botocore's path
        return False


def operation(path: Any, name: str, makers: Makers) -> Op | None:
    """The :class:`Op` of ``name`` for the fast path ``path`` (None: botocore's path)."""
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
        decode = decoder(model.output_shape, path.blob, path.timestamp, makers)
    except Unsupported:
        decode = None
    where = next((ARN_LISTS[v["path"]] for v in lists.values()),
                 "TableName" if member else None)
    return Op(client, model, where, decode)


def handlers_known(path: Any, op: Op) -> bool:
    """Only botocore's own handlers on every event the fast path skips (checked again after
    any handler is registered or removed: botocore then drops its lookup cache)."""
    cache = path.emitter._lookup_cache
    for event, known in KNOWN.items():
        for handler in path.emitter._handlers.prefix_search(op.events[event]):
            owner: Any = getattr(handler, "__self__", None)
            if getattr(handler, "__func__", handler) not in known:
                return False
            kind = type(owner).__name__
            if (kind == "RequestSigner" and owner is not path.signer) or (
                    kind == "UserAgentString" and owner is not path.ua) or (
                    kind == "MaxAttemptsSeeder" and owner._max_attempts != op.attempts):
                return False
    # The retry handler itself is never asked on the fast path: a call is sent once.
    if path.signer._choose_signer(op.model.name, "standard", dict(op.context)) != "v4":
        return False
    op.checked = cache
    return True


def resolve(client: Any, op: Op, params: dict[str, Any], context: dict[str, Any],
            key: Any) -> Any:
    """Where ``op``'s request for these table names and account goes: (URL, host, path,
    User-Agent features), or False (botocore's path) — botocore's own resolution, in a context
    of its own to see which user-agent features it registers; kept per ``key``."""
    scratch = _ctx.ClientContext()
    token = _ctx.set_context(scratch)
    try:
        url, headers, properties = client._resolve_endpoint_ruleset(
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


def user_agent(path: Any, key: tuple[tuple[str, ...], frozenset[str] | None], outer: Any) -> str:
    """The User-Agent botocore sends with the features ``key`` names (kept in ``path.uas``)."""
    scratch = _ctx.ClientContext(set(() if outer is None else outer.features))
    scratch.features.update(key[0])
    token = _ctx.set_context(scratch)
    try:
        made: str = path.ua.to_string()
        path.uas[key] = made
    finally:
        _ctx.reset_context(token)
    return made


def botocore_steps(client: Any, operation_name: str,
                   api_params: dict[str, Any]) -> tuple[Op, dict[str, Any], Any, Any]:
    """botocore's ``_make_api_call`` up to its send: (the operation, the request dict, the
    request to send — None when a ``before-call`` handler answered —, that answer)."""
    op = Op(client, client.meta.service_model.operation_model(operation_name), None, None)
    model = op.model
    context = dict(op.context)
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
        return op, request_dict, None, answered
    maybe_compress_request(client.meta.config, request_dict, model)
    _checksum.apply_request_checksum(request_dict)
    client._endpoint._update_retries_context(context, 1)
    return op, request_dict, client._endpoint.create_request(request_dict, model), None


def emit(call: Any, event: str, **kwargs: Any) -> Any:
    """Emit ``event`` of ``call``'s operation on its client."""
    return call.client.meta.events.emit(call.op.events[event], **kwargs)


def parse(call: Any, http: Any) -> Any:
    """botocore's ``Endpoint._do_get_response`` after the send of ``call`` (a ``_wire`` call)
    and its retry check (1 attempt): an error answer, or one the decoder did not fit."""
    endpoint, model = call.client._endpoint, call.op.model
    context = call.request_dict["context"]
    response_dict = convert_to_response_dict(http, model)
    _checksum.handle_checksum_body(http, response_dict, context, model)
    customized: dict[str, Any] = {}
    emit(call, "before-parse", operation_model=model, response_dict=response_dict,
          customized_response_dict=customized)
    parser = endpoint._response_parser_factory.create_parser(
        model.service_model.resolved_protocol)
    parsed = parser.parse(response_dict, model.output_shape)
    parsed.update(customized)
    if http.status_code >= 300:
        endpoint._add_modeled_error_fields(response_dict, parsed, model, parser)
    emit(call, "response-received", response_dict=convert_to_response_dict(http, model),
          parsed_response=parsed, context=context, exception=None)
    _retried(call, (http, parsed), None)
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return parsed


def _retried(call: Any, response: Any, exception: Any) -> None:
    emit(call, "needs-retry", response=response, endpoint=call.client._endpoint,
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


# --- answers -------------------------------------------------------------------------------------

#: DynamoDB's AttributeValue: its members and their types, as the service model has them.
ATTRIBUTE_VALUE = {"S": "string", "N": "string", "B": "blob", "SS": "list", "NS": "list",
                   "BS": "list", "M": "map", "L": "list", "NULL": "boolean", "BOOL": "boolean"}


class Unsupported(Exception):
    """A shape :func:`decoder` does not compile (botocore's parser handles it)."""


class Makers(NamedTuple):
    """The converters a decoder is made of (``_wire``'s), each made from its parts."""

    #: ``[(member, wire name, its converter or None)]`` → a structure's converter.
    structure: Callable[[list[tuple[str, str, Convert | None]]], Convert]
    #: the parser's blob converter → DynamoDB's AttributeValue's converter.
    attribute_value: Callable[[Convert], Convert]
    #: a member's converter → a list's; a value's converter → a string-keyed map's.
    listing: Callable[[Convert], Convert]
    mapping: Callable[[Convert], Convert]


def _is_attribute_value(shape: Any) -> bool:
    members = getattr(shape, "members", None)
    return (shape.type_name == "structure" and shape.name == "AttributeValue"
            and not shape.is_tagged_union and members is not None
            and {k: m.type_name for k, m in members.items()} == ATTRIBUTE_VALUE
            and all(not m.serialization.get("name") for m in members.values())
            and members["M"].value.name == "AttributeValue"
            and members["L"].member.name == "AttributeValue"
            and members["BS"].member.type_name == "blob")


def decoder(shape: Any, blob: Convert, timestamp: Convert, makers: Makers) -> Convert:
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
                made: Convert = makers.attribute_value(blob)
            elif shape.is_document_type or shape.is_tagged_union:
                raise Unsupported(f"{shape.name}: a document or a union")
            else:
                made = makers.structure([(name, member.serialization.get("name", name),
                                          compile_(member))
                                         for name, member in shape.members.items()])
            compiled[shape.name] = made
            return made
        if kind == "list":
            item = compile_(shape.member)
            return list if item is None else makers.listing(item)
        if kind == "map":
            if shape.key.type_name != "string":
                raise Unsupported(f"{shape.name}: a map keyed by {shape.key.type_name}")
            value = compile_(shape.value)
            return dict if value is None else makers.mapping(value)
        if kind == "blob":
            return blob
        if kind == "timestamp":
            return timestamp
        return None

    made = compile_(shape) if shape is not None else None
    if made is None:
        raise Unsupported("no output structure")
    return made
