"""Part 1: round trips and items per operation — dynaunique, hand-written boto3, the minimum.

Every operation runs once against the local server inside a counting window; setup (creating
and loading the records an operation needs) happens outside it. The counts are deterministic:
they are the claim, and the smoke test asserts them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs

from benchmarks.consistency import TableState, table_state
from benchmarks.counting import RequestLog, Sent
from benchmarks.handwritten import HandWritten, make_client
from benchmarks.models import TABLE, BenchAccount, fresh_table, point_at
from dynaunique import atomic


@attrs.frozen
class Cost:
    """What one operation sent."""

    round_trips: int
    operations: tuple[str, ...]
    written: int
    read: int
    wcu: float
    rcu: float

    @classmethod
    def of(cls, sent: list[Sent]) -> Cost:
        """Sum a window of requests."""
        return cls(
            round_trips=len(sent),
            operations=tuple(s.operation for s in sent),
            written=sum(s.written for s in sent),
            read=sum(s.read for s in sent),
            wcu=sum(s.wcu for s in sent),
            rcu=sum(s.rcu for s in sent),
        )

    def cell(self) -> str:
        """``1 RT / 3 items (TransactWriteItems)`` for a table cell."""
        parts = []
        if self.written:
            parts.append(f"{self.written} written")
        if self.read:
            parts.append(f"{self.read} read")
        ops = " + ".join(_short(o) for o in self.operations)
        return f"{self.round_trips} RT / {', '.join(parts) or '0 items'} ({ops})"

    def same_counts(self, other: Minimum) -> bool:
        """Whether round trips and items equal ``other``'s."""
        return (self.round_trips, self.written, self.read) == \
            (other.round_trips, other.written, other.read)


def _short(operation: str) -> str:
    return {"TransactWriteItems": "TransactWrite"}.get(operation, operation)


@attrs.frozen
class Minimum:
    """The fewest round trips and items an operation can take, and why."""

    round_trips: int
    written: int
    read: int
    why: str

    def cell(self) -> str:
        """``1 RT / 3 written`` for a table cell."""
        parts = []
        if self.written:
            parts.append(f"{self.written} written")
        if self.read:
            parts.append(f"{self.read} read")
        return f"{self.round_trips} RT / {', '.join(parts)}"


@attrs.frozen
class Row:
    """One operation, measured through each implementation."""

    key: str
    label: str
    minimum: Minimum
    dynaunique: Cost
    handwritten: Cost | None


MINIMA: dict[str, Minimum] = {
    "create": Minimum(1, 3, 0, "record put + one guarded lock put per unique value (k = 2)"),
    "update_unique": Minimum(1, 3, 0, "record put + new lock put + old lock delete"),
    "update_plain": Minimum(1, 1, 0, "no lock changes: one plain conditional write"),
    "update_actions_unique": Minimum(1, 3, 0, "as save(): record update + lock put + delete"),
    "update_actions_plain": Minimum(1, 1, 0, "one plain UpdateItem"),
    "delete_loaded": Minimum(1, 3, 0, "record delete + one lock delete per value held"),
    "delete_unloaded": Minimum(2, 3, 1, "the lock keys are the stored values: read them "
                                        "(consistent GetItem), then one transaction"),
    "get_by_unique": Minimum(2, 0, 2, "lock → owner key → record, both strongly consistent"),
    "swap": Minimum(1, 4, 0, "2 record puts + 2 lock owner transfers (one op per item)"),
}

LABELS: dict[str, str] = {
    "create": "create (k = 2 unique values)",
    "update_unique": "update changing one unique value — `save()`",
    "update_plain": "update of a non-unique field — `save()`",
    "update_actions_unique": "update changing one unique value — `update(actions)`",
    "update_actions_plain": "update of a non-unique field — `update(actions)`",
    "delete_loaded": "delete, loaded object",
    "delete_unloaded": "delete, never-loaded object (key only)",
    "get_by_unique": "`get_by_unique` (consistent)",
    "swap": "swap two emails in `atomic()`",
}

#: Hand-written code (and OneTable) has no separate update(actions) path: the save() rows
#: stand for both.
SAME_AS = {"update_actions_unique": "update_unique", "update_actions_plain": "update_plain"}


class _Counter:
    """Distinct keys and values for every record a run creates."""

    def __init__(self, prefix: str) -> None:
        self._ids = itertools.count(1)
        self.prefix = prefix

    def values(self) -> tuple[str, str, str]:
        n = next(self._ids)
        return f"ACCT#{self.prefix}{n}", f"{self.prefix}{n}@Example.COM", f"{self.prefix}user{n}"


