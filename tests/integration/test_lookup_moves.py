"""get_by_unique while the value changes hands between its two reads (the lock, then its
owner): the lookup follows the lock to the record holding the value now, sync and async.

Found by the deterministic simulation (``tests/simulation``): a swap in ``atomic()`` landing
between the two reads made the lookup report the value's lock as an orphan and find nothing,
while the value was held at every moment of the call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.signals import pre_dynamodb_send

from dynaunique import Model, atomic
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint


class Handed(Model):
    """A record whose unique email moves between records."""

    class Meta:
        table_name = "lookup_moves"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(unique=True, null=True)


def _two_holders(endpoint: str) -> tuple[Handed, Handed]:
    use_endpoint(endpoint, Handed)
    create_tables(Handed)
    Handed(pk="A", email="a@x.io").save()
    Handed(pk="B", email="b@x.io").save()
    return Handed.get("A", consistent_read=True), Handed.get("B", consistent_read=True)


@contextmanager
def swapped_before_the_owner_read(a: Handed, b: Handed) -> Iterator[list[str]]:
    """Just before the lookup's second GetItem (its owner read), A and B exchange their emails
    in one atomic() — the lock of a@x.io now names B."""
    sent: list[str] = []

    def pre(sender: Any, operation_name: str, table_name: str | None, req_uuid: Any) -> None:
        sent.append(operation_name)
        if sent.count("GetItem") == 2 and operation_name == "GetItem" and "swap" not in sent:
            sent.append("swap")
            a.email, b.email = b.email, a.email
            with atomic():
                a.save()
                b.save()

    pre_dynamodb_send.connect(pre)
    try:
        yield sent
    finally:
        pre_dynamodb_send.disconnect(pre)


def test_a_lookup_follows_a_value_handed_over_between_its_reads(dynaunique_db: str) -> None:
    a, b = _two_holders(dynaunique_db)
    with swapped_before_the_owner_read(a, b) as sent:
        found = Handed.get_by_unique("email", "a@x.io")
    assert (found.pk, found.email) == ("B", "a@x.io")
    # The lock, A (read after the swap: it no longer holds the value), the lock again (it
    # moved), B.
    assert [s for s in sent if s != "TransactWriteItems"] == [
        "GetItem", "GetItem", "swap", "GetItem", "GetItem"]


@pytest.mark.anyio
async def test_an_async_lookup_follows_a_value_handed_over_between_its_reads(
        dynaunique_aio_db: str) -> None:
    a, b = _two_holders(dynaunique_aio_db)
    with swapped_before_the_owner_read(a, b) as sent:
        found = await Handed.aget_by_unique("email", "a@x.io")
    assert (found.pk, found.email) == ("B", "a@x.io")
    assert [s for s in sent if s != "TransactWriteItems"] == [
        "GetItem", "GetItem", "swap", "GetItem", "GetItem"]


def test_a_lock_still_as_read_naming_a_record_without_the_value_is_an_orphan(
        dynaunique_db: str) -> None:
    _two_holders(dynaunique_db)
    # The record drops its value around the library: the lock stays, naming it.
    Handed._get_connection().update_item("A", actions=[Handed.email.remove()])
    with pytest.raises(Handed.DoesNotExist, match=r"which no longer holds that value \(an "
                                                  r"orphan lock\)"):
        Handed.get_by_unique("email", "a@x.io")
