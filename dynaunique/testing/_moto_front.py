"""The local server's HTTP front: werkzeug's request handler, keeping the connection open.

werkzeug's development server closes every connection after its response (``Connection:
close``): :mod:`http.server` cannot tell where a request body it did not read ends, so it could
not find the next request line. Every request then costs the server a new connection and a new
thread, and the client a new connection (botocore's pool keeps none), about as much CPU as the
request itself on a small ``GetItem``. :func:`keep_alive_handler` subclasses the handler the
server uses (moto's, which keeps S3's underscored header names) and, for a request whose body it
can delimit — an HTTP/1.1 request with a ``Content-Length`` (or none, and no body), not chunked,
not ``Expect: 100-continue`` and not ``HEAD`` — reads the whole body first, runs the application
on it, and answers without ``Connection: close``, so the client sends its next request on the
same connection. The environment, status, headers and body are werkzeug's own (its
``make_environ``, ``send_response``, ``send_header``; a response without ``Content-Length`` is
chunked as werkzeug chunks it, and an application that raises is answered with werkzeug's
``InternalServerError`` and the connection closed). Any other request, and every request when the
client asks for ``Connection: close`` or speaks HTTP/1.0, is werkzeug's ``run_wsgi`` unchanged.

:data:`PIECES` holds the source hash of each werkzeug, standard library and moto function each
piece of the front relies on, as verified; a piece whose functions differ (another Python, another
werkzeug) is left out, not refused: the front is a saving, never a condition of correctness.
"""

from __future__ import annotations

import io
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from werkzeug.serving import WSGIRequestHandler

__all__ = ["PIECES", "SIGNATURES", "SOURCES", "VERIFIED_PYTHON", "install_header_parser",
           "keep_alive_handler", "parse_headers", "random_string"]

_WERKZEUG_LOG = logging.getLogger("werkzeug")

#: The Python the standard library's hashes below were verified on (the front's tests passed).
VERIFIED_PYTHON = (3, 11, 7)

#: The front's three pieces, each with what it relies on: the parameters each function takes and
#: its verified source hash (:func:`dynaunique.testing._moto_check.source_hash`; several
#: separated by spaces). ``keep_alive`` answers for werkzeug's handler on http.server's
#: keep-alive loop, ``header_parser`` replaces http.client's header parse, ``request_id`` draws
#: moto's request ids. Python's standard library and werkzeug are not pinned (other Pythons than
#: the one verified have other sources): a piece whose functions are not as verified is left out
#: and the server answers as werkzeug and moto do (:func:`dynaunique.testing._moto_patch.front`).
PIECES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "keep_alive": {
        "werkzeug.serving.WSGIRequestHandler.run_wsgi": (("self",), "774df60c75af"),
        "werkzeug.serving.WSGIRequestHandler.make_environ": (("self",), "5aa026f5fa8c"),
        "werkzeug.serving.WSGIRequestHandler.log_request": (("self", "code", "size"),
                                                            "65cbfae9ae9a"),
        "http.server.BaseHTTPRequestHandler.handle": (("self",), "2f6ec5042f51"),
        "http.server.BaseHTTPRequestHandler.handle_one_request": (("self",), "0c8c287cb20f"),
        "http.server.BaseHTTPRequestHandler.parse_request": (("self",), "5088937a2b7c"),
        "http.server.BaseHTTPRequestHandler.send_header": (("self", "keyword", "value"),
                                                           "d421dee36efd"),
        "http.server.BaseHTTPRequestHandler.end_headers": (("self",), "97d4c80d810f"),
        "http.server.BaseHTTPRequestHandler.flush_headers": (("self",), "cba7dbbf73c2"),
    },
    "header_parser": {
        "http.client.parse_headers": (("fp", "_class"), "38aa1ecf42ac"),
        "http.client._read_headers": (("fp",), "6c136b63737f"),
    },
    # The request id's characters, drawn as moto draws them.
    "request_id": {
        "moto.moto_api._internal.moto_random.MotoRandom.get_random_string": (
            ("self", "length", "include_digits", "lower_case"), "942eb93ebea1"),
        "random.Random.choice": (("self", "seq"), "cf51676d79ea"),
        "random.Random._randbelow_with_getrandbits": (("self", "n"), "ddae4cce28f2"),
    },
}
SIGNATURES: dict[str, tuple[str, ...]] = {
    name: params for functions in PIECES.values() for name, (params, _) in functions.items()}
