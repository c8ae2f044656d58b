"""A test's tables on the local server: its models pointed at the server, their tables created,
and a plain boto3 client to read (or break) them behind the library's back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynaunique.testing import create_tables, use_endpoint
from support.invariants import raw_client, scan_table

if TYPE_CHECKING:
    from pynamodb.models import Model


def point(endpoint: str, *models: type[Model]) -> None:
    """``use_endpoint`` for the models not yet pointed at ``endpoint``.

    Re-pointing drops a model's PynamoDB connection, and building a new one (a botocore client:
    ~25 ms of CPU with the shared loader) costs more than a short test's requests; the session's
    server URL never changes, so a model pointed at it once stays pointed. (dynaunique's own
    requests use a connection kept per settings and read ``Meta`` each time; a test that changes
    a model's ``Meta`` for PynamoDB's own connection calls ``use_endpoint`` itself.)
    """
    stale = [m for m in models if getattr(m.Meta, "host", None) != endpoint]
    if stale:
        use_endpoint(endpoint, *stale)


def raw_tables(endpoint: str, *models: type[Model]) -> Any:
    """Point ``models`` at ``endpoint`` (``point``: only those pointed elsewhere), create their
    tables and return a plain boto3 client (``support.invariants.raw_client``'s, one per
    endpoint: a client costs more to make than a test's requests; it is shared, so do not
    register event handlers on it)."""
    point(endpoint, *models)
    create_tables(*models)
    return raw_client(endpoint)


def scan_all(raw: Any, table: str) -> list[dict[str, Any]]:
    """Every item of ``table``, read strongly consistently, page after page."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = raw.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def raw_items(model: type[Model]) -> list[dict[str, Any]]:
    """Every item of the model's table, lock items included, read consistently (with a client
    of the suite's own, so that its reads are not counted on the model's clients)."""
    return scan_table(model.Meta.host, model.Meta.table_name)
