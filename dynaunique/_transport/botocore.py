"""The fence around botocore's private API, and botocore's transport settings as the client
resolved them.

**The fence** (docs/decisions.md, "The fence"). The request path (``dynaunique._transport.wire``)
makes botocore's very request and answer without botocore's pipeline: it mirrors what a set of
botocore functions do, and reads some of botocore's private names. Every such read is here,
typed: :class:`Client` (a client's emitter, signer, endpoint and User-Agent creator) and the
module's functions; nothing else in the request path reads a botocore private
(``tests/unit/test_botocore_shim.py`` checks it). :data:`ACCEPTED` records, for every botocore
release tested, a hash of the source of each function in :data:`CHECKED` (the ones the path
mirrors, and the privates it calls); :func:`fence` compares the installed botocore's once per
process. A function whose source matches no tested release's, or a private that is missing
(:data:`MISSING`, :func:`stand_aside`), turns the fast path off for good — every call takes
botocore's own steps, still checked and sent once — and one WARNING names what differed. No
version pin: an untested release whose functions are unchanged keeps the fast path; CI runs
the byte-identity and decode tests against the newest botocore on PyPI (``.ci/run``, section
"fence").

**The transport**: what the async sender needs to send exactly where, and as safely as,
botocore's own HTTP session would.

botocore resolves a client's transport when it makes it: ``verify`` (the ``verify=`` argument,
else ``AWS_CA_BUNDLE`` or ``ca_bundle`` in the config file, else ``REQUESTS_CA_BUNDLE``, else
its default bundle), the proxies (``Config(proxies=...)``, else the environment's
``HTTPS_PROXY``/``HTTP_PROXY`` minus ``NO_PROXY``) and ``proxies_config``, the client
certificate, the timeouts and the pool size. Only the last three stay on the client's public
``meta.config``; the others live on its HTTP session (``client._endpoint.http_session``), so
they are read there, in this one function, and nowhere else (docs/decisions.md, "The async
sender honours botocore's transport"). :func:`transport` never raises: a private it cannot
read is taken from what botocore's public API gives (the session's ``ca_bundle``, the
environment's proxies), with one WARNING naming what was missing.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import linecache
import logging
import os
import ssl
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from functools import cache
from typing import Any, Protocol

import attrs
import botocore
import botocore.auth as _auth
import botocore.awsrequest as _awsrequest
import botocore.handlers as _handlers
import botocore.useragent as _useragent
from botocore.awsrequest import HeadersDict
from botocore.client import BaseClient
from botocore.history import get_global_history_recorder
from botocore.httpsession import get_cert_path
from botocore.retries import standard as _standard
from botocore.signers import RequestSigner
from botocore.useragent import UserAgentString
from botocore.utils import get_environ_proxies

_log = logging.getLogger("dynaunique.connection")
_warned: set[str] = set()


#: The botocore releases whose byte-identity and decode tests passed with the fast path on: the
#: source hashes of :data:`ACCEPTED` are theirs (docs/decisions.md, "The fence": the releases
#: tried, and why the others are not here).
TESTED: tuple[str, ...] = ("1.44.0", "1.44.8", "1.44.18")

#: The botocore functions whose behaviour the request path relies on → the hashes of their
#: source (sha256, 16 hex digits) accepted: one per distinct source among the :data:`TESTED`
#: releases. ``python -m dynaunique._transport.botocore`` prints the installed release's; a
#: release's hashes are added (and the release to TESTED) once the byte-identity and decode tests
#: pass against it.
ACCEPTED: dict[str, tuple[str, ...]] = {
    # What the fast path mirrors (does itself, without calling it).
    "botocore.client.BaseClient._make_api_call": ("75ba491f61ffbd4e",),
    "botocore.client.BaseClient._emit_api_params": ("a6e9374a2db6a81f",),
    "botocore.client.BaseClient._convert_to_request_dict": ("9c9089a6ab3b59d6",),
    "botocore.endpoint.Endpoint.create_request": ("3896032f73c0943e",),
    "botocore.endpoint.Endpoint._send_request": ("af914535237dd087",),
    "botocore.endpoint.Endpoint._do_get_response": ("e1821119dedea32b",),
    "botocore.endpoint.convert_to_response_dict": ("4910fc6af731775a",),
    "botocore.auth.SigV4Auth.add_auth": ("0a37f12b13c3d758",),
    "botocore.auth.SigV4Auth.canonical_request": ("fcddf419e5c48554",),
    "botocore.auth.SigV4Auth.canonical_headers": ("b730b3c91eeb2128",),
    "botocore.auth.SigV4Auth.headers_to_sign": ("ab710967c39dab72",),
    "botocore.auth.SigV4Auth.string_to_sign": ("5b4ddbeef6205bf9",),
    "botocore.auth.SigV4Auth.signature": ("e62ff117617719fa",),
    "botocore.auth.SigV4Auth._modify_request_before_signing": ("c5366d6e92e5a6c0",),
    "botocore.signers.RequestSigner.sign": ("b066ac228d0a9b81",),
    "botocore.handlers.add_retry_headers": ("9de75c926ca39ca6",),
    "botocore.handlers.add_recursion_detection_header": ("3f859b1770acde71",),
    "botocore.retries.standard.MaxAttemptsSeeder.seed_max_attempts": ("fb1c1496baef39fb",),
    "botocore.serialize.JSONSerializer.serialize_to_request": ("040af75bce3a010a",),
    "botocore.parsers.BaseJSONParser._handle_structure": ("c0149450e9824bc3",),
    "botocore.parsers.JSONParser._do_parse": ("c9e6874fbd9ecc86",),
    "botocore.parsers.JSONParser._handle_json_body": ("6fdfd1959bfc1dcf",),
    "botocore.awsrequest.prepare_request_dict": ("f2fcf2bf122acc77",),
    "botocore.awsrequest.HeadersDict.__setitem__": ("8442c519e257dc39",),
    # The privates the fast path and botocore's steps call.
    "botocore.client.BaseClient._resolve_endpoint_ruleset": ("3f25c08bf2b07c9a",),
    "botocore.endpoint.Endpoint._send": ("b3217a41d9801162",),
    "botocore.endpoint.Endpoint._update_retries_context": ("f50793020b61fed6",),
    "botocore.endpoint.Endpoint._add_modeled_error_fields": ("b1920c6acf170ec0",),
    "botocore.parsers.ResponseParserFactory.create_parser": ("d680c348280e42bb",),
    "botocore.signers.RequestSigner._choose_signer": ("cbc77f5a8e9afeca", "ebca8ea162e454fd"),
}
#: The functions :func:`fence` checks.
CHECKED: tuple[str, ...] = tuple(ACCEPTED)


def _resolve(name: str) -> Any:
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            found = getattr(found, part)
        return found
    raise ImportError(name)


def source_hash(name: str) -> str:
    """The hash :data:`ACCEPTED` keeps of the botocore function ``name`` (``"missing"``: it
    is gone or its source cannot be read)."""
    try:
        # inspect.getsource's lines, found without its search of every module's file (0.3 s).
        code = inspect.unwrap(_resolve(name)).__code__
        lines = linecache.getlines(code.co_filename)
        source = "".join(inspect.getblock(lines[code.co_firstlineno - 1:]))
    except (ImportError, AttributeError, TypeError, ValueError):
        return "missing"
    if not source:
        return "missing"
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


@cache
def fence() -> tuple[str, ...]:
    """The mirrored functions whose source matches no tested release's (empty: the fast path
    may run). Checked once per process; a difference is logged once, as a WARNING."""
    differ = tuple(name for name in CHECKED if source_hash(name) not in ACCEPTED[name])
    if differ:
        _log.warning(
            "botocore %s changed %s, which dynaunique's fast request path mirrors or calls "
            "(tested: botocore %s); every request takes botocore's own steps instead (correct, "
            "slower)",
            botocore.__version__, ", ".join(differ), ", ".join(TESTED))
    return differ


#: The botocore handlers of :data:`KNOWN` this botocore does not have (the fast path then
#: stands aside: ``_wire.check_client``).
MISSING: list[str] = []


def _found(owner: Any, name: str) -> Any:
    found = getattr(owner, name, None)
    if found is None and owner is not None:     # (an owner missing is named already)
        MISSING.append(f"{getattr(owner, '__name__', owner)}.{name}")
    return found


#: botocore's own handlers of each event the fast path does not emit (it does their work).
KNOWN: dict[str, frozenset[Any]] = {
    "provide-client-params": frozenset(), "before-sign": frozenset(),
    "before-endpoint-resolution": frozenset(),
    "response-received": frozenset(), "before-parse": frozenset(),
    "before-parameter-build": frozenset({
        _handlers.generate_idempotent_uuid,
        _found(_handlers, "_handle_request_validation_mode_member")}),
    "before-call": frozenset({_handlers.add_recursion_detection_header,
                              _handlers.inject_api_version_header_if_needed}),
    "request-created": frozenset({
        RequestSigner.handler,
        _found(_found(_standard, "MaxAttemptsSeeder"), "seed_max_attempts"),
        _found(UserAgentString, "rebuild_and_replace_user_agent_handler"),
        _handlers.add_retry_headers}),
    "choose-signer": frozenset({_handlers.set_operation_specific_signer,
                                _found(_handlers, "_set_auth_scheme_preference_signer")}),
    "needs-retry": frozenset({_standard.RetryHandler.needs_retry}),
}
#: botocore's key of a header in a ``HeadersDict`` (made once per header name).
_HEADER_KEY: Any = getattr(_awsrequest, "_HeaderKey", None)
#: botocore's loggers: at DEBUG, botocore's path (it logs what the fast path would not).
LOGGERS = tuple(logging.getLogger(f"botocore.{n}") for n in (
    "endpoint", "hooks", "auth", "parsers", "client", "regions", "retries.standard", "utils"))

def max_attempts(client: Any) -> int:
    """The attempts the client's retry configuration makes a call (``total_max_attempts``, or
    ``max_attempts`` retries plus one; botocore's default: 3 in legacy mode, which the fast
    path leaves to botocore; 0: not known)."""
    retries = getattr(client.meta.config, "retries", None) or {}
    if "total_max_attempts" in retries:
        return int(retries["total_max_attempts"])
    if "max_attempts" in retries:
        return int(retries["max_attempts"]) + 1
    return 0


# --- the botocore privates the request path reads: here, and nowhere else -----------------------

Convert = Callable[[Any], Any]


class Credentials(Protocol):
    """A signer's credentials (botocore's ``Credentials`` or ``RefreshableCredentials``)."""

    def get_frozen_credentials(self) -> Any: ...


class Parser(Protocol):
    """botocore's response parser."""

    def parse(self, response: dict[str, Any], shape: Any) -> dict[str, Any]: ...


