"""Part 5: a peer library — OneTable (dynamodb-onetable) under Node — counted on the same server.

``benchmarks/peer/onetable_bench.mjs`` runs the round-trip operations through OneTable's
``unique: true`` fields and counts every request at the AWS SDK's per-attempt middleware step,
as ``benchmarks.counting`` does for botocore. Needs ``node`` and ``npm ci --prefix
benchmarks/peer`` (the lock file pins the versions).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs

from benchmarks.counting import Sent
from benchmarks.roundtrips import Cost

PEER_DIR = Path(__file__).resolve().parent / "peer"


@attrs.frozen
class PeerResult:
    """OneTable's counts per operation key of ``benchmarks.roundtrips`` (None: not run)."""

    name: str
    version: str
    costs: dict[str, Cost]
    #: operation key → the error OneTable raised (the request was still counted).
    errors: dict[str, str]
    #: Why the peer did not run, when it did not.
    skipped: str | None = None


def _installed_version() -> str | None:
    manifest = PEER_DIR / "node_modules" / "dynamodb-onetable" / "package.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text())["version"])


def install() -> None:
    """``npm ci`` the pinned peer packages (needs the npm registry)."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(PEER_DIR)],
                   check=True, capture_output=True, timeout=300)


def run(endpoint: str, *, allow_install: bool) -> PeerResult:
    """Count OneTable's requests; skipped (with the reason) when Node or the packages are absent."""
    node = shutil.which("node")
    if node is None:
        return PeerResult("OneTable", "", {}, {}, skipped="node is not installed")
    if _installed_version() is None:
        if not allow_install:
            return PeerResult("OneTable", "", {}, {}, skipped=(
                "packages not installed: run `npm ci --prefix benchmarks/peer`"))
        try:
            install()
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            return PeerResult("OneTable", "", {}, {}, skipped=f"npm ci failed: {exc}")
    version = _installed_version() or "?"
    env = {**os.environ, "NODE_NO_WARNINGS": "1"}
    done = subprocess.run([node, str(PEER_DIR / "onetable_bench.mjs"), endpoint],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return PeerResult("OneTable", version, {}, {}, skipped=f"the Node script failed: {tail[0]}")
    raw: dict[str, Any] = json.loads(done.stdout)
    costs = {}
    errors = {}
    for key, result in raw.items():
        sent = [Sent(r["operation"], r["written"], r["read"], r["operation"].startswith("Transact"),
                     wcu=float(r["wcu"]), rcu=float(r["rcu"])) for r in result["requests"]]
        costs[key] = Cost.of(sent)
        if result.get("error"):
            errors[key] = result["error"]
    return PeerResult("OneTable", version, costs, errors)
