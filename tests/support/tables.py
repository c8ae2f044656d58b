"""A test's tables on the local server: its models pointed at the server, their tables created,
and a plain boto3 client to read (or break) them behind the library's back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynaunique.testing import create_tables, use_endpoint
from support.invariants import raw_client, scan_table

if TYPE_CHECKING:
    from pynamodb.models import Model


def raw_tables(endpoint: str, *models: type[Model]) -> Any:
    """Point ``models`` at ``endpoint``, create their tables and return a plain boto3 client
    (``support.invariants.raw_client``'s, one per endpoint: a client costs more to make than a
    test's requests; it is shared, so do not register event handlers on it)."""
    use_endpoint(endpoint, *models)
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
