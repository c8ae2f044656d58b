"""The write protocol for multi-Region strong consistency (MRSC) tables, sans IO.

DynamoDB refuses ``TransactWriteItems`` on an MRSC global table, but every single-item write is
synchronous across its regions: for this protocol the table is one strongly consistent
database without transactions. One write of a record (create, change of unique values, delete)
is a fixed sequence of single-item conditional requests (docs/global-tables.md, "Strong
consistency (MRSC)", states it with every crash point):

1. read the record (consistent);
2. put each new lock with ``attribute_not_exists`` carrying a *pending intent*: the operation's
   token (:data:`TOKEN_ATTR`), :data:`PENDING_ATTR` and when it was put (:data:`AT_ATTR`); a
   lock met instead is judged (:func:`judge`) after reading its owner, and taken over —
   a put conditioned on the exact lock met — only when it is free;
3. write the record conditioned on what was read, only before the intents' lease ends;
4. clear each intent (conditioned on the token);
5. for each old lock: read it and, when it names this record, read the record again and judge
   it; a free one is deleted conditioned on being exactly the lock judged (owner, token and time).

A failed step 3 releases the new locks (conditioned on the token) that the record, as it now
is, does not require. A lost answer (the driver resends the request; :meth:`Write.lost`) is
recognised: a resent intent refused by its own token is a success, a resent record write
refused by its own earlier attempt is judged by the record it returns (``ALL_OLD``), and one
whose lease ended before the resend by reading the record again. :class:`Write` is that
sequence as a state machine: :meth:`Write.request` is the next request (or None: done, with
:attr:`Write.outcome`), :meth:`Write.answered` the machine after its answer. :class:`Settle` is
the rule a contender, ``repair`` or the stream guard applies to one lock met. Nothing here sends
a request; a driver (the simulation; the flush, through ``dynaunique._write.strong``) sends
them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dynaunique._lock.kinds import Kind
from dynaunique._lock.locks import MRSC_AT_ATTR, MRSC_PENDING_ATTR, MRSC_TOKEN_ATTR
from dynaunique._write.state import same_item

__all__ = ["AT_ATTR", "PENDING_ATTR", "TOKEN_ATTR", "Met", "Settle", "Timing", "Verdict",
           "Write", "judge"]

#: The token of the operation that last put the lock (every lock the protocol writes has one).
TOKEN_ATTR = MRSC_TOKEN_ATTR
#: Present (the token again) while the operation's record write may still be pending.
PENDING_ATTR = MRSC_PENDING_ATTR
#: When the lock was put, by the writer's clock (epoch seconds).
AT_ATTR = MRSC_AT_ATTR

Item = dict[str, Any]
#: The lock items a record item requires, by lock key (the library's ``locks_of`` + ``lock_put``).
LocksFor = Callable[[Mapping[str, Any] | None], Mapping[str, Item]]


@attrs.frozen
class Timing:
    """The protocol's two durations, in seconds.

    ``lease``: a writer sends its record write only while ``now < at + lease`` (``at``: when it
    put its first intent) and never resends it after. ``grace``: a pending intent whose owner
    does not hold the value is free for others once ``now >= at + grace``. Safe when ``grace >=
    lease + the largest clock skew between writers + the longest a sent request takes to be
    applied`` (a request still in flight when its lease ends must land before anyone takes
    the lock over).
    """

    lease: float = 10.0
    grace: float = 30.0


class Verdict(Kind):
    """What a lock met means, once its owner has been read (:func:`judge`)."""

    LIVE = "live"         # its owner holds the value: the value is taken
    CONFIRM = "confirm"   # live, and its intent is still marked pending: clearing it is safe
    FREE = "free"         # no owner will hold the value through it: take over or delete it
    WAIT = "wait"         # a pending intent within its grace period: its writer may still write


@attrs.frozen
class Met:
    """A lock item as read: its key, owner (a typed key, as JSON), token, intent, time."""

    key: str
    owner: str
    token: str
    pending: bool
    at: float
    #: Whether the item carries its time (``mrsc_at``; every intent the protocol puts does).
    stamped: bool = True

    @classmethod
    def of(cls, item: Mapping[str, Any] | None, hash_attr: str) -> Met | None:
        """The lock ``item`` (None: no item)."""
        if item is None:
            return None
        return cls(key=item[hash_attr]["S"], owner=_text(item.get("owner", {}).get("M")),
                   token=item.get(TOKEN_ATTR, {}).get("S", ""),
                   pending=PENDING_ATTR in item, at=float(item.get(AT_ATTR, {}).get("N", 0)),
                   stamped=AT_ATTR in item)

    def owner_key(self) -> Item:
        """The owner's typed primary key."""
        owner: Item = json.loads(self.owner)
        return owner


