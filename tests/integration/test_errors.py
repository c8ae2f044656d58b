"""Errors raised by real writes against the local server: the cancellation reasons they carry,
PynamoDB's own error without constraints, and values refused before sending — a hashed
constraint's never shown."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pynamodb.exceptions import (
    PutError,
)
from support.declare import declare, pk_attr
from support.tables import raw_items

from dynaunique import aio, atomic, normalizers
from dynaunique.attributes import ListAttribute, NumberAttribute, UnicodeAttribute
from dynaunique.errors import (
    ConcurrentModificationError,
    InvalidValueError,
    UniqueViolation,
    UnsupportedOperationError,
    for_operation,
)
from dynaunique.testing import create_tables, use_endpoint

_Member = declare("_Member", "errors_members", pk=pk_attr(), email=UnicodeAttribute(unique=True))

_Note = declare("_Note", "errors_notes", pk=pk_attr(), text=UnicodeAttribute(null=True))


def test_a_real_unique_violation_carries_dynamodbs_cancellation_reasons(dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, _Member)
    create_tables(_Member)
    _Member(pk="M1", email="ada@x.io").save()
    with pytest.raises(UniqueViolation) as caught:
        _Member(pk="M2", email="ada@x.io").save()
    exc: Any = for_operation(caught.value, "save")
    assert isinstance(exc, PutError)
    assert exc.cause is exc.__cause__
    assert exc.cause_response_code == "TransactionCanceledException"
    failed = [r for r in exc.cancellation_reasons if r is not None]
    assert [(r.code, r.raw_item["PK"], r.raw_item["owner"]) for r in failed] == [
        ("ConditionalCheckFailed", {"S": "UNIQ#EMAIL#ada@x.io"}, {"M": {"PK": {"S": "M1"}}})]
    assert len(exc.cancellation_reasons) == len(
        exc.__cause__.response["CancellationReasons"])


def test_a_real_stale_save_carries_the_record_guards_cancellation_reason(
        dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, _Member)
    create_tables(_Member)
    stale = _Member(pk="M1", email="a@x.io")
    stale.save()
    other = _Member.get("M1")
    other.email = "b@x.io"
    other.save()
    stale.email = "c@x.io"
    with pytest.raises(ConcurrentModificationError) as caught:
        stale.save()
    exc: Any = for_operation(caught.value, "save")
    assert isinstance(exc, PutError) and isinstance(exc, ConcurrentModificationError)
    assert exc.cause_response_code == "TransactionCanceledException"
    failed = [r for r in exc.cancellation_reasons if r is not None]
    assert [(r.code, r.raw_item["PK"], r.raw_item["email"]) for r in failed] == [
        ("ConditionalCheckFailed", {"S": "M1"}, {"S": "b@x.io"})]


def test_a_model_without_constraints_raises_pynamodbs_own_put_error(dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, _Note)
    create_tables(_Note)
    _Note(pk="N1", text="a").save()
    with pytest.raises(PutError) as caught:
        _Note(pk="N1", text="b").save(condition=_Note.pk.does_not_exist())
    assert type(caught.value) is PutError
    assert caught.value.cause_response_code == "ConditionalCheckFailedException"
    assert caught.value.cause_response_message == "The conditional request failed"


# --- values refused before sending ---------------------------------------------------------------

#: The hashed constraint's value: in no spelling may it appear in an error.
PRIVATE = "Ada.Private@Lovelace.io"

_Private = declare("_Private", "errors_private", meta={"lock_secret": "errors-secret"},
                   pk=pk_attr(),
                   email=UnicodeAttribute(unique=True, hashed=True, null=True,
                                          normalize=normalizers.casefold),
                   badge=NumberAttribute(unique=True, hashed=True, null=True),
                   handle=UnicodeAttribute(unique=True, null=True),
                   note=UnicodeAttribute(null=True), tags=ListAttribute(null=True))

#: (fields, the message): every value DynamoDB would refuse, refused by the library first.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "hashed lone surrogate": (
        {"email": PRIVATE + "\ud800"},
        "_Private.email = <hashed> cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)"),
    "hashed wrong type": (
        {"email": 1815},
        "_Private.email = <hashed> cannot be stored as a UnicodeAttribute: a string must be a "
        "str, not int"),
    "hashed NaN": (
        {"badge": float("nan")},
        "_Private.badge = <hashed> cannot be stored as a NumberAttribute: it is not a finite "
        "number"),
    "unique lone surrogate": (
        {"handle": "ada\udfff"},
        "_Private.handle = 'ada\\udfff' cannot be stored as a UnicodeAttribute: it is not "
        "valid UTF-8 (it holds a lone surrogate)"),
    "plain lone surrogate": (
        {"note": "\ud83d"},
        "_Private.note = '\\ud83d' cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)"),
    "lone surrogate in a list": (
        {"tags": ["ok", "b\ud800"]},
        "_Private.tags = ['ok', 'b\\ud800'] cannot be stored as a ListAttribute: it is not "
        "valid UTF-8 (it holds a lone surrogate)"),
    "lone surrogate in the key": (
        {"pk": "P\ud800"},
        "_Private.pk = 'P\\ud800' cannot be stored as a UnicodeAttribute: it is not valid "
        "UTF-8 (it holds a lone surrogate)"),
}


def _save(how: str, obj: Any) -> None:
    if how == "save":
        obj.save()
    elif how == "atomic":
        with atomic():
            obj.save()
    else:
        async def run() -> None:
            try:
                await obj.asave()
            finally:
                await aio.close()
        asyncio.run(run())


@pytest.mark.parametrize("how", ["save", "asave", "atomic"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_value_dynamodb_would_refuse_is_refused_first_naming_its_field(
        dynaunique_db: str, how: str, case: str) -> None:
    """The error names the field, shows the value unless it is a hashed constraint's (then
    neither the value nor its normalized form, anywhere in the error or its causes), and
    nothing was written."""
    use_endpoint(dynaunique_db, _Private)
    create_tables(_Private)
    fields, message = REFUSED[case]
    with pytest.raises(InvalidValueError) as raised:
        _save(how, _Private(**{"pk": "P1", **fields}))
    assert str(raised.value) == message
    seen: BaseException | None = raised.value
    while seen is not None:
        for text in (str(seen), repr(seen)):
            assert PRIVATE not in text and PRIVATE.casefold() not in text
            assert "1815" not in text
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    assert raw_items(_Private) == []


@pytest.mark.parametrize("how", ["update", "aupdate"])
def test_an_unpredictable_update_of_a_hashed_field_does_not_quote_its_operands(
        dynaunique_db: str, how: str) -> None:
    use_endpoint(dynaunique_db, _Private)
    create_tables(_Private)
    record = _Private(pk="P1", email="first@x.io")
    record.save()
    action = _Private.email.set(_Private.email | PRIVATE)

    async def aupdate() -> None:
        try:
            await record.aupdate(actions=[action])
        finally:
            await aio.close()

    with pytest.raises(UnsupportedOperationError) as raised:
        record.update(actions=[action]) if how == "update" else asyncio.run(aupdate())
    assert str(raised.value) == (
        "an update action changes 'email', which a unique lock depends on, in a way that cannot "
        "be known before sending; assign the new value and call save() instead")
    # A constraint that is not hashed shows the action, operands included.
    with pytest.raises(UnsupportedOperationError, match=r"update action handle = if_not_exists"):
        record.update(actions=[_Private.handle.set(_Private.handle | "ada")])
