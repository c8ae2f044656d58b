"""The old import path of :mod:`dynaunique.testing.aio` (the async fixture), kept working."""

from __future__ import annotations

from dynaunique.testing.aio import dynaunique_aio_db

__all__ = ["dynaunique_aio_db"]
