"""The reliability suite: concurrent soak, injected network faults, hostile input, lock ownership.

Each test ends with a full invariant check (``tests/support/invariants.py``): every record holds
exactly the locks its values require, and no lock exists without such a record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynaunique.testing import use_endpoint

if TYPE_CHECKING:
    from dynaunique import Model


def point(endpoint: str, *models: type[Model]) -> None:
    """``use_endpoint`` for the models not yet pointed at ``endpoint``.

    Re-pointing drops a model's connection, and building a new one (botocore parses its service
    model) costs more than a whole test's requests; the session's server URL never changes.
    """
    stale = [m for m in models if getattr(m.Meta, "host", None) != endpoint]
    if stale:
        use_endpoint(endpoint, *stale)
