"""The pytest plugin (a ``pytest11`` entry): the ``dynaunique_endpoint``, ``dynaunique_db`` and
``dynaunique_models`` fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from dynaunique.testing import (
    FAKE_AWS_ENV,
    create_tables,
    local_dynamodb,
    reset_local_dynamodb,
    use_endpoint,
)
from dynaunique.testing._corpus import CASE_PATH, RECORD_ENV
from dynaunique.testing._local_server import _post_local

#: What :func:`use_endpoint` sets on a model's ``Meta``: what ``dynaunique_models`` restores.
_BOUND_META = ("host", "region", "aws_access_key_id", "aws_secret_access_key")
_ABSENT = object()


class _Bindings:
    """Models bound to a test's server, with what they were before (restored by :meth:`undo`)."""

    def __init__(self) -> None:
        # (object, attribute, value before or _ABSENT), in the order they were first touched.
        self._saved: list[tuple[Any, str, Any]] = []
        self._seen: set[tuple[int, str]] = set()

    def _save(self, owner: Any, name: str) -> None:
        if (id(owner), name) not in self._seen:
            self._seen.add((id(owner), name))
            self._saved.append((owner, name, vars(owner).get(name, _ABSENT)))

    def bind(self, endpoint: str, models: tuple[Any, ...]) -> None:
        """Point ``models`` at ``endpoint`` (:func:`use_endpoint`) and create their tables."""
        for model in models:
            for name in _BOUND_META:
                self._save(model.Meta, name)  # a Meta shared by models is saved once
            self._save(model, "_connection")
        use_endpoint(endpoint, *models)
        create_tables(*models)

    def undo(self) -> None:
        """Every saved attribute as it was: set again, or deleted if the class had none."""
        for owner, name, value in reversed(self._saved):
            if value is _ABSENT:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, value)
        self._saved.clear()
        self._seen.clear()


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

    @pytest.fixture
    def dynaunique_models(dynaunique_db: str) -> Iterator[Callable[..., str]]:
        """Bind models to this test's server: ``dynaunique_models(Account, Order)`` points them
        at ``dynaunique_db``'s reset server, creates their tables and returns the endpoint.

        When the test ends, each model's ``Meta`` (``host``, ``region``, credentials) and
        cached connection are restored to what they were, so the binding lasts one test (what
        ``use_endpoint`` alone changes stays changed for the session). List the model whose
        key schema describes a shared table first, as for ``create_tables``.
        """
        bindings = _Bindings()

        def bind(*models: Any) -> str:
            bindings.bind(dynaunique_db, models)
            return dynaunique_db

        try:
            yield bind
        finally:
            bindings.undo()

    from dynaunique.testing.aio import dynaunique_aio_db  # noqa: F401 - async fixtures
