"""Where the demo runs: the DynamoDB endpoint, its region and the credentials to sign with."""

from __future__ import annotations

import importlib.util

import attrs

from dynaunique._transport.endpoint import (
    LOCAL_CREDENTIALS,
    LOCAL_REGION,
    configured_region,
    is_loopback,
    region_in_url,
    target_for,
)
from dynaunique.errors import ConfigurationError

__all__ = ["LOCAL_CREDENTIALS", "DemoUnavailableError", "Target", "is_loopback",
           "moto_available", "region_for", "remote_target"]


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
    """The region to sign requests for: the one in an AWS endpoint URL, else the environment's,
    else ``us-east-1`` (what the demo shows for a server on this machine)."""
    return region_in_url(endpoint) or configured_region() or LOCAL_REGION


def moto_available() -> bool:
    """Whether the embedded server's dependencies (the ``[local]`` extra) are installed."""
    return importlib.util.find_spec("moto") is not None


def remote_target(endpoint: str) -> Target:
    """The target for a DynamoDB at ``endpoint``, signed as every command signs
    (:func:`dynaunique._transport.endpoint.target_for`): the usual AWS credentials, fake ones only
    for a server on this machine when there are none.

    :raises DemoUnavailableError: a malformed URL, or no region or credentials for an endpoint
        that is not on this machine.
    """
    try:
        decided = target_for(endpoint)
    except ConfigurationError as exc:
        raise DemoUnavailableError(f"{exc}; or run the demo without --endpoint to use the "
                                   "embedded server") from exc
    return Target(endpoint, decided.region, embedded=False, credentials=decided.credentials)
