"""How fast ``dynaunique ui`` pages through a big table: 20,000 locks on the embedded server.

    python -m benchmarks.ui [--records 10000] [--page-size 50] [--endpoint URL]

Seeds ``--records`` BenchAccount records (two unique values each: 2 locks per record, 20,000 by
default) with raw BatchWriteItem, then measures, side by side in one run:

1. :func:`dynaunique.audit.lock_page` as the page calls it (``max_seconds=PAGE_SECONDS``),
   every page of the whole listing, one after the other;
2. the lock browser over HTTP — the real app served by uvicorn on 127.0.0.1, ``GET /locks``
   with the next-page cursor, rendering included — for pages spread over the table;
3. a sparse search (a value prefix only one lock matches), the slowest kind of page: up to
   ``max_requests`` Scan requests of growing size;
4. for contrast, :func:`dynaunique.audit.list_locks`, which loads the whole listing.

The claim checked: every page under one second. The local server is moto: each Scan request
sorts the whole table, so a page's time grows with the table, unlike DynamoDB's.
``--endpoint`` names a server to use instead — it is reset, so never point it at anything that
matters.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python benchmarks/ui.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.models import TABLE, BenchAccount, fake_credentials, fresh_table, point_at
from dynaunique import audit
from dynaunique._lock.locks import lock_item
from dynaunique.testing import local_dynamodb
from dynaunique.ui._app import PAGE_SECONDS

MODELS = [BenchAccount]
KEYS = ("PK", "SK")


def seed(client: Any, records: int) -> None:
    """``records`` accounts and their two locks each, written raw (25 items per request)."""
    created = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    items: list[dict[str, Any]] = []
    for i in range(records):
        owner = {"PK": {"S": f"ACCT#{i:06}"}, "SK": {"S": "PROFILE"}}
        email, username = f"user{i:06}@example.com", f"user{i:06}"
        items.append({**owner, "email": {"S": email}, "username": {"S": username}})
        for name, value in (("EMAIL", email), ("USERNAME", username)):
            items.append(lock_item(key_attributes=KEYS, lock_key_value=f"UNIQ#{name}#{value}",
                                   owner=owner, model="BenchAccount", constraint=name,
                                   value=value, hashed=False, created=created))
    for start in range(0, len(items), 25):
        pending = {TABLE: [{"PutRequest": {"Item": item}} for item in items[start:start + 25]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems")


def summary(seconds: Sequence[float]) -> str:
    """``n pages: min / median / p95 / max`` in milliseconds."""
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (f"{len(ordered)} pages: min {ordered[0] * 1000:.0f} ms, median "
            f"{statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max "
            f"{ordered[-1] * 1000:.0f} ms")


@contextmanager
def served_app() -> Iterator[tuple[str, str]]:
    """The ui app on 127.0.0.1 (a free port) in a thread: (base URL, access token)."""
    import socket

    import uvicorn

    from dynaunique.ui import UIConfig, create_app

    config = UIConfig(tuple(MODELS), module="benchmarks.models", endpoint="local")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning",
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", config.token
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def fetch(base: str, token: str, path: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
    with opener.open(request, timeout=60) as response:
        assert response.status == 200, response.status
        return str(response.read().decode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000,
                        help="records to seed; each holds 2 locks (default 10,000 → 20,000)")
    parser.add_argument("--page-size", type=int, default=50, help="locks per page (the ui's "
                        "default, 50)")
    parser.add_argument("--http-pages", type=int, default=20,
                        help="pages fetched over HTTP, spread over the table")
    parser.add_argument("--endpoint", help="a server to use (it is reset) instead of starting one")
    args = parser.parse_args(argv)
    fake_credentials()
    with ExitStack() as stack:
        endpoint = args.endpoint or stack.enter_context(local_dynamodb())
        fresh_table(endpoint)
        client = point_at(endpoint)
        began = time.perf_counter()
        seed(client, args.records)
        print(f"seeded {args.records} records, {2 * args.records} locks "
              f"({3 * args.records} items) in {time.perf_counter() - began:.1f} s")

        # 1. Every page of the listing through audit.lock_page.
        times: list[float] = []
        requests: list[int] = []
        cursors: list[str | None] = [None]
        shown = 0
        cursor = None
        while True:
            began = time.perf_counter()
            page = audit.lock_page(MODELS, cursor=cursor, limit=args.page_size,
                                   max_seconds=PAGE_SECONDS)
            times.append(time.perf_counter() - began)
            requests.append(page.cost.count("Scan"))
            shown += len(page.locks)
            cursor = page.next_cursor
            if cursor is None:
                break
            cursors.append(cursor)
        assert shown == 2 * args.records, shown
        spread = ", ".join(f"{requests.count(n)} pages with {n}" for n in sorted(set(requests)))
        print(f"lock_page, {args.page_size} locks a page, the whole listing ({shown} locks): "
              f"{summary(times)}; Scan requests per page: {spread}")
        slowest = max(times)
        step = max(1, len(cursors) // args.http_pages)
        sample = cursors[::step][:args.http_pages]

        # The server's own floor: one bare Scan request of a page's size at the same places.
        floor: list[float] = []
        for cursor in sample:
            start = audit._decode_cursor(cursor)[1] if cursor else None
            began = time.perf_counter()
            client.scan(TableName=TABLE, Limit=args.page_size,
                        **({"ExclusiveStartKey": start} if start else {}))
            floor.append(time.perf_counter() - began)
        print(f"one bare boto3 Scan (Limit={args.page_size}) at the same places, the server's "
              f"floor: {summary(floor)}")

        # 2. The page over HTTP, rendering included, at cursors spread over the table.
        with served_app() as (base, token):
            http: list[float] = []
            for cursor in sample:
                query = {"limit": str(args.page_size), **({"cursor": cursor} if cursor else {})}
                began = time.perf_counter()
                body = fetch(base, token, "/locks?" + urllib.parse.urlencode(query))
                http.append(time.perf_counter() - began)
                # Records sort before locks on the local server: early pages hold fewer.
                assert len(re.findall(r'<a class="owner"', body)) <= args.page_size
            print(f"GET /locks over HTTP (render included), {args.page_size} a page: "
                  f"{summary(http)}")
            slowest = max(slowest, *http)

            # 3. A sparse search: one lock matches a prefix, every item is scanned for it.
            target = f"user{args.records - 1:06}"
            sparse: list[float] = []
            cursor = None
            matched = 0
            while True:
                query = {"constraint": "EMAIL", "prefix": target, "limit": str(args.page_size),
                         **({"cursor": cursor} if cursor else {})}
                began = time.perf_counter()
                body = fetch(base, token, "/locks?" + urllib.parse.urlencode(query))
                sparse.append(time.perf_counter() - began)
                matched += len(re.findall(r'<a class="owner"', body))
                found = re.search(r'href="/locks\?[^"]*cursor=([^"&]+)"[^>]*id="next"', body)
                if found is None:
                    break
                cursor = urllib.parse.unquote_plus(found.group(1))
            assert matched == 1, matched
            print(f"GET /locks, EMAIL values starting {target!r} (1 match among "
                  f"{args.records}): {summary(sparse)}")
            slowest = max(slowest, *sparse)

        # 4. For contrast: the whole listing at once.
        began = time.perf_counter()
        listing = audit.list_locks(MODELS)
        print(f"list_locks, the whole listing at once ({len(listing.locks)} locks): "
              f"{time.perf_counter() - began:.2f} s ({listing.cost.describe()})")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (1, 5, 15 min) at the end")
    verdict = "under" if slowest < 1.0 else "NOT under"
    # A page costs what the server's Scan costs (see the floor): on moto every Scan request
    # sorts the whole table in Python, so the time tracks the table size and the machine's load.
    print(f"slowest page: {slowest * 1000:.0f} ms — {verdict} one second")
    return 0 if slowest < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