def _dynaunique_ops(ids: _Counter) -> dict[str, Callable[[], Callable[[], Any]]]:
    """For each operation: a setup that returns the operation to count."""

    def created() -> BenchAccount:
        pk, email, username = ids.values()
        BenchAccount(pk=pk, email=email, username=username, name="n").save()
        return BenchAccount.get(pk, "PROFILE", consistent_read=True)

    def create() -> Callable[[], Any]:
        pk, email, username = ids.values()
        account = BenchAccount(pk=pk, email=email, username=username, name="n")
        return account.save

    def update_unique() -> Callable[[], Any]:
        account = created()
        account.email = ids.values()[1]
        return account.save

    def update_plain() -> Callable[[], Any]:
        account = created()
        account.name = "renamed"
        return account.save

    def update_actions_unique() -> Callable[[], Any]:
        account = created()
        email = ids.values()[1]
        return lambda: account.update([BenchAccount.email.set(email)])

    def update_actions_plain() -> Callable[[], Any]:
        account = created()
        return lambda: account.update([BenchAccount.name.set("renamed")])

    def delete_loaded() -> Callable[[], Any]:
        return created().delete

    def delete_unloaded() -> Callable[[], Any]:
        pk = created().pk
        return BenchAccount(pk=pk).delete

    def get_by_unique() -> Callable[[], Any]:
        email = created().email.upper()
        return lambda: BenchAccount.get_by_unique("email", email)

    def swap() -> Callable[[], Any]:
        a, b = created(), created()
        a.email, b.email = b.email, a.email

        def run() -> None:
            with atomic():
                a.save()
                b.save()
        return run

    return {
        "create": create, "update_unique": update_unique, "update_plain": update_plain,
        "update_actions_unique": update_actions_unique,
        "update_actions_plain": update_actions_plain, "delete_loaded": delete_loaded,
        "delete_unloaded": delete_unloaded, "get_by_unique": get_by_unique, "swap": swap,
    }


def _handwritten_ops(hw: HandWritten, ids: _Counter) -> dict[str, Callable[[], Callable[[], Any]]]:

    def created() -> dict[str, Any]:
        pk, email, username = ids.values()
        hw.create(pk, email, username, "n")
        got = hw.client.get_item(TableName=hw.table, ConsistentRead=True,
                                 Key={"PK": {"S": pk}, "SK": {"S": "PROFILE"}})
        return dict(got["Item"])

    def create() -> Callable[[], Any]:
        pk, email, username = ids.values()
        return lambda: hw.create(pk, email, username, "n")

    def update_unique() -> Callable[[], Any]:
        item = created()
        email = ids.values()[1]
        return lambda: hw.change_email(item, email)

    def update_plain() -> Callable[[], Any]:
        item = created()
        return lambda: hw.rename(item, "renamed")

    def delete_loaded() -> Callable[[], Any]:
        item = created()
        return lambda: hw.delete(item)

    def delete_unloaded() -> Callable[[], Any]:
        pk = created()["PK"]["S"]
        return lambda: hw.delete_by_key(pk)

    def get_by_unique() -> Callable[[], Any]:
        email = created()["email"]["S"].upper()
        return lambda: hw.get_by_email(email)

    def swap() -> Callable[[], Any]:
        a, b = created(), created()
        return lambda: hw.swap_emails(a, b)

    return {
        "create": create, "update_unique": update_unique, "update_plain": update_plain,
        "delete_loaded": delete_loaded, "delete_unloaded": delete_unloaded,
        "get_by_unique": get_by_unique, "swap": swap,
    }


def _count(log: RequestLog, setup: Callable[[], Callable[[], Any]]) -> Cost:
    operation = setup()
    with log.window() as sent:
        operation()
    return Cost.of(sent)


@attrs.frozen
class RoundTrips:
    """Part 1's result."""

    rows: tuple[Row, ...]
    #: The table after both implementations ran every operation.
    state: TableState


def run(endpoint: str) -> RoundTrips:
    """Count every operation through dynaunique and the hand-written code."""
    fresh_table(endpoint)
    hw = HandWritten(make_client(endpoint), TABLE)
    with RequestLog() as log:
        log.attach(point_at(endpoint))
        log.attach(BenchAccount._get_connection().connection.client)
        log.attach(hw.client)
        dyn = _dynaunique_ops(_Counter("du"))
        hand = _handwritten_ops(hw, _Counter("hw"))
        rows = []
        for key in MINIMA:
            dyn_cost = _count(log, dyn[key])
            hand_key = SAME_AS.get(key, key)
            hand_cost = _count(log, hand[hand_key]) if hand_key == key else None
            rows.append(Row(key, LABELS[key], MINIMA[key], dyn_cost, hand_cost))
    return RoundTrips(tuple(rows), table_state(hw.client, TABLE))
