"""Lost answers on a multi-Region strong consistency (MRSC) table, on the wire (the fault proxy in
front of the local server's STRONG table): the record write of the protocol applied and its
answer lost is recognised — by its resend's refusal while its lease lasts, by reading the record
again once it has ended — and the write completes, with no intent left pending."""

from __future__ import annotations

import time
from typing import Any

from support.global_tables import EAST, WEST, check_region, make_global, regional_client
from support.tables import point

from dynaunique import Model, normalizers
from dynaunique.attributes import UnicodeAttribute

from .proxy import Fault, FaultProxy


def _model(table: str, lease: float, grace: float) -> type[Model]:
    return type("Member", (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": table, "region": EAST,
                                  "mrsc_lease_seconds": lease, "mrsc_grace_seconds": grace}),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "email": UnicodeAttribute(unique=True, normalize=normalizers.casefold),
    })


def _record_put(operation: str, body: dict[str, Any]) -> bool:
    return operation == "PutItem" and body.get("Item", {}).get("PK") == {"S": "A"}


def _strong(proxy: FaultProxy, endpoint: str, table: str, lease: float,
            grace: float) -> type[Model]:
    model = _model(table, lease, grace)
    point(proxy.url, model)
    make_global(model, endpoint, mode="STRONG")
    return model


def _assert_written(model: type[Model], endpoint: str, table: str) -> None:
    found = regional_client(endpoint, EAST).scan(TableName=table, ConsistentRead=True)["Items"]
    by_key = {item["PK"]["S"]: item for item in found}
    assert sorted(by_key) == ["A", "UNIQ#EMAIL#a@x.io"]
    assert "mrsc_pending" not in by_key["UNIQ#EMAIL#a@x.io"]
    for region in (EAST, WEST):
        assert check_region(model, endpoint, region).clean


def test_a_record_write_applied_with_its_answer_lost_is_recognised_by_its_resend(
        proxy: FaultProxy, dynaunique_db: str) -> None:
    model = _strong(proxy, dynaunique_db, "rel_mrsc_resend", lease=10, grace=30)
    proxy.inject(Fault.DROP_AFTER, operations={"PutItem"}, when=_record_put)
    model(pk="A", email="a@x.io").save()
    sent = [(r.operation, r.fault) for r in proxy.writes()]
    # The intent; the record write applied, its answer dropped; resent (refused by itself,
    # recognised); the intent cleared.
    assert sent == [("PutItem", None), ("PutItem", Fault.DROP_AFTER), ("PutItem", None),
                    ("UpdateItem", None)]
    _assert_written(model, dynaunique_db, "rel_mrsc_resend")


def test_a_record_write_whose_answer_comes_too_late_is_verified_by_a_read(
        proxy: FaultProxy, dynaunique_db: str) -> None:
    model = _strong(proxy, dynaunique_db, "rel_mrsc_verify", lease=1.0, grace=5.0)
    proxy.inject(Fault.DROP_AFTER, operations={"PutItem"}, when=_record_put,
                 on_applied=lambda: time.sleep(1.2))   # the lease ends before the resend
    model(pk="A", email="a@x.io").save()
    sent = [r.operation for r in proxy.records()]
    assert sent[-4:] == ["PutItem", "PutItem", "GetItem", "UpdateItem"]   # no resend: a read
    _assert_written(model, dynaunique_db, "rel_mrsc_verify")
