"""A global table's replicas in the simulation: one database per region, replication explored.

The table is a multi-Region eventually consistent (MREC) global table in :data:`REGIONS`. Each
region holds its own :class:`~.memory.MemoryDynamoDB`; client ``i`` is bound to region
``REGIONS[i % 2]`` (its models' ``Meta.region``, :func:`models_in`). A request is answered by the
replica of the region its **connection** is for — what the library's ``_regions.route`` chose —
so the routing explored is the product's, not the scenario's.

A request that changes its replica queues, per item it changed, one *version* (the table, the
key, the item or its deletion, a sequence number) for every other region. Delivering a pending
version is a step of the exploration like a client's request (:class:`Replicate`), so every
delay and order of replication is explored; it applies last writer wins: only when its sequence
is above the one the target's item was last written with (DynamoDB settles concurrent writes of
an item in two regions by their time; the schedule's order stands for it). A version that can
no longer apply is dropped, and the sequences are kept as their order per key only
(:func:`canonical`), so equal futures are one state.

The invariants (``world.analyse``: no value held by two records, no record without its lock, no
orphan once every client is done) are checked in the home region after every step, and in every
region whenever no replication is pending. Each call's checks see the replica its client's
requests go to.

:class:`ReplicatedSearch` is ``search.Search`` with a state's database made of the replicas'
interned states, the sequences and the pending versions; :class:`ReplicatedWorld` replays a
schedule to print it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from dynaunique._lock.locks import OWNER_ATTR, RESERVED_PREFIX
from dynaunique._transport import regions as _regions
from dynaunique._transport.clients import connection_for

from .explore import Found, Held, Step, World, decode
from .memory import MemoryDynamoDB
from .search import Databases, Machines, Node, Search, Seat
from .workloads import Action, Client
from .world import TABLE, SimAccount, new_memory

#: The regions holding the table; the first is the home region.
REGIONS = ("us-east-1", "eu-west-1")
HOME = REGIONS[0]
#: The endpoint of the replicated models (its own: the one-region models' modes are untouched).
HOST = "http://replicas.invalid"


def declare_global() -> None:
    """Tell the library the table at :data:`HOST` is an MREC global table in :data:`REGIONS`
    (as ``create_tables`` seeds a table's mode: no DescribeTable is sent)."""
    described = {"Replicas": [{"RegionName": r} for r in REGIONS]}
    for region in REGIONS:
        _regions.remember(TABLE, region, HOST, described)


def _model_in(region: str) -> Any:
    meta = type("Meta", (SimAccount.Meta,), {"region": region, "host": HOST,
                                              "home_region": HOME})
    name = "SimAccount_" + region.replace("-", "_")
    # Its own connection: PynamoDB reuses a parent model's for a subclass on the same table,
    # whatever its Meta says (made already, SimAccount's would send this region's requests to
    # us-east-1 at SimAccount's host; ReplicatedDatabases.apply's check caught it).
    return type(SimAccount)(name, (SimAccount,), {"Meta": meta, "__module__": __name__,
                                                  "_connection": None})


#: Per region, its ``SimAccount``: the same attributes and lock, ``Meta.region`` that region.
MODELS_IN = {region: _model_in(region) for region in REGIONS}
declare_global()


def region_of(index: int) -> str:
    """The region client ``index`` runs in."""
    return REGIONS[index % len(REGIONS)]


class RegionClient(Client):
    """A client whose accounts are its region's model (``record`` of ``Action`` any account)."""

    def _obj(self, model: str, record: str) -> Any:
        assert model == "account", f"the replicated scenarios use accounts only, not {model}"
        if (model, record) not in self.held:
            self.held[(model, record)] = MODELS_IN[region_of(self.index)](pk=record)
        return self.held[(model, record)]

    def _start(self, action: Action) -> Any:
        if action.kind == "get":
            model = MODELS_IN[region_of(self.index)]
            return model._du_get_by_unique_steps("email", action.value, {})
        return super()._start(action)


class RegionMachines(Machines):
    client = RegionClient


def routed(index: int) -> int:
    """Where the library sends client ``index``'s writes (``_regions.route``: the home region,
    or — its routing off — the client's own), as an index of :data:`REGIONS`."""
    model = MODELS_IN[region_of(index)]
    meta = _regions.route(model.Meta, lambda _meta: connection_for(model))
    return REGIONS.index(str(meta.region))


# --- the replicated state ------------------------------------------------------------------------

#: An item of the table: (table, its key's identity in the model).
Key = tuple[str, str]


@attrs.frozen
class Pending:
    """A version on its way: to ``target`` (an index of :data:`REGIONS`), from ``source``."""

    target: int
    key: Key
    seq: int
    version: int
    source: int


@attrs.frozen
class Replicate:
    """The step delivering the pending version of ``key`` numbered ``seq`` to ``target``."""

    target: int
    key: Key
    seq: int


@attrs.frozen
class Replicated:
    """The replicas: each region's interned database, per key the sequence each region's item
    was last written with (None: never), the versions on their way."""

    regions: tuple[int, ...]
    stamps: tuple[tuple[Key, tuple[int | None, ...]], ...] = ()
    pending: tuple[Pending, ...] = ()


def canonical(stamps: dict[Key, list[int | None]], pending: list[Pending]) -> Replicated:
    """The replicas' bookkeeping without what no future can tell apart (``regions`` left
    empty): a version that can no longer apply is dropped; per key, only the order of its
    sequences is kept (ranked from 0); a key no version is on its way for, written with one
    sequence everywhere, is forgotten (any later write of it wins everywhere)."""
    none: list[int | None] = [None] * len(REGIONS)
    kept = [p for p in pending if (at := stamps.get(p.key, none)[p.target]) is None or p.seq > at]
    rows = []
    for key in sorted(set(stamps) | {p.key for p in kept}):
        seqs = stamps.get(key, none)
        waiting = [p.seq for p in kept if p.key == key]
        if not waiting and len(set(seqs)) == 1:
            continue
        rank = {s: n for n, s in enumerate(sorted({s for s in seqs if s is not None}
                                                   | set(waiting)))}
        rows.append((key, tuple(None if s is None else rank[s] for s in seqs)))
        kept = [attrs.evolve(p, seq=rank[p.seq]) if p.key == key else p for p in kept]
    order = sorted(kept, key=lambda p: (p.target, p.key, p.seq))
    return Replicated((), tuple(rows), tuple(order))


class ReplicatedDatabases(Databases):
    """The databases of each region, interned as ``search.Databases`` interns one, and the
    replicated states (:class:`Replicated`) made of them, each transition computed once."""

    def __init__(self, views: Sequence[int]) -> None:
        super().__init__()
        #: Per client, the region its requests go to (its calls' checks see that replica).
        self.views = tuple(views)
        self.worlds: list[Replicated] = []
        self.world_ids: dict[Replicated, int] = {}
        #: The versions met: (key, item or None, its hash key as text), interned.
        self.versions: list[tuple[Key, Any, str]] = []
        self.version_ids: dict[tuple[Key, str], int] = {}
        self.moved: dict[tuple[int, int, str], tuple[Any, Any, str, int]] = {}
        self.delivered: dict[tuple[int, Replicate], int] = {}
        self._snapshots: dict[int, Any] = {}

    def content(self, db: int) -> tuple[Any, ...]:
        """The replicated state ``db`` by value — each replica's snapshot, the sequences, each
        pending version's item — comparable across two searches (whose ids differ)."""
        if len(self._snapshots) != len(self.ids):
            self._snapshots = {n: snapshot for snapshot, n in self.ids.items()}
        world = self.worlds[db]
        return (tuple(self._snapshots[r] for r in world.regions), world.stamps,
                tuple((p.target, p.key, p.seq, p.source, repr(self.versions[p.version][1]))
                      for p in world.pending))

    def world(self, replicated: Replicated) -> int:
        wid = self.world_ids.get(replicated)
        if wid is None:
            wid = self.world_ids[replicated] = len(self.worlds)
            self.worlds.append(replicated)
        return wid

    def first(self, db: int) -> int:
        """The replicated state whose every replica is the database ``db``, nothing pending."""
        return self.world(Replicated((db,) * len(REGIONS)))

    def apply(self, db: int, seat: Seat, kind: str) -> tuple[Any, Any, str, int]:
        """``Databases.apply`` of ``seat``'s request on the replica its connection is for, in
        the replicated state ``db``: (answer, error, token, the replicated state after)."""
        memo = (db, seat.sid, kind)
        hit = self.moved.get(memo)
        if hit is None:
            region = REGIONS.index(str(seat.pending.connection.region))
            if region != self.views[seat.index]:
                raise AssertionError(
                    f"client {seat.index}'s {seat.pending.operation} went to "
                    f"{REGIONS[region]}, its other requests to {REGIONS[self.views[seat.index]]}"
                    ": its calls' checks would need to see both replicas")
            world = self.worlds[db]
            answer, error, token, after = super().apply(world.regions[region], seat, kind)
            hit = self.moved[memo] = (answer, error, token, self.wrote(db, region, after))
        return hit

    def wrote(self, db: int, region: int, after: int) -> int:
        """The replicated state after ``region``'s replica became ``after`` by a request: a
        version queued for every other region per item that changed."""
        world = self.worlds[db]
        before = world.regions[region]
        if after == before:
            return db
        stamps = {key: list(seqs) for key, seqs in world.stamps}
        pending = list(world.pending)
        old, new = self.states[before][0], self.states[after][0]
        for table in sorted(new):
            for ident in sorted(set(old[table]) | set(new[table])):
                item = new[table].get(ident)
                if item == old[table].get(ident):
                    continue
                key = (table, ident)
                seqs = stamps.setdefault(key, [None] * len(REGIONS))
                seq = 1 + max([s for s in seqs if s is not None]
                              + [p.seq for p in pending if p.key == key], default=-1)
                seqs[region] = seq
                text = json.dumps(item, sort_keys=True)
                version = self.version_ids.setdefault((key, text), len(self.versions))
                if version == len(self.versions):
                    shown = (item or old[table][ident])["PK"]["S"]
                    self.versions.append((key, item, shown))
                pending += [Pending(t, key, seq, version, region)
                            for t in range(len(REGIONS)) if t != region]
        regions = (*world.regions[:region], after, *world.regions[region + 1:])
        return self.world(attrs.evolve(canonical(stamps, pending), regions=regions))

    def deliveries(self, db: int) -> list[Replicate]:
        """The replication steps possible in the replicated state ``db``."""
        return [Replicate(p.target, p.key, p.seq) for p in self.worlds[db].pending]

    def deliver(self, db: int, step: Replicate) -> int:
        """The replicated state after ``step``: the version applied to its target (it is newer
        than the item there: :func:`canonical` dropped the others)."""
        memo = (db, step)
        hit = self.delivered.get(memo)
        if hit is None:
            world = self.worlds[db]
            (entry,) = [p for p in world.pending if Replicate(p.target, p.key, p.seq) == step]
            memory = self.memory(world.regions[step.target])
            (table, ident), item, _ = self.versions[entry.version]
            if item is None:
                memory.items[table].pop(ident, None)
            else:
                memory.items[table][ident] = item
            stamps = {key: list(seqs) for key, seqs in world.stamps}
            stamps[step.key][step.target] = step.seq
            regions = list(world.regions)
            regions[step.target] = self.intern(memory)
            rest = [p for p in world.pending if p is not entry]
            hit = self.delivered[memo] = self.world(
                attrs.evolve(canonical(stamps, rest), regions=tuple(regions)))
        return hit

    def standing(self, db: int, done: bool, inherited: Callable[[tuple[str, ...]], bool]
                 ) -> list[str]:
        """The invariants broken in the replicated state ``db``, in each region no version is
        on its way to (an orphan only once every client is ``done``): the home region after
        every request (with the routing, nothing is ever on its way there), every region once
        replication has drained. A region still receiving a transaction's items may show a
        record before its lock: replication is per item, as DynamoDB's."""
        world = self.worlds[db]
        receiving = {p.target for p in world.pending}
        found = []
        for region in range(len(REGIONS)):
            if region in receiving:
                continue
            found += [f"in {REGIONS[region]}: {text}"
                      for ident, text in self.analysed[world.regions[region]][0]
                      if not inherited(ident) and (done or ident[0] != "orphan")]
        return found

    def shown(self, db: int, step: Replicate) -> str:
        """One line for a replication step from the replicated state ``db``."""
        (entry,) = [p for p in self.worlds[db].pending
                    if Replicate(p.target, p.key, p.seq) == step]
        _, item, pk = self.versions[entry.version]
        what = "deleted" if item is None else "put"
        if item is not None and pk.startswith(RESERVED_PREFIX):
            what += f" (owner {item.get(OWNER_ATTR, {}).get('M', {}).get('PK', {}).get('S')})"
        elif item is not None and "email" in item:
            what += f" (email={item['email']['S']!r})"
        return (f"replicated {REGIONS[entry.source]} -> {REGIONS[step.target]}: "
                f"{pk} {what}")


# --- the search ----------------------------------------------------------------------------------


class ReplicatedSearch(Search):
    """``search.Search`` over the replicas: a state's ``db`` is a :class:`Replicated` state,
    and delivering a pending version is a step (:class:`Replicate`)."""

    def __init__(self, workload: Sequence[Sequence[Action]], *, lost: int = 0, faults: int = 0,
                 scenario: str = "") -> None:
        super().__init__(workload, lost=lost, faults=faults, scenario=scenario)
        declare_global()
        self.machines = RegionMachines(workload)
        self.dbs = ReplicatedDatabases([routed(i) for i in range(len(workload))])

    def start(self) -> Node:
        node = super().start()   # every replica the seeded database
        return attrs.evolve(node, db=self.dbs.first(node.db))

    def _view(self, db: int, index: int) -> int:
        return self.dbs.worlds[db].regions[self.dbs.views[index]]

    def violations(self, node: Node) -> list[str]:
        done = all(seat.pending is None for seat in node.seats)
        return self.dbs.standing(node.db, done, self._inherited) + list(node.problems)

    def runnable(self, node: Node) -> list[Step]:
        return super().runnable(node) + self.dbs.deliveries(node.db)  # type: ignore[operator]

    def child(self, node: Node, step: Step, ended: list[bool] | None = None) -> Node:
        if not isinstance(step, Replicate):
            return super().child(node, step, ended)
        db = self.dbs.deliver(node.db, step)
        calls = []
        for index, cid in enumerate(node.calls):
            if self._view(db, index) != self._view(node.db, index):   # another writer's change
                cid = self._flagged(cid, True, False)
            calls.append(self._see(cid, self._view(db, index)))
        return Node(db, node.seats, tuple(calls), node.lost, node.faults, node.problems,
                    (node.trail, step))

    def canonical(self, node: Node) -> tuple[Any, ...]:
        """``node``'s key as ``ReplicatedWorld.key()`` reads (for the tests)."""
        clients = {sid: key for (_, key), sid in self.machines.ids.items()}
        return (self.dbs.content(node.db), tuple(clients[s.sid] for s in node.seats),
                tuple(self.call_list[cid].key() for cid in node.calls), node.lost, node.faults)

    def _found(self, node: Node) -> Found:
        return ReplicatedFound(self.workload, node.schedule(), self.violations(node), self.lost,
                               self.scenario, self.faults)


@attrs.define
class ReplicatedFound(Found):
    """A violation found over the replicas, replayed by :class:`ReplicatedWorld`."""

    def start(self) -> World:
        return replay_regions(self.workload, (), lost=self.lost, faults=self.faults,
                              scenario=self.scenario)


# --- the replay ----------------------------------------------------------------------------------


class ReplicatedWorld(World):
    """``explore.World`` over the replicas, stepping one schedule (to print its trace): its
    ``memory`` is, during a request, the replica the request goes to."""

    dbs: ReplicatedDatabases
    db: int = 0
    acting: int = 0

    def start(self, seed: Callable[[MemoryDynamoDB], None] | None = None) -> None:
        declare_global()
        self.dbs = ReplicatedDatabases([routed(c.index) for c in self.clients])
        super().start(seed)
        self.db = self.dbs.first(self.dbs.intern(self.memory))

    def key(self) -> tuple[Any, ...]:
        return (self.dbs.content(self.db), tuple(c.key() for c in self.clients),
                tuple(c.key() for c in self.calls), self.lost, self.faults)

    def runnable(self) -> list[Step]:
        return super().runnable() + self.dbs.deliveries(self.db)  # type: ignore[operator]

    def violations(self) -> list[str]:
        done = all(client.done for client in self.clients)
        return self.dbs.standing(self.db, done, self._inherited) + self.problems

    def _holders(self, index: int) -> dict[Held, set[str]]:
        return self.dbs.analysed[self.dbs.worlds[self.db].regions[self.dbs.views[index]]][1]

    def _seen(self, holders: dict[Held, set[str]]) -> None:
        regions = list(self.dbs.worlds[self.db].regions)
        regions[self.acting] = self.dbs.intern(self.memory)
        for index, call in enumerate(self.calls):
            call.see(self.dbs.analysed[regions[self.dbs.views[index]]][1])

    def step(self, step: Step) -> None:
        if isinstance(step, Replicate):
            before = self.db
            self.log.append(self.dbs.shown(self.db, step))
            self.db = self.dbs.deliver(self.db, step)
            for index, call in enumerate(self.calls):
                view = self.dbs.views[index]
                if self.dbs.worlds[self.db].regions[view] != self.dbs.worlds[before].regions[view]:
                    call.others_wrote, call.quiet = True, False
                call.see(self._holders(index))
            return
        index, _ = decode(step)
        request = self.clients[index].pending
        assert request is not None
        self.acting = REGIONS.index(str(request.connection.region))
        self.memory = self.dbs.memory(self.dbs.worlds[self.db].regions[self.acting])
        self.snapshot = self.memory.snapshot()
        line = len(self.log)
        super().step(step)
        self.log[line] = self.log[line].replace(
            f"client {index}: ", f"client {index} ({region_of(index)}, sent to "
                                 f"{REGIONS[self.acting]}): ", 1)
        self.db = self.dbs.wrote(self.db, self.acting, self.dbs.intern(self.memory))


def replay_regions(workload: Sequence[Sequence[Action]], schedule: Sequence[Step], *,
                   lost: int = 0, faults: int = 0, scenario: str = "") -> ReplicatedWorld:
    """The replicated world after ``schedule`` from the start of ``workload``."""
    world = ReplicatedWorld(new_memory(),
                            [RegionClient(i, actions) for i, actions in enumerate(workload)],
                            lost, faults)
    from .workloads import SEEDS

    world.start(SEEDS.get(scenario))
    for step in schedule:
        world.step(step)
    return world

