"""dynaunique._write.transaction: rendering, size limits, tokens, retries and the mapping of
failures.

``execute`` runs against a fake connection object that records its calls and answers from a script:
these are unit tests of the retry and mapping logic. Behaviour against a server is in
test_model.py and test_races.py.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import threading
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from support.declare import declare, pk_attr, sk_attr

from dynaunique._lock.locks import LockRef
from dynaunique._transport.connection import RetryPolicy
from dynaunique._write import render as _render
from dynaunique._write.flush import execute
from dynaunique._write.plan import Plan, merge
from dynaunique._write.record import plan_save as plan_of
from dynaunique._write.render import (
    MAX_BYTES,
    MAX_ITEMS,
    check_size,
    new_token,
    render,
    render_checked,
    to_json,
)
from dynaunique._write.state import same_item
from dynaunique._write.writes import (
    Absent,
    ConditionCheck,
    Expression,
    HeldBy,
    LockPut,
    RecordDelete,
    RecordPut,
    RecordUpdate,
    Unchanged,
)
from dynaunique.attributes import UnicodeAttribute
from dynaunique.errors import (
    ConcurrentModificationError,
    ConditionCheckFailedError,
    DynauniqueError,
    ForeignLockError,
    OutcomeUnknownError,
    TransactionTooLargeError,
    UniqueViolation,
    UnreachableError,
)

Account = declare("Account", "tx_accounts", pk=pk_attr(), sk=sk_attr("PROFILE"),
                  email=UnicodeAttribute(unique=True, null=True),
                  username=UnicodeAttribute(unique=True, lock_name="HANDLE", null=True))


A1 = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}
HOLDER = {"PK": {"S": "ACCT#a1f9c3"}, "SK": {"S": "PROFILE"}}


# --- a scripted fake client ----------------------------------------------------------------------


class FakeClient:
    """A stand-in for a PynamoDB connection: records every request it is asked to dispatch and
    answers each with the next scripted response or exception."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, operation: str, params: dict[str, Any]) -> Any:
        self.calls.append((operation, copy.deepcopy(params)))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def dispatch(self, operation: str, params: dict[str, Any]) -> Any:
        """What ``dynaunique._transport.connection.send`` calls on a PynamoDB connection."""
        return self._answer(operation, params)

    @property
    def tokens(self) -> list[str]:
        return [params["ClientRequestToken"] for _, params in self.calls]


class Sleeps:
    """A no-op sleep that remembers how long it was asked to wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def canceled(*reasons: dict[str, Any]) -> ClientError:
    """A TransactionCanceledException as botocore parses it (reasons at the top level)."""
    response: Any = {
        "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
        "CancellationReasons": list(reasons),
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }
    return ClientError(response, "TransactWriteItems")


def client_error(code: str, status: int = 400, item: dict[str, Any] | None = None,
                 operation: str = "PutItem") -> ClientError:
    response: Any = {"Error": {"Code": code, "Message": f"{code} happened"},
                     "ResponseMetadata": {"HTTPStatusCode": status}}
    if item is not None:
        response["Item"] = item
    return ClientError(response, operation)


OK = {"Code": "None"}
CONFLICT = {"Code": "TransactionConflict", "Message": "conflict"}


def failed(item: dict[str, Any] | None = None) -> dict[str, Any]:
    reason: dict[str, Any] = {"Code": "ConditionalCheckFailed", "Message": "failed"}
    if item is not None:
        reason["Item"] = item
    return reason


def timeout() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="http://127.0.0.1:9")


def create_plan() -> Plan:
    """Create ACCT#1 holding email ada@x.io and handle ada: [record, EMAIL lock, HANDLE lock]."""
    return plan_of(Account(pk="ACCT#1", email="ada@x.io", username="ada"))


def update_plan() -> Plan:
    """ACCT#1 changes email a@x.io → b@x.io: [record, put b, delete a]."""
    acct = Account(pk="ACCT#1", email="a@x.io", username="ada")
    acct._du_loaded = acct.serialize()
    acct.email = "b@x.io"
    return plan_of(acct)


def plain_plan() -> Plan:
    acct = Account(pk="ACCT#1", email="a@x.io")
    acct._du_loaded = acct.serialize()
    return plan_of(acct)


