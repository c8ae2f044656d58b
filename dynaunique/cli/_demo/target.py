"""Where the demo runs: the DynamoDB endpoint, its region and the credentials to sign with."""

from __future__ import annotations

import importlib.util
import re
import urllib.parse

import attrs
import botocore.session

from dynaunique.errors import ConfigurationError

#: Fake credentials for the embedded server (moto accepts any); real ones never go there.
LOCAL_CREDENTIALS = ("testing", "testing")
_AWS_ENDPOINT = re.compile(r"^https://dynamodb(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/?$")


class DemoUnavailableError(ConfigurationError):
    """The demo cannot run where it was asked to: no embedded server, no credentials, or the
    DynamoDB there failed (unreachable, access denied)."""


@attrs.frozen
class Target:
    """The DynamoDB the demo talks to."""

    #: The endpoint URL.
    endpoint: str
    region: str
    #: Whether this is the embedded local server the demo started itself.
    embedded: bool
    #: Explicit (key id, secret) or None for the usual AWS credential chain.
    credentials: tuple[str, str] | None = None

    @property
    def description(self) -> str:
        """One line naming the target."""
        if self.embedded:
            return f"the embedded local server at {self.endpoint} (moto, requests serialized)"
        return f"{self.endpoint} (region {self.region})"


def region_for(endpoint: str | None) -> str:
    """The region to sign requests for: the one in an AWS endpoint URL, else the environment's.

    ``https://dynamodb.eu-west-1.amazonaws.com`` → ``eu-west-1``; anything else falls back to the
    usual AWS configuration (``AWS_REGION``/``AWS_DEFAULT_REGION``/profile), then ``us-east-1``.
    """
    if endpoint is not None:
        match = _AWS_ENDPOINT.match(endpoint)
        if match:
            return match.group(1)
    configured = botocore.session.get_session().get_config_variable("region")
    return str(configured) if configured else "us-east-1"


def is_loopback(endpoint: str) -> bool:
    """Whether ``endpoint`` is on this machine (``http://127.0.0.1:8000``, ``localhost``…)."""
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def moto_available() -> bool:
    """Whether the embedded server's dependencies (the ``[local]`` extra) are installed."""
    return importlib.util.find_spec("moto") is not None


def remote_target(endpoint: str) -> Target:
    """The target for a DynamoDB at ``endpoint``, signed with the usual AWS credentials.

    :raises DemoUnavailableError: no credentials found and ``endpoint`` is not on this machine.
    """
    credentials = None
    if botocore.session.get_session().get_credentials() is None:
        if not is_loopback(endpoint):
            raise DemoUnavailableError(
                f"no AWS credentials found for {endpoint}: configure them the usual "
                "way (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, aws "
                "configure), or run the demo without --endpoint to use the embedded "
                "server"
            )
        # A server on this machine (moto, DynamoDB Local) accepts any credentials.
        credentials = LOCAL_CREDENTIALS
    return Target(endpoint, region_for(endpoint), embedded=False, credentials=credentials)
