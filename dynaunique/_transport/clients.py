"""A model's client: the PynamoDB connection a model's requests go through, and the library's
request path wired into its botocore client.

:func:`connection_for` is the one place a model's client is chosen: the model's own PynamoDB
connection (``model._get_connection().connection``), what PynamoDB itself writes through — so the
client's event handlers, a ``Stubber`` on it, ``mock_aws``, its session and settings apply to
the library's requests as to PynamoDB's. :func:`install` puts ``dynaunique._transport.wire``'s
serializer and request path in a client (once per client; ``_connection.answer`` wires a client
PynamoDB made again, e.g. after its credentials went missing).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from pynamodb.connection import Connection

from dynaunique._transport import botocore as _botocore
from dynaunique._transport.wire import FastPath, FastSerializer

#: The connections wired so far (what ``client_hooks`` were run for), by ``id``.
_connections: weakref.WeakValueDictionary[int, Connection] = weakref.WeakValueDictionary()
#: The models whose connections the library wired (for :func:`forget`).
_wired: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()
#: Called with every botocore client the library wires (a model's, the first time the library
#: sends through it, and again when PynamoDB makes it a new client), e.g. to register botocore
#: event handlers (the benchmarks count requests this way).
client_hooks: list[Callable[[Any], None]] = []


def install(client: Any) -> bool:
    """Serialize ``client``'s requests with ``_wire.FastSerializer`` and send them through a
    ``_wire.FastPath``; False when it already was (or the private hooks are missing: ``client``
    is left as it is)."""
    inner = _botocore.serializer(client)
    if isinstance(_botocore.installed_call(client), FastPath):
        return False
    if not isinstance(inner, FastSerializer):
        from botocore.serialize import JSONSerializer
        if not isinstance(inner, JSONSerializer) or not hasattr(inner, "serialize_to_request"):
            return False
        _botocore.set_serializer(client, FastSerializer(inner))
    _botocore.install_call(client, FastPath(client))
    for hook in client_hooks:
        hook(client)
    return True


def connection_for(model: Any) -> Connection:
    """The PynamoDB connection a model's requests go through: the model's own, its client wired
    (:func:`install`). The one place a model's client is chosen."""
    connection: Connection = model._get_connection().connection
    if "_connection" not in vars(model) and not _made_for(connection, model.Meta):
        # PynamoDB keeps one connection per class hierarchy and table (its ``_get_connection``
        # compares only the table name): a subclass naming another region or host would send
        # through its parent's. Its own, made as PynamoDB makes one; the parent keeps its.
        model._connection = None
        connection = model._get_connection().connection
    if install(connection.client) or id(connection) not in _connections:
        with _lock:
            _connections[id(connection)] = connection
            _wired.add(model)
    return connection


def _made_for(connection: Connection, meta: Any) -> bool:
    """Whether ``connection`` is for the region and host ``meta`` names (a setting it leaves
    unset is PynamoDB's default, which any connection of the hierarchy was made with)."""
    region = getattr(meta, "region", None)
    host = getattr(meta, "host", None)
    return ((region is None or connection.region == region)
            and (host is None or connection.host == host))


#: (model, region) → (the model's own connection it was made beside, the home region's one).
_homes: dict[tuple[Any, str], tuple[Connection, Connection]] = {}


def connection_in(model: Any, meta: Any) -> Connection:
    """The connection a call of ``model`` goes through where ``dynaunique._transport.regions.route``
    sent it: the model's own (:func:`connection_for`) when ``meta`` is its ``Meta``; else ``meta``
    is the model's settings signed for a global table's home region, and this is a PynamoDB
    connection made from them as PynamoDB makes the model's, wired the same way, kept per model
    and region and made again when the model's own connection is. Every handler registered on
    the model's own client, before or after, runs on this one's calls too (a ``before-send``
    hook, a ``Stubber``: ``_botocore.forward``).
    """
    own = connection_for(model)
    if meta is model.Meta:
        return own
    key = (model, str(meta.region))
    with _lock:
        kept = _homes.get(key)
    if kept is not None and kept[0] is own:
        return kept[1]
    home = Connection(region=meta.region, host=meta.host,
                      connect_timeout_seconds=meta.connect_timeout_seconds,
                      read_timeout_seconds=meta.read_timeout_seconds,
                      max_retry_attempts=meta.max_retry_attempts,
                      max_pool_connections=meta.max_pool_connections,
                      extra_headers=meta.extra_headers,
                      aws_access_key_id=meta.aws_access_key_id,
                      aws_secret_access_key=meta.aws_secret_access_key,
                      aws_session_token=meta.aws_session_token)
    install(home.client)
    _botocore.forward(own.client, home.client)
    with _lock:
        _homes[key] = (own, home)
        _connections[id(home)] = home
    return home


def client_for(model: Any) -> Any:
    """The botocore client behind :func:`connection_for` (to register event handlers on)."""
    return connection_for(model).client


def target_of(connection: Connection) -> tuple[str, str]:
    """Where a connection's requests go: (region, endpoint URL) of its botocore client."""
    meta = connection.client.meta
    return str(meta.region_name), str(meta.endpoint_url)


def forget() -> None:
    """Drop the PynamoDB connection of every model the library sent through (PynamoDB makes
    each again on its next request, with a new botocore client): for tests that change the
    environment a connection was made from, or registered handlers on its client."""
    with _lock:
        models, connections = list(_wired), list(_connections.values())
        _wired.clear()
        _connections.clear()
        _homes.clear()
    for model in models:
        model._connection = None
    for connection in connections:
        # A parent's connection its subclasses share: made again too.
        connection._client = None
