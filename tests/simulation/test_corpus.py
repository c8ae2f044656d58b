"""The in-memory model agrees with the local server on the recorded corpus (corpus.py): every
request a representative part of the test suite sent, replayed in order on an empty model per
test case, gets the answer the server gave when it was recorded — and the answer a fresh server
gives now.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import boto3
import pytest

from dynaunique.testing import local_dynamodb, reset_local_dynamodb
from dynaunique.testing._corpus import RECORD_ENV

from . import corpus


@pytest.fixture(scope="module")
def cases() -> list[corpus.Case]:
    return corpus.load()


def test_the_corpus_holds_every_kind_of_request_and_refusal(cases: list[corpus.Case]) -> None:
    kinds = Counter((s.operation, s.status) for c in cases for s in c.steps)
    operations = {operation for operation, _ in kinds}
    assert {"PutItem", "UpdateItem", "DeleteItem", "GetItem", "TransactWriteItems",
            "TransactGetItems", "BatchGetItem", "BatchWriteItem", "Query", "Scan",
            "CreateTable", "DescribeTable"} <= operations, operations
    codes = {json.loads(json.dumps(s.answer)).get("__type", "").rsplit("#", 1)[-1]
             for c in cases for s in c.steps if s.status != 200}
    assert {"TransactionCanceledException", "ConditionalCheckFailedException",
            "ResourceNotFoundException"} <= codes, codes
    assert len(cases) > 250 and sum(kinds.values()) > 4000


def test_the_model_answers_the_corpus_as_the_server_did(cases: list[corpus.Case]) -> None:
    found = [str(d) for case in cases if not case.controlled for d in corpus.replay(case)]
    assert found == [], "\n".join(found[:10])


def _sample(cases: list[corpus.Case]) -> list[corpus.Case]:
    """Every 6th case of at most 80 requests: 66 cases of 20 files, 770 requests."""
    return [c for c in cases if len(c.steps) <= 80][::6]


#: The default run replays a sample on a fresh server (770 requests); ``-m slow`` replays every
#: case (10,793 requests: 283 s at load average 12-16 on the shared 2-core machine).
@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_fresh_server_answers_the_corpus_as_the_model_does(
        dynaunique_db: str, cases: list[corpus.Case], whole: bool) -> None:
    server = corpus.http_server(dynaunique_db)
    found = []
    for case in cases if whole else _sample(cases):
        if case.controlled:
            continue
        reset_local_dynamodb(dynaunique_db)
        found += [str(d) for d in corpus.replay(case, server)]
    assert found == [], "\n".join(found[:10])


def test_the_comparison_tells_a_wrong_answer_from_a_right_one(cases: list[corpus.Case]) -> None:
    """A model that lost one item of a scan page disagrees (the check can fail)."""
    case = next(c for c in cases if any(s.operation == "Scan" and s.answer.get("Items")
                                        for s in c.steps))
    step = next(s for s in case.steps if s.operation == "Scan" and s.answer.get("Items"))
    wrong = json.loads(json.dumps(step.answer))
    wrong["Items"] = wrong["Items"][1:]
    broken = corpus.Case(case.name, [corpus.Step(s.operation, s.request, s.status,
                                                 wrong if s is step else s.answer)
                                     for s in case.steps])
    assert [d.operation for d in corpus.replay(broken)] == ["Scan"]


def test_the_server_records_each_request_and_its_answer(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RECORD_ENV, str(tmp_path))
    with local_dynamodb() as endpoint:
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_table(TableName="tbl", KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        client.put_item(TableName="tbl", Item={"k": {"S": "a"}})
        reset_local_dynamodb(endpoint)
        with pytest.raises(client.exceptions.ResourceNotFoundException):
            client.get_item(TableName="tbl", Key={"k": {"S": "a"}})
    (written,) = tmp_path.glob("server-*.jsonl")
    lines = [json.loads(line) for line in written.read_text().splitlines()]
    assert [sorted(line) for line in lines] == [
        ["case"], ["answer", "op", "request", "status"], ["answer", "op", "request", "status"],
        ["case"], ["answer", "op", "request", "status"]]
    assert lines[0]["case"].startswith("server ") and lines[3] == {"case": "reset"}
    assert [line.get("op") for line in lines] == [None, "CreateTable", "PutItem", None, "GetItem"]
    assert lines[2]["request"] == {"TableName": "tbl", "Item": {"k": {"S": "a"}}}
    assert (lines[2]["status"], lines[2]["answer"]) == (200, {})
    assert lines[4]["status"] == 400
    assert lines[4]["answer"]["__type"].endswith("#ResourceNotFoundException")
    with gzip.open(corpus.CORPUS, "rt") as stored:
        assert json.loads(stored.readline())["case"].startswith("server ")
