"""Errors raised by real writes against the local server: the cancellation reasons they carry,
and PynamoDB's own error without constraints."""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.exceptions import (
    PutError,
)
from support.declare import declare, pk_attr

from dynaunique.attributes import UnicodeAttribute
from dynaunique.errors import (
    ConcurrentModificationError,
    UniqueViolation,
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
