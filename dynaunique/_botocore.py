"""The fence around botocore's private API, and botocore's transport settings as the client
resolved them.

**The fence** (docs/decisions.md, "The fence"). The fast request path (``dynaunique._wire``,
``dynaunique._codec``) makes botocore's very request and answer without botocore's pipeline: it
mirrors what a set of botocore functions do. :data:`MIRRORED` records, for every botocore
release tested, a hash of each such function's source; :func:`fence` compares the installed
botocore's once per process. A function whose source matches no tested release's is a change
the fast path may no longer mirror: the fast path then stands aside for good (every call takes
botocore's own steps, still checked and sent once) and one WARNING names the functions that
differed. No version pin: an untested release whose functions are unchanged keeps the fast
path; CI runs the byte-identity and decode tests against the newest botocore on PyPI
(``.ci/run``, section "fence").

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
from collections.abc import Mapping
from contextvars import ContextVar
from functools import cache
from typing import Any

import attrs
import botocore
import botocore.awsrequest as _awsrequest
import botocore.handlers as _handlers
from botocore.httpsession import get_cert_path
from botocore.retries import standard as _standard
from botocore.signers import RequestSigner
from botocore.useragent import UserAgentString
from botocore.utils import get_environ_proxies

_log = logging.getLogger("dynaunique.connection")
_warned: set[str] = set()


#: The botocore functions the fast path mirrors → the hash of their source (sha256, 16 hex
#: digits) in each tested botocore release. Add a release's column after its byte-identity
#: and decode tests pass (``python -m dynaunique._botocore`` prints it).
MIRRORED: dict[str, dict[str, str]] = {
    "1.44.8": {
        "botocore.client.BaseClient._make_api_call": "75ba491f61ffbd4e",
        "botocore.client.BaseClient._emit_api_params": "a6e9374a2db6a81f",
        "botocore.client.BaseClient._convert_to_request_dict": "9c9089a6ab3b59d6",
        "botocore.endpoint.Endpoint.create_request": "3896032f73c0943e",
        "botocore.endpoint.Endpoint._send_request": "af914535237dd087",
        "botocore.endpoint.Endpoint._do_get_response": "e1821119dedea32b",
        "botocore.endpoint.convert_to_response_dict": "4910fc6af731775a",
        "botocore.auth.SigV4Auth.add_auth": "0a37f12b13c3d758",
        "botocore.auth.SigV4Auth.canonical_request": "fcddf419e5c48554",
        "botocore.auth.SigV4Auth.canonical_headers": "b730b3c91eeb2128",
        "botocore.auth.SigV4Auth.headers_to_sign": "ab710967c39dab72",
        "botocore.auth.SigV4Auth.string_to_sign": "5b4ddbeef6205bf9",
        "botocore.auth.SigV4Auth.signature": "e62ff117617719fa",
        "botocore.auth.SigV4Auth._modify_request_before_signing": "c5366d6e92e5a6c0",
        "botocore.signers.RequestSigner.sign": "b066ac228d0a9b81",
        "botocore.handlers.add_retry_headers": "9de75c926ca39ca6",
        "botocore.handlers.add_recursion_detection_header": "3f859b1770acde71",
        "botocore.retries.standard.MaxAttemptsSeeder.seed_max_attempts": "fb1c1496baef39fb",
        "botocore.serialize.JSONSerializer.serialize_to_request": "040af75bce3a010a",
        "botocore.parsers.BaseJSONParser._handle_structure": "c0149450e9824bc3",
        "botocore.parsers.JSONParser._do_parse": "c9e6874fbd9ecc86",
        "botocore.parsers.JSONParser._handle_json_body": "6fdfd1959bfc1dcf",
        "botocore.awsrequest.prepare_request_dict": "f2fcf2bf122acc77",
        "botocore.awsrequest.HeadersDict.__setitem__": "8442c519e257dc39",
    },
}


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
    """The hash :data:`MIRRORED` records of the botocore function ``name`` (``"missing"``: it
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
    names = next(iter(MIRRORED.values()))
    differ = tuple(name for name in names
                   if source_hash(name) not in {hashes.get(name) for hashes in MIRRORED.values()})
    if differ:
        _log.warning(
            "botocore %s changed %s, which dynaunique's fast request path mirrors (tested: "
            "botocore %s); every request takes botocore's own steps instead (correct, slower)",
            botocore.__version__, ", ".join(differ), ", ".join(MIRRORED))
    return differ


#: botocore's own handlers of each event the fast path does not emit (it does their work).
KNOWN: dict[str, frozenset[Any]] = {
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
#: botocore's key of a header in a ``HeadersDict`` (``_wire`` makes each name's once).
HEADER_KEY: Any = getattr(_awsrequest, "_HeaderKey", None)
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
                     max_pool_connections=int(config.max_pool_connections))


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


if __name__ == "__main__":  # the installed botocore's column of MIRRORED
    print(f'    "{botocore.__version__}": {{')
    for _name in next(iter(MIRRORED.values())):
        print(f'        "{_name}": "{source_hash(_name)}",')
    print("    },")
