"""Shared by the gap-attack tests: models, the four adversaries, and the request-guard check.

An *adversary* is another writer that acts between two requests of one call (injected by
``FaultProxy.intercept``). It uses dynaunique's own API on the same model classes, so what it
does is something a real second process could do:

* ``back`` — the record moves back to the value it held before;
* ``third`` — the record moves to a third value;
* ``deleted`` — the record is deleted;
* ``recreated`` — the record is deleted and created again (same key) holding the contested value
  (the value whose lock the call under test would touch): a versioned record restarts at 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from support.declare import declare

from dynaunique import Model
from dynaunique.attributes import UnicodeAttribute, VersionAttribute

from .proxy import WRITE_OPERATIONS, Recorded

ADVERSARIES = ("back", "third", "deleted", "recreated")


# No version: "unchanged since loaded" is the unique value.
GapPlain = declare("GapPlain", "rel_gaps", meta={"read_timeout_seconds": 30},
                   pk=UnicodeAttribute(hash_key=True),
                   email=UnicodeAttribute(unique=True, null=True), note=UnicodeAttribute(null=True))

# With a VersionAttribute (which restarts at 1 when the record is created again).
GapVersioned = declare("GapVersioned", "rel_gaps_v", meta={"read_timeout_seconds": 30},
                       pk=UnicodeAttribute(hash_key=True),
                       email=UnicodeAttribute(unique=True, null=True),
                       note=UnicodeAttribute(null=True), version=VersionAttribute())


MODELS: dict[str, type[Model]] = {"plain": GapPlain, "versioned": GapVersioned}


def set_value(model: type[Model], key: str, value: str | None) -> None:
    """Move record ``key`` to ``value`` (load it consistently, assign, save); create it with
    ``value`` when it does not exist."""
    try:
        record = model.get(key, consistent_read=True)
    except model.DoesNotExist:
        model(pk=key, email=value).save()
        return
    record.email = value  # type: ignore[attr-defined]
    record.save()


def delete(model: type[Model], key: str) -> None:
    """Delete record ``key`` if it exists (a never-loaded delete reads it first)."""
    model(pk=key).delete()


def recreate(model: type[Model], key: str, value: str) -> None:
    """Delete record ``key`` and create it again holding ``value``."""
    delete(model, key)
    model(pk=key, email=value).save()


def swap_back(model: type[Model], x: str, y: str, x_value: str, y_value: str) -> None:
    """Put ``x_value`` back on ``x`` and ``y_value`` on ``y``, in one atomic() unit."""
    from dynaunique import atomic

    first = model.get(x, consistent_read=True)
    second = model.get(y, consistent_read=True)
    first.email = x_value  # type: ignore[attr-defined]
    second.email = y_value  # type: ignore[attr-defined]
    with atomic():
        first.save()
        second.save()


# --- what a request guards ---------------------------------------------------------------------


def _item_key(kind: str, item: Mapping[str, Any], key_names: Iterable[str]) -> dict[str, Any]:
    source = item.get("Item", {}) if kind == "Put" else item.get("Key", {})
    return {k: source.get(k) for k in key_names}


def guarded_records(request: Recorded, key_names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The record keys a write request carries a condition on: an item of the request (put,
    update, delete or ConditionCheck) on that key with a ``ConditionExpression``."""
    body = request.body
    found: list[dict[str, Any]] = []
    if request.operation == "TransactWriteItems":
        for entry in body.get("TransactItems", []):
            for kind, item in entry.items():
                if item.get("ConditionExpression"):
                    found.append(_item_key(kind, item, key_names))
    elif request.operation in WRITE_OPERATIONS and body.get("ConditionExpression"):
        kind = "Put" if request.operation == "PutItem" else "Key"
        found.append(_item_key(kind, body, key_names))
    return found


def unguarded_followups(requests: list[Recorded], records: Iterable[Mapping[str, Any]],
                        key_names: tuple[str, ...]) -> list[str]:
    """Every write request after the first request of one call must carry a guard on each of
    the call's records (a conditioned record item, or a ConditionCheck on it): one line per
    request that does not."""
    problems: list[str] = []
    wanted = [dict(r) for r in records]
    for position, request in enumerate(requests[1:], start=2):
        if request.operation not in WRITE_OPERATIONS:
            continue
        guarded = guarded_records(request, key_names)
        missing = [r for r in wanted if r not in guarded]
        if missing:
            problems.append(f"request {position} ({request.operation}) carries no guard on "
                            f"{[_plain(r) for r in missing]}; it writes {describe(request)}")
    return problems


def _plain(key: Mapping[str, Any]) -> str:
    return "/".join(str(next(iter(v.values()))) for v in key.values() if v)


def describe(request: Recorded) -> list[str]:
    """A write request's items in one line each: kind, key, and whether it is conditioned."""
    body = request.body
    entries = (body.get("TransactItems", []) if request.operation == "TransactWriteItems"
               else [{request.operation.replace("Item", ""): body}])
    shown = []
    for entry in entries:
        for kind, item in entry.items():
            key = item.get("Item") if kind == "Put" else item.get("Key")
            hash_only = {k: v for k, v in (key or {}).items() if k == "pk"}
            guard = "guarded" if item.get("ConditionExpression") else "UNGUARDED"
            shown.append(f"{kind} {_plain(hash_only)} ({guard})")
    return shown


Act = Callable[[], object]
