"""One botocore data loader for every botocore session a test process makes.

A botocore ``Session`` reads its JSON data (``endpoints.json``, the DynamoDB service model, its
endpoint rule set, ...) through its own ``Loader``, and a loader caches what it read only for
itself. PynamoDB makes a session per connection (and per thread), ``use_endpoint`` drops a
model's connection, and the tests, the audit's export and the streams' readers make their own:
so each test paid about 160 ms of CPU reading the same files again, per model (186 ms for a
session and its DynamoDB client, 25 ms with the loader shared; tests/README.md, "Time").

``install()`` makes ``botocore.session`` build its loaders through a cache keyed by the data
path (``AWS_DATA_PATH``), so sessions with the same data path share one loader and what it
read. The loader only reads files and keeps what it parsed; nothing of a session's state (its
credentials, region, configuration, event handlers, clients) is shared. The tests' own
processes only: the CLI subprocesses, the forked commands and the local servers load as a user's
process does.
"""

from __future__ import annotations

import functools
from typing import Any

import botocore.loaders
import botocore.session

_MARK = "_dynaunique_tests_shared_loader"


def install() -> None:
    """Share one loader per data path between this process's botocore sessions (idempotent)."""
    if getattr(botocore.session.create_loader, _MARK, False):
        return
    shared: Any = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)
    setattr(shared, _MARK, True)
    botocore.session.create_loader = shared

