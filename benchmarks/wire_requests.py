"""The exact requests the write path sends, captured, to compare two versions of the library.

    python -m benchmarks.wire_requests OUT.json [--endpoint URL]

Runs a fixed sequence of writes on a local server (started for the run unless ``--endpoint``
names one): the benchmark's cases (a create, a change of a unique value and of a plain field on
the k = 2 model, ``atomic()`` of 10 items, creates with k = 1, 2, 5 and 10) and the other shapes
of the write path (a delete, a never-loaded delete of a record and of nothing, ``update(actions)``
plain and moving a lock, a never-loaded save of an existing record, a refused duplicate, an
``atomic()`` swap, an unconstrained model's writes on a table a constrained one shares, an
orphan lock taken over). Every HTTP request is recorded (operation and body bytes) where
botocore hands it to its HTTP session, then the tables' items at the end. The values that
change from run to run — the token and the times (a lock's ``created``, also in a takeover's
guard) — are replaced by placeholders; everything else is the bytes sent. Two captures are
equal when the write path sends the same requests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import botocore.httpsession

import dynaunique
from benchmarks.cases import k_model
from benchmarks.models import BenchAccount, fake_credentials, fresh_table
from dynaunique._transport import clients as _clients
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, local_dynamodb, use_endpoint

_TOKEN = re.compile(rb'"ClientRequestToken":\s*"[^"]*"')
_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00"')


def normalized(body: bytes) -> str:
    """``body`` with its token and its times replaced by placeholders."""
    body = _TOKEN.sub(b'"ClientRequestToken":"<token>"', body)
    body = _TIME.sub(b'"<time>"', body)
    return body.decode("utf-8")


@contextlib.contextmanager
def recording() -> Iterator[list[dict[str, Any]]]:
    """Every DynamoDB request sent in the block: ``{"operation", "body"}`` (normalized)."""
    sent: list[dict[str, Any]] = []
    original = botocore.httpsession.URLLib3Session.send

    def send(self: Any, request: Any) -> Any:
        target = request.headers.get("X-Amz-Target", b"")
        if isinstance(target, bytes):
            target = target.decode("ascii")
        body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
        sent.append({"operation": target.rsplit(".", 1)[-1], "body": normalized(body)})
        return original(self, request)

    botocore.httpsession.URLLib3Session.send = send
    try:
        yield sent
    finally:
        botocore.httpsession.URLLib3Session.send = original


def mixed_models() -> tuple[Any, Any]:
    """A constrained model and one without constraints sharing a table of their own (made when
    a capture runs, so that importing this module makes no other table a mixed one)."""
    meta = {"table_name": "wire_mixed", "region": "us-east-1", "host": "http://127.0.0.1:9"}
    account = type("WireAccount", (dynaunique.Model,), {
        "Meta": type("Meta", (), meta),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "email": UnicodeAttribute(unique=True)})
    note = type("WireNote", (dynaunique.Model,), {
        "Meta": type("Meta", (), meta),
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="NOTE"),
        "text": UnicodeAttribute(null=True)})
    return account, note


def steps() -> tuple[list[tuple[str, Callable[[], Any]]], list[Any]]:
    """The sequence of calls, each named, and the models they write besides BenchAccount."""
    ks: dict[int, Any] = {k: k_model(k) for k in (1, 2, 5, 10)}
    account, note_model = mixed_models()
    held: dict[str, Any] = {}

    def create() -> None:
        BenchAccount(pk="C#1", email="c1@Example.com", username="c1", name="n").save()

    def loaded() -> None:
        held["a"] = BenchAccount.get("C#1", "PROFILE")

    def change_unique() -> None:
        held["a"].email = "m1@example.com"
        held["a"].save()

    def change_plain() -> None:
        held["a"].name = "m"
        held["a"].save()

    def update_plain() -> None:
        held["a"].update([BenchAccount.name.set("p")])

    def update_unique() -> None:
        held["a"].update([BenchAccount.username.set("c1b")])

    def delete() -> None:
        held["a"].delete()

    def duplicate() -> None:
        BenchAccount(pk="D#1", email="d@x.io", username="d1").save()
        with contextlib.suppress(dynaunique.UniqueViolation):
            BenchAccount(pk="D#2", email="D@x.io", username="d2").save()

    def never_loaded_save() -> None:
        BenchAccount(pk="D#1", email="d@x.io", username="d1", name="again").save()

    def never_loaded_delete() -> None:
        BenchAccount(pk="D#1").delete()
        BenchAccount(pk="D#404").delete()

    def never_loaded_update() -> None:
        BenchAccount(pk="U#1", email="u@x.io", username="u1").save()
        BenchAccount(pk="U#1").update([BenchAccount.name.set("q")])
        BenchAccount(pk="U#1").update([BenchAccount.email.set("u2@x.io")])

    def atomic_10() -> None:
        with dynaunique.atomic():
            for r in range(5):
                ks[1](pk=f"A#{r}", name="n", u0=f"a{r}").save()

    def swap() -> None:
        first = ks[1].get("A#0", "PROFILE")
        second = ks[1].get("A#1", "PROFILE")
        with dynaunique.atomic():
            first.u0, second.u0 = second.u0, first.u0
            first.save()
            second.save()
            ks[1].get("A#2", "PROFILE").delete()

    def k_creates() -> None:
        for k, model in ks.items():
            model(pk=f"K#{k}", name="n", **{f"u{j}": f"k{j}" for j in range(k)}).save()

    def mixed() -> None:
        account(pk="M#1", email="m@x.io").save()
        note_model(pk="M#1", text="t").save()
        note = note_model.get("M#1", "NOTE")
        note.text = "u"
        note.save()
        note.delete()

    def orphan() -> None:
        BenchAccount(pk="O#1", email="o@x.io", username="o1").save()
        client = _clients.client_for(BenchAccount)
        client.delete_item(TableName="bench_accounts",
                           Key={"PK": {"S": "O#1"}, "SK": {"S": "PROFILE"}})
        BenchAccount(pk="O#2", email="o@x.io", username="o2").save()

    return [(f.__name__, f) for f in (
        create, loaded, change_unique, change_plain, update_plain, update_unique, delete,
        duplicate, never_loaded_save, never_loaded_delete, never_loaded_update, atomic_10, swap,
        k_creates, mixed, orphan)], [*ks.values(), account, note_model]


def capture(endpoint: str) -> dict[str, Any]:
    """Run :func:`steps` on ``endpoint`` (reset first): the requests of each, then the items."""
    fake_credentials()
    fresh_table(endpoint)
    named, models = steps()
    use_endpoint(endpoint, *models)
    create_tables(*models)
    out: dict[str, Any] = {"requests": {}, "items": {}}
    for name, call in named:
        with recording() as sent:
            call()
        out["requests"][name] = sent
    client = _clients.client_for(BenchAccount)
    for table in ["bench_accounts", *(m.Meta.table_name for m in models)]:
        items = client.scan(TableName=table, ConsistentRead=True)["Items"]
        rows = sorted(normalized(json.dumps(i, sort_keys=True).encode()) for i in items)
        out["items"][table] = rows
    return out


def main(argv: list[str] | None = None) -> None:
    """Write the capture to the file named."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wire_requests")
    parser.add_argument("out")
    parser.add_argument("--endpoint", default=None)
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        endpoint = args.endpoint or stack.enter_context(local_dynamodb())
        result = capture(endpoint)
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(result, out, indent=1, sort_keys=True)
    total = sum(len(v) for v in result["requests"].values())
    print(f"{total} requests in {len(result['requests'])} steps written to {args.out}")


if __name__ == "__main__":
    main()