def lock_item_of(key: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {"PK": {"S": key}, "SK": {"S": "LOCK"}, "owner": {"M": owner},
            "model": {"S": "Account"}, "constraint": {"S": "EMAIL"}, "value": {"S": "x"},
            "created": {"S": "t"}}


def no_retry_policy() -> RetryPolicy:
    return RetryPolicy(max_conflict_retries=3, max_network_retries=2)


# --- render --------------------------------------------------------------------------------------


def test_render_keeps_plan_order_and_combines_guard_and_user_condition() -> None:
    key = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}
    lock = LockRef("EMAIL", ("email",), "UNIQ#EMAIL#a@x.io", "a@x.io")
    lock_key = {"PK": {"S": "UNIQ#EMAIL#a@x.io"}, "SK": {"S": "LOCK"}}
    plan = Plan((
        RecordUpdate("t", "Account", key, Expression("SET #0 = :0", {"#0": "name"},
                                                       {":0": {"S": "n"}}),
                     Unchanged((("email", {"S": "a@x.io"}), ("username", None))),
                     Expression("#1 > :1", {"#1": "age"}, {":1": {"N": "3"}})),
        LockPut("t", "Account", lock, key, {**lock_key, "owner": {"M": key}}, HeldBy((key,)),
                lock_key),
        ConditionCheck("t", "Workspace", {"PK": {"S": "WS#1"}, "SK": {"S": "WS"}},
                       Expression("attribute_exists(#0)", {"#0": "PK"}), "workspace exists"),
        RecordDelete("t", "Account", {"PK": {"S": "ACCT#2"}, "SK": {"S": "PROFILE"}}, None),
    ))
    assert render(plan) == {"TransactItems": [
        {"Update": {
            "TableName": "t",
            "Key": key,
            "UpdateExpression": "SET #0 = :0",
            "ConditionExpression": "(attribute_exists(#g0) AND #g1 = :g0 AND "
                                   "attribute_not_exists(#g2)) AND (#1 > :1)",
            "ExpressionAttributeNames": {"#g0": "PK", "#g1": "email", "#g2": "username",
                                         "#1": "age", "#0": "name"},
            "ExpressionAttributeValues": {":g0": {"S": "a@x.io"}, ":1": {"N": "3"},
                                          ":0": {"S": "n"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        {"Put": {
            "TableName": "t",
            "Item": {**lock_key, "owner": {"M": key}},
            "ConditionExpression": "attribute_not_exists(#g0) OR "
                                   "(#g1.#g0 = :g0 AND #g1.#g2 = :g1)",
            "ExpressionAttributeNames": {"#g0": "PK", "#g1": "owner", "#g2": "SK"},
            "ExpressionAttributeValues": {":g0": {"S": "ACCT#1"}, ":g1": {"S": "PROFILE"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
        {"ConditionCheck": {
            "TableName": "t",
            "Key": {"PK": {"S": "WS#1"}, "SK": {"S": "WS"}},
            "ConditionExpression": "attribute_exists(#0)",
            "ExpressionAttributeNames": {"#0": "PK"},
        }},
        {"Delete": {
            "TableName": "t",
            "Key": {"PK": {"S": "ACCT#2"}, "SK": {"S": "PROFILE"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }},
    ], "ReturnConsumedCapacity": "TOTAL"}


@pytest.mark.parametrize(("write", "expected"), [
    (RecordPut("t", "M", {"id": {"S": "1"}}, {"id": {"S": "1"}}, Absent()),
     {"Operation": "PutItem", "TableName": "t", "Item": {"id": {"S": "1"}},
      "ConditionExpression": "attribute_not_exists(#g0)",
      "ExpressionAttributeNames": {"#g0": "id"},
      "ReturnValuesOnConditionCheckFailure": "ALL_OLD", "ReturnConsumedCapacity": "TOTAL"}),
    (RecordUpdate("t", "M", {"id": {"S": "1"}}, Expression("REMOVE #0", {"#0": "x"}), None),
     {"Operation": "UpdateItem", "TableName": "t", "Key": {"id": {"S": "1"}},
      "UpdateExpression": "REMOVE #0", "ExpressionAttributeNames": {"#0": "x"},
      "ReturnValuesOnConditionCheckFailure": "ALL_OLD", "ReturnValues": "ALL_NEW",
      "ReturnConsumedCapacity": "TOTAL"}),
    (RecordDelete("t", "M", {"id": {"S": "1"}}, Unchanged((("v", {"N": "2"}),))),
     {"Operation": "DeleteItem", "TableName": "t", "Key": {"id": {"S": "1"}},
      "ConditionExpression": "attribute_exists(#g0) AND #g1 = :g0",
      "ExpressionAttributeNames": {"#g0": "id", "#g1": "v"},
      "ExpressionAttributeValues": {":g0": {"N": "2"}},
      "ReturnValuesOnConditionCheckFailure": "ALL_OLD", "ReturnConsumedCapacity": "TOTAL"}),
])
def test_render_of_a_single_record_write_is_a_plain_request(write: Any,
                                                             expected: dict[str, Any]) -> None:
    plan = Plan((write,))
    assert not plan.is_transaction
    assert render(plan) == expected


def test_to_json_renders_binary_as_base64_and_keeps_unicode() -> None:
    assert json.loads(to_json({"B": b"\x00\xff", "S": "é"})) == {"B": "AP8=", "S": "é"}
    assert "é" in to_json({"S": "é"})


# --- size limits ---------------------------------------------------------------------------------


def many_locks(count: int, value_size: int = 1) -> Plan:
    owner = {"PK": {"S": "ACCT#1"}, "SK": {"S": "PROFILE"}}
    writes: list[Any] = []
    for index in range(count):
        key = {"PK": {"S": f"UNIQ#E{index}#x"}, "SK": {"S": "LOCK"}}
        lock = LockRef(f"E{index}", ("e",), key["PK"]["S"], "x")
        writes.append(LockPut("t", "M", lock, owner,
                              {**key, "owner": {"M": owner}, "pad": {"S": "p" * value_size}},
                              HeldBy((owner,)), key))
    return Plan(tuple(writes))


def test_more_than_100_items_is_refused_before_sending() -> None:
    client = FakeClient()
    with pytest.raises(TransactionTooLargeError) as caught:
        execute(many_locks(101), client, sleep=Sleeps())
    assert (caught.value.items, caught.value.max_items) == (101, MAX_ITEMS)
    assert client.calls == []


def test_exactly_100_items_is_sent() -> None:
    client = FakeClient({})
    execute(many_locks(100), client, sleep=Sleeps())
    assert len(client.calls) == 1
    assert len(client.calls[0][1]["TransactItems"]) == 100


def test_more_than_4_mb_is_refused_before_sending() -> None:
    client = FakeClient()
    with pytest.raises(TransactionTooLargeError) as caught:
        execute(many_locks(5, value_size=MAX_BYTES // 5 + 10), client, sleep=Sleeps())
    assert caught.value.items == 5
    assert caught.value.size_bytes > MAX_BYTES
    assert caught.value.max_bytes == 4 * 1024 * 1024
    assert client.calls == []


def test_a_dry_run_render_refuses_too_large_too() -> None:
    with pytest.raises(TransactionTooLargeError):
        render_checked(many_locks(101))
    assert len(render_checked(many_locks(100))["TransactItems"]) == 100


def test_check_size_ignores_single_writes() -> None:
    check_size({"Operation": "PutItem", "Item": {"x": {"S": "p" * (MAX_BYTES + 1)}}})


# --- tokens --------------------------------------------------------------------------------------


def test_new_token_is_a_process_prefix_and_a_counter_within_36_characters() -> None:
    request = render(create_plan())
    first, second = new_token(request), new_token(request)
    assert re.fullmatch(r"[0-9a-f]{24}-[0-9a-f]{11}", first), first
    assert len(first) == len(second) == 36      # DynamoDB's limit
    prefix, count = first.split("-")
    # Same process: the same random prefix, the next count — whatever the request.
    assert second == f"{prefix}-{int(count, 16) + 1:011x}"
    assert new_token(render(update_plan())) == f"{prefix}-{int(count, 16) + 2:011x}"


def test_new_tokens_are_unique_across_threads() -> None:
    tokens: list[str] = []

    def make() -> None:
        tokens.extend(new_token({}) for _ in range(2000))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tokens)) == len(tokens) == 8000


def test_a_wrapping_counter_draws_a_new_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = new_token({}).split("-")[0]
    monkeypatch.setattr(_render, "_counter", 16 ** 11 - 2)
    assert new_token({}) == f"{prefix}-{16 ** 11 - 1:011x}"
    wrapped = new_token({})
    assert wrapped.endswith("-00000000001") and not wrapped.startswith(prefix)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_tokens() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first token, then gone
        os.write(write, new_token({}).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    parent = new_token({})
    assert len(child) == 36
    assert child.split("-")[0] != parent.split("-")[0]


def test_every_resend_of_one_call_reuses_its_token_and_a_new_call_gets_a_new_one() -> None:
    plan = create_plan()
    client = FakeClient(timeout(), canceled(CONFLICT, OK, OK), timeout(), {})
    execute(plan, client, sleep=Sleeps())
    assert len(client.calls) == 4
    assert len(set(client.tokens)) == 1
    assert {json.dumps(p, sort_keys=True) for _, p in client.calls} == {
        json.dumps(client.calls[0][1], sort_keys=True)}
    again = FakeClient({})
    execute(plan, again, sleep=Sleeps())
    assert again.tokens[0] != client.tokens[0]


# --- retries -------------------------------------------------------------------------------------


def test_transaction_conflict_is_retried_then_succeeds_with_the_same_token() -> None:
    plan = create_plan()
    sleeps = Sleeps()
    client = FakeClient(canceled(OK, CONFLICT, OK), canceled(CONFLICT, OK, OK),
                        {"ConsumedCapacity": []})
    assert execute(plan, client, sleep=sleeps) == {"ConsumedCapacity": []}
    assert [op for op, _ in client.calls] == ["TransactWriteItems"] * 3
    assert len(set(client.tokens)) == 1
    assert client.calls[0][1] == {**render(plan), "ClientRequestToken": client.tokens[0]}
    assert len(sleeps.delays) == 2


def test_conflicts_are_retried_a_bounded_number_of_times() -> None:
    policy = no_retry_policy()
    client = FakeClient(*[canceled(CONFLICT, OK, OK)] * 10)
    with pytest.raises(DynauniqueError, match="kept conflicting"):
        execute(create_plan(), client, policy=policy, sleep=Sleeps())
    assert len(client.calls) == policy.max_conflict_retries + 1


@pytest.mark.parametrize("code", ["ThrottlingException", "ProvisionedThroughputExceededException",
                                  "TransactionInProgressException", "RequestLimitExceeded"])
def test_throttling_is_retried(code: str) -> None:
    client = FakeClient(client_error(code, operation="TransactWriteItems"), {})
    assert execute(create_plan(), client, sleep=Sleeps()) == {}
    assert len(client.calls) == 2


def test_conditional_check_failed_is_never_retried() -> None:
    client = FakeClient(canceled(OK, failed(lock_item_of("UNIQ#EMAIL#ada@x.io", HOLDER)), OK), {})
    sleeps = Sleeps()
    with pytest.raises(UniqueViolation):
        execute(create_plan(), client, sleep=sleeps)
    assert len(client.calls) == 1
    assert sleeps.delays == []


def test_conflict_beside_a_failed_condition_is_not_retried() -> None:
    client = FakeClient(canceled(CONFLICT, failed(lock_item_of("UNIQ#EMAIL#ada@x.io", HOLDER)),
                                 OK), {})
    with pytest.raises(UniqueViolation):
        execute(create_plan(), client, sleep=Sleeps())
    assert len(client.calls) == 1


def test_other_client_errors_are_not_retried_and_keep_their_cause() -> None:
    error = client_error("ValidationException", operation="TransactWriteItems")
    client = FakeClient(error, {})
    with pytest.raises(DynauniqueError, match="ValidationException") as caught:
        execute(create_plan(), client, sleep=Sleeps())
    assert caught.value.__cause__ is error
    assert len(client.calls) == 1


# --- mapping CancellationReasons ------------------------------------------------------------------


def test_lock_slot_maps_to_unique_violation_with_the_holder() -> None:
    reason = failed(lock_item_of("UNIQ#EMAIL#ada@x.io", HOLDER))
    error = canceled(OK, reason, OK)
    with pytest.raises(UniqueViolation) as caught:
        execute(create_plan(), FakeClient(error), sleep=Sleeps())
    violation = caught.value
    assert violation.model == "Account"
    assert violation.fields == ("email",)
    assert violation.constraint == "EMAIL"
    assert violation.value == "ada@x.io"
    assert violation.owner == {"PK": "ACCT#a1f9c3", "SK": "PROFILE"}
    assert violation.violations == (violation,)
    assert str(violation) == "email 'ada@x.io' is already taken (held by ACCT#a1f9c3)"
    assert violation.__cause__ is error


def test_slots_are_mapped_by_position() -> None:
    # Only the third item (HANDLE) failed: the error must name the handle, not the email.
    reason = failed(lock_item_of("UNIQ#HANDLE#ada", HOLDER))
    with pytest.raises(UniqueViolation) as caught:
        execute(create_plan(), FakeClient(canceled(OK, OK, reason)), sleep=Sleeps())
    assert (caught.value.fields, caught.value.constraint, caught.value.value) == (
        ("username",), "HANDLE", "ada")


def test_lock_slot_without_returned_item_has_no_owner() -> None:
    with pytest.raises(UniqueViolation) as caught:
        execute(create_plan(), FakeClient(canceled(OK, failed(), OK)), sleep=Sleeps())
    assert caught.value.owner is None
    assert str(caught.value) == "email 'ada@x.io' is already taken"


def test_two_lock_slots_give_both_violations() -> None:
    other = {"PK": {"S": "ACCT#b2"}, "SK": {"S": "PROFILE"}}
    reasons = (OK, failed(lock_item_of("UNIQ#EMAIL#ada@x.io", HOLDER)),
               failed(lock_item_of("UNIQ#HANDLE#ada", other)))
    with pytest.raises(UniqueViolation) as caught:
        execute(create_plan(), FakeClient(canceled(*reasons)), sleep=Sleeps())
    error = caught.value
    assert error.constraint == "EMAIL"
    assert [(v.constraint, v.value, v.owner) for v in error.violations] == [
        ("EMAIL", "ada@x.io", {"PK": "ACCT#a1f9c3", "SK": "PROFILE"}),
        ("HANDLE", "ada", {"PK": "ACCT#b2", "SK": "PROFILE"}),
    ]


def test_record_slot_of_a_create_maps_to_concurrent_modification() -> None:
    current = {**A1, "email": {"S": "someone@else.io"}}
    plan = create_plan()
    with pytest.raises(ConcurrentModificationError, match="already exists") as caught:
        execute(plan, FakeClient(canceled(failed(current), OK, OK)), sleep=Sleeps())
    assert caught.value.current == current
    assert caught.value.write is plan.writes[0]
    assert caught.value.key == {"PK": "ACCT#1", "SK": "PROFILE"}
    assert caught.value.model == "Account"


def test_record_slot_of_an_update_maps_to_concurrent_modification() -> None:
    current = {**A1, "email": {"S": "changed@x.io"}}
    with pytest.raises(ConcurrentModificationError, match="was modified since"):
        execute(update_plan(), FakeClient(canceled(failed(current), OK, OK)), sleep=Sleeps())
    with pytest.raises(ConcurrentModificationError, match="no longer exists"):
        execute(update_plan(), FakeClient(canceled(failed(), OK, OK)), sleep=Sleeps())


def test_record_slot_wins_over_lock_slots() -> None:
    reasons = (failed({**A1, "email": {"S": "x"}}), failed(lock_item_of("UNIQ#EMAIL#b@x.io",
                                                                         HOLDER)), OK)
    with pytest.raises(ConcurrentModificationError):
        execute(update_plan(), FakeClient(canceled(*reasons)), sleep=Sleeps())


def test_old_lock_held_by_another_record_is_a_foreign_lock_error() -> None:
    # The record slot passed (it is as loaded), yet its old value's lock is someone else's:
    # drift. The lock was never this record's, so the caller must not delete it.
    reasons = (OK, OK, failed(lock_item_of("UNIQ#EMAIL#a@x.io", HOLDER)))
    with pytest.raises(ForeignLockError) as caught:
        execute(update_plan(), FakeClient(canceled(*reasons)), sleep=Sleeps())
    assert isinstance(caught.value, ConcurrentModificationError)
    assert caught.value.lock_keys == ("UNIQ#EMAIL#a@x.io",)
    assert caught.value.model == "Account"
    assert "held by {'PK': 'ACCT#a1f9c3', 'SK': 'PROFILE'}" in str(caught.value)


def test_a_new_lock_taken_beside_a_foreign_old_lock_is_a_violation() -> None:
    reasons = (OK, failed(lock_item_of("UNIQ#EMAIL#b@x.io", HOLDER)),
               failed(lock_item_of("UNIQ#EMAIL#a@x.io", HOLDER)))
    with pytest.raises(UniqueViolation) as caught:
        execute(update_plan(), FakeClient(canceled(*reasons)), sleep=Sleeps())
    assert caught.value.value == "b@x.io"


def test_condition_check_slot_maps_to_condition_check_failed() -> None:
    check = ConditionCheck("tx_accounts", "Workspace", {"PK": {"S": "WS#1"}, "SK": {"S": "WS"}},
                           Expression("attribute_exists(#0)", {"#0": "PK"}), "workspace exists")
    plan = merge([create_plan()], [check])
    assert isinstance(plan.writes[1], ConditionCheck)
    with pytest.raises(ConditionCheckFailedError) as caught:
        execute(plan, FakeClient(canceled(OK, failed(), OK, OK)), sleep=Sleeps())
    assert str(caught.value) == "condition check failed: workspace exists"
    assert caught.value.model == "Workspace"
    assert caught.value.key == {"PK": "WS#1", "SK": "WS"}


def test_single_write_failure_maps_from_conditional_check_failed_exception() -> None:
    current = {**A1, "email": {"S": "changed@x.io"}}
    error = client_error("ConditionalCheckFailedException", item=current)
    client = FakeClient(error, {})
    with pytest.raises(ConcurrentModificationError) as caught:
        execute(plain_plan(), client, sleep=Sleeps())
    assert caught.value.current == current
    assert [op for op, _ in client.calls] == ["PutItem"]
    assert "Operation" not in client.calls[0][1]
    assert "ClientRequestToken" not in client.calls[0][1]


# --- ambiguous failures --------------------------------------------------------------------------


def test_resend_after_a_timeout_that_finds_its_own_record_is_success() -> None:
    plan = create_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    # The first attempt was applied; on the resend the record's absence guard fails with our
    # own item, and the lock puts pass because we own the locks.
    own = copy.deepcopy(record.item)
    client = FakeClient(timeout(), canceled(failed(own), OK, OK))
    assert execute(plan, client, sleep=Sleeps()) == {}
    assert len(client.calls) == 2
    assert client.tokens[0] == client.tokens[1]


def test_own_item_found_without_a_prior_ambiguity_is_refused_and_nothing_more_is_sent() -> None:
    # The record already is exactly what this stale copy writes, but this call never sent it: a
    # refused stale write. Its lock writes must not go out alone (another writer may move the
    # record between two requests): one request, then ConcurrentModificationError.
    plan = update_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    client = FakeClient(canceled(failed(dict(record.item)), OK, OK), {})
    with pytest.raises(ConcurrentModificationError) as caught:
        execute(plan, client, sleep=Sleeps())
    assert caught.value.write is record
    assert len(client.calls) == 1


def test_own_item_found_when_repeating_an_unknown_outcome_is_success() -> None:
    # The same record write as a call that ended in OutcomeUnknownError: its landing is proved
    # by the record slot (a transaction lands whole), so the repeat is done, nothing resent.
    plan = update_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    client = FakeClient(canceled(failed(dict(record.item)), failed(), OK), {})
    assert execute(plan, client, sleep=Sleeps(), repeats=[record]) == {}
    assert len(client.calls) == 1


def test_a_repeat_whose_record_shows_another_item_is_refused() -> None:
    plan = update_plan()
    record = plan.writes[0]
    client = FakeClient(canceled(failed({**A1, "email": {"S": "c@x.io"}}), OK, OK))
    with pytest.raises(ConcurrentModificationError):
        execute(plan, client, sleep=Sleeps(), repeats=[record])


def test_a_create_finding_its_own_item_without_ambiguity_is_left_to_the_caller() -> None:
    # A never-loaded save that finds the record is redone as an update of the stored item by
    # Model.save(), so execute reports it (with the item) instead of taking it as done.
    plan = create_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    with pytest.raises(ConcurrentModificationError) as caught:
        execute(plan, FakeClient(canceled(failed(dict(record.item)), OK, OK)), sleep=Sleeps())
    assert caught.value.write is record
    assert caught.value.current == record.item


def test_resend_after_a_timeout_that_finds_another_item_is_an_error() -> None:
    client = FakeClient(timeout(), canceled(failed({**A1, "email": {"S": "other@x.io"}}), OK, OK))
    with pytest.raises(ConcurrentModificationError):
        execute(create_plan(), client, sleep=Sleeps())


def test_resend_whose_record_slot_shows_our_item_is_success_whatever_the_locks_say() -> None:
    # A transaction lands whole or not at all: our exact record in place proves the earlier
    # attempt landed, even if a lock slot fails now (a value it freed was taken since).
    plan = update_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    reasons = (failed(dict(record.item)), OK, failed(lock_item_of("UNIQ#EMAIL#a@x.io", HOLDER)))
    assert execute(plan, FakeClient(timeout(), canceled(*reasons)), sleep=Sleeps()) == {}


def test_resend_whose_only_failure_is_a_lock_slot_is_a_violation() -> None:
    # No record slot failed: the earlier attempt did not land, the lock is really taken.
    reasons = (OK, failed(lock_item_of("UNIQ#EMAIL#ada@x.io", HOLDER)), OK)
    with pytest.raises(UniqueViolation):
        execute(create_plan(), FakeClient(timeout(), canceled(*reasons)), sleep=Sleeps())


def test_resend_of_a_single_put_after_a_timeout_that_finds_its_own_item_is_success() -> None:
    plan = plain_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    error = client_error("ConditionalCheckFailedException", item=dict(record.item))
    client = FakeClient(ConnectionClosedError(endpoint_url="http://x"), error)
    assert execute(plan, client, sleep=Sleeps()) == {}


def test_server_errors_are_ambiguous_and_retried() -> None:
    plan = create_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    client = FakeClient(client_error("InternalServerError", 500, operation="TransactWriteItems"),
                        canceled(failed(dict(record.item)), OK, OK))
    assert execute(plan, client, sleep=Sleeps()) == {}
    assert len(set(client.tokens)) == 1


def test_network_errors_exhausting_retries_give_outcome_unknown() -> None:
    policy = no_retry_policy()
    sleeps = Sleeps()
    first = timeout()
    client = FakeClient(first, timeout(), timeout(), {})
    with pytest.raises(OutcomeUnknownError, match="may or may not have been applied") as caught:
        execute(create_plan(), client, policy=policy, sleep=sleeps)
    assert len(client.calls) == policy.max_network_retries + 1
    assert len(set(client.tokens)) == 1
    assert len(sleeps.delays) == policy.max_network_retries
    assert isinstance(caught.value.__cause__, ReadTimeoutError)


def test_unreachable_endpoint_exhausting_retries_is_unreachable_not_unknown() -> None:
    policy = no_retry_policy()
    client = FakeClient(*[EndpointConnectionError(endpoint_url="http://x")] * 3)
    with pytest.raises(UnreachableError, match="nothing was applied") as caught:
        execute(create_plan(), client, policy=policy, sleep=Sleeps())
    assert not isinstance(caught.value, OutcomeUnknownError)
    assert isinstance(caught.value.__cause__, EndpointConnectionError)
    assert len(client.calls) == 3


def test_one_timeout_among_refused_connections_makes_the_outcome_unknown() -> None:
    policy = no_retry_policy()
    client = FakeClient(EndpointConnectionError(endpoint_url="http://x"), timeout(),
                        EndpointConnectionError(endpoint_url="http://x"))
    with pytest.raises(OutcomeUnknownError):
        execute(create_plan(), client, policy=policy, sleep=Sleeps())
    assert len(client.calls) == 3


def test_refused_connection_is_not_ambiguous() -> None:
    # The request never reached the server, so finding "our" item afterwards proves nothing:
    # the create is reported (Model.save() then redoes it as an update of the stored item).
    plan = create_plan()
    record = plan.writes[0]
    assert isinstance(record, RecordPut)
    client = FakeClient(EndpointConnectionError(endpoint_url="http://x"),
                        canceled(failed(dict(record.item)), OK, OK))
    with pytest.raises(ConcurrentModificationError):
        execute(plan, client, sleep=Sleeps())


# --- helpers -------------------------------------------------------------------------------------


def test_same_item_compares_numbers_by_value() -> None:
    assert same_item({"n": {"N": "1.0"}, "m": {"M": {"x": {"N": "10"}}}},
                     {"n": {"N": "1"}, "m": {"M": {"x": {"N": "1E+1"}}}})
    assert not same_item({"n": {"N": "1"}}, {"n": {"N": "2"}})
    assert not same_item({"n": {"N": "1"}}, None)
    assert same_item(None, None)


def test_retry_delay_is_jittered_and_bounded() -> None:
    policy = RetryPolicy(base_delay=0.01, max_delay=0.05)
    random.seed(7)
    delays = [policy.delay(attempt) for attempt in range(1, 10) for _ in range(20)]
    assert all(0 <= d <= 0.05 for d in delays)
    assert all(0 <= policy.delay(1) <= 0.02 for _ in range(50))
    assert len(set(delays)) > 100
