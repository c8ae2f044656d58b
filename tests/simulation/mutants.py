"""Mutants: switchable re-introductions of known bugs, patched in at run time (the library's code
is never edited). Each must be caught by the exploration with a minimal counterexample."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import attrs

import dynaunique._render as render_module
import dynaunique._writes as writes_module


@contextlib.contextmanager
def patched(module: Any, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, wrap(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def _drop_condition(op: dict[str, Any]) -> dict[str, Any]:
    for name in ("ConditionExpression", "ExpressionAttributeNames", "ExpressionAttributeValues"):
        op.pop(name, None)
    return op


def _lock_put_unguarded() -> Any:
    def wrap(original: Any) -> Any:
        def held_by(op: dict[str, Any], guard: Any, hash_attr: str) -> dict[str, Any]:
            op = original(op, guard, hash_attr)
            return _drop_condition(op) if "Item" in op else op
        return held_by
    return patched(render_module, "_held_by", wrap)


def _stale_record_unguarded() -> Any:
    def wrap(original: Any) -> Any:
        def guarded(write: Any, ph: Any) -> Any:
            if isinstance(write, writes_module.RecordPut) and not write.create:
                write = attrs.evolve(write, guard=None)
            return original(write, ph)
        return guarded
    return patched(render_module, "_guarded", wrap)


#: Switchable re-introductions of known bugs: name → (what it breaks, patcher).
MUTANTS: dict[str, tuple[str, Callable[[], Any]]] = {
    "lock-put-unguarded": ("a lock put without attribute_not_exists (nor an owner guard)",
                           _lock_put_unguarded),
    "stale-record-unguarded": ("a loaded copy's record put not guarded on what was loaded",
                               _stale_record_unguarded),
}
