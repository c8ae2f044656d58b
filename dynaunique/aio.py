"""The asyncio sender: drives the library's sans-IO steps over an async HTTP client.

``await arun(steps)`` performs the steps of any of dynaunique's generators (a flush, a read,
``get_by_unique``) — the same generators :func:`dynaunique._transport.connection.run` drives
synchronously — so the async path plans, sends, retries and settles exactly as the sync one does.

Each request is built, signed and parsed by the very botocore client of the model's PynamoDB
connection (:func:`dynaunique._transport.clients.connection_for`): the same region (unset:
botocore's region chain), host, credentials, timeouts and ``extra_headers`` as the sync path, the
same botocore event hooks (a ``before-send`` handler that answers — ``moto``'s ``mock_aws``,
botocore's ``Stubber`` — answers here too), the same error classes; PynamoDB's
``pre_dynamodb_send``/``post_dynamodb_send`` signals fire for every request. Only the HTTP
exchange itself goes over :mod:`httpx` (the ``async`` extra:
``pip install -e '/path/to/clone[async]'``); the sync API never imports this module.
Why this and not aiobotocore: docs/decisions.md.

One ``httpx.AsyncClient`` per event loop (and per connection settings), created on first use.
Close them with ``await dynaunique.aio.close()`` before the loop ends, or use
``async with dynaunique.aio.session():`` around the code that writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import uuid
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import botocore.exceptions
import httpx
from botocore.awsrequest import AWSResponse, HeadersDict
from pynamodb.connection import Connection

from dynaunique._transport import botocore as _botocore
from dynaunique._transport import wire as _wire
from dynaunique._transport.answers import Ambiguous, Answer, Ok, answer_of
from dynaunique._transport.connection import Sleep, Steps
from dynaunique.errors import ConfigurationError

__all__ = ["arun", "close", "session"]

_T = TypeVar("_T")

# event loop → connection → (the botocore client, its HTTP client). Weak on the loop: a loop
# that is gone takes its clients' entry with it.
_clients: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop,
    dict[int, tuple[Any, httpx.AsyncClient]]] = weakref.WeakKeyDictionary()

#: Operations PynamoDB's ``dispatch`` does not add ``ReturnConsumedCapacity`` to.
_TABLE_OPERATIONS = frozenset({"DescribeTable", "ListTables", "UpdateTable", "UpdateTimeToLive",
                               "DeleteTable", "CreateTable"})


async def arun(steps: Steps[_T]) -> _T:
    """Drive ``steps`` under asyncio: each request over this loop's HTTP client, answered with
    an :class:`~dynaunique._transport.answers.Answer` as
    :func:`dynaunique._transport.connection.run` answers it (the same
    :func:`~dynaunique._transport.answers.answer_of` reads the failures), each backoff as
    ``asyncio.sleep``. The async twin of :func:`dynaunique._transport.connection.run`."""
    try:
        step = next(steps)
        while True:
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                step = steps.send(None)
                continue
            try:
                got: Answer | BaseException = Ok(
                    await dispatch(step.connection, step.operation, step.params))
            except asyncio.CancelledError as exc:
                # The request may have landed: the logic records that as it does after a lost
                # answer (a repeat of the call then recognises its own write), and the task
                # still ends cancelled.
                with contextlib.suppress(Exception):
                    steps.send(Ambiguous(exc, lasting=True))
                raise
            except Exception as exc:
                failure = answer_of(exc)
                got = exc if failure is None else failure
            step = steps.throw(got) if isinstance(got, BaseException) else steps.send(got)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        steps.close()


async def dispatch(connection: Connection, operation: str,
                   params: Mapping[str, Any]) -> dict[str, Any]:
    """One request, as PynamoDB's ``Connection.dispatch`` sends it, over the async client.

    :raises botocore.exceptions.ClientError: DynamoDB answered with an error (the class
        botocore raises for its code).
    :raises botocore.exceptions.ConnectionError: the HTTP exchange failed (refused, timed out,
        cut), in the classes botocore raises for the same failures.
    """
    kwargs = dict(params)
    if operation not in _TABLE_OPERATIONS and "ReturnConsumedCapacity" not in kwargs:
        kwargs.update(connection.get_consumed_capacity_map("TOTAL"))
    table_name = kwargs.get("TableName")
    req_uuid = uuid.uuid4()
    connection.send_pre_boto_callback(operation, req_uuid, table_name)  # type: ignore[no-untyped-call]
    # As PynamoDB's dispatch: the post signal only after an answer that is not an error.
    data = await _make_api_call(connection, operation, kwargs)
    connection.send_post_boto_callback(operation, req_uuid, table_name)  # type: ignore[no-untyped-call]
    return data


async def _make_api_call(connection: Connection, operation: str,
                         api_params: dict[str, Any]) -> dict[str, Any]:
    # botocore's BaseClient._make_api_call, as the sync path makes it (dynaunique._transport.wire:
    # the same request, fast or botocore's own steps), with the HTTP send awaited.
    call = _wire.start(connection.client, operation, api_params)
    if call.request is None:               # a before-call handler answered
        return dict(call.finish(None))
    try:
        response = call.before_send()
        if response is None:
            response = await _send(connection, call.request)
    except Exception as exc:
        call.failed(exc)
    return dict(call.finish(response))


class _Body:
    """The raw body botocore's ``AWSResponse`` reads its ``content`` from."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._content


