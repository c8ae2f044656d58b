"""The MRSC protocol's locks in the audit: judged and settled by the protocol's own rule.

On a multi-Region strong consistency table a write puts each new lock as a *pending intent*
(``mrsc_token``, ``mrsc_pending``, ``mrsc_at``) before its record write, and clears the mark
after it (``dynaunique._write.mrsc``, docs/global-tables.md). A lock carrying the mark is judged
by :func:`dynaunique._write.mrsc.judge` — one rule for writers, ``check``, ``repair`` and the
stream guard —: within its grace period, its owner not holding the value, it is a write in
flight (``pending``), never an orphan; its owner holding the value, its mark may be cleared
(``confirmable``); past the grace period, its owner not holding the value, it is an orphan.

Repair settles such locks (and every lock carrying a token: a lock the protocol wrote) with
:class:`dynaunique._write.mrsc.Settle`: read the owner, judge at the repairer's clock, then
clear the mark conditioned on the token, or delete the lock conditioned on it being exactly the
lock read (token and owner) — never an unconditioned write, and no transaction (MRSC has none).

The clock: ``mrsc_at`` is the writer's, ``now`` the judge's own (:func:`time.time`), as a
contending writer reads it; the grace period covers the skew between them (``grace >= lease +
the largest clock skew + the longest a request takes``). The audit judges with the writers'
own durations (:data:`TIMING`): a shorter grace period would delete a live writer's intent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dynaunique._lock.items import key_of
from dynaunique._transport.answers import Refused, error_for
from dynaunique._write import mrsc as _mrsc
from dynaunique._write.render import render_write
from dynaunique._write.writes import lock_put
from dynaunique.errors import AuditError

from ._stored import Intent, _interpret, _Record
from ._tables import _call, _exchange, _info, _Meter, _Table

#: The durations intents are judged with: the protocol's writers' own.
TIMING = _mrsc.Timing()


def is_intent(lock_item: Mapping[str, Any] | None) -> bool:
    """Whether a stored lock is a pending intent (it carries the protocol's pending mark)."""
    return lock_item is not None and _mrsc.PENDING_ATTR in lock_item


def by_protocol(lock_item: Mapping[str, Any] | None) -> bool:
    """Whether a stored lock was written by the MRSC protocol (it carries a token): repair
    settles it with single-item writes conditioned on that token."""
    return lock_item is not None and _mrsc.TOKEN_ATTR in lock_item


def marks(lock_item: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A protocol lock's marks as JSON: ``{"token", "pending", "at"}`` (None: no such lock)."""
    intent = Intent.of(lock_item)
    return intent.to_dict() if intent is not None else None


def _at(lock_item: Mapping[str, Any]) -> float:
    return float(lock_item.get(_mrsc.AT_ATTR, {}).get("N", 0))


def locks_for(table: _Table) -> _mrsc.LocksFor:
    """The lock items a record item of ``table`` requires (owned by it), by lock key: the
    model that claims the item (``_interpret``) and the one lock builder (``lock_put``)."""
    def locks(item: Mapping[str, Any] | None) -> Mapping[str, dict[str, Any]]:
        key = key_of(table.key_attributes, item) if item is not None else None
        if item is None or key is None:
            return {}
        record = _interpret(table, key, dict(item), keep_item=True)
        model = table.model_named(record.ref.model)
        if model is None or not record.requires:
            return {}
        return {name: render_write(lock_put(_info(model), ref, key, dict(item)))[1]["Item"]
                for name, ref in record.requires.items()}
    return locks


def _met(table: _Table, lock_item: Mapping[str, Any]) -> _mrsc.Met:
    met = _mrsc.Met.of(lock_item, table.hash_attr)
    assert met is not None
    return met


def verdict(table: _Table, lock_item: Mapping[str, Any], owner: Mapping[str, Any] | None,
            now: float) -> _mrsc.Verdict:
    """The protocol's verdict on ``lock_item`` given its ``owner`` record as read after it."""
    return _mrsc.judge(_met(table, lock_item), owner, locks_for(table), now, TIMING)


def age(lock_item: Mapping[str, Any], now: float) -> float:
    """How long ago, by ``now``, the writer put the lock (its ``mrsc_at``)."""
    return now - _at(lock_item)


def settle_rule(table: _Table, lock_item: Mapping[str, Any]) -> _mrsc.Settle:
    """The protocol's rule for ``lock_item`` as read."""
    met = _met(table, lock_item)
    return _mrsc.Settle(table.name, met, table.lock_pk(met.key), locks_for(table), TIMING)


def planned(rule: _mrsc.Settle, verdict_: _mrsc.Verdict) -> dict[str, Any]:
    """``{operation: parameters}``: the conditional write ``rule`` sends on ``verdict_``."""
    request = attrs.evolve(rule, verdict=verdict_).request()
    assert request is not None
    return {request[0]: request[1]}


def claim_rule(table: _Table, holder: _Record, lock_key: str,
               met_item: Mapping[str, Any] | None) -> _mrsc.Claim:
    """The protocol's steps writing ``holder``'s lock ``lock_key`` on an MRSC table (no
    transaction): a missing lock (``met_item`` None), or the hand-over of ``met_item``, the lock
    as read (:class:`dynaunique._write.mrsc.Claim`). A fresh token; the lock item is the one
    the library's lock builder makes for ``holder`` as read."""
    assert holder.item is not None
    lock = locks_for(table)(holder.item)[lock_key]
    met = None if met_item is None else _met(table, met_item)
    return _mrsc.Claim(table.name, dict(holder.ref.key), dict(lock), uuid.uuid4().hex,
                       locks_for(table), table.lock_pk(lock_key), met)


def claim(table: _Table, rule: _mrsc.Claim, meter: _Meter,
          clock: Callable[[], float] = time.time) -> _mrsc.Claim | None:
    """Run ``rule``: for a hand-over, read the lock's owner first and judge it at ``clock()``;
    then its requests, each answered (a failed condition is an answer: the machine reads it).

    Returns the machine as it ended (its ``outcome``), or None when the lock to hand over is
    not judged free (nothing was written).

    :raises AuditError: a request failed otherwise.
    """
    if rule.met is not None:
        owner = _call(meter, table.connection, "GetItem", TableName=table.name,
                      Key=rule.met.owner_key(), ConsistentRead=True).get("Item")
        if _mrsc.judge(rule.met, owner, rule.locks_for, clock(), TIMING) is not _mrsc.Verdict.FREE:
            return None
    now = clock()
    while (request := rule.request(now)) is not None:
        operation, params = request
        answer, refused = _send(table, operation, params, meter)
        now, rule = clock(), rule.answered(now, answer, refused)
    return rule


def _send(table: _Table, operation: str, params: dict[str, Any], meter: _Meter
          ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(answer, refusal: a failed condition's response, with the item it returns)."""
    if operation == "GetItem":
        return _call(meter, table.connection, operation, **params), None
    got = _exchange(meter, table.connection, operation, params)
    if isinstance(got, Refused):
        if "ConditionalCheckFailed" in got.code:
            return None, dict(got.response)
        raise error_for(got, operation, params, error=AuditError)
    return dict(got.data), None


def settle(table: _Table, rule: _mrsc.Settle, meter: _Meter,
           clock: Callable[[], float] = time.time) -> _mrsc.Settle | None:
    """Run ``rule``: read the owner, judge at ``clock()``, send its conditional write.

    Returns the rule as it ended (see its ``verdict``: ``live``/``wait`` sent no write), or
    None when DynamoDB refused the write's condition: the lock is no longer the one read.

    :raises AuditError: a request failed otherwise.
    """
    while (request := rule.request()) is not None:
        answer, refused = _send(table, *request, meter)
        if refused is not None:
            return None
        rule = rule.answered(clock(), answer)
    return rule
