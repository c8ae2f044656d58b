"""The async API without a server: importing the sync API never imports the async client."""

from __future__ import annotations

import os


def test_the_sync_api_never_imports_the_async_client() -> None:
    code = ("import sys, dynaunique, dynaunique._write.atomic, dynaunique.testing; "
            "assert 'httpx' not in sys.modules and 'dynaunique.aio' not in sys.modules")
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "PYTHONWARNINGS": "ignore"})
