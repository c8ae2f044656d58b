"""The sans-IO core: send_steps and flush_steps yield steps and do no I/O themselves.

Driven here by hand, step by step, as both drivers (``connection.run`` and ``aio.arun``) drive
them: what each step asks for is asserted exactly.
"""

from __future__ import annotations

import time
from typing import Any

import botocore.exceptions
import pytest

from dynaunique import Model
from dynaunique._transport.answers import Refused
from dynaunique._transport.connection import (
    Request,
    RetryPolicy,
    Sleep,
    exchange_steps,
    run,
    send_steps,
)
from dynaunique._write.flush import Unit, flush_steps
from dynaunique._write.state import Op, OpKind
from dynaunique.attributes import UnicodeAttribute
from dynaunique.errors import DynauniqueError, OutcomeUnknownError, UnreachableError

POLICY = RetryPolicy(max_conflict_retries=2, max_network_retries=2, base_delay=0.01)
CONNECTION: Any = object()  # never used: nothing here sends


def test_send_steps_resends_the_very_same_request_after_a_lost_answer() -> None:
    steps = send_steps(CONNECTION, "PutItem", {"TableName": "t", "Item": {}}, policy=POLICY)
    first = next(steps)
    assert first == Request(CONNECTION, "PutItem", {"TableName": "t", "Item": {}})
    backoff = steps.throw(botocore.exceptions.ConnectionClosedError(endpoint_url="http://x"))
    assert isinstance(backoff, Sleep) and 0 <= backoff.seconds <= 0.02
    assert steps.send(None) == first
    with pytest.raises(StopIteration) as done:
        steps.send({"ConsumedCapacity": {}})
    assert done.value.value == {"ConsumedCapacity": {}}


def test_send_steps_gives_up_as_unreachable_when_nothing_was_ever_sent() -> None:
    steps = send_steps(CONNECTION, "GetItem", {"TableName": "t"}, policy=POLICY)
    next(steps)
    refused = botocore.exceptions.EndpointConnectionError(endpoint_url="http://x")
    for _ in range(POLICY.max_network_retries):
        assert isinstance(steps.throw(refused), Sleep)
        assert isinstance(steps.send(None), Request)
    with pytest.raises(UnreachableError):
        steps.throw(refused)


def _conflict() -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": "ReplicatedWriteConflictException", "Message": "m"}}, "PutItem")


def test_until_stops_the_retries_at_its_time_and_hands_back_the_refusal() -> None:
    """An MRSC record write is retried only within its lease: a retryable refusal at or after
    ``until`` is handed back (nothing was applied); an unanswered attempt then is the retries
    running out (its outcome unknown), never a resend."""
    params = {"TableName": "t", "Item": {}}
    steps = exchange_steps(CONNECTION, "PutItem", params, policy=POLICY,
                           until=time.time() + 60)
    next(steps)
    assert isinstance(steps.throw(_conflict()), Sleep)   # before its time: retried
    steps = exchange_steps(CONNECTION, "PutItem", params, policy=POLICY, until=time.time())
    next(steps)
    with pytest.raises(StopIteration) as done:
        steps.throw(_conflict())
    assert isinstance(done.value.value, Refused)
    assert done.value.value.code == "ReplicatedWriteConflictException"
    steps = exchange_steps(CONNECTION, "PutItem", params, policy=POLICY, until=time.time())
    next(steps)
    with pytest.raises(OutcomeUnknownError):
        steps.throw(botocore.exceptions.ReadTimeoutError(endpoint_url="http://x"))


class Stepped(Model):
    class Meta:
        table_name = "steps"
        host = "http://127.0.0.1:9"  # never reached

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(unique=True, null=True)


def test_a_flush_asks_for_its_read_then_its_write_and_settles_on_the_answers() -> None:
    unit = Unit()
    obj = Stepped(pk="A")
    unit.add(Op(obj, OpKind.DELETE))
    steps = flush_steps(unit)
    read = next(steps)
    assert isinstance(read, Request) and read.operation == "GetItem"
    assert read.params == {"TableName": "steps", "Key": {"pk": {"S": "A"}},
                           "ConsistentRead": True}
    write = steps.send({"Item": {"pk": {"S": "A"}, "email": {"S": "a@x.io"}}})
    assert isinstance(write, Request) and write.operation == "TransactWriteItems"
    assert [next(iter(item)) for item in write.params["TransactItems"]] == ["Delete", "Delete"]
    with pytest.raises(StopIteration) as done:
        steps.send({})
    assert done.value.value.plan.has_work


def test_run_drives_steps_with_the_given_sleep() -> None:
    slept: list[float] = []

    def steps() -> Any:
        yield Sleep(0.5)
        return "done"

    assert run(steps(), sleep=slept.append) == "done"
    assert slept == [0.5]


def _refused(code: str) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": "refused"},
         "ResponseMetadata": {"HTTPStatusCode": 400}}, "GetItem")


def test_a_lookup_reads_the_lock_then_its_owner_and_maps_a_refused_owner_key() -> None:
    """A lock naming a key DynamoDB refuses to read (ValidationException) names no record:
    DoesNotExist; the first read's refusal is a DynauniqueError quoting DynamoDB."""
    steps = Stepped._du_get_by_unique_steps("email", "a@x.io", {})
    lock_read = next(steps)
    assert isinstance(lock_read, Request)
    assert (lock_read.operation, lock_read.params) == ("GetItem", {
        "TableName": "steps", "Key": {"pk": {"S": "UNIQ#EMAIL#a@x.io"}}, "ConsistentRead": True})
    owner_read = steps.send({"Item": {"pk": {"S": "UNIQ#EMAIL#a@x.io"},
                                      "owner": {"M": {"pk": {"S": "A"}}},
                                      "model": {"S": "Stepped"}}})
    assert isinstance(owner_read, Request)
    assert owner_read.params == {"TableName": "steps", "Key": {"pk": {"S": "A"}},
                                 "ConsistentRead": True}
    with pytest.raises(Stepped.DoesNotExist) as raised:
        steps.throw(_refused("ValidationException"))
    assert str(raised.value) == (
        "the lock on email 'a@x.io' names no record of Stepped (its owner is not a key of the "
        "table; an orphan lock: `dynaunique check` finds and `dynaunique repair` removes these)")
    # The lock's own read refused: not a DoesNotExist, DynamoDB's words.
    steps = Stepped._du_get_by_unique_steps("email", "a@x.io", {})
    next(steps)
    with pytest.raises(DynauniqueError) as other:
        steps.throw(_refused("ValidationException"))
    assert type(other.value) is DynauniqueError
    assert str(other.value) == "DynamoDB refused the request: ValidationException: refused"
