"""The in-memory DynamoDB agrees with the local server on what the library sends.

A handful of library calls (a create, a violation, a unique change, a stale copy's save, a
lookup, a never-loaded save of an existing record, a never-loaded delete, an update of the
unique field) are recorded as the library sent them; the server is emptied, and the corpus —
plus resends of recorded transactions (a repeat with its token, the same token on another
request, a create of an existing record) and of a recorded single write whose guard no longer
holds — is replayed against both, one request at a time: every answer must be the same
(consumed capacity and request metadata aside).
"""

from __future__ import annotations

import copy
from typing import Any

import boto3
import botocore.exceptions
import pytest
from botocore import xform_name
from support.recorders import Wire

from dynaunique._connection import client_for
from dynaunique.errors import ConcurrentModificationError, UniqueViolation
from dynaunique.testing import create_tables, reset_local_dynamodb, use_endpoint

from .explore import simulation
from .memory import MemoryDynamoDB, Unsupported
from .world import TABLE, SimAccount, new_memory

_DROPPED = ("ResponseMetadata", "ConsumedCapacity")


def _answer(call: Any) -> dict[str, Any]:
    try:
        response = call()
    except botocore.exceptions.ClientError as exc:
        response = dict(exc.response)
        response["Error"] = {"Code": response["Error"]["Code"]}
        for reason in response.get("CancellationReasons") or []:
            reason.pop("Message", None)
        return {k: v for k, v in response.items()
                if k not in _DROPPED and k not in ("message", "Message")}
    # moto answers an empty ItemCollectionMetrics nobody asked for; the library never reads it.
    return {k: v for k, v in response.items()
            if k not in _DROPPED and not (k == "ItemCollectionMetrics" and not v)}


def _library_calls() -> None:
    first = SimAccount(pk="R0", email="v0")
    first.save()                                              # create: record + lock
    with pytest.raises(UniqueViolation):
        SimAccount(pk="R1", email="v0").save()                 # violation
    stale = SimAccount.get("R0", "PROFILE", consistent_read=True)
    first.email = "v1"
    first.save()                                              # unique change
    stale.email = "v2"
    with pytest.raises(ConcurrentModificationError):
        stale.save()                                          # a stale copy is refused
    assert SimAccount.get_by_unique("email", "v1").pk == "R0"  # lookup: lock, then record
    SimAccount(pk="R0", email="v1").save()                    # never-loaded save, adopted
    first.update(actions=[SimAccount.email.set("v2")])        # update of the unique field
    SimAccount(pk="R0").delete()                              # never-loaded delete


def _corpus(wire: Wire) -> list[tuple[str, dict[str, Any]]]:
    calls = [(op, params) for op, params in wire.calls if op != "DescribeTable"]
    transactions = [p for op, p in calls if op == "TransactWriteItems"]
    singles = [p for op, p in calls if op in ("PutItem", "UpdateItem", "DeleteItem")]
    assert transactions and singles, [op for op, _ in calls]
    create = copy.deepcopy(transactions[0])
    create["ClientRequestToken"] = "corpus-recreate"
    mismatch = copy.deepcopy(transactions[-1])
    mismatch["TransactItems"] = mismatch["TransactItems"][:1]
    extra: list[tuple[str, dict[str, Any]]] = [
        ("TransactWriteItems", copy.deepcopy(transactions[-1])),   # a repeat of its token
        ("TransactWriteItems", mismatch),                            # its token, another body
        ("TransactWriteItems", copy.deepcopy(transactions[0])),     # create again (R0 gone)
        ("TransactWriteItems", create),                              # create of an existing R0
    ]
    single_op = next(op for op, p in calls if p is singles[0])
    extra.append((single_op, copy.deepcopy(singles[0])))         # its guard no longer holds
    return calls + extra


def test_memory_answers_the_recorded_corpus_as_the_server_does(dynaunique_db: str) -> None:
    use_endpoint(dynaunique_db, SimAccount)
    create_tables(SimAccount)
    wire = Wire()
    wire.hook(client_for(SimAccount.Meta))
    try:
        with simulation():
            _library_calls()
    finally:
        wire.unhook()
    corpus = _corpus(wire)
    operations = {op for op, _ in corpus}
    assert {"GetItem", "PutItem", "TransactWriteItems"} <= operations, operations

    reset_local_dynamodb(dynaunique_db)
    create_tables(SimAccount)
    raw = boto3.client("dynamodb", endpoint_url=dynaunique_db, region_name="us-east-1")
    memory = new_memory()
    codes = set()
    for n, (operation, params) in enumerate(corpus):
        call = getattr(raw, xform_name(operation))
        server = _answer(lambda call=call, params=params: call(**copy.deepcopy(params)))
        mine = _answer(lambda op=operation, params=params: memory.handle(op, params))
        assert mine == server, (n, operation, params)
        codes.add(server.get("Error", {}).get("Code"))
    # The corpus exercises refusals of every kind the simulation relies on, not just successes.
    assert {"TransactionCanceledException", "ConditionalCheckFailedException",
            "IdempotentParameterMismatchException", None} <= codes, codes


def _memory() -> MemoryDynamoDB:
    return MemoryDynamoDB({TABLE: ("PK", "SK")})


def test_unsupported_expressions_are_refused_loudly() -> None:
    memory = _memory()
    key = {"PK": {"S": "R0"}, "SK": {"S": "PROFILE"}}
    with pytest.raises(Unsupported, match="ends_with"):
        memory.handle("PutItem", {"TableName": TABLE, "Item": key,
                                  "ConditionExpression": "ends_with(#a, :v) = :v",
                                  "ExpressionAttributeNames": {"#a": "PK"},
                                  "ExpressionAttributeValues": {":v": {"S": "R"}}})
    with pytest.raises(Unsupported, match="UPDATED_NEW"):
        memory.handle("UpdateItem", {"TableName": TABLE, "Key": key,
                                     "UpdateExpression": "ADD #n :v", "ReturnValues": "UPDATED_NEW",
                                     "ExpressionAttributeNames": {"#n": "n"},
                                     "ExpressionAttributeValues": {":v": {"N": "1"}}})
    with pytest.raises(Unsupported, match="ExecuteStatement"):
        memory.handle("ExecuteStatement", {"Statement": "SELECT * FROM t"})
    assert memory.items[TABLE] == {}


def test_a_transaction_applies_all_or_nothing_with_positional_reasons() -> None:
    memory = _memory()
    r0 = {"PK": {"S": "R0"}, "SK": {"S": "PROFILE"}, "email": {"S": "a"}}
    memory.handle("PutItem", {"TableName": TABLE, "Item": r0})
    absent = {"ConditionExpression": "attribute_not_exists(#k)",
              "ExpressionAttributeNames": {"#k": "PK"},
              "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    r1 = {"PK": {"S": "R1"}, "SK": {"S": "PROFILE"}}
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        memory.handle("TransactWriteItems", {"TransactItems": [
            {"Put": {"TableName": TABLE, "Item": r1, **absent}},
            {"Put": {"TableName": TABLE, "Item": r0, **absent}},
        ], "ClientRequestToken": "t1"})
    response = refused.value.response
    assert response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in response["CancellationReasons"]] == ["None",
                                                                     "ConditionalCheckFailed"]
    assert response["CancellationReasons"][1]["Item"] == r0
    assert memory.get(TABLE, r1) is None   # nothing of the cancelled transaction applied
    assert "t1" not in memory.tokens       # a cancelled transaction does not use its token up
