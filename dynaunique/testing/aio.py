"""Async fixtures of dynaunique's pytest plugin (``dynaunique.testing._pytest_plugin`` registers
them).

``dynaunique_aio_db``: the ``dynaunique_db`` fixture for an async test — the session's local
server, reset — that also closes the event loop's dynaunique HTTP clients when the test ends,
so no client outlives its loop. Use it from anyio's pytest plugin (shipped with anyio, which
the ``async`` extra installs)::

    @pytest.mark.anyio
    async def test_signup(dynaunique_aio_db: str) -> None:
        use_endpoint(dynaunique_aio_db, Account)
        create_tables(Account)
        await Account(pk="A", email="ada@x.io").asave()

or from pytest-asyncio in its ``auto`` mode (its strict mode runs only fixtures declared with
``@pytest_asyncio.fixture``).
Importing this module does not import the async client; the fixture does, when it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

__all__ = ["dynaunique_aio_db"]


@pytest.fixture
async def dynaunique_aio_db(dynaunique_db: str) -> AsyncIterator[str]:
    """The reset local server's endpoint; the test loop's dynaunique clients closed after."""
    from dynaunique import aio

    try:
        yield dynaunique_db
    finally:
        await aio.close()
