"""The pytest plugin (a ``pytest11`` entry): the ``dynaunique_endpoint`` and ``dynaunique_db``
fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from dynaunique.testing import FAKE_AWS_ENV, local_dynamodb, reset_local_dynamodb
from dynaunique.testing._corpus import CASE_PATH, RECORD_ENV
from dynaunique.testing._local_server import _post_local

# --- pytest plugin (registered through the pytest11 entry point) ------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - pytest is optional; the fixtures simply do not exist
    _HAVE_PYTEST = False
else:
    _HAVE_PYTEST = True

if _HAVE_PYTEST:

    @pytest.fixture(scope="session")
    def dynaunique_endpoint() -> Iterator[str]:
        """The endpoint URL of one local DynamoDB server shared by the whole test session.

        Also sets fake ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
        ``AWS_DEFAULT_REGION`` for the session where they are unset, and restores the
        environment afterwards. Prefer the ``dynaunique_db`` fixture, which also resets the server.
        """
        with pytest.MonkeyPatch.context() as patch:
            for name, value in FAKE_AWS_ENV.items():
                if not os.environ.get(name):
                    patch.setenv(name, value)
            with local_dynamodb() as endpoint:
                yield endpoint

    @pytest.fixture
    def dynaunique_db(dynaunique_endpoint: str, request: pytest.FixtureRequest) -> str:
        """The session's local DynamoDB endpoint, reset before this test: no tables, no items.

        Typical use: ``use_endpoint(dynaunique_db, MyModel); create_tables(MyModel)``.
        While the server records a corpus (``DYNAUNIQUE_RECORD_CORPUS``), the test's id names
        the case that begins.
        """
        reset_local_dynamodb(dynaunique_endpoint)
        if os.environ.get(RECORD_ENV):
            _post_local(dynaunique_endpoint, CASE_PATH, request.node.nodeid.encode("utf-8"),
                        "name the corpus case on", 10.0)
        return dynaunique_endpoint

    from dynaunique.testing.aio import dynaunique_aio_db  # noqa: F401 - async fixtures
