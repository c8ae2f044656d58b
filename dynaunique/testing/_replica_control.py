"""The parent side of the local server's global tables (:mod:`dynaunique.testing._replicas`):
:func:`set_replication_delay` and :func:`replication_state`, re-exported by
:mod:`dynaunique.testing`."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from dynaunique.testing._local_server import _post_local
from dynaunique.testing._replica_parts import REPLICATION_PATH

__all__ = ["replication_state", "set_replication_delay"]


def set_replication_delay(endpoint: str, seconds: float, *, timeout: float = 10.0) -> None:
    """Make a local server replicate eventually consistent global tables after ``seconds``.

    Every write to a replica of a global table (one made with ``UpdateTable`` and
    ``ReplicaUpdates``, multi-Region eventual consistency) reaches the other replicas once
    ``seconds`` have passed, last writer wins; ``0`` (the default, and after
    :func:`dynaunique.testing.reset_local_dynamodb`) replicates before the next request is served.
    Tables with multi-Region strong consistency replicate at once whatever the delay. A new
    delay applies to the versions in flight too (each is due ``seconds`` after its write), so a
    test can hold replication back with a long delay and release it with ``0``.

    Raises:
        LocalServerError: the server could not be reached, or ``seconds`` is negative.
    """
    body = json.dumps({"delay": seconds}).encode("utf-8")
    _post_local(endpoint, REPLICATION_PATH, body, "set the replication delay of", timeout)


def replication_state(endpoint: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """A local server's global tables (regions, mode), replication delay and pending versions.

    ``{"delay": 0.5, "tables": {"users": {"regions": ["eu-west-1", "us-east-1"], "mode":
    "EVENTUAL"}}, "pending": 2, "replicated": 10}``: ``pending`` counts item versions not yet
    applied to a replica (``0``: replication has drained, as far as the server has been asked).
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(endpoint.rstrip("/") + REPLICATION_PATH, timeout=timeout) as response:
        state: dict[str, Any] = json.loads(response.read())
    return state
