"""``dynaunique ui``: a local web page to inspect locks — who holds what, and what drifted.

An optional extra (``pip install -e '/path/to/clone[ui]'``: Starlette, uvicorn, Jinja2). The
page only renders what :mod:`dynaunique.audit` returns; repairs, when enabled, go through
:func:`dynaunique.audit.apply_repair`, the guarded repair the ``repair`` command sends.

* :func:`create_app` — the ASGI application for some models (an access token, a CSRF token,
  read-only unless told otherwise).
* :func:`serve` — run it on ``127.0.0.1`` against an endpoint, or against an embedded local
  server started for the occasion (empty: nothing is seeded).

docs/operating-locks.md shows the pages; docs/decisions.md says why this stack.
"""

from __future__ import annotations

from dynaunique.ui._access import UIConfig
from dynaunique.ui._app import create_app, serve

__all__ = ["UIConfig", "create_app", "serve"]
