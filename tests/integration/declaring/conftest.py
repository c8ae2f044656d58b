"""The ``wire`` fixture of the declaring tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dynaunique._transport import clients
from dynaunique.testing import use_endpoint

from .declared import MODELS, Wire


@pytest.fixture
def wire(dynaunique_db: str) -> Iterator[Wire]:
    """Point every model at the server and record what is sent (tables are created per test)."""
    # Retarget only when needed: a new PynamoDB connection means a new botocore client, which
    # costs far more than the test itself.
    stale = [m for m in MODELS if m.Meta.host != dynaunique_db]
    if stale:
        use_endpoint(dynaunique_db, *stale)
    recorder = Wire()
    for model in MODELS:
        recorder.hook(clients.client_for(model))
    yield recorder
    recorder.unhook()
