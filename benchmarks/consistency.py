"""Check a benchmark table after a run: every record holds its locks, no lock is orphaned,
no two records share a unique value."""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

_LOCKED = (("email", "EMAIL", str.casefold), ("username", "USERNAME", str))


@attrs.frozen
class TableState:
    """What a full scan of the benchmark table found."""

    records: int
    locks: int
    #: Extra records beyond the first for each value held by more than one record.
    duplicates: int
    #: Locks whose owner is missing or no longer holds the value.
    orphans: int
    #: Values a record holds without the lock that protects them.
    missing: int

    @property
    def clean(self) -> bool:
        """Whether the table is exactly right."""
        return self.duplicates == 0 and self.orphans == 0 and self.missing == 0


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table`` (a full scan; benchmark tables are small)."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def table_state(client: Any, table: str) -> TableState:
    """Audit the benchmark table (layout of ``benchmarks.models.BenchAccount``)."""
    # UNIQ#~ items are dynaunique's system items (e.g. the migrations ledger), not locks.
    items = [i for i in scan_all(client, table) if not i["PK"]["S"].startswith("UNIQ#~")]
    locks = {i["PK"]["S"]: i for i in items if i["PK"]["S"].startswith("UNIQ#")}
    records = [i for i in items if not i["PK"]["S"].startswith("UNIQ#")]
    duplicates = 0
    missing = 0
    wanted: dict[str, tuple[str, str]] = {}
    for field, name, normalize in _LOCKED:
        values = Counter(normalize(r[field]["S"]) for r in records if field in r)
        duplicates += sum(n - 1 for n in values.values() if n > 1)
        for record in records:
            if field not in record:
                continue
            key = f"UNIQ#{name}#{normalize(record[field]['S'])}"
            owner = (record["PK"]["S"], record["SK"]["S"])
            lock = locks.get(key)
            if lock is None or _owner(lock) != owner:
                missing += 1
            wanted[key] = owner
    orphans = sum(1 for key, lock in locks.items() if wanted.get(key) != _owner(lock))
    return TableState(len(records), len(locks), duplicates, orphans, missing)


def _owner(lock: dict[str, Any]) -> tuple[str, str]:
    owner = lock.get("owner", {}).get("M", {})
    return owner.get("PK", {}).get("S", ""), owner.get("SK", {}).get("S", "")
