"""botocore's transport settings, as the client resolved them: what the async sender needs to
send exactly where, and as safely as, botocore's own HTTP session would.

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

import logging
import os
import ssl
from collections.abc import Mapping
from typing import Any

import attrs
from botocore.httpsession import get_cert_path
from botocore.utils import get_environ_proxies

_log = logging.getLogger("dynaunique.connection")
_warned: set[str] = set()


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
