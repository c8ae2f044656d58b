"""TTL against the local server: lock items carry and follow the record's expiry."""

from __future__ import annotations

from datetime import datetime, timezone

from .declared import Session, Wire, assert_consistent, lock_items, records, tables, transact_keys

# --- TTL -----------------------------------------------------------------------------------------

EXPIRY = datetime(2031, 1, 1, tzinfo=timezone.utc)
LATER = datetime(2032, 6, 1, tzinfo=timezone.utc)


def epoch(moment: datetime) -> dict[str, str]:
    return {"N": str(int(moment.timestamp()))}


def test_locks_carry_the_record_expiry(wire: Wire) -> None:
    tables(wire, Session)
    Session(pk="SESS#1", token="t1", device="d1", expires=EXPIRY).save()
    (record,) = records(Session)
    assert record["expires"] == epoch(EXPIRY)
    locks = lock_items(Session)
    assert set(locks) == {"UNIQ#TOKEN#t1", "UNIQ#DEVICE#d1"}
    assert all(lock["expires"] == epoch(EXPIRY) for lock in locks.values())
    assert_consistent(Session)


def test_a_ttl_change_alone_re_puts_the_locks_with_the_new_expiry(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", device="d1", expires=EXPIRY)
    session.save()
    wire.clear()
    session.expires = LATER
    session.save()
    assert wire.sent == ["TransactWriteItems"]
    assert sorted(transact_keys(wire.last("TransactWriteItems"))) == [
        ("Put", "SESS#1"), ("Put", "UNIQ#DEVICE#d1"), ("Put", "UNIQ#TOKEN#t1")]
    assert all(lock["expires"] == epoch(LATER) for lock in lock_items(Session).values())
    assert_consistent(Session)


def test_removing_the_ttl_removes_it_from_the_locks(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    session.expires = None
    session.save()
    assert "expires" not in lock_items(Session)["UNIQ#TOKEN#t1"]
    assert_consistent(Session)


def test_a_ttl_change_by_update_actions_re_puts_the_locks(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    wire.clear()
    session.update([Session.expires.set(LATER)])
    assert wire.sent == ["TransactWriteItems"]
    assert lock_items(Session)["UNIQ#TOKEN#t1"]["expires"] == epoch(LATER)
    assert records(Session)[0]["expires"] == epoch(LATER)
    assert_consistent(Session)


def test_a_new_token_with_a_new_expiry_moves_the_lock_with_the_expiry(wire: Wire) -> None:
    tables(wire, Session)
    session = Session(pk="SESS#1", token="t1", expires=EXPIRY)
    session.save()
    session.token, session.expires = "t2", LATER
    session.save()
    locks = lock_items(Session)
    assert set(locks) == {"UNIQ#TOKEN#t2"}
    assert locks["UNIQ#TOKEN#t2"]["expires"] == epoch(LATER)
    assert_consistent(Session)
