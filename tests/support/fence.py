"""Whether the fast request path runs on the installed botocore, for its own tests.

On a botocore release the fast path was never tested on that changed a function it mirrors or
calls, the library stands aside (botocore's own steps carry every call, one WARNING): the fast
path's own tests have nothing to test there and are skipped, naming what changed. CI's fence
section then runs botocore's steps' tests and reports the release (docs/decisions.md, "The
fence"). On a tested release the fence must stand open: that is a failure, not a skip.
"""
from __future__ import annotations

import botocore
import pytest

from dynaunique._transport import botocore as _botocore


def require_fast_path() -> None:
    """Skip the calling test on an untested botocore the fence stands aside on; fail on a
    tested one."""
    changed = (*_botocore.fence(), *_botocore.MISSING)
    if not changed:
        return
    what = (f"botocore {botocore.__version__} changed {', '.join(changed)}; the fast path "
            "stands aside on it")
    if botocore.__version__ in _botocore.TESTED:
        pytest.fail(f"{what}, yet it is a tested release (_botocore.TESTED)")
    pytest.skip(f"{what} (not a tested release: botocore's own steps carry every call)")
