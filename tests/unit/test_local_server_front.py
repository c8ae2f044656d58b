"""The local server's HTTP front without a server: its header parser builds exactly the message
the standard library's builds, and leaves every other header block to it."""

from __future__ import annotations

import email.parser
import http.client
import io

import pytest

from dynaunique.testing import _moto_front

BOTOCORE = (
    b"Host: 127.0.0.1:41235\r\n"
    b"Accept-Encoding: identity\r\n"
    b"X-Amz-Target: DynamoDB_20120810.GetItem\r\n"
    b"Content-Type: application/x-amz-json-1.0\r\n"
    b"User-Agent: Boto3/1.40.8 md/Botocore#1.40.8 ua/2.1 os/linux#6.1 cfg/retry-mode#legacy\r\n"
    b"X-Amz-Date: 20261202T051000Z\r\n"
    b"Authorization: AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/dynamodb/aws4_"
    b"request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=9f0e\r\n"
    b"amz-sdk-invocation-id: 6b1c-44\r\n"
    b"amz-sdk-request: attempt=1; max=1\r\n"
    b"Content-Length: 52\r\n"
    b"\r\n"
)

# Header blocks the fast path takes: equal messages, field by field.
TAKEN = [
    BOTOCORE,
    b"\r\n",  # no header at all
    b"A: 1\r\nA: 2\r\nb:\r\nC:   \t spaced and trailing  \r\nD:\tx\r\n\r\n",  # repeats, blanks
    b"X-Weird!#$%&'*+-.^_`|~: v:w:x\r\nE: \"quoted\" ; q=1, (c)\r\n\r\n",
]
# Header blocks it leaves to the email package (the same answer, from the email package).
LEFT = [
    b"Folded: first\r\n second line\r\n\r\n",  # an obsolete line folding
    b"Bare: lf\n\n",  # lines ending in LF alone
    b"A: 1\r\n",  # end of file before the empty line
    b"NoColon\r\nA: 1\r\n\r\n",  # a line that is no header
    b": empty name\r\n\r\n",
    b"From somebody\r\nA: 1\r\n\r\n",  # an mbox "From " line
    b"Latin: caf\xe9\r\n\r\n",  # beyond ASCII
    b"Ctl: a\x0bb\r\n\r\n",  # a control character in a value
    b"Mid: a\rb\r\n\r\n",  # a CR inside a line
    b"Space Name: x\r\n\r\n",
]


STOCK = http.client.parse_headers  # the standard library's, as imported


def _fields(message: http.client.HTTPMessage) -> dict[str, object]:
    """A message's fields, its defects (compared by identity) by type and text."""
    fields = dict(vars(message))
    fields["defects"] = [(type(d), str(d)) for d in message.defects]
    return fields


@pytest.mark.parametrize("block", TAKEN + LEFT)
def test_the_parser_builds_the_standard_librarys_message(block: bytes) -> None:
    stream, stock_stream = io.BytesIO(block + b"BODY\r\n"), io.BytesIO(block + b"BODY\r\n")
    ours = _moto_front.parse_headers(stream, _class=http.client.HTTPMessage)
    theirs = STOCK(stock_stream, _class=http.client.HTTPMessage)
    assert type(ours) is http.client.HTTPMessage
    assert _fields(ours) == _fields(theirs)
    assert ours.items() == theirs.items() and ours.get_payload() == theirs.get_payload()
    assert stream.read() == stock_stream.read()  # read just as far


def test_the_fast_path_takes_the_plain_blocks_and_leaves_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    original = email.parser.Parser.parsestr

    def parsestr(self: email.parser.Parser, text: str, headersonly: bool = False) -> object:
        parsed.append(text)
        return original(self, text, headersonly)

    monkeypatch.setattr(email.parser.Parser, "parsestr", parsestr)
    for block in TAKEN:
        _moto_front.parse_headers(io.BytesIO(block))
    assert parsed == []
    for block in LEFT:
        _moto_front.parse_headers(io.BytesIO(block))
    assert parsed == [block.decode("latin-1") for block in LEFT]


def test_the_parser_keeps_the_standard_librarys_limits() -> None:
    with pytest.raises(http.client.LineTooLong):
        _moto_front.parse_headers(io.BytesIO(b"A: " + b"x" * 70_000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="got more than 100 headers"):
        _moto_front.parse_headers(io.BytesIO(b"A: 1\r\n" * 101 + b"\r\n"))


def test_installing_replaces_the_module_function_once(monkeypatch: pytest.MonkeyPatch) -> None:
    stock = http.client.parse_headers
    monkeypatch.setattr(http.client, "parse_headers", stock)  # restored after the test
    _moto_front.install_header_parser()
    _moto_front.install_header_parser()
    assert http.client.parse_headers is _moto_front.parse_headers
    assert _moto_front.parse_headers.__wrapped__ is stock  # type: ignore[attr-defined]


@pytest.mark.parametrize("length", [0, 1, 20, 52, 200])
@pytest.mark.parametrize("include_digits", [True, False])
@pytest.mark.parametrize("lower_case", [False, True])
def test_a_request_id_is_drawn_exactly_as_moto_draws_it(length: int, include_digits: bool,
                                                        lower_case: bool) -> None:
    from moto.moto_api._internal.moto_random import MotoRandom

    ours, theirs = MotoRandom(), MotoRandom()
    fast = _moto_front.random_string(MotoRandom.get_random_string)
    for seed in (0, 7, 2**40):
        ours.seed(seed)
        theirs.seed(seed)
        for _ in range(5):
            assert fast(ours, length, include_digits, lower_case) == theirs.get_random_string(
                length, include_digits, lower_case)
        assert ours.getstate() == theirs.getstate()  # the same numbers drawn, no more


def test_a_generator_that_draws_otherwise_gets_motos_own_loop() -> None:
    from moto.moto_api._internal.moto_random import MotoRandom

    class Other(MotoRandom):
        def choice(self, seq: object) -> str:
            return "z"

    fast = _moto_front.random_string(MotoRandom.get_random_string)
    assert fast(Other(), 4) == "zzzz"