def judge(met: Met, owner: Mapping[str, Any] | None, locks_for: LocksFor, now: float,
          timing: Timing) -> Verdict:
    """The verdict on ``met`` given its ``owner`` record as read after it (None: gone)."""
    if met.key in locks_for(owner):
        return Verdict.CONFIRM if met.pending else Verdict.LIVE
    if met.pending and now < met.at + timing.grace:
        return Verdict.WAIT
    return Verdict.FREE


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _names(pairs: list[tuple[str, Any]], condition: str) -> Item:
    """Request parameters: ``condition`` over the placeholders ``pairs`` names in order."""
    names = {f"#n{i}": name for i, (name, _) in enumerate(pairs)}
    values = {f":v{i}": value for i, (_, value) in enumerate(pairs) if value is not None}
    params: Item = {"ConditionExpression": condition, "ExpressionAttributeNames": names}
    if values:
        params["ExpressionAttributeValues"] = values
    return params


def _exact(met: Met) -> Item:
    """The condition "this lock is exactly ``met``": the same token, owner and intent time. The
    time tells an intent put again with the same token and owner (a writer's resend after a
    ``Settle`` deleted its first one) from the one judged."""
    pairs: list[tuple[str, Any]] = [(TOKEN_ATTR, {"S": met.token}),
                                    ("owner", {"M": met.owner_key()})]
    if met.stamped:
        return _names([*pairs, (AT_ATTR, {"N": _at_text(met.at)})],
                      "#n0 = :v0 AND #n1 = :v1 AND #n2 = :v2")
    return _names([*pairs, (AT_ATTR, None)],
                  "#n0 = :v0 AND #n1 = :v1 AND attribute_not_exists(#n2)")


def _at_text(at: float) -> str:
    """An intent's time as stored (``repr``: read back by ``float``, written again the same)."""
    return repr(float(at))