#: botocore's ``BaseClient._make_api_call``: the method the fast path takes the place of.
ORIGINAL_CALL: Callable[[Any, str, dict[str, Any]], Any] = BaseClient._make_api_call


def class_call(client: Any) -> Callable[[Any, str, dict[str, Any]], Any]:
    """The ``_make_api_call`` of the client's class (not :data:`ORIGINAL_CALL`: patched)."""
    method: Callable[[Any, str, dict[str, Any]], Any] = type(client)._make_api_call
    return method


def installed_call(client: Any) -> Any:
    """The ``_make_api_call`` set on the client itself (the fast path's), or None."""
    return vars(client).get("_make_api_call")


def install_call(client: Any, call: Callable[[str, dict[str, Any]], Any]) -> None:
    """Make ``call`` the client's ``_make_api_call`` (an attribute of the instance)."""
    client._make_api_call = call


def serializer(client: Any) -> Any:
    """The client's request serializer (``client._serializer``; None: it has none)."""
    return getattr(client, "_serializer", None)


def set_serializer(client: Any, made: Any) -> None:
    """Make ``made`` the client's request serializer."""
    client._serializer = made


def sender(client: Any) -> Callable[[Any], Any]:
    """botocore's HTTP send of a prepared request (the client's ``Endpoint._send``)."""
    send: Callable[[Any], Any] = client._endpoint._send
    return send


