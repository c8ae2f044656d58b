"""``get_by_unique`` against hostile tables and values, sync and async.

Lock items planted with a raw boto3 client, as a write around the library would leave them: an
``owner`` that is a string, an empty map, a map of the wrong key attributes or of wrong key
types, a lock without its ``model``. Each lookup answers ``Model.DoesNotExist`` (the lock names
no record of the model) — never a ``KeyError`` or an internal exception. And a value of a
``hashed=True`` constraint appears in no message a lookup raises: not the value as given, not
its normalized form.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.declare import declare, pk_attr, sk_attr
from support.tables import raw_tables

from dynaunique import DynauniqueError, InvalidValueError, aio, normalizers
from dynaunique._lock.locks import lock_key
from dynaunique.attributes import UnicodeAttribute

SECRET = "lookup-secret"
#: The value of the hashed constraint: no message may show it, in any spelling.
PRIVATE = "Ada.Private@Lovelace.io"
SPELLINGS = (PRIVATE, PRIVATE.casefold(), repr(PRIVATE), repr(PRIVATE.casefold()))
TABLE = "lookup_hostile"

Member = declare("Member", TABLE, pk=pk_attr(), sk=sk_attr("PROFILE"),
                 email=UnicodeAttribute(unique=True, null=True, normalize=normalizers.casefold))
Patient = declare("Patient", "lookup_hostile_patients", meta={"lock_secret": SECRET},
                  pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, hashed=True, null=True,
                                         normalize=normalizers.casefold))


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, Member, Patient)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def lookup(mode: str, model: Any, *args: Any) -> Any:
    """``model.get_by_unique(*args)``, or its asyncio form run on a loop of its own."""
    if mode == "sync":
        return model.get_by_unique(*args)

    async def run() -> Any:
        try:
            return await model.aget_by_unique(*args)
        finally:
            await aio.close()

    return asyncio.run(run())


def plant(raw: Any, table: str, key: str, **attributes: Any) -> None:
    """A lock item written around the library: its key, plus exactly ``attributes``."""
    raw.put_item(TableName=table, Item={"PK": {"S": key}, "SK": {"S": "LOCK"}, **attributes})


def no_private_value(exc: BaseException) -> None:
    """Neither the message nor the repr of ``exc`` (nor of its causes) holds the value."""
    seen: BaseException | None = exc
    while seen is not None:
        for text in (str(seen), repr(seen)):
            for spelling in SPELLINGS:
                assert spelling not in text
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)


# --- malformed locks -----------------------------------------------------------------------------

_OWNER = {"M": {"PK": {"S": "M1"}, "SK": {"S": "PROFILE"}}}
MALFORMED: dict[str, dict[str, Any]] = {
    "owner a string": {"owner": {"S": "M1"}, "model": {"S": "Member"}},
    "owner an empty map": {"owner": {"M": {}}, "model": {"S": "Member"}},
    "owner a list": {"owner": {"L": [{"S": "M1"}]}, "model": {"S": "Member"}},
    "owner without its range key": {"owner": {"M": {"PK": {"S": "M1"}}},
                                    "model": {"S": "Member"}},
    "owner with another table's key": {"owner": {"M": {"id": {"S": "M1"}}},
                                       "model": {"S": "Member"}},
    "owner key of the wrong type": {"owner": {"M": {"PK": {"N": "1"}, "SK": {"S": "PROFILE"}}},
                                    "model": {"S": "Member"}},
    "owner key a set": {"owner": {"M": {"PK": {"SS": ["M1"]}, "SK": {"S": "PROFILE"}}},
                        "model": {"S": "Member"}},
    "owner key an empty string": {"owner": {"M": {"PK": {"S": ""}, "SK": {"S": "PROFILE"}}},
                                  "model": {"S": "Member"}},
    # Well formed, yet not a key DynamoDB can read (over 2048 bytes): its ValidationException.
    "owner key too long": {"owner": {"M": {"PK": {"S": "M" * 2049}, "SK": {"S": "PROFILE"}}},
                           "model": {"S": "Member"}},
    "owner a string, no model": {"owner": {"S": "M1"}},
    "no owner, no model": {},
}


@pytest.mark.parametrize("shape", list(MALFORMED))
def test_a_malformed_lock_is_does_not_exist(raw: Any, mode: str, shape: str) -> None:
    """Whatever the lock's owner looks like, the answer is the model's DoesNotExist saying the
    lock names no record of it — not a KeyError, not DynamoDB's ValidationException."""
    Member(pk="M1", email="ada@x.io").save()   # a real record that holds the value
    raw.delete_item(TableName=TABLE, Key={"PK": {"S": "UNIQ#EMAIL#ada@x.io"},
                                          "SK": {"S": "LOCK"}})
    plant(raw, TABLE, "UNIQ#EMAIL#ada@x.io", **MALFORMED[shape])
    with pytest.raises(Member.DoesNotExist) as raised:
        lookup(mode, Member, "email", "Ada@x.io")
    assert str(raised.value) == (
        "the lock on email 'Ada@x.io' names no record of Member (its owner is not a key of "
        "the table; an orphan lock: `dynaunique check` finds and `dynaunique repair` removes "
        "these)")


