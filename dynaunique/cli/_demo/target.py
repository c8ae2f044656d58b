"""Where the demo runs: a :class:`dynaunique._transport.endpoint.Target` (the DynamoDB endpoint,
its region and the credentials to sign with), described for the reader."""

from __future__ import annotations

import importlib.util

from dynaunique._transport.endpoint import (
    LOCAL_CREDENTIALS,
    LOCAL_REGION,
    Target,
    configured_region,
    is_loopback,
    region_in_url,
    target_for,
)
from dynaunique.errors import ConfigurationError

__all__ = ["LOCAL_CREDENTIALS", "DemoUnavailableError", "describe", "is_loopback",
           "moto_available", "region_for", "remote_target"]


class DemoUnavailableError(ConfigurationError):
    """The demo cannot run where it was asked to: no embedded server, no credentials, or the
    DynamoDB there failed (unreachable, access denied)."""


def describe(target: Target, *, embedded: bool) -> str:
    """One line naming where the demo runs; ``embedded``: the local server the demo started
    itself."""
    if embedded:
        return f"the embedded local server at {target.endpoint} (moto, requests serialized)"
    return f"{target.endpoint} (region {target.region})"


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
        return target_for(endpoint)
    except ConfigurationError as exc:
        raise DemoUnavailableError(f"{exc}; or run the demo without --endpoint to use the "
                                   "embedded server") from exc
