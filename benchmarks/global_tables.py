"""The cost of a home region: a save from the home region against a save from another region.

``python -m benchmarks.global_tables [--rtt-ms 80] [--saves 40]`` starts a local server, makes a
table global (us-east-1, eu-west-1; home us-east-1) and times, side by side in one run:

- ``home``: saves of a model in us-east-1 (each one TransactWriteItems, local);
- ``away``: saves of the same model in eu-west-1, which dynaunique sends to us-east-1; the
  inter-region round trip is injected on the client (a sleep of ``--rtt-ms`` before every request
  signed for us-east-1 while the away saves run), as a client in eu-west-1 would meet it;
- ``local read``: a plain ``get`` in eu-west-1 (stays local: no injected delay).

It prints the median of each and the difference: the added latency of a write from a non-home
region, which is one inter-region round trip per request the write sends (a save: one).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import boto3

from dynaunique import Model, normalizers
from dynaunique._transport import connection as _connection
from dynaunique._transport import regions as _regions
from dynaunique.attributes import UnicodeAttribute
from dynaunique.testing import create_tables, local_dynamodb, use_endpoint

EAST, WEST = "us-east-1", "eu-west-1"


def _model(region: str, endpoint: str) -> type[Model]:
    model = type("Account", (Model,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": "bench_global", "region": region,
                                  "home_region": EAST}),
        "pk": UnicodeAttribute(hash_key=True),
        "email": UnicodeAttribute(unique=True, normalize=normalizers.casefold),
    })
    use_endpoint(endpoint, model)
    return model


def measure(endpoint: str, rtt_ms: float, saves: int) -> dict[str, float]:
    """Median milliseconds of a home save, an away save and a local read, interleaved (one of
    each per round, so a busy machine slows all three alike)."""
    east, west = _model(EAST, endpoint), _model(WEST, endpoint)
    create_tables(east)
    boto3.client("dynamodb", endpoint_url=endpoint, region_name=EAST,
                 aws_access_key_id="testing", aws_secret_access_key="testing").update_table(
        TableName="bench_global", ReplicaUpdates=[{"Create": {"RegionName": WEST}}])
    _regions.forget()
    east(pk="warm-e", email="warm-e@x.io").save()
    west(pk="warm-w", email="warm-w@x.io").save()
    away_now = [False]

    def far(request: Any, **_: Any) -> None:
        if away_now[0] and f"/{EAST}/dynamodb/" in str(request.headers.get("Authorization")):
            time.sleep(rtt_ms / 1000)

    calls: dict[str, Callable[[int], Any]] = {
        "home": lambda n: east(pk=f"E{n}", email=f"e{n}@x.io").save(),
        "away": lambda n: west(pk=f"W{n}", email=f"w{n}@x.io").save(),
        "local read": lambda n: west.get("warm-w"),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    client = _connection.sending_for(west)[0].client   # the home region's connection
    client.meta.events.register_first("before-send.dynamodb", far)
    try:
        for n in range(saves):
            for name, call in calls.items():
                away_now[0] = name == "away"
                start = time.perf_counter()
                call(n)
                times[name].append((time.perf_counter() - start) * 1000)
    finally:
        client.meta.events.unregister("before-send.dynamodb", far)
    result = {name: statistics.median(values) for name, values in times.items()}
    result["added"] = result["away"] - result["home"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rtt-ms", type=float, default=80.0)
    parser.add_argument("--saves", type=int, default=40)
    args = parser.parse_args(argv)
    with local_dynamodb() as endpoint:
        result = measure(endpoint, args.rtt_ms, args.saves)
    print(f"injected inter-region round trip: {args.rtt_ms:.0f} ms, {args.saves} saves each")
    for name, value in result.items():
        print(f"{name:>10}: {value:7.1f} ms (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