SOURCES: dict[str, frozenset[str]] = {
    name: frozenset(digests.split())
    for functions in PIECES.values() for name, (_, digests) in functions.items()
}


def _delimited(handler: Any) -> int | None:
    """The body length of a request the lean path can answer; ``None`` for werkzeug's path."""
    headers = handler.headers
    if (handler.request_version != "HTTP/1.1" or handler.close_connection
            or handler.command == "HEAD" or "Transfer-Encoding" in headers
            or "Expect" in headers):
        return None
    lengths = headers.get_all("Content-Length") or []
    if not lengths:  # a body-less request; a POST without a length is werkzeug's to read
        return 0 if handler.command in ("GET", "DELETE", "OPTIONS") else None
    length = lengths[0].strip()
    if len(lengths) != 1 or not (length.isascii() and length.isdigit()):
        return None
    return int(length)


def keep_alive_handler(base: type[WSGIRequestHandler]) -> type[WSGIRequestHandler]:  # noqa: C901  # a class factory: its methods count here
    """``base`` (werkzeug's request handler or moto's subclass of it), keeping connections."""

    class KeepAliveRequestHandler(base):  # type: ignore[valid-type,misc]
        """A request handler that answers a delimited request and keeps the connection."""

        def run_wsgi(self) -> None:
            length = _delimited(self)
            if length is None:
                super().run_wsgi()
                return
            body = self.rfile.read(length) if length else b""
            if len(body) != length:  # the client went away mid-body
                self.close_connection = True
                return
            self.environ = environ = self.make_environ()
            environ["wsgi.input"] = io.BytesIO(body)
            answer: list[Any] = []

            def start_response(status: str, headers: list[tuple[str, str]],
                               exc_info: Any = None) -> Any:
                if answer and exc_info is None:
                    raise AssertionError("Headers already set")
                answer[:] = [status, headers]
                return lambda data: None  # the lean path takes the body from the iterable

            try:
                data = _drain(self.server.app(environ, start_response))
                if not answer:
                    raise AssertionError("write() before start_response")
            except Exception as exc:
                if self.server.passthrough_errors:
                    raise
                from werkzeug.debug.tbtools import DebugTraceback
                from werkzeug.exceptions import InternalServerError

                answer.clear()
                data = _drain(InternalServerError()(environ, start_response))
                self.close_connection = True
                self.server.log("error", "Error on request:\n"
                                + DebugTraceback(exc).render_traceback_text())
            self._answer(answer[0], answer[1], data)

        def _answer(self, status: str, headers: list[tuple[str, str]], data: bytes) -> None:
            """Send one response as werkzeug's ``run_wsgi`` writes it, minus ``Connection``;
            the status line, headers and body in one write (werkzeug: one for the head, one
            for the body)."""
            try:
                code_text, message = status.split(None, 1)
            except ValueError:
                code_text, message = status, ""
            code = int(code_text)
            self.send_response(code, message)
            keys = set()
            for key, value in headers:
                self.send_header(key, value)
                keys.add(key.lower())
            chunked = not ("content-length" in keys or 100 <= code < 200 or code in {204, 304})
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
                framed = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
                data = framed + b"0\r\n\r\n"
            if self.close_connection:
                self.send_header("Connection", "close")
            # end_headers, with the body in the same write (an HTTP/1.1 request, never 0.9)
            self._headers_buffer.append(b"\r\n")
            self._headers_buffer.append(data)
            self.flush_headers()

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            # werkzeug formats the line (the path decoded to an IRI, colours) before its logger
            # drops it: the server logs warnings and errors only.
            if _WERKZEUG_LOG.isEnabledFor(logging.INFO):
                super().log_request(code, size)

    KeepAliveRequestHandler.__qualname__ = f"KeepAlive{base.__name__}"
    return KeepAliveRequestHandler


