"""A request to a table that does not exist names the table (issue 40): DynamoDB's own message,
"Requested resource not found", names none."""

from __future__ import annotations

import pytest

from dynaunique import DynauniqueError, Model, atomic
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, use_endpoint


class Ghost(Model):
    class Meta:
        table_name = "missing_ghosts"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(unique=True)


class Present(Model):
    class Meta:
        table_name = "missing_present"

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(unique=True)


@pytest.fixture
def db(dynaunique_db: str) -> str:
    use_endpoint(dynaunique_db, Ghost, Present)
    create_tables(Present)
    return dynaunique_db


@pytest.mark.parametrize(("operation", "call"), [
    ("TransactWriteItems", lambda: Ghost(pk="G#1", email="a@x.io").save()),
    ("GetItem", lambda: Ghost(pk="G#1", email="a@x.io").delete()),  # reads what it holds first
    ("GetItem", lambda: Ghost.get_by_unique("email", "a@x.io")),
])
def test_the_error_names_the_missing_table(db: str, operation: str, call: object) -> None:
    with pytest.raises(DynauniqueError) as missing:
        call()  # type: ignore[operator]
    assert str(missing.value).startswith(
        "table 'missing_ghosts' does not exist (or the endpoint or region is wrong): DynamoDB "
        f"refused {operation}: ResourceNotFoundException")


def test_a_transaction_over_two_tables_names_both(db: str) -> None:
    with pytest.raises(DynauniqueError) as missing, atomic():
        Present(pk="P#1", email="p@x.io").save()
        Ghost(pk="G#1", email="g@x.io").save()
    assert "one of the tables 'missing_present', 'missing_ghosts' does not exist" in str(
        missing.value) or "one of the tables 'missing_ghosts', 'missing_present' does not " \
        "exist" in str(missing.value)
    assert Present.count() == 0  # nothing of it applied
