"""A pytest plugin for CI's fence section: accept the INSTALLED botocore's sources.

Loaded only by ``.ci/run`` (``-p tests.support.fence_candidate``) when the newest botocore on
PyPI changed a function the fast request path mirrors or calls. The library then stands aside
(botocore's own steps, one WARNING), which is what users get and what CI gates on. This plugin
asks the other question, for the maintainers: with that release's sources accepted, do the
byte-identity and decode tests still pass? If they do, its hashes can be recorded
(``python -m dynaunique._transport.botocore``); if not, ``dynaunique/_transport/wire.py`` must
follow the change first (docs/decisions.md, "The fence").
"""
from __future__ import annotations

from dynaunique._transport import botocore as _botocore


def pytest_configure() -> None:
    """Add the installed release's hash of every checked function to the accepted ones."""
    for name in _botocore.CHECKED:
        installed = _botocore.source_hash(name)
        if installed not in _botocore.ACCEPTED[name]:
            _botocore.ACCEPTED[name] = (*_botocore.ACCEPTED[name], installed)
    _botocore.fence.cache_clear()
