"""Where the tools' requests go: an endpoint URL → the region and the credentials to sign with.

The one decision every command (``locks``, ``check``, ``repair``, the migrations commands,
``ui``, ``demo``) makes before it sends a request, :func:`target_for`:

- an endpoint on this machine (``127.0.0.0/8``, ``localhost``, ``[::1]``: moto, DynamoDB Local)
  takes any credentials, so when the environment has none it gets fake static ones
  (:data:`LOCAL_CREDENTIALS`) and, when no region is configured, ``us-east-1``;
- any other endpoint (and no endpoint: AWS itself) is signed with botocore's usual chain
  (environment variables, profile, SSO, instance role) for the region the models declare, the
  endpoint URL names or the environment configures; fake credentials never go there. Missing
  region or credentials are a :class:`~dynaunique.errors.ConfigurationError` naming the fix.

:func:`point_models` applies the decision to model classes.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

import attrs
import botocore.session

from dynaunique.errors import ConfigurationError

#: Fake credentials for a server on this machine (moto and DynamoDB Local accept any).
LOCAL_CREDENTIALS = ("testing", "testing")
#: The region a server on this machine is signed for when the environment configures none.
LOCAL_REGION = "us-east-1"

#: botocore's credential providers that ask a metadata service over the network.
_NETWORK_PROVIDERS = ("container-role", "iam-role")
_AWS_ENDPOINT = re.compile(
    r"^https://dynamodb(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/?$")


@attrs.frozen
class Target:
    """Where requests go and how they are signed."""

    #: The endpoint URL, or None for AWS's own endpoint of ``region``.
    endpoint: str | None
    region: str
    #: Explicit (key id, secret), or None for botocore's usual credential chain.
    credentials: tuple[str, str] | None = None

    @property
    def local(self) -> bool:
        """Whether the endpoint is on this machine."""
        return self.endpoint is not None and is_loopback(self.endpoint)


def check_url(endpoint: str) -> str:
    """``endpoint`` if it is an http(s) URL with a host.

    :raises ConfigurationError: it is not (``"not a url"``, ``localhost:8000`` without a scheme).
    """
    try:
        parts = urllib.parse.urlsplit(endpoint)
        host, _ = parts.hostname, parts.port  # .port raises on a bad port
    except ValueError as exc:
        raise ConfigurationError(f"endpoint {endpoint!r} is not a URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigurationError(
            f"endpoint {endpoint!r} is not an http(s) URL such as http://127.0.0.1:8000 or "
            "https://dynamodb.eu-west-1.amazonaws.com")
    return endpoint


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` is on this machine: ``127.0.0.0/8``, ``localhost`` or ``[::1]``."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def region_in_url(endpoint: str | None) -> str | None:
    """The region an AWS endpoint URL names (``https://dynamodb.eu-west-1.amazonaws.com``)."""
    match = _AWS_ENDPOINT.match(endpoint or "")
    return match.group(1) if match else None


class _Environment:
    """botocore's view of the environment (region, credentials), read once and only if asked."""

    def __init__(self) -> None:
        self._session: Any = None
        self._credentials: Any = ()
        self._local: bool | None = None

    @property
    def session(self) -> Any:
        if self._session is None:
            self._session = botocore.session.get_session()
        return self._session

    def region(self) -> str | None:
        region = self.session.get_config_variable("region")
        return str(region) if region else None

    def has_credentials(self) -> bool:
        """Whether botocore's whole chain finds credentials (instance and container roles
        included: a real endpoint may be signed with them)."""
        if self._credentials == ():
            self._credentials = self.session.get_credentials()
        return self._credentials is not None

    def has_local_credentials(self) -> bool:
        """Whether credentials are configured on this machine (variables, profiles, SSO,
        processes), asking no metadata service: for a server on this machine, which accepts
        any, a lookup over the network would only cost a second."""
        if self._credentials != ():
            return self._credentials is not None
        if self._local is None:
            session = botocore.session.get_session()
            resolver = session.get_component("credential_provider")
            for provider in list(resolver.providers):
                if provider.METHOD in _NETWORK_PROVIDERS:
                    resolver.remove(provider.METHOD)
            self._local = session.get_credentials() is not None
        return self._local


def configured_region() -> str | None:
    """The region botocore's configuration chain gives (``AWS_DEFAULT_REGION``, the profile)."""
    return _Environment().region()


def target_for(endpoint: str | None, *, region: str | None = None,
               credentials: bool = False, environment: _Environment | None = None) -> Target:
    """The region and credentials for requests to ``endpoint`` (None: AWS's own endpoint).

    ``region`` is the one the models declare (``Meta.region``), used as is; ``credentials``
    says the models bring their own (``Meta.aws_access_key_id``), so the environment's are not
    needed.

    :raises ConfigurationError: the URL is malformed; or the endpoint is not on this machine and
        no region is known or no credentials are found.
    """
    env = environment if environment is not None else _Environment()
    if endpoint is not None:
        check_url(endpoint)
    where = endpoint or "AWS"
    region = region or region_in_url(endpoint) or env.region()
    if endpoint is not None and is_loopback(endpoint):
        fake = None if credentials or env.has_local_credentials() else LOCAL_CREDENTIALS
        return Target(endpoint, region or LOCAL_REGION, fake)
    if region is None:
        raise ConfigurationError(
            f"no AWS region for {where}: set AWS_DEFAULT_REGION (or a profile's region, or "
            "Meta.region), or pass --endpoint http://127.0.0.1:PORT for a local server")
    if not credentials and not env.has_credentials():
        raise ConfigurationError(
            f"no AWS credentials found for {where}: configure them the usual way (AWS_PROFILE, "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, aws configure), or pass --endpoint "
            "http://127.0.0.1:PORT for a local server")
    return Target(endpoint, region, None)


def point_models(models: Sequence[Any], endpoint: str | None) -> None:
    """Send every request of ``models`` to ``endpoint`` (None: where each model's Meta says),
    signed as :func:`target_for` decides; settings a model's ``Meta`` has are kept.

    :raises ConfigurationError: as :func:`target_for`.
    """
    env = _Environment()
    for model in models:
        meta = model.Meta
        host = endpoint if endpoint is not None else getattr(meta, "host", None)
        own_key = getattr(meta, "aws_access_key_id", None) is not None
        target = target_for(host, region=getattr(meta, "region", None), credentials=own_key,
                            environment=env)
        before = pointing(meta)
        if endpoint is not None:
            meta.host = endpoint
        meta.region = target.region
        if target.credentials is not None:
            meta.aws_access_key_id, meta.aws_secret_access_key = target.credentials
        if pointing(meta) != before:
            # Only then: the model's connection (and the handlers on its client) is kept.
            model._connection = None


def pointing(meta: Any) -> tuple[Any, ...]:
    """What a model's connection is made of that re-pointing it changes: host, region and
    credentials (equal before and after: the connection, and the handlers on its client, stay).
    """
    return tuple(getattr(meta, name, None) for name in (
        "host", "region", "aws_access_key_id", "aws_secret_access_key"))
