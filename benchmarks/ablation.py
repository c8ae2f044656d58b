"""What each change of the request path buys: dynaunique with one change switched off at a time.

    python -m benchmarks.ablation [rounds] [case ...]

Paired per round, as ``benchmarks.cases`` (same cases, stub transport, thread CPU time): every
round runs dynaunique as it is, and again with one of its request-path changes undone —

* ``botocore request path``: botocore's ``_make_api_call`` (events, endpoint ruleset, signing,
  parsing) instead of ``dynaunique._transport.wire.FastPath``;
* ``botocore serializer``: the client's own serializer instead of ``dynaunique._transport.wire``'s;
* ``digest token``: the earlier ``ClientRequestToken``, a uuid4 and a SHA-256 of the request;
* ``a timestamp per lock``: every lock put stamped with its own ``now()``.

The ratio is (with the change undone) / (as it is): above 1, the change pays.
"""

from __future__ import annotations

import gc
import hashlib
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

from benchmarks.cases import DYNAUNIQUE, cases, quantiles
from dynaunique._transport import clients as _clients
from dynaunique._transport import wire as _wire
from dynaunique._write import render as _render
from dynaunique._write import writes as _writes

AS_IS = "as it is"


@contextmanager
def _botocore_serializer() -> Iterator[None]:
    clients = [c.client for c in _clients._connections.values()]
    saved = [c._serializer for c in clients]
    for client in clients:
        if isinstance(client._serializer, _wire.FastSerializer):
            client._serializer = client._serializer.inner
    try:
        yield
    finally:
        for client, serializer in zip(clients, saved, strict=True):
            client._serializer = serializer


@contextmanager
def _botocore_request_path() -> Iterator[None]:
    clients = [c.client for c in _clients._connections.values()]
    saved = [c.__dict__.pop("_make_api_call", None) for c in clients]
    try:
        yield
    finally:
        for client, path in zip(clients, saved, strict=True):
            if path is not None:
                client._make_api_call = path


def _digest_token(request: Any, encoded: bytes | None = None) -> str:
    digest = hashlib.sha256(encoded if encoded is not None else _render.encode(request))
    return f"{uuid.uuid4().hex[:12]}-{digest.hexdigest()[:23]}"


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


UNDONE: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "botocore request path": _botocore_request_path,
    "botocore serializer": _botocore_serializer,
    "digest token": lambda: _patched(_render, "new_token", _digest_token),
    "a timestamp per lock": lambda: _patched(_writes.Stamp, "take", lambda _: _writes.now()),
}


def run(rounds: int, only: tuple[str, ...] | None = None, warmup: int = 10
        ) -> dict[str, dict[str, dict[str, float]]]:
    """case → variant → quantiles of (µs with the change undone) / (µs as it is)."""
    chosen = [c for c in cases() if only is None or c.key in only]
    variants = (AS_IS, *UNDONE)
    samples: dict[str, dict[str, list[float]]] = {c.key: {v: [] for v in variants}
                                                  for c in chosen}
    clock = time.thread_time_ns
    gc.collect()
    for i in range(warmup + rounds):
        shift = i % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            with ExitStack() as stack:
                if variant != AS_IS:
                    stack.enter_context(UNDONE[variant]())
                for case in chosen:
                    call = case.build[DYNAUNIQUE](i * len(variants) + variants.index(variant))
                    start = clock()
                    call()
                    elapsed = clock() - start
                    if i >= warmup:
                        samples[case.key][variant].append(elapsed / 1000)
    return {c.key: {v: quantiles([u / a for u, a in zip(samples[c.key][v], samples[c.key][AS_IS],
                                                        strict=True)])
                    for v in UNDONE}
            | {AS_IS: {"median": statistics.median(samples[c.key][AS_IS])}}
            for c in chosen}


def main() -> None:
    """Print the ratios as a Markdown table."""
    from benchmarks.models import fake_credentials

    fake_credentials()
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    result = run(rounds, tuple(sys.argv[2:]) or None)
    print("| case | µs as it is | " + " | ".join(f"{v} ÷ as it is" for v in UNDONE) + " |")
    print("|---" * (2 + len(UNDONE)) + "|")
    for case, row in result.items():
        ratios = " | ".join(f"{row[v]['median']:.3f} [{row[v]['q1']:.2f}\u2013{row[v]['q3']:.2f}]"
                            for v in UNDONE)
        print(f"| {case} | {row[AS_IS]['median']:,.0f} | {ratios} |")


if __name__ == "__main__":
    main()
