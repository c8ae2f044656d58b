"""The pytest plugin (a ``pytest11`` entry): the ``dynaunique_endpoint`` and ``dynaunique_db``
fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from dynaunique.testing import FAKE_AWS_ENV, local_dynamodb, reset_local_dynamodb

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
    def dynaunique_db(dynaunique_endpoint: str) -> str:
        """The session's local DynamoDB endpoint, reset before this test: no tables, no items.

        Typical use: ``use_endpoint(dynaunique_db, MyModel); create_tables(MyModel)``.
        """
        reset_local_dynamodb(dynaunique_endpoint)
        return dynaunique_endpoint

    from dynaunique.testing.aio import dynaunique_aio_db  # noqa: F401 - async fixtures