async def _send(connection: Connection, request: Any) -> AWSResponse:
    url = request.url
    try:
        answer = await http_client(connection).request(
            request.method, url, headers=dict(request.headers.items()), content=request.body)
    except (httpx.ConnectError, httpx.PoolTimeout) as exc:
        # Never sent: DynamoDB cannot have applied it.
        raise botocore.exceptions.EndpointConnectionError(endpoint_url=url, error=exc) from exc
    except httpx.ConnectTimeout as exc:
        raise botocore.exceptions.ConnectTimeoutError(endpoint_url=url, error=exc) from exc
    except httpx.TimeoutException as exc:
        raise botocore.exceptions.ReadTimeoutError(endpoint_url=url, error=exc) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        raise botocore.exceptions.ConnectionClosedError(endpoint_url=url) from exc
    except httpx.TransportError as exc:
        raise botocore.exceptions.HTTPClientError(error=exc) from exc
    except ssl.SSLError as exc:
        # TLS 1.3 sends an alert (a client certificate required, a bad one) at the first read,
        # after the request went out; httpx lets it through unwrapped. botocore's SSLError, as
        # the sync path raises it: the outcome is unknown, never a raw error.
        raise botocore.exceptions.SSLError(endpoint_url=url, error=exc) from exc
    except OSError as exc:   # a socket error httpx did not wrap: the connection failed mid-call
        raise botocore.exceptions.ConnectionClosedError(endpoint_url=url) from exc
    return AWSResponse(url, answer.status_code, HeadersDict(answer.headers.items()),
                       _Body(answer.content))


def http_client(connection: Connection) -> httpx.AsyncClient:
    """This event loop's HTTP client for a connection's botocore client (made on first use).

    It sends as botocore's own HTTP session would (``dynaunique._transport.botocore.transport``):
    the same CA bundle or ``verify=False``, client certificate, proxy for the endpoint (with its
    ``proxies_config`` CA bundle and client certificate), connect and read timeouts;
    ``max_pool_connections`` connections are kept alive, and more are opened when more requests
    are in flight, as botocore's own pool does. The environment is not read again (botocore
    read it: ``AWS_CA_BUNDLE``, ``HTTPS_PROXY``, ``NO_PROXY``…).
    """
    loop = asyncio.get_running_loop()
    clients = _clients.setdefault(loop, {})
    client = connection.client
    made = clients.get(id(connection))
    if made is None or made[1].is_closed or made[0] is not client:
        made = clients[id(connection)] = (client, _made(_botocore.transport(client)))
    return made[1]


def _made(transport: _botocore.Transport) -> httpx.AsyncClient:
    proxy = None
    if transport.proxy is not None:
        settings = transport.proxy_settings
        if settings.get("proxy_use_forwarding_for_https") \
                and transport.endpoint_url.startswith("https:"):
            raise ConfigurationError(
                "proxies_config's proxy_use_forwarding_for_https is not supported by the async "
                "sender: httpx always tunnels HTTPS through the proxy with CONNECT. Send with "
                "save() (botocore honours it), or leave the setting off if the proxy accepts "
                "CONNECT (docs/async.md, \"Transport\")")
        proxy_tls = None
        if settings.get("proxy_ca_bundle") or settings.get("proxy_client_cert"):
            proxy_tls = _botocore.ssl_context(settings.get("proxy_ca_bundle") or True,
                                              settings.get("proxy_client_cert"))
        proxy = httpx.Proxy(transport.proxy, headers=dict(transport.proxy_headers),
                            ssl_context=proxy_tls)
    sender = httpx.AsyncHTTPTransport(
        verify=_botocore.ssl_context(transport.verify, transport.cert),
        proxy=proxy, trust_env=False,
        limits=httpx.Limits(max_connections=None,
                            max_keepalive_connections=transport.max_pool_connections),
        # botocore's tcp_keepalive: SO_KEEPALIVE, as its session sets it (nothing else).
        socket_options=[(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
        if transport.tcp_keepalive else None)
    return httpx.AsyncClient(
        transport=sender, trust_env=False,
        timeout=httpx.Timeout(transport.read_timeout, connect=transport.connect_timeout))


async def close() -> None:
    """Close this event loop's HTTP clients (they are made again on the next request)."""
    clients = _clients.pop(asyncio.get_running_loop(), {})
    for _, made in clients.values():
        await made.aclose()


@asynccontextmanager
async def session() -> AsyncIterator[None]:
    """``async with dynaunique.aio.session(): ...`` — close this loop's clients at the end.

    For an app's lifespan (FastAPI's ``lifespan=``, aiohttp's ``cleanup_ctx``) or a script's
    ``main()``.
    """
    try:
        yield
    finally:
        await close()
