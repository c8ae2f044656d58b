"""The recorded corpus: every request a chosen part of the library's test suite sent to the local
server, with the server's answer, replayed against the in-memory model (and a fresh server).

Record it (about 5 minutes on the shared 2-core machine; it rewrites :data:`CORPUS`)::

    python -m tests.simulation.corpus record

which runs pytest over :data:`RECORDED_TESTS` with ``DYNAUNIQUE_RECORD_CORPUS`` set (the local
server then writes each request and answer, :mod:`dynaunique.testing._corpus`) and merges what
the servers wrote into one gzipped JSON-lines file. ``python -m tests.simulation.corpus check``
replays it against the model and prints every disagreement.

**Cases.** A case begins where a server started or was reset (the ``dynaunique_db`` fixture
names it after the test); its requests are replayed in the order the server applied them, on an
empty model. A case holding a control request (injected conflicts, a shorter token window) is
not replayed: its answers depend on the server's random choices or clock.

**Normalizations** (:func:`normalize`): what legitimately differs, and nothing else:

- ``ResponseMetadata`` (request ids, HTTP headers) and ``ConsumedCapacity`` are dropped: the
  server makes them up, the library only logs them; an empty ``ItemCollectionMetrics`` the
  server sends unasked is dropped.
- Error and cancellation-reason **messages** are replaced by ``"..."`` (their presence is
  kept): the library quotes them in its exceptions and never branches on them; codes, reasons'
  codes and items are compared exactly.
- Members of string, number and binary **sets** are sorted, and the items of a BatchGetItem's
  ``Responses`` are sorted: DynamoDB gives both in no defined order.
- **Table descriptions** (CreateTable, DescribeTable, DeleteTable) keep only the table name,
  status, key schema, attribute definitions and (DescribeTable) the item count: the rest (ARN,
  creation time, throughput, sizes) is the server's own.
- A Query or Scan page that stopped at ``Limit`` on the table's last item: DynamoDB (and the
  model) still return a ``LastEvaluatedKey``, the local server does not; the library reads the
  next, empty, page either way. The comparison accepts that one difference
  (:func:`same_page`), and only when the model's page holds exactly ``Limit`` items.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from .memory import MemoryDynamoDB, Unsupported

CORPUS = Path(__file__).with_name("corpus.jsonl.gz")

#: The test files whose requests make the corpus: the model, atomic(), async, mixed tables,
#: audit, migrations, every way of declaring a constraint.
RECORDED_TESTS = (
    "tests/integration/test_model.py", "tests/integration/test_atomic.py",
    "tests/integration/test_aio.py", "tests/integration/test_mixed_tables.py",
    "tests/integration/test_audit.py", "tests/integration/test_keys_and_versions.py",
    "tests/integration/declaring", "tests/integration/test_migrations_runners.py",
    "tests/integration/test_model_compat.py",
)

_TARGET = "DynamoDB_20120810."
_TABLE_OPERATIONS = ("CreateTable", "DescribeTable", "DeleteTable")


@attrs.define
class Step:
    """One recorded request and the server's answer (HTTP status and JSON body)."""

    operation: str
    request: dict[str, Any]
    status: int
    answer: dict[str, Any]


@attrs.define
class Case:
    """The requests of one test case, from an empty server."""

    name: str
    steps: list[Step] = attrs.field(factory=list)
    controlled: bool = False


def load(path: Path = CORPUS) -> list[Case]:
    """The corpus's cases that hold requests, in recorded order."""
    cases: list[Case] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            if "case" in entry:
                cases.append(Case(entry["case"]))
            elif "control" in entry:
                cases[-1].controlled = True
            else:
                cases[-1].steps.append(Step(entry["op"], entry["request"], entry["status"],
                                            entry["answer"]))
    return [c for c in cases if c.steps]


# --- answers in one comparable form --------------------------------------------------------------


def wire_answer(status: int, body: dict[str, Any]) -> dict[str, Any]:
    """A server's JSON answer as ``{"ok": body}`` or ``{"error": code, ...its fields}``."""
    if status == 200:
        return {"ok": body}
    out = {k: v for k, v in body.items() if k not in ("__type", "message", "Message")}
    return {"error": str(body.get("__type", "")).rsplit("#", 1)[-1], **out}


def model_answer(memory: MemoryDynamoDB, operation: str, request: dict[str, Any]) -> dict[str, Any]:
    """The model's answer in :func:`wire_answer`'s form (``Unsupported`` propagates)."""
    try:
        return {"ok": memory.handle(operation, request)}
    except Unsupported:
        raise
    except Exception as exc:
        response = getattr(exc, "response", None)
        if response is None:
            raise
        out = {k: v for k, v in response.items() if k not in ("Error", "ResponseMetadata")}
        return {"error": response["Error"]["Code"], **out}


