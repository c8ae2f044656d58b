"""Mutants: switchable re-introductions of known bugs, patched in at run time (the library's code
is never edited). Each must be caught by the exploration with a minimal counterexample."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import attrs

import dynaunique._transport.regions as regions_module
import dynaunique._write.flush as flush_module
import dynaunique._write.heal as heal_module
import dynaunique._write.plan as plan_module
import dynaunique._write.record as record_module
import dynaunique._write.render as render_module
import dynaunique._write.writes as writes_module
from dynaunique._lock.items import locks_of
from dynaunique._write.state import same_item
from dynaunique.errors import ConcurrentModificationError


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


def _lock_guard_dropped(part: str) -> Any:
    """The lock writes whose request has ``part`` (``Item``: puts, ``Key``: deletes) sent
    without their guard (``_render._held_by``: missing, or owned by the writer)."""
    def wrap(original: Any) -> Any:
        def held_by(op: dict[str, Any], guard: Any, hash_attr: str) -> dict[str, Any]:
            op = original(op, guard, hash_attr)
            return _drop_condition(op) if part in op else op
        return held_by
    return patched(render_module, "_held_by", wrap)


def _lock_delete_unguarded() -> Any:
    return _lock_guard_dropped("Key")


def _stale_follow_up() -> Any:
    """The first version's settling: a loaded copy's save refused as stale, whose record
    already holds exactly what it meant to write, sent its lock changes on their own (guarded on
    the locks, not on the record) and reported success."""
    def wrap(original: Any) -> Any:
        def execute_steps(plan: Any, connection: Any, **kwargs: Any) -> Any:
            try:
                return (yield from original(plan, connection, **kwargs))
            except ConcurrentModificationError as exc:
                write = exc.write
                if not (isinstance(write, writes_module.RecordPut) and not write.create
                        and exc.current is not None and same_item(exc.current, write.item)):
                    raise
                rest = attrs.evolve(plan, writes=tuple(w for w in plan.writes if w is not write))
                if not rest.writes:
                    return {}
                # The follow-up is its own request: the whole plan's rendering does not apply.
                kwargs.pop("request", None)
                kwargs.pop("sent", None)
                return (yield from original(rest, connection, **kwargs))
        return execute_steps
    return patched(flush_module, "execute_steps", wrap)


def _lock_from_python_value() -> Any:
    """A save's new locks computed from the object's python values instead of the item it
    stores (``"V1"`` locked as ``V1`` while ``"v1"`` is stored)."""
    def wrap(original: Any) -> Any:
        def plan_save_from(obj: Any, loaded: Any, *args: Any, **kwargs: Any) -> Any:
            item_of, stored_locks = record_module.item_of, record_module.stored_locks
            stored_lock_refs = record_module.stored_lock_refs
            items: list[Any] = []

            def item(of: Any, base: Any) -> Any:
                items.append(item_of(of, base))
                return items[-1]

            def locks(model: Any, raw: Any, reads: Any = None) -> Any:
                if items and raw is items[-1]:
                    return locks_of(model._du_info, obj, reads)
                return stored_locks(model, raw, reads)

            def refs(info: Any, raw: Any) -> Any:
                if items and raw is items[-1]:
                    return locks_of(info, obj)
                return stored_lock_refs(info, raw)

            record_module.item_of, record_module.stored_locks = item, locks
            record_module.stored_lock_refs = refs
            try:
                return original(obj, loaded, *args, **kwargs)
            finally:
                record_module.item_of, record_module.stored_locks = item_of, stored_locks
                record_module.stored_lock_refs = stored_lock_refs
        return plan_save_from
    return patched(record_module, "plan_save_from", wrap)


def _lock_put_unguarded() -> Any:
    return _lock_guard_dropped("Item")


def _stale_record_unguarded() -> Any:
    def wrap(original: Any) -> Any:
        def guarded(write: Any, ph: Any) -> Any:
            if isinstance(write, writes_module.RecordPut) and not write.create:
                write = attrs.evolve(write, guard=None)
            return original(write, ph)
        return guarded
    return patched(render_module, "_guarded", wrap)


def _takeover_without_owner_check() -> Any:
    """Healing that takes over every lock it meets: the owner neither judged on its read nor
    checked in the takeover's transaction (no ConditionCheck). (Dropping the check alone is
    not catchable with the library as the only writer: every write of the library that makes
    an owner hold a value puts its lock again, with a new ``created``, which the takeover's
    exact-lock guard already refuses; the check is for owners written around the library.)"""
    @contextlib.contextmanager
    def both() -> Iterator[None]:
        def orphan_check(_: Any) -> Any:
            def check(write: Any, owner: Any, item: Any) -> Any:
                return writes_module.ConditionCheck(
                    table=write.table, model=write.model, key=dict(owner), condition=None,
                    label="(mutant)", guard=writes_module.Absent(), heals=write.lock.key)
            return check

        def taking_over(original: Any) -> Any:
            def without_checks(self: Any, takeovers: Any) -> Any:
                plan = original(self, takeovers)
                return attrs.evolve(plan, writes=tuple(
                    w for w in plan.writes
                    if not (isinstance(w, writes_module.ConditionCheck) and w.heals)))
            return without_checks

        with patched(heal_module, "_orphan_check", orphan_check), \
                patched(plan_module.Plan, "taking_over", taking_over):
            yield
    return both()


def _takeover_without_exact_lock() -> Any:
    """A takeover's lock put guarded only on the lock existing, not on its being exactly the
    lock met (owner and ``created``)."""
    def wrap(original: Any) -> Any:
        def taking_over(self: Any, takeovers: Any) -> Any:
            loose = {key: attrs.evolve(t, guard=writes_module.Shaped(equal=()))
                     for key, t in takeovers.items()}
            return original(self, loose)
        return taking_over
    return patched(plan_module.Plan, "taking_over", wrap)


def _home_region_ignored() -> Any:
    """A global table's writes sent where each model points, its home region ignored (as
    before issue 35): ``_regions.route`` keeps every call in its client's region."""
    @contextlib.contextmanager
    def local() -> Iterator[None]:
        from . import replicas

        def reset() -> None:   # the routes kept by the library are made again
            regions_module.forget(replicas.HOST)
            replicas.declare_global()

        reset()
        try:
            with patched(regions_module, "_choose",
                         lambda _: lambda meta, mode, write, strong: meta):
                yield
        finally:
            reset()
    return local()


#: Switchable re-introductions of known bugs: name → (what it breaks, patcher).
MUTANTS: dict[str, tuple[str, Callable[[], Any]]] = {
    "lock-put-unguarded": ("a lock put without attribute_not_exists (nor an owner guard)",
                           _lock_put_unguarded),
    "lock-delete-unguarded": ("a lock delete not guarded on its owner", _lock_delete_unguarded),
    "stale-follow-up": ("the old unguarded follow-up: a refused stale save whose record holds "
                        "what it meant to write sends its lock changes alone",
                        _stale_follow_up),
    "lock-from-python-value": ("a save's locks computed from the python value, not the "
                               "stored (serialized) one", _lock_from_python_value),
    "stale-record-unguarded": ("a loaded copy's record put not guarded on what was loaded",
                               _stale_record_unguarded),
    "takeover-without-owner-check": ("healing takes over any lock it meets: its owner neither "
                                     "judged nor checked", _takeover_without_owner_check),
    "takeover-without-exact-lock": ("a takeover's lock put not conditioned on the lock being "
                                    "exactly the one met", _takeover_without_exact_lock),
    "home-region-ignored": ("a global table's writes go to each client's own region, not the "
                            "home region", _home_region_ignored),
}
