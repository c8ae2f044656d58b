"""``python -m benchmarks.wire_requests``: the write path's exact requests, captured to diff two
versions of the library (issue 39). This checks that the capture records what was sent — every
request, its body bytes with only the token and the times replaced — never that it is short."""

from __future__ import annotations

import json
import re

from benchmarks import wire_requests


def test_the_capture_records_each_request_with_its_body(dynaunique_db: str) -> None:
    captured = wire_requests.capture(dynaunique_db)
    requests = captured["requests"]
    assert [r["operation"] for r in requests["create"]] == ["TransactWriteItems"]
    body = json.loads(requests["create"][0]["body"])
    # The record put and one lock put per unique value (k = 2), the lock times replaced.
    assert [next(iter(slot)) for slot in body["TransactItems"]] == ["Put", "Put", "Put"]
    assert body["ClientRequestToken"] == "<token>"
    assert {slot["Put"]["Item"]["created"]["S"] for slot in body["TransactItems"][1:]} == {
        "<time>"}
    # A never-loaded delete reads first; one of nothing sends nothing after its read.
    assert [r["operation"] for r in requests["never_loaded_delete"]] == [
        "GetItem", "TransactWriteItems", "GetItem"]
    # The orphan lock met is taken over in the write's own transaction (a ConditionCheck).
    last = json.loads(requests["orphan"][-1]["body"])
    assert "ConditionCheck" in last["TransactItems"][-1]
    # The items left: the capture ends with them, normalized the same way.
    assert any('"UNIQ#EMAIL#o@x.io"' in row for row in captured["items"]["bench_accounts"])
    assert not any(re.search(r"\d{4}-\d\d-\d\dT", row)
                   for rows in captured["items"].values() for row in rows)
    # The unconstrained model's write on the shared table is guarded off the other's locks.
    note_put = json.loads(requests["mixed"][1]["body"])
    assert note_put["ConditionExpression"] == "attribute_not_exists(#g0)"
    assert note_put["ExpressionAttributeNames"] == {"#g0": "email"}