def test_a_lock_without_its_model_but_a_good_owner_finds_the_record(raw: Any, mode: str) -> None:
    """The lock's ``model`` is only a hint: a lock that names a record holding the value is
    that record's, whoever wrote it."""
    Member(pk="M1", email="ada@x.io").save()
    plant(raw, TABLE, "UNIQ#EMAIL#ada@x.io", owner=_OWNER)
    assert lookup(mode, Member, "email", "ADA@x.io").pk == "M1"


def test_a_missing_table_is_a_dynaunique_error_not_an_internal_one(dynaunique_db: str,
                                                                    mode: str) -> None:
    """A lookup DynamoDB refuses for another reason is a DynauniqueError saying so."""
    raw_tables(dynaunique_db, Patient)   # Member's table is not created
    with pytest.raises(DynauniqueError, match="ResourceNotFoundException") as raised:
        lookup(mode, Member, "email", "ada@x.io")
    assert type(raised.value) is DynauniqueError


# --- hashed values appear in no message ----------------------------------------------------------


def patient_miss(mode: str) -> str:
    """The message of Patient's DoesNotExist for PRIVATE, checked to hold the value nowhere."""
    with pytest.raises(Patient.DoesNotExist) as raised:
        lookup(mode, Patient, "email", PRIVATE)
    no_private_value(raised.value)
    return str(raised.value)


def test_a_hashed_miss_never_shows_the_value(raw: Any, mode: str) -> None:
    assert patient_miss(mode) == "no Patient holds email <hashed>"


def test_a_hashed_orphan_lock_never_shows_the_value(raw: Any, mode: str) -> None:
    key = lock_key("EMAIL", (PRIVATE.casefold(),), secret=SECRET.encode())
    plant(raw, "lookup_hostile_patients", key, owner={"M": {"PK": {"S": "P9"},
                                                            "SK": {"S": "PROFILE"}}},
          model={"S": "Patient"})
    assert patient_miss(mode) == (
        "the lock on email <hashed> names {'PK': 'P9', 'SK': 'PROFILE'}, which does not exist "
        "(an orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)")
    # The owner exists but holds another value: an orphan too, still without the value.
    raw.put_item(TableName="lookup_hostile_patients", Item={
        "PK": {"S": "P9"}, "SK": {"S": "PROFILE"}, "email": {"S": "other@x.io"}})
    assert patient_miss(mode) == (
        "the lock on email <hashed> names {'PK': 'P9', 'SK': 'PROFILE'}, which no longer holds "
        "that value (an orphan lock)")
    # A malformed owner on a hashed lock (it even spells the value): the value stays hidden.
    plant(raw, "lookup_hostile_patients", key, owner={"S": PRIVATE})
    assert patient_miss(mode) == (
        "the lock on email <hashed> names no record of Patient (its owner is not a key of the "
        "table; an orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)")


def test_a_hashed_value_that_cannot_be_stored_is_named_by_its_field_only(
        raw: Any, mode: str) -> None:
    """A lone surrogate cannot be stored (nor looked up): the error names the field and never
    quotes the value."""
    bad = PRIVATE + "\ud800"
    with pytest.raises(InvalidValueError) as raised:
        lookup(mode, Patient, "email", bad)
    assert str(raised.value) == (
        "Patient.email = <hashed> cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)")
    no_private_value(raised.value)
    with pytest.raises(InvalidValueError) as plain:
        lookup(mode, Member, "email", "ada\ud800")
    assert str(plain.value) == (
        "Member.email = 'ada\\ud800' cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)")
