"""dynaunique's own writes against the local server's injected conflicts: saves, updates and
deletes still land exactly once when 30% of transactions are cancelled with
``TransactionConflict`` (``transaction.execute`` retries them, resending the call's one token).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.local_server import client, server_state

from dynaunique import Model, UniqueViolation, normalizers
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, set_conflict_rate, use_endpoint


class Member(Model):
    class Meta:
        table_name = "conflict_members"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UnicodeAttribute(unique=True, normalize=normalizers.casefold)


@pytest.fixture
def members(dynaunique_db: str) -> Iterator[str]:
    use_endpoint(dynaunique_db, Member)
    create_tables(Member)
    yield dynaunique_db


def stored_keys(endpoint: str) -> list[str]:
    pages = client(endpoint).get_paginator("scan").paginate(
        TableName=Member.Meta.table_name, ConsistentRead=True)
    return sorted(item["PK"]["S"] for page in pages for item in page["Items"])


def test_writes_land_exactly_once_under_30_percent_conflicts(members: str) -> None:
    set_conflict_rate(members, 0.3, seed=11)
    people = [Member(pk=f"M{n:02}", email=f"m{n}@x.io") for n in range(20)]
    for person in people:
        person.save()
    for person in people[:10]:
        person.email = f"new{person.pk}@x.io"
        person.save()
    for person in people[15:]:
        person.delete()
    injected = server_state(members)["conflicts_injected"]
    assert injected >= 5  # the retries really ran (35 transactions at 30%)
    set_conflict_rate(members, 0.0)
    expected = sorted(
        [f"M{n:02}" for n in range(15)]
        + [f"UNIQ#EMAIL#newm{n:02}@x.io" for n in range(10)]  # casefolded
        + [f"UNIQ#EMAIL#m{n}@x.io" for n in range(10, 15)]
    )
    assert stored_keys(members) == expected
    assert Member.get_by_unique("email", "NEWM03@x.io").pk == "M03"


def test_a_taken_value_is_still_a_violation_under_conflicts(members: str) -> None:
    Member(pk="A", email="ada@x.io").save()
    set_conflict_rate(members, 0.5, seed=2)
    for n in range(6):
        with pytest.raises(UniqueViolation) as raised:
            Member(pk=f"B{n}", email="ADA@x.io").save()
        assert raised.value.owner == {"PK": "A"}
    set_conflict_rate(members, 0.0)
    assert stored_keys(members) == ["A", "UNIQ#EMAIL#ada@x.io"]
