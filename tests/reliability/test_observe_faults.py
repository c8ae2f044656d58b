"""Observability of the faults: the ``resend`` event after an answer lost on the wire, and the
``drift_detected`` / ``foreign_lock_skipped`` events when a lock a record's values imply is held
by another record (crafted with a raw write, as tests/reliability/test_ownership.py does).
The other events are in tests/integration/test_observe.py."""

from __future__ import annotations

import logging

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.invariants import assert_clean, raw_client, raw_item
from support.log_events import events, levels

from dynaunique._lock.locks import lock_key
from dynaunique.attributes import UnicodeAttribute, VersionAttribute
from dynaunique.testing import create_tables

from . import point
from .proxy import Fault, FaultProxy

TABLE = "rel_observe"


Observed = declare("Observed", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"),
                   email=UnicodeAttribute(unique=True, null=True), version=VersionAttribute())


def test_a_resend_after_a_lost_answer_is_a_warning_with_its_token(
        proxy: FaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dynaunique")
    point(proxy.url, Observed)
    create_tables(Observed)
    proxy.inject(Fault.DROP_AFTER)
    Observed(pk="A", email="a@x.io").save()
    writes = proxy.writes()
    assert [w.fault for w in writes] == [Fault.DROP_AFTER, None]
    token = writes[0].token
    assert token is not None and writes[1].token == token
    [resend] = events(caplog, "resend")
    assert {k: v for k, v in resend.items() if k != "delay"} == {
        "event": "resend", "operation": "TransactWriteItems", "token": token,
        "code": "ConnectionClosedError", "attempt": 1}
    assert resend["delay"] >= 0
    assert levels(caplog, "resend") == {"WARNING"}
    assert events(caplog, "retry") == []


def test_a_foreign_lock_is_reported_as_drift_then_skipped(
        dynaunique_db: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dynaunique")
    point(dynaunique_db, Observed)
    create_tables(Observed)
    Observed(pk="B", email="x@x.io").save()  # B holds the lock on x@x.io
    # A's record says x@x.io too (written around the library: drift), without its lock.
    raw_client(dynaunique_db).put_item(TableName=TABLE, Item={
        "PK": {"S": "A"}, "SK": {"S": "PROFILE"}, "email": {"S": "x@x.io"},
        "version": {"N": "1"}})
    a = Observed.get("A", "PROFILE", consistent_read=True)
    a.email = "y@x.io"
    a.save()  # frees x@x.io — which is B's: left alone
    key = lock_key("EMAIL", ("x@x.io",))
    assert events(caplog, "drift_detected") == [{
        "event": "drift_detected", "model": "Observed", "constraint": "EMAIL",
        "lock_key": key, "holder": {"PK": "B", "SK": "PROFILE"}}]
    assert levels(caplog, "drift_detected") == {"WARNING"}
    assert events(caplog, "foreign_lock_skipped") == [
        {"event": "foreign_lock_skipped", "model": "Observed", "lock_key": key}]
    assert levels(caplog, "foreign_lock_skipped") == {"INFO"}
    lock = raw_item(dynaunique_db, TABLE, {"PK": {"S": key}, "SK": {"S": "LOCK"}})
    assert lock is not None and lock["owner"]["M"]["PK"] == {"S": "B"}
    assert_clean([Observed], dynaunique_db)