def _drain(result: Any) -> bytes:
    from dynaunique.testing._server_rules import drain

    return drain(result)


# --- the request's header block, parsed without the email package ----------------------------

# One header line as the email package's compat32 parser reads it (printable ASCII only, here):
# a name of printable characters but the colon, the value after the colon's blanks, to the CRLF.
_HEADER_LINE = re.compile(r"([\041-\071\073-\176]+):[ \t]*([\t\040-\176]*)\r\n")


def parse_headers(fp: Any, _class: Any = None) -> Any:
    """``http.client.parse_headers``, without the email package for a plain header block.

    The standard one decodes the lines (ISO-8859-1) and feeds them to ``email.parser``, about a
    tenth of a small request's CPU. A block of ``Name: value`` lines ending in CRLF, with an
    empty CRLF line last, parses there to ``(name, value)`` pairs (the value after the colon's
    blanks, to the CRLF) and an empty payload: that is built here directly, the same object
    (its ``vars()`` are equal). Any other block (folded lines, bare LF or CR, a line without a
    name, end of file) goes to the email package as before.
    """
    import http.client

    message_class: Any = http.client.HTTPMessage if _class is None else _class
    lines = http.client._read_headers(fp)  # type: ignore[attr-defined]
    if lines[-1] == b"\r\n":
        pairs = []
        for line in lines[:-1]:
            match = _HEADER_LINE.fullmatch(line.decode("iso-8859-1"))
            if match is None:
                break
            pairs.append((match[1], match[2]))
        else:
            message = message_class()
            message._headers = pairs
            message._payload = ""
            return message
    import email.parser

    text = b"".join(lines).decode("iso-8859-1")
    return email.parser.Parser(_class=message_class).parsestr(text)


def install_header_parser() -> None:
    """Make :func:`parse_headers` the server process's ``http.client.parse_headers``."""
    import http.client

    original = http.client.parse_headers
    if getattr(original, "__wrapped__", None) is None:
        parse_headers.__wrapped__ = original  # type: ignore[attr-defined]
        http.client.parse_headers = parse_headers


# --- the request id ----------------------------------------------------------------------------


def random_string(original: Any) -> Any:
    """``MotoRandom.get_random_string``, drawing the very same numbers without a call per draw.

    moto names every response with a 52-character request id, one ``Random.choice`` a character
    (two calls each, about a twentieth of a small request's CPU). ``choice`` takes
    ``_randbelow(len(pool))``, which for a ``Random`` is ``_randbelow_with_getrandbits``: draw
    ``getrandbits(n.bit_length())`` until it is below ``n``. This loop does exactly that, inline,
    so a seeded moto (``/moto-api/seed``) makes the same ids and leaves the same state; a
    generator that draws otherwise (another ``choice`` or ``_randbelow``) gets moto's own.
    """
    import random
    import string

    def get_random_string(self: Any, length: int = 20, include_digits: bool = True,
                          lower_case: bool = False) -> str:
        below = getattr(self._randbelow, "__func__", None)
        if (below is not random.Random._randbelow_with_getrandbits  # type: ignore[attr-defined]
                or type(self).choice is not random.Random.choice):
            return str(original(self, length, include_digits, lower_case))
        pool = string.ascii_letters
        if include_digits:
            pool += string.digits
        size = len(pool)
        bits = size.bit_length()
        getrandbits = self.getrandbits
        drawn = []
        for _ in range(length):
            number = getrandbits(bits)
            while number >= size:
                number = getrandbits(bits)
            drawn.append(pool[number])
        text = "".join(drawn)
        return text.lower() if lower_case else text

    return get_random_string
