"""The write paths that must refuse, against the local server: batch_write and PynamoDB's
TransactWrite would write records without their locks."""

from __future__ import annotations

import pytest
from pynamodb.connection import Connection
from pynamodb.transactions import TransactWrite

from dynaunique import (
    UnsupportedOperationError,
)

from .declared import Account, Wire, assert_consistent, lock_owners, raw_items, tables

# --- write paths that must refuse ----------------------------------------------------------------


def test_batch_write_is_refused_and_points_to_atomic(wire: Wire) -> None:
    tables(wire, Account)
    with pytest.raises(UnsupportedOperationError) as caught, Account.batch_write() as batch:
        batch.save(Account(pk="ACCT#1", email="ada@x.io"))
    assert "atomic()" in str(caught.value)
    assert wire.writes() == []
    assert raw_items(Account) == []


@pytest.mark.parametrize("operation", ["save", "delete", "update"])
def test_pynamodb_transact_write_is_refused(wire: Wire, dynaunique_db: str, operation: str) -> None:
    tables(wire, Account)
    account = Account(pk="ACCT#1", email="ada@x.io")
    account.save()
    wire.clear()
    with pytest.raises(UnsupportedOperationError) as caught:  # noqa: SIM117
        with TransactWrite(connection=Connection(host=dynaunique_db, region="us-east-1")) as tx:
            if operation == "save":
                account.email = "bob@x.io"
                tx.save(account)
            elif operation == "delete":
                tx.delete(account)
            else:
                tx.update(account, [Account.email.set("bob@x.io")])
    assert "atomic()" in str(caught.value)
    assert wire.writes() == []
    assert lock_owners(Account) == {"UNIQ#EMAIL#ada@x.io": {"PK": "ACCT#1"}}
    assert_consistent(Account)
