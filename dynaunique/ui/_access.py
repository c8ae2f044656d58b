"""Who may use the page: its config and secrets, the Host check, the access token, the headers.

Every request passes :class:`_Access` first: the Host header must be ``127.0.0.1`` or
``localhost`` (a page on another site cannot reach the server through DNS rebinding), and the
request must carry the access token — once in the URL (``?token=``, as printed at start, which
then moves into an HttpOnly, SameSite=Strict cookie), in that cookie, or as ``Authorization:
token <token>``. Anything else is answered 403. Every POST must also carry the CSRF token the
pages embed in their forms (checked by the pages with :func:`_same`) and, when the browser sends
an ``Origin``, a local one (:func:`local_origin`).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any
from urllib.parse import urlencode, urlsplit

import attrs
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dynaunique.model import Model

#: Host header names a request may use (any port): anything else is a page of another site.
_ALLOWED_HOSTS = frozenset({"127.0.0.1", "localhost"})
_SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
     b"frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # The URL may carry the token: never send it along to another site. (Not no-referrer:
    # under it a browser sends the page's own POSTs with "Origin: null", an opaque origin that
    # :func:`local_origin` refuses; under same-origin they carry the page's real Origin.)
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def _token() -> str:
    return secrets.token_urlsafe(32)


@attrs.frozen
class UIConfig:
    """What one page serves, and the secrets that guard it."""

    models: tuple[type[Model], ...]
    #: The access token every request must carry (printed in the start URL).
    token: str = attrs.field(factory=_token, repr=False)
    #: The token every POST form carries.
    csrf: str = attrs.field(factory=_token, repr=False)
    #: Whether repair controls exist and repair POSTs are accepted.
    allow_repair: bool = False
    #: For the page header: the models' module and the endpoint.
    module: str = ""
    endpoint: str = ""


class _Refused(Exception):
    """A request the page turns down, with the status and the reason it shows."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def local_origin(origin: str) -> bool:
    """Whether an ``Origin`` header names a page served on this machine: ``http(s)://`` and
    ``127.0.0.1`` or ``localhost``, any port. ``null`` (an opaque origin: a sandboxed frame, a
    ``data:`` URL, a redirect across sites) is not."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 (a malformed port raises)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.hostname in _ALLOWED_HOSTS


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class _Access:
    """ASGI middleware: local Host only, the access token on every request, security headers."""

    def __init__(self, app: ASGIApp, config: UIConfig, env: Any) -> None:
        self.app = app
        self.config = config
        self.env = env

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        request = Request(scope)
        response = self._refusal(request)
        if response is None:
            await self.app(scope, receive, send_with_headers)
        else:
            await response(scope, receive, send_with_headers)

    def _cookie(self, request: Request) -> str:
        # Cookies ignore ports: two pages on one machine must not overwrite each other's.
        port = request.url.port or (scope_port(request.scope))
        return f"dynaunique_ui_{port}"

    def _refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "")
        name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0]
        if (name or host) not in _ALLOWED_HOSTS:
            return self._denied("this page answers only on 127.0.0.1 or localhost")
        given = request.query_params.get("token")
        if given is not None:
            if not _same(given, self.config.token):
                return self._denied("wrong access token: open the URL dynaunique ui printed")
            # Move the token from the URL into a cookie, so it leaves the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self._cookie(request), self.config.token, httponly=True,
                                samesite="strict", path="/")
            return response
        authorization = request.headers.get("authorization", "")
        header = authorization[6:] if authorization.lower().startswith("token ") else None
        if not (_same(request.cookies.get(self._cookie(request)), self.config.token)
                or _same(header, self.config.token)):
            return self._denied("missing or wrong access token: open the URL dynaunique ui "
                                "printed (it ends in ?token=...)")
        return None

    def _denied(self, reason: str) -> Response:
        return HTMLResponse(self.env.get_template("denied").render(reason=reason),
                            status_code=403)


def scope_port(scope: Scope) -> int:
    """The port the server answered on (0 when the scope does not say)."""
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else 0