def history_enabled() -> bool:
    """Whether botocore's history recorder records (the fast path then stands aside)."""
    return bool(get_global_history_recorder()._enabled)


def host_from_url(url: str) -> str:
    """The ``host`` header botocore's SigV4 signs for ``url``."""
    host: str = _auth._host_from_url(url)
    return host


def headers_dict(sent: dict[str, Any], keys: dict[str, Any]) -> Any:
    """botocore's ``HeadersDict`` of ``sent`` (in its order), its keys made once per header
    name and kept in ``keys``."""
    made = HeadersDict()
    made._dict = {(keys[k] if k in keys else keys.setdefault(k, _HEADER_KEY(k))): v
                  for k, v in sent.items()}
    return made


def lowered_headers(headers: Any) -> dict[str, str]:
    """Headers with lower-cased names, as botocore's ``lowercase_dict`` (read from a
    ``HeadersDict``'s own keys when it is one)."""
    if type(headers) is HeadersDict:
        return {key._lower: value for key, value in headers._dict.items()}
    return {key.lower(): headers[key] for key in headers}


def seeder_attempts(seeder: Any) -> int | None:
    """The attempts botocore's ``MaxAttemptsSeeder`` writes in the retry headers."""
    attempts: int | None = getattr(seeder, "_max_attempts", None)
    return attempts


