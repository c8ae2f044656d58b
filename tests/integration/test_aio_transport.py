"""The async sender sends as botocore's own HTTP session would: a private CA given by
``AWS_CA_BUNDLE`` verifies the endpoint for ``asave()`` as for ``save()``, and a proxy botocore
resolved (here the environment's ``HTTP_PROXY``) carries both.

The TLS endpoint and the proxy are the fault proxy (tests/reliability/proxy.py) on 127.0.0.1, in
front of the local server; the CA and the server's certificate are made for the test with the
``cryptography`` package.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability.proxy import FaultProxy
from support.declare import declare

from dynaunique import DynauniqueError, aio
from dynaunique import _connection as connection
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables

x509 = pytest.importorskip("cryptography.x509")

Secured = declare("Secured", "aio_transport", meta={"region": "us-east-1"},
                  pk=UnicodeAttribute(hash_key=True),
                  email=UnicodeAttribute(unique=True, null=True))


def _private_ca(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA's certificate (written to ``folder``) and a server context for 127.0.0.1 it signed."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dynaunique test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - day).not_valid_after(now + day)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                       False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - day).not_valid_after(now + day)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_file = folder / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem))
    (folder / "server.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "server.pem", folder / "server.key")
    return ca_file, server


@pytest.fixture
def tls_endpoint(dynaunique_db: str, tmp_path: Path) -> Iterator[tuple[FaultProxy, Path]]:
    """The local server behind a TLS endpoint signed by a private CA: (it, the CA's file)."""
    ca_file, server = _private_ca(tmp_path)
    proxy = FaultProxy(dynaunique_db)
    proxy.start(tls=server)
    try:
        yield proxy, ca_file
    finally:
        proxy.stop()
        connection.forget()


def _point(endpoint: str) -> None:
    Secured.Meta.host = endpoint
    Secured._connection = None
    connection.forget()


async def _asave(pk: str, email: str) -> None:
    async with aio.session():
        await Secured(pk=pk, email=email).asave()


def test_a_private_ca_in_aws_ca_bundle_verifies_save_and_asave(
        tls_endpoint: tuple[FaultProxy, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, ca_file = tls_endpoint
    assert proxy.url.startswith("https://")
    monkeypatch.setenv("AWS_CA_BUNDLE", str(ca_file))
    _point(proxy.url)
    create_tables(Secured)
    Secured(pk="sync", email="sync@x.io").save()
    asyncio.run(_asave("async", "async@x.io"))
    assert Secured.get_by_unique("email", "async@x.io").pk == "async"
    writes = [r.body["TransactItems"][0]["Put"]["Item"]["pk"]["S"] for r in proxy.writes()]
    assert writes == ["sync", "async"]


def test_without_the_ca_neither_save_nor_asave_trusts_the_endpoint(
        tls_endpoint: tuple[FaultProxy, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    proxy, _ = tls_endpoint
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    monkeypatch.setattr(Secured.Meta, "max_retry_attempts", 0, raising=False)
    _point(proxy.url)
    with pytest.raises(DynauniqueError):
        Secured(pk="sync", email="sync@x.io").save()
    with pytest.raises(DynauniqueError):
        asyncio.run(_asave("async", "async@x.io"))
    assert proxy.writes() == []


def test_the_proxy_botocore_resolved_carries_save_and_asave(
        dynaunique_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "")
    with FaultProxy(dynaunique_db) as forward:
        monkeypatch.setenv("HTTP_PROXY", forward.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        try:
            _point(dynaunique_db)
            create_tables(Secured)
            forward.clear()
            Secured(pk="sync", email="sync@x.io").save()
            asyncio.run(_asave("async", "async@x.io"))
        finally:
            connection.forget()
        writes = [r.body["TransactItems"][0]["Put"]["Item"]["pk"]["S"]
                  for r in forward.writes()]
        assert writes == ["sync", "async"]