def intent_put(table: str, lock: Mapping[str, Any], token: str, now: float,
               met: Met | None) -> Item:
    """PutItem of ``lock`` with a pending intent: new (``met`` None: ``attribute_not_exists``),
    or taking over exactly ``met``."""
    item = {**lock, TOKEN_ATTR: {"S": token}, PENDING_ATTR: {"S": token},
            AT_ATTR: {"N": _at_text(now)}}
    hash_attr = next(iter(lock))
    guard = (_names([(hash_attr, None)], "attribute_not_exists(#n0)") if met is None
             else _exact(met))
    return {"TableName": table, "Item": item, "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **guard}


def intent_clear(table: str, key: Mapping[str, Any], token: str) -> Item:
    """UpdateItem removing the pending intent of the lock at ``key``, if it is still ``token``'s."""
    return {"TableName": table, "Key": dict(key), "UpdateExpression": "REMOVE #n1",
            **_names([(TOKEN_ATTR, {"S": token}), (PENDING_ATTR, None)], "#n0 = :v0")}


def release(table: str, key: Mapping[str, Any], met: Met) -> Item:
    """DeleteItem of the lock at ``key`` if it is still exactly ``met`` (owner, token, time)."""
    return {"TableName": table, "Key": dict(key), **_exact(met)}


def record_write(table: str, key: Mapping[str, Any], read: Mapping[str, Any] | None,
                 target: Mapping[str, Any] | None, compared: tuple[str, ...]) -> tuple[str, Item]:
    """(operation, parameters) writing ``target`` (None: deleting the record) conditioned on
    the record being as ``read`` (None: absent) in the attributes ``compared``."""
    hash_attr = next(iter(key))
    if read is None:
        guard = _names([(hash_attr, None)], "attribute_not_exists(#n0)")
    else:
        pairs: list[tuple[str, Any]] = [(hash_attr, None)]
        parts = ["attribute_exists(#n0)"]
        for name in compared:
            pairs.append((name, read.get(name)))
            n = len(pairs) - 1
            parts.append(f"#n{n} = :v{n}" if name in read else f"attribute_not_exists(#n{n})")
        guard = _names(pairs, " AND ".join(parts))
    guard["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if target is None:
        return "DeleteItem", {"TableName": table, "Key": dict(key), **guard}
    return "PutItem", {"TableName": table, "Item": dict(target), **guard}


def _get(table: str, key: Mapping[str, Any]) -> tuple[str, Item]:
    return "GetItem", {"TableName": table, "Key": dict(key), "ConsistentRead": True}


@attrs.frozen
class Write:
    """One record write by the protocol, as a state machine (see the module docstring).

    ``key``: the record's typed primary key; ``target``: the item to store (None: delete);
    ``locks_for``: the lock items an item requires, owned by this record; ``lock_key``: a lock
    key's typed primary key; ``compared``: the attributes the record write is conditioned on.
    """

    table: str
    key: Item = attrs.field(eq=False)
    target: Item | None = attrs.field(eq=False)
    token: str
    locks_for: LocksFor = attrs.field(eq=False)
    lock_key: Callable[[str], Item] = attrs.field(eq=False)
    compared: tuple[str, ...]
    timing: Timing = Timing()
    #: The record write as the caller renders it (the flush: its guard and the caller's
    #: condition), sent instead of :func:`record_write` of ``compared``.
    sent: tuple[str, Item] | None = attrs.field(default=None, eq=False)
    #: Where it is: read, put, owner, take, write, verify, clear, seek, judge, drop, undo,
    #: done.
    phase: str = "read"
    read: str = "null"        # the record as read (JSON)
    new: tuple[str, ...] = ()  # the lock keys it puts, in order
    index: int = 0
    met: Met | None = None
    at: float | None = None    # the time its intents carry (from before its first put)
    #: Whether a record write was sent whose answer was lost (it may have been applied).
    doubt: bool = False
    #: Intents not to release on undo: locks the record as last read requires.
    keep: tuple[str, ...] = ()
    #: How it ended: ``written``, ``unchanged`` (the record already was the target), ``taken``
    #: (a live lock holds a value: a UniqueViolation), ``busy`` (a pending intent within its
    #: grace period), ``conflict`` (the record changed since read), ``expired`` (the lease
    #: ended before the record write).
    outcome: str = ""

    @property
    def record(self) -> Item | None:
        """The record as read (None: absent, or not read yet)."""
        value: Item | None = json.loads(self.read)
        return value

    def key_text(self) -> tuple[Any, ...]:
        """What its future depends on (for state hashing)."""
        return (self.phase, self.read, self.new, self.index, self.met, self.at,
                self.outcome, self.token, self.doubt, self.keep)

    def request(self, now: float) -> tuple[str, Item] | None:
        """The next request at time ``now`` (None: done, see :attr:`outcome`), of the machine
        :meth:`advance` returned for ``now``."""
        phase, table = self.phase, self.table
        if phase == "read":
            return _get(table, self.key)
        at = now if self.at is None else self.at   # (set by advance: its intents' time)
        if phase == "put":
            lock = self.locks_for(self.target)[self.new[self.index]]
            return "PutItem", intent_put(table, lock, self.token, at, None)
        if phase in ("owner", "judge"):
            assert self.met is not None
            return _get(table, self.met.owner_key())
        if phase == "take":
            lock = self.locks_for(self.target)[self.new[self.index]]
            return "PutItem", intent_put(table, lock, self.token, at, self.met)
        if phase == "write":
            return self.sent or record_write(table, self.key, self.record, self.target,
                                             self.compared)
        if phase == "verify":
            return _get(table, self.key)
        if phase == "clear":
            return "UpdateItem", intent_clear(table, self.lock_key(self.new[self.index]),
                                              self.token)
        if phase == "seek":
            return _get(table, self.lock_key(self._releasing()[self.index]))
        if phase == "drop":
            assert self.met is not None
            return "DeleteItem", release(table, self.lock_key(self.met.key), self.met)
        if phase == "undo":
            mine = Met(self.new[self.index], _text(self.key), self.token, True, at)
            return "DeleteItem", release(table, self.lock_key(mine.key), mine)
        return None

    def writable(self, now: float) -> bool:
        """Whether its record write may be sent at ``now`` (within the intents' lease)."""
        return self.at is None or now < self.at + self.timing.lease

    def answered(self, now: float, answer: Item | None, refused: Item | None) -> Write:
        """The machine after the answer to :meth:`request` at ``now``: ``answer`` (the
        response) or ``refused`` (a ``ConditionalCheckFailedException``'s response, with the
        item when it carries one). Other errors are the driver's (its retry loop)."""
        phase = self.phase
        if phase == "read":
            return self._after_read((answer or {}).get("Item"))
        if phase in ("put", "take"):
            return self._after_put(now, refused)
        if phase in ("owner", "judge"):
            return self._after_owner(now, (answer or {}).get("Item"))
        if phase in ("write", "verify"):
            return self._after_write(answer, refused)
        if phase == "clear":
            return attrs.evolve(self, index=self.index + 1)._cleared()
        if phase == "seek":
            met = Met.of((answer or {}).get("Item"), next(iter(self.key)))
            if met is None or met.owner != _text(self.key):   # gone, or not this record's
                return attrs.evolve(self, index=self.index + 1)._released()
            return attrs.evolve(self, phase="judge", met=met)
        if phase == "drop":
            return attrs.evolve(self, index=self.index + 1)._released()
        if phase == "undo":
            return self._undo(self.index)
        raise AssertionError(f"answered while {phase}")

    def _after_read(self, record: Item | None) -> Write:
        had, wants = self.locks_for(record), self.locks_for(self.target)
        new = tuple(sorted(set(wants) - set(had)))
        if same_item(record, self.target):
            return attrs.evolve(self, read=_text(record), phase="done", outcome="unchanged")
        return attrs.evolve(self, read=_text(record), new=new, index=0)._put_or_write()

    def _after_put(self, now: float, refused: Item | None) -> Write:
        if refused is None:
            at = self.at if self.at is not None else now
            return attrs.evolve(self, index=self.index + 1, met=None, at=at)._put_or_write()
        met = Met.of(refused.get("Item"), next(iter(self.key)))
        if met is None:   # gone since: put it again
            return attrs.evolve(self, phase="put", met=None)
        if met.token == self.token:   # our own earlier attempt, its answer lost
            at = self.at if self.at is not None else met.at
            return attrs.evolve(self, index=self.index + 1, met=None, at=at)._put_or_write()
        return attrs.evolve(self, phase="owner", met=met)

    def _after_owner(self, now: float, owner: Item | None) -> Write:
        assert self.met is not None
        verdict = judge(self.met, owner, self.locks_for, now, self.timing)
        if verdict is Verdict.FREE:   # a lock met: take it over; an old lock: delete it
            return attrs.evolve(self, phase="take" if self.phase == "owner" else "drop")
        if self.phase == "judge":
            return attrs.evolve(self, index=self.index + 1)._released()
        outcome = "busy" if verdict is Verdict.WAIT else "taken"
        return attrs.evolve(self, outcome=outcome)._undo(self.index)

    def _after_write(self, answer: Item | None, refused: Item | None) -> Write:
        phase = self.phase
        current = (answer or {}).get("Item") if phase == "verify" else (
            None if refused is None else refused.get("Item"))
        if (phase == "write" and refused is None) or same_item(current, self.target):
            # applied, now or by an attempt whose answer was lost
            return attrs.evolve(self, outcome="written", phase="clear", index=0)._cleared()
        keep = tuple(sorted(set(self.locks_for(current)) & set(self.new)))
        outcome = "conflict" if phase == "write" else "expired"
        return attrs.evolve(self, outcome=outcome, keep=keep)._undo(len(self.new))

    def _releasing(self) -> list[str]:
        return sorted(set(self.locks_for(self.record)) - set(self.locks_for(self.target)))

    def _put_or_write(self) -> Write:
        if self.index < len(self.new):
            return attrs.evolve(self, phase="put")
        return attrs.evolve(self, phase="write")

    def _cleared(self) -> Write:
        if self.index < len(self.new):
            return attrs.evolve(self, phase="clear")
        return attrs.evolve(self, index=0)._released()

    def _released(self) -> Write:
        if self.index < len(self._releasing()):
            return attrs.evolve(self, phase="seek", met=None)
        return attrs.evolve(self, phase="done", met=None)

    def _undo(self, count: int) -> Write:
        """Release the first ``count`` new locks (this operation's), last first, but those the
        record as last read requires (:attr:`keep`)."""
        while count > 0 and self.new[count - 1] in self.keep:
            count -= 1
        if count == 0:
            return attrs.evolve(self, phase="done", met=None)
        return attrs.evolve(self, phase="undo", index=count - 1, met=None)

    def advance(self, now: float) -> Write:
        """The machine at ``now`` before it sends: a record write whose lease ended is not
        sent; the intents are released instead (outcome ``expired``) — after reading the
        record again when an earlier attempt's answer was lost. Before its first intent put
        it takes ``now`` as :attr:`at`: the time every intent it puts carries, and the start
        of its lease (so a put answered late, or resent, never lengthens the lease past what
        the intent tells the others)."""
        if self.phase in ("put", "take") and self.at is None:
            return attrs.evolve(self, at=now)
        if self.phase == "write" and not self.writable(now):
            if self.doubt:
                return attrs.evolve(self, phase="verify")
            return attrs.evolve(self, outcome="expired")._undo(len(self.new))
        return self

    def lost(self) -> Write:
        """The machine after its request's answer was lost (the driver resends it): only a
        record write's loss matters — it may have been applied."""
        return attrs.evolve(self, doubt=True) if self.phase == "write" else self

    def abandon(self) -> Write:
        """The machine after its driver gave up on its request (an error, the retries run
        out) before any record write could have been applied: it releases every intent it may
        have put, the one in doubt too (each release is conditioned on its token: an intent
        never put is not there to delete). Later, the record may be written: done as it is."""
        undone = {"put": self.index + 1, "take": self.index + 1, "owner": self.index,
                  "write": len(self.new)}.get(self.phase)
        if undone is None or self.doubt:
            return attrs.evolve(self, phase="done", met=None)
        return attrs.evolve(self, outcome="abandoned")._undo(undone)


@attrs.frozen
class Settle:
    """The rule for one lock met by a contender, ``repair`` or the stream guard: read its
    owner, judge, then clear a live lock's intent or delete a free lock (conditioned on it
    being exactly the lock met); a live lock or one within its grace period is left."""

    table: str
    met: Met
    lock_key: Item = attrs.field(eq=False)
    locks_for: LocksFor = attrs.field(eq=False)
    timing: Timing = Timing()
    verdict: Verdict | None = None
    done: bool = False

    def request(self) -> tuple[str, Item] | None:
        """The next request (None: done)."""
        if self.done:
            return None
        if self.verdict is None:
            return _get(self.table, self.met.owner_key())
        if self.verdict is Verdict.CONFIRM:
            return "UpdateItem", intent_clear(self.table, self.lock_key, self.met.token)
        return "DeleteItem", release(self.table, self.lock_key, self.met)

    def answered(self, now: float, answer: Item | None) -> Settle:
        """The rule after the answer to :meth:`request` at ``now``."""
        if self.verdict is None:
            verdict = judge(self.met, (answer or {}).get("Item"), self.locks_for, now,
                            self.timing)
            return attrs.evolve(self, verdict=verdict,
                                done=verdict in (Verdict.LIVE, Verdict.WAIT))
        return attrs.evolve(self, done=True)


@attrs.frozen
class Claim:
    """``repair``'s write of a lock for a record that holds its value, by the protocol's own
    steps (no transaction): a missing lock (``met`` None), or a lock handed over from an owner
    judged free (``met``: the lock exactly as judged).

    1. put ``lock`` as a pending intent with ``token`` (:func:`intent_put`:
       ``attribute_not_exists``, or conditioned on exactly ``met``);
    2. read the record at ``key`` again (consistent);
    3. it still requires the lock: clear the mark (:func:`intent_clear`, conditioned on the
       token); it does not: delete the own intent (:func:`release`: token, owner and time).

    Between 1 and 3 the lock is the record's pending intent, judged as a writer's (:func:`judge`):
    a contender for the value meets it and, the record holding the value, is refused; a writer
    moving the record away leaves it within its grace period, and the read of 2 sees the record
    moved. :attr:`outcome`: ``held`` (cleared: the record holds the lock), ``released`` (the
    record no longer requires it: the intent deleted), ``refused`` (step 1's condition failed:
    the lock is not as read), ``lost`` (the mark was no longer this token's: taken over since).
    """

    table: str
    key: Item = attrs.field(eq=False)
    lock: Item = attrs.field(eq=False)
    token: str
    locks_for: LocksFor = attrs.field(eq=False)
    lock_key: Item = attrs.field(eq=False)
    met: Met | None = None
    #: Where it is: put, read, clear, undo, done.
    phase: str = "put"
    at: float | None = None    # the time its intent carries (set by advance before the put)
    outcome: str = ""

    def key_text(self) -> tuple[Any, ...]:
        """What its future depends on (for state hashing)."""
        return (self.phase, self.token, self.met, self.at, self.outcome)

    def advance(self, now: float) -> Claim:
        """No lease: every write it sends is conditioned on its own token. Before its put it
        takes ``now`` as :attr:`at`, the time its intent carries (and its undo's condition)."""
        if self.phase == "put" and self.at is None:
            return attrs.evolve(self, at=now)
        return self

    def lost(self) -> Claim:
        """A lost answer changes nothing: each request, resent, is recognised or harmless."""
        return self

    def request(self, now: float) -> tuple[str, Item] | None:
        """The next request at ``now`` (None: done, see :attr:`outcome`)."""
        at = now if self.at is None else self.at
        if self.phase == "put":
            return "PutItem", intent_put(self.table, self.lock, self.token, at, self.met)
        if self.phase == "read":
            return _get(self.table, self.key)
        if self.phase == "clear":
            return "UpdateItem", intent_clear(self.table, self.lock_key, self.token)
        if self.phase == "undo":
            name = self.lock_key[next(iter(self.lock_key))]["S"]
            mine = Met(name, _text(self.key), self.token, True, at)
            return "DeleteItem", release(self.table, self.lock_key, mine)
        return None

    def answered(self, now: float, answer: Item | None, refused: Item | None) -> Claim:
        """The machine after the answer (or the condition's refusal) to :meth:`request`."""
        if self.phase == "put":
            met = Met.of((refused or {}).get("Item"), next(iter(self.lock_key)))
            if refused is not None and (met is None or met.token != self.token):
                return attrs.evolve(self, phase="done", outcome="refused")
            at = (now if self.at is None else self.at) if met is None else met.at
            return attrs.evolve(self, phase="read", at=at)
        if self.phase == "read":
            name = self.lock_key[next(iter(self.lock_key))]["S"]
            held = name in self.locks_for((answer or {}).get("Item"))
            return attrs.evolve(self, phase="clear" if held else "undo")
        if self.phase == "clear":
            return attrs.evolve(self, phase="done", outcome="lost" if refused else "held")
        return attrs.evolve(self, phase="done", outcome="released")