def headers_known() -> bool:
    """botocore's ``HeadersDict`` is as :func:`headers_dict` and :func:`lowered_headers` read
    it: a ``_dict`` of ``_HeaderKey`` keys, each with its ``_lower`` name."""
    return (_HEADER_KEY is not None and _HEADER_KEY("A")._lower == "a"
            and vars(HeadersDict({"A": 1})) == {"_dict": {_HEADER_KEY("a"): 1}})


def default_user_agent() -> bool:
    """No plugin changed the components of botocore's User-Agent."""
    # botocore's own default is defined in botocore.useragent (named _default_modify_components
    # since 1.44.x); a plugin's comes from botocore.customizations.useragent.
    modify = getattr(_useragent, "modify_components", None)
    return modify is None or getattr(modify, "__module__", None) == _useragent.__name__


class Client:
    """The privates of one botocore client the request path reads, typed; made once per
    client (:raises AttributeError: one is missing — the client is not one the path knows)."""

    __slots__ = ("client", "emitter", "endpoint", "signer", "ua")

    def __init__(self, client: Any) -> None:
        self.client = client
        #: botocore's ``HierarchicalEmitter`` behind ``client.meta.events``.
        self.emitter: Any = client.meta.events._emitter
        self.signer: Any = client._request_signer
        self.endpoint: Any = client._endpoint
        #: The client's ``UserAgentString`` (its ``to_string()`` is public).
        self.ua: Any = client._user_agent_creator

    def known(self) -> bool:
        """The client's parts are wired as the fast path expects: one emitter shared by the
        client, its endpoint and its signer, with a lookup cache and a prefix search; an
        endpoint ruleset resolver."""
        events = self.client.meta.events
        return (self.endpoint._event_emitter is events
                and self.signer._event_emitter._emitter is self.emitter
                and self.client._ruleset_resolver is not None
                and hasattr(self.emitter, "_lookup_cache")
                and callable(getattr(self.emitter._handlers, "prefix_search", None)))

    def lookup_cache(self) -> object:
        """The emitter's lookup cache: botocore replaces it when a handler is (un)registered."""
        cache: object = self.emitter._lookup_cache
        return cache

    def handlers(self, event: str) -> list[Callable[..., Any]]:
        """The handlers registered on ``event`` and its prefixes, in botocore's order."""
        return list(self.emitter._handlers.prefix_search(event))

    def credentials(self) -> Credentials | None:
        """The signer's credentials (None: none)."""
        found: Credentials | None = self.signer._credentials
        return found

    def signing(self) -> tuple[str, str]:
        """(region, service) the signer signs for."""
        return str(self.signer._region_name), str(self.signer._signing_name)

    def signer_for(self, operation: str, context: dict[str, Any]) -> str | None:
        """The signature version botocore's signer chooses for ``operation``."""
        chosen: str | None = self.signer._choose_signer(operation, "standard", context)
        return chosen

    def converters(self) -> tuple[Convert, Convert]:
        """The JSON parser's own blob and timestamp converters."""
        parser = self.parser("json")
        return parser._blob_parser, parser._timestamp_parser  # type: ignore[attr-defined]

    def parser(self, protocol: str) -> Parser:
        """botocore's response parser for ``protocol`` (the endpoint's factory's)."""
        made: Parser = self.endpoint._response_parser_factory.create_parser(protocol)
        return made

    def resolve_endpoint(self, model: Any, params: dict[str, Any], context: dict[str, Any]
                         ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """botocore's endpoint ruleset resolution: (URL, headers, properties)."""
        url, headers, properties = self.client._resolve_endpoint_ruleset(model, params, context)
        return str(url), headers, properties

    def emit_api_params(self, params: dict[str, Any], model: Any,
                        context: dict[str, Any]) -> dict[str, Any]:
        """botocore's ``provide-client-params``/``before-parameter-build`` step."""
        made: dict[str, Any] = self.client._emit_api_params(
            api_params=params, operation_model=model, context=context)
        return made

    def request_dict(self, params: dict[str, Any], model: Any, url: str,
                     context: dict[str, Any], headers: dict[str, Any]) -> dict[str, Any]:
        """botocore's serialized request dict of a call."""
        made: dict[str, Any] = self.client._convert_to_request_dict(
            api_params=params, operation_model=model, endpoint_url=url, context=context,
            headers=headers)
        return made

    def first_attempt(self, context: dict[str, Any]) -> None:
        """botocore's retry context of the first attempt, set in ``context``."""
        self.endpoint._update_retries_context(context, 1)

    def create_request(self, request_dict: dict[str, Any], model: Any) -> Any:
        """botocore's signed, prepared request (``request-created`` emitted)."""
        return self.endpoint.create_request(request_dict, model)

    def add_error_fields(self, response_dict: dict[str, Any], parsed: dict[str, Any],
                         model: Any, parser: Parser) -> None:
        """botocore's modeled error fields of an error answer, added to ``parsed``."""
        self.endpoint._add_modeled_error_fields(response_dict, parsed, model, parser)


def stand_aside(changed: str) -> None:
    """Log once, as a WARNING, that the fast path stands aside because botocore's ``changed``
    (a private it reads is missing or not as it was)."""
    if changed not in _warned:
        _warned.add(changed)
        _log.warning(
            "botocore %s changed %s, which dynaunique's fast request path reads; every request "
            "takes botocore's own steps instead (correct, slower)", botocore.__version__, changed)


#: The events of a DynamoDB call whose handlers a :class:`Forward` passes on.
FORWARDED = ("provide-client-params", "before-parameter-build", "before-endpoint-resolution",
             "before-call", "request-created", "choose-signer", "before-sign", "before-send",
             "needs-retry", "response-received", "before-parse", "after-call",
             "after-call-error")


def _code(handler: Any) -> tuple[object, object]:
    function = getattr(handler, "__func__", handler)
    return getattr(function, "__module__", None), getattr(function, "__qualname__", function)


class Forward:
    """A handler on a client (``target``, e.g. a global table's home-region client) that runs
    the handlers registered on another (``source``, the model's own) that ``target`` does not
    have itself: the user's (a ``before-send`` hook, a ``Stubber``), not botocore's own per-client
    ones (same code on both: its signer, User-Agent, retries)."""

    def __init__(self, source: Client, target: Client) -> None:
        self.source, self.target = source, target

    def handlers(self, event: str) -> list[Callable[..., Any]]:
        """``source``'s handlers of ``event`` that ``target`` has no handler of the same code
        for."""
        theirs = {_code(h) for h in self.target.handlers(event)}
        return [h for h in self.source.handlers(event) if _code(h) not in theirs]

    def __call__(self, event_name: str, **kwargs: Any) -> Any:
        for handler in self.handlers(event_name):
            answer = handler(event_name=event_name, **kwargs)
            if answer is not None:
                return answer
        return None


@cache
def _botocores_own() -> frozenset[tuple[object, object]]:
    # The handlers a DynamoDB client botocore just made has (its session's, botocore's own).
    import botocore.session

    made = botocore.session.Session().create_client(
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="own", aws_secret_access_key="own")
    own = Client(made)
    return frozenset(_code(h) for event in FORWARDED
                     for h in own.handlers(f"{event}.dynamodb.TransactWriteItems"))


def _ours(module: str) -> bool:
    # PynamoDB's, dynaunique's, or botocore's own per-client handlers (its retry handlers, whose
    # code a default client may not have: another retry mode, an older botocore) — but a
    # ``Stubber`` (``botocore.stub``) is the user's.
    return module.startswith(("pynamodb.", "dynaunique.")) or (
        module.startswith("botocore.") and not module.startswith("botocore.stub"))


def user_handlers(client: Any) -> list[str]:
    """The handlers registered on ``client`` for a DynamoDB write that are neither botocore's
    own, nor PynamoDB's or dynaunique's (a hook, a ``Stubber``…): their names."""
    try:
        privates = Client(client)
    except AttributeError:
        return []
    found = []
    for event in FORWARDED:
        for handler in privates.handlers(f"{event}.dynamodb.TransactWriteItems"):
            code = module, name = _code(handler)
            if code not in _botocores_own() and not _ours(str(module)) \
                    and not isinstance(handler, Forward):
                found.append(f"{event}: {module}.{name}")
    return found


def forward(source: Any, target: Any) -> Forward:
    """Make every handler registered on ``source`` (now or later) run on ``target``'s DynamoDB
    calls too (:class:`Forward`, registered first on each of :data:`FORWARDED`)."""
    made = Forward(Client(source), Client(target))
    for event in FORWARDED:
        target.meta.events.register_first(f"{event}.dynamodb", made,
                                          unique_id=f"dynaunique-forward-{event}")
    return made


#: Set while the library sends one request (``_connection.answer``): the call is sent once, its
#: retries being the library's own loop, whatever the client's retry settings. A call without it
#: (PynamoDB's own ``Model.get`` on the same client) is botocore's, retries and all.
once: ContextVar[bool] = ContextVar("dynaunique_once", default=False)


@attrs.frozen
class Transport:
    """How a botocore client sends: what ``httpx`` needs to send the same way."""

    #: ``True`` (botocore's default bundle), ``False`` (no verification) or a CA bundle's path.
    verify: bool | str
    #: The client certificate: a path, or (certificate, key) paths; None: none.
    cert: str | tuple[str, str] | None
    #: The proxy URL for the client's endpoint (None: direct), and its headers (basic auth).
    proxy: str | None
    proxy_headers: Mapping[str, str]
    #: botocore's ``proxies_config``: ``proxy_ca_bundle``, ``proxy_client_cert``…
    proxy_settings: Mapping[str, Any]
    connect_timeout: float | None
    read_timeout: float | None
    max_pool_connections: int
    #: botocore's ``Config(tcp_keepalive=True)``: ``SO_KEEPALIVE`` on every connection.
    tcp_keepalive: bool = False
    #: The client's endpoint URL (whether the proxy, if any, would carry HTTPS).
    endpoint_url: str = ""


def _missing(what: str) -> None:
    if what not in _warned:
        _warned.add(what)
        _log.warning("botocore's HTTP session has no %s (botocore changed): the async sender "
                     "takes it from botocore's configuration instead", what)


def transport(client: Any) -> Transport:
    """The transport settings botocore resolved for ``client``."""
    config = client.meta.config
    endpoint_url = str(client.meta.endpoint_url)
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    verify: Any = getattr(session, "_verify", None)
    if verify is None:
        _missing("_verify")
        verify = True
    proxies = getattr(session, "_proxy_config", None)
    proxy: str | None
    if proxies is not None and callable(getattr(proxies, "proxy_url_for", None)):
        proxy = proxies.proxy_url_for(endpoint_url)
        headers = dict(proxies.proxy_headers_for(proxy)) if proxy else {}
        settings = dict(getattr(proxies, "settings", None) or {})
    else:
        _missing("_proxy_config")
        configured = config.proxies or get_environ_proxies(endpoint_url)
        proxy = configured.get(endpoint_url.partition(":")[0])
        headers, settings = {}, dict(config.proxies_config or {})
    cert_file = getattr(session, "_cert_file", None)
    key_file = getattr(session, "_key_file", None)
    cert: str | tuple[str, str] | None = (
        (cert_file, key_file) if cert_file and key_file else cert_file or config.client_cert)
    return Transport(verify=verify, cert=cert, proxy=proxy or None, proxy_headers=headers,
                     proxy_settings=settings, connect_timeout=config.connect_timeout,
                     read_timeout=config.read_timeout,
                     max_pool_connections=int(config.max_pool_connections),
                     tcp_keepalive=bool(getattr(config, "tcp_keepalive", False)),
                     endpoint_url=endpoint_url)


def ssl_context(verify: bool | str, cert: str | tuple[str, str] | None) -> ssl.SSLContext:
    """The TLS context botocore's session would use: its CA bundle (``get_cert_path``: the
    given file or directory, or botocore's default), no verification for ``verify=False``, and
    the client certificate."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        path = str(get_cert_path(verify))
        context = (ssl.create_default_context(capath=path) if os.path.isdir(path)
                   else ssl.create_default_context(cafile=path))
    if isinstance(cert, tuple):
        context.load_cert_chain(cert[0], cert[1])
    elif cert:
        context.load_cert_chain(cert)
    return context


if __name__ == "__main__":  # the installed botocore's hash of each checked function
    print(f"# botocore {botocore.__version__}")
    for _name in CHECKED:
        print(f'    "{_name}": "{source_hash(_name)}",')
