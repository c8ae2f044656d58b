"""dynaunique._botocore: what the async sender takes from botocore — the transport settings as
botocore resolved them for a client — and the TLS context botocore's session would use."""

from __future__ import annotations

import ssl

import botocore.session
import pytest
from botocore.config import Config

from dynaunique import _botocore
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
