"""``python -m dynaunique.testing --port 8000``: serve the local server in the foreground."""

from __future__ import annotations

import sys

from dynaunique.testing._local_server import _serve_main

if __name__ == "__main__":
    sys.exit(_serve_main())