def _sorted_sets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (sorted(v) if k in ("SS", "NS", "BS") and isinstance(v, list)
                    else _sorted_sets(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_sorted_sets(v) for v in value]
    return value


def normalize(operation: str, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with only what legitimately differs made equal (the module docstring)."""
    answer = _sorted_sets(json.loads(json.dumps(answer)))
    if "error" in answer:
        for reason in answer.get("CancellationReasons") or []:
            if "Message" in reason:
                reason["Message"] = "..."
        return answer
    body = {k: v for k, v in answer["ok"].items()
            if k not in ("ResponseMetadata", "ConsumedCapacity")
            and not (k == "ItemCollectionMetrics" and not v)}
    if operation in _TABLE_OPERATIONS:
        kept = ("TableName", "TableStatus", "KeySchema", "AttributeDefinitions") + (
            ("ItemCount",) if operation == "DescribeTable" else ())
        for field in ("Table", "TableDescription"):
            if field in body:
                body[field] = {k: v for k, v in body[field].items() if k in kept}
    if operation == "BatchGetItem":
        body["Responses"] = {t: sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
                             for t, items in body.get("Responses", {}).items()}
    return {"ok": body}


def same_page(operation: str, request: dict[str, Any], mine: dict[str, Any],
              server: dict[str, Any]) -> bool:
    """Whether the normalized answers agree (a page that stopped at ``Limit`` on the last item:
    with or without ``LastEvaluatedKey``)."""
    if mine == server:
        return True
    if operation not in ("Query", "Scan") or "ok" not in mine or "ok" not in server:
        return False
    page = dict(mine["ok"])
    last = page.pop("LastEvaluatedKey", None)
    return bool(last is not None and "LastEvaluatedKey" not in server["ok"]
                and page == server["ok"] and page.get("ScannedCount") == request.get("Limit"))


# --- replay --------------------------------------------------------------------------------------


@attrs.define
class Disagreement:
    case: str
    index: int
    operation: str
    request: dict[str, Any]
    model: Any
    server: Any

    def __str__(self) -> str:
        return (f"{self.case} #{self.index} {self.operation}\n  request: "
                f"{json.dumps(self.request)[:600]}\n  model:   {json.dumps(self.model)[:600]}"
                f"\n  server:  {json.dumps(self.server)[:600]}")


def replay(case: Case, server: Any = None) -> Iterator[Disagreement]:
    """Replay ``case`` on an empty model; compare with the recorded answers, or with the
    answers of ``server`` (a callable ``(operation, request) -> (status, body)``) if given."""
    memory = MemoryDynamoDB()
    for n, step in enumerate(case.steps):
        if server is None:
            expected = wire_answer(step.status, step.answer)
        else:
            expected = wire_answer(*server(step.operation, step.request))
        try:
            mine: Any = model_answer(memory, step.operation, step.request)
        except Unsupported as exc:
            yield Disagreement(case.name, n, step.operation, step.request, f"Unsupported: {exc}",
                               normalize(step.operation, expected))
            return   # the model's state is unknown from here on
        mine, expected = normalize(step.operation, mine), normalize(step.operation, expected)
        if not same_page(step.operation, step.request, mine, expected):
            yield Disagreement(case.name, n, step.operation, step.request, mine, expected)


def http_server(endpoint: str) -> Any:
    """``(operation, request) -> (status, body)`` over HTTP to a local server at ``endpoint``."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    credential = "Credential=testing/20240101/us-east-1/dynamodb/aws4_request"

    def send(operation: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        http = urllib.request.Request(endpoint, data=json.dumps(request).encode(), method="POST",
                                      headers={
            "X-Amz-Target": _TARGET + operation, "Content-Type": "application/x-amz-json-1.0",
            "Authorization": f"AWS4-HMAC-SHA256 {credential}, SignedHeaders=host, Signature=0"})
        try:
            with opener.open(http, timeout=30) as response:
                return int(response.status), json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return int(exc.code), json.loads(exc.read() or b"{}")

    return send


# --- recording -----------------------------------------------------------------------------------


def record(out: Path = CORPUS, tests: tuple[str, ...] = RECORDED_TESTS) -> int:
    """Run pytest over ``tests`` with the servers recording, and merge what they wrote."""
    with tempfile.TemporaryDirectory(prefix="dynaunique-corpus-") as directory:
        env = {**os.environ, "DYNAUNIQUE_RECORD_CORPUS": directory}
        status = subprocess.call([sys.executable, "-m", "pytest", "-q", "-n", "2",
                                  "-p", "no:cacheprovider", *tests], env=env)
        if status != 0:
            return status
        with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as merged:
            for part in sorted(Path(directory).glob("server-*.jsonl")):
                merged.write(part.read_text(encoding="utf-8"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.corpus")
    parser.add_argument("command", choices=("record", "check"))
    args = parser.parse_args(argv)
    if args.command == "record":
        return record()
    cases = load()
    found = [d for case in cases if not case.controlled for d in replay(case)]
    for disagreement in found:
        print(disagreement)
    steps = sum(len(c.steps) for c in cases)
    print(f"replayed {len(cases)} cases, {steps} requests, {len(found)} disagreements")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
