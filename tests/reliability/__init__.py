"""The reliability suite: concurrent soak, injected network faults, hostile input, lock ownership.

Each test ends with a full invariant check (``tests/support/invariants.py``): every record holds
exactly the locks its values require, and no lock exists without such a record.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Any

from support.tables import point

if TYPE_CHECKING:
    from dynaunique import Model

__all__ = ["fresh_tables", "point"]  # point: support.tables', kept here for the suite's imports


#: model → the table requests ``create_tables`` sent for it (CreateTable, and UpdateTimeToLive
#: for a model with a TTL attribute), as botocore's parameters, recorded the first time.
_TABLE_CALLS: dict[type[Model], list[tuple[str, dict[str, Any]]]] = {}
_TABLE_OPERATIONS = {"CreateTable": "create_table", "UpdateTimeToLive": "update_time_to_live"}


def fresh_tables(endpoint: str, *models: type[Model]) -> None:
    """``create_tables(*models)``, cheaper: meant for a server just reset (``dynaunique_db``).

    The first time a model's table is made in this process, ``create_tables`` makes it and the
    requests it sends are recorded; later, the same CreateTable (and UpdateTimeToLive) is sent
    straight to ``endpoint`` (the server, not the fault proxy a model may point at) with one
    request a table, instead of ``create_tables``'s existence check, create and wait (three
    requests, the first an error: about 25 ms of CPU a table in the test and as much in the
    server, measured, a third of a short test). A table that exists is left as it is, as
    ``create_tables`` leaves it.
    """
    from support.invariants import raw_client

    seen: set[str] = set()
    for model in models:
        table = model.Meta.table_name
        if table in seen:
            continue
        seen.add(table)
        calls = _TABLE_CALLS.get(model)
        if calls is None:
            _create_recorded(model)
            continue
        client = raw_client(endpoint)
        with contextlib.suppress(client.exceptions.ResourceInUseException):
            client.create_table(**calls[0][1])
        for name, params in calls[1:]:
            getattr(client, _TABLE_OPERATIONS[name])(**params)


def _create_recorded(model: type[Model]) -> None:
    """``create_tables(model)``, remembering the table requests it sent."""
    from support.recorders import PARAMS, listening

    from dynaunique.testing import create_tables

    sent: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in _TABLE_OPERATIONS:
            sent.append((model.name, copy.deepcopy(dict(params))))

    with listening([model._get_connection().connection.client], record, event=PARAMS):
        create_tables(model)
    if sent and sent[0][0] == "CreateTable":
        _TABLE_CALLS[model] = sent
