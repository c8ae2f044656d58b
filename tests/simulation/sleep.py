"""Sleep sets for the search: steps that commute are not taken twice.

Two steps of different clients at a state ``s`` **commute** here when one of them, ``t``, is
*quiet* — it leaves the database as it was and ends no call (a read, a refused write, a
conflict or a throttle) — and the other, ``u``, changes none of the items ``t``'s answer depends
on (``reads``: its keys; a Scan or Query: every item; a conflict or throttle: none), and the
budgets allow both. Then ``s.t.u`` and ``s.u.t`` are the same state, key for key: ``t`` gets the
same answer either way (so its client makes the same move), the database after both is
``u``'s, and every call has seen the same states — ``t`` changes nothing a call's checks see,
and seeing a state twice changes nothing.

Sleep sets (Godefroid) use that: after exploring ``t`` from ``s``, a sibling ``u`` commuting with
it carries ``t`` asleep, and ``t`` is not taken from ``s.u`` (``s.u.t`` is ``s.t.u``, met from the
other side). A step stays asleep along steps it commutes with; what it was found to read and
write stays true along them (a quiet step's answer does not change, a writer stays asleep only
while the database does not change). A state met again with fewer steps asleep than it was
expanded with is expanded again for the missing ones, so **every reachable state is still
visited**: sleep sets save transitions, not states (``test_search.py`` compares the sets of
states, and each state's depth, with and without them). They do not cut the states the checks'
memories multiply (two writers' orders stay two states): see docs/guarantees.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from .explore import Found, Step, decode
from .search import Node, Search

#: "Every item" (what a Scan or a Query reads).
EVERY = None


@attrs.frozen
class Info:
    """What a step does at the state it was taken from."""

    index: int
    kind: str
    quiet: bool
    reads: frozenset[tuple[str, str]] | None
    writes: frozenset[tuple[str, str]]


def _keys(search: Search, request: Any) -> frozenset[tuple[str, str]] | None:
    """The items ``request``'s answer depends on (``EVERY``: any)."""
    operation, params = request.operation, request.params
    model = search.dbs._empty
    if operation in ("Scan", "Query"):
        return EVERY
    pairs: list[tuple[str, Any]] = []
    if operation in ("TransactWriteItems", "TransactGetItems"):
        for entry in params["TransactItems"]:
            (_, body), = entry.items()
            pairs.append((body["TableName"], body.get("Key") or body.get("Item")))
    elif operation == "BatchGetItem":
        pairs += [(t, k) for t, r in params["RequestItems"].items() for k in r["Keys"]]
    elif operation == "BatchWriteItem":
        for table, writes in params["RequestItems"].items():
            for write in writes:
                (_, body), = write.items()
                pairs.append((table, body.get("Key") or body.get("Item")))
    else:
        pairs.append((params["TableName"], params.get("Key") or params.get("Item")))
    return frozenset((t, model.key(operation, t, source)[0]) for t, source in pairs)


def _changed(search: Search, before: int, after: int) -> frozenset[tuple[str, str]]:
    if before == after:
        return frozenset()
    old, new = search.dbs.states[before][0], search.dbs.states[after][0]
    return frozenset((t, ident) for t in old.keys() | new.keys()
                     for ident in old.get(t, {}).keys() | new.get(t, {}).keys()
                     if old.get(t, {}).get(ident) != new.get(t, {}).get(ident))


_Memo = dict[Any, Any]


def info(search: Search, node: Node, step: Step, child: Node, ended: bool,
         memo: _Memo) -> Info:
    """What ``step`` from ``node`` (reaching ``child``; ``ended``: a call of it ended) does;
    ``memo`` keeps what it computed (each request's keys, each pair of states' difference)."""
    index, kind = decode(step)
    seat = node.seats[index]
    reads = frozenset() if kind in ("conflict", "throttle") else memo.get(seat.sid, False)
    if reads is False:
        reads = memo[seat.sid] = _keys(search, seat.pending)
    pair = (node.db, child.db)
    writes = memo.get(pair)
    if writes is None:
        writes = memo[pair] = _changed(search, node.db, child.db)
    key = (index, kind, child.db == node.db and not ended, reads, writes)
    made = memo.get(key)
    if made is None:
        made = memo[key] = Info(*key)
    return made


def _disjoint(reads: frozenset[tuple[str, str]] | None,
              writes: frozenset[tuple[str, str]]) -> bool:
    return not writes if reads is EVERY else not reads & writes


def independent(node: Node, a: Info, b: Info) -> bool:
    """Whether the steps ``a`` and ``b`` commute at ``node`` (see the module docstring)."""
    if a.index == b.index:
        return False
    # Both spending one budget: both orders need two left.
    if a.kind not in ("", "lost") and b.kind not in ("", "lost") and node.faults < 2:
        return False
    if a.kind == "lost" and b.kind == "lost" and node.lost < 2:
        return False
    return ((a.quiet and _disjoint(a.reads, b.writes))
            or (b.quiet and _disjoint(b.reads, a.writes)))


def run(search: Search, limit: int = 1, visit: Callable[[Node], None] | None = None
        ) -> tuple[int, list[Found]]:
    """``search.run`` with sleep sets: the same states, fewer transitions computed."""
    start = search.start()
    if visit is not None:
        visit(start)
    asleep: dict[Any, dict[Step, Info]] = {start.key(): {}}
    expanded: set[Any] = set()
    memo: _Memo = {}
    found: list[Found] = []
    if search.violations(start):
        return 1, [search._found(start)]
    # Each entry: a state and the steps to take from it (None: all but those asleep).
    queue: deque[tuple[Node, list[Step] | None]] = deque([(start, None)])
    while queue:
        node, only = queue.popleft()
        key = node.key()
        sleeping = asleep[key]
        expanded.add(key)
        steps = ([s for s in search.runnable(node) if s not in sleeping] if only is None
                 else only)
        done: dict[Step, Info] = {}
        for step in steps:
            ended: list[bool] = []
            child = search.child(node, step, ended)
            mine = info(search, node, step, child, bool(ended), memo)
            carried = {s: i for s, i in (*sleeping.items(), *done.items())
                       if independent(node, i, mine)}
            done[step] = mine
            ckey = child.key()
            before = asleep.get(ckey)
            if before is None:
                asleep[ckey] = carried
                if search.met(child, found, visit):
                    queue.append((child, None))
                elif len(found) >= limit:
                    return len(asleep), found
                continue
            missing = [s for s in before if s not in carried]
            if not missing:
                continue
            asleep[ckey] = {s: i for s, i in before.items() if s in carried}
            if ckey in expanded and not search.violations(child):
                queue.append((child, missing))
    return len(asleep), found
