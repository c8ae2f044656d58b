"""dynaunique._transport.botocore: what the async sender takes from botocore — the transport
settings as botocore resolved them for a client — and the TLS context botocore's session would
use."""

from __future__ import annotations

import ast
import importlib
import ssl
from pathlib import Path

import botocore.session
import pytest
from botocore.config import Config

from dynaunique._transport import botocore as _botocore
from dynaunique.testing import FAKE_AWS_ENV


def _client(monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> object:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)
    return botocore.session.get_session().create_client(
        "dynamodb", region_name="eu-west-1", endpoint_url="https://dynamodb.example.test",
        **kwargs)


def test_the_transport_is_what_botocore_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(monkeypatch, verify=False, config=Config(
        proxies={"https": "http://user:secret@127.0.0.1:3128"},
        proxies_config={"proxy_ca_bundle": "/etc/proxy-ca.pem"},
        client_cert=("/etc/client.pem", "/etc/client.key"),
        connect_timeout=2, read_timeout=3, max_pool_connections=7))
    got = _botocore.transport(client)
    assert got.verify is False
    assert got.cert == ("/etc/client.pem", "/etc/client.key")
    assert got.proxy == "http://user:secret@127.0.0.1:3128"
    assert got.proxy_headers == {"Proxy-Authorization": "Basic dXNlcjpzZWNyZXQ="}
    assert got.proxy_settings == {"proxy_ca_bundle": "/etc/proxy-ca.pem"}
    assert (got.connect_timeout, got.read_timeout, got.max_pool_connections) == (2, 3, 7)


def test_the_ca_bundle_and_proxy_come_from_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CA_BUNDLE", "/etc/private-ca.pem")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "")
    got = _botocore.transport(_client(monkeypatch))
    assert got.verify == "/etc/private-ca.pem" and got.proxy == "http://127.0.0.1:3128"
    monkeypatch.setenv("NO_PROXY", "dynamodb.example.test")
    assert _botocore.transport(_client(monkeypatch)).proxy is None


def test_without_verification_the_context_checks_nothing() -> None:
    context = _botocore.ssl_context(False, None)
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    assert _botocore.ssl_context(True, None).verify_mode == ssl.CERT_REQUIRED


#: The modules of the request path, sync and async: none reads a private of botocore's.
REQUEST_PATH = (
    "dynaunique._transport.wire",
    "dynaunique._transport.connection",
    "dynaunique._transport.clients",
    "dynaunique._transport.endpoint",
    "dynaunique._transport.answers",
    "dynaunique.aio",
)
#: Private names of PynamoDB's (not botocore's) the request path reads: the model's connection
#: and the connection's client, as PynamoDB makes them.
PYNAMODB_PRIVATES = frozenset({"_connection", "_get_connection", "_client"})


def botocore_privates(source: str) -> list[str]:
    """Every read of a private name in ``source`` that is not its own (``self``/``cls``) or
    PynamoDB's: ``x._name``, a ``"_name"`` string (``getattr``, ``__dict__``), ``from botocore…
    import _name``; type variables' names aside."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and node.attr not in PYNAMODB_PRIVATES \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value[:1] == "_" and node.value[1:2].islower() \
                and node.value.isidentifier() and node.value not in PYNAMODB_PRIVATES:
            found.append(f"line {node.lineno}: {node.value!r}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("botocore"):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("_")]
    return found


@pytest.mark.parametrize("module", REQUEST_PATH)
def test_no_botocore_private_is_read_outside_the_shim(module: str) -> None:
    """Every botocore private the request path reads is read in ``dynaunique._transport.botocore``,
    the one module whose reads are typed and fenced (docs/decisions.md, "The fence")."""
    source = Path(str(importlib.import_module(module).__file__)).read_text(encoding="utf-8")
    assert botocore_privates(source) == []


def test_the_private_check_sees_each_kind_of_read() -> None:
    source = ("from botocore.awsrequest import _HeaderKey\n"
              "x = client._endpoint\ny = vars(client).get('_make_api_call')\n"
              "z = self._own\nw = model._connection\n")
    assert botocore_privates(source) == [
        "line 1: import _HeaderKey", "line 2: client._endpoint", "line 3: '_make_api_call'"]


def test_botocores_own_user_agent_components_before_and_after_1_44(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's default ``modify_components`` (named ``_default_modify_components`` since
    1.44.x, a nameless fallback in 1.44.0) keeps the fast path; a plugin's does not."""
    import botocore.useragent as useragent

    assert _botocore.default_user_agent()
    monkeypatch.delattr(useragent, "_default_modify_components")

    def modify_components(components: list[object]) -> list[object]:
        return components

    modify_components.__module__ = "botocore.useragent"
    monkeypatch.setattr(useragent, "modify_components", modify_components)
    assert _botocore.default_user_agent()
    modify_components.__module__ = "botocore.customizations.useragent"
    assert not _botocore.default_user_agent()
