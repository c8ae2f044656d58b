"""An AWS Lambda handler for a DynamoDB Streams event source mapping: the stream guard.

Each invocation receives a batch of the table's stream records (``event["Records"]``, each with
``eventName``, ``eventSourceARN`` and ``dynamodb``: ``Keys``, ``OldImage``, ``NewImage``,
``SequenceNumber``) and judges every lock value they touch on a consistent read
(:class:`dynaunique.streams.Checker`). Findings are log events of the ``dynaunique.streams``
logger (``stream_finding``; CloudWatch receives them once logging is configured, which the
handler does when the Lambda runtime has not: JSON lines at ``DYNAUNIQUE_LOG_LEVEL``). It
answers ``{"batchItemFailures": [{"itemIdentifier": <SequenceNumber>}, ...]}`` — the records it
could not handle (malformed, of a table no loaded model uses, or whose reads failed) — so that,
with ``FunctionResponseTypes: [ReportBatchItemFailures]`` on the mapping, Lambda retries from the
first failed record instead of the whole batch.

Configuration comes from the environment: ``DYNAUNIQUE_MODULE`` (the models module, required),
``DYNAUNIQUE_REPAIR`` (``1``/``true``: send the audit's guarded repair for what is found; off by
default), ``DYNAUNIQUE_REGIONS`` (a global table's regions, comma-separated: also read each lock
key in every one of them and report a value granted in two, ``stream_double_grant``),
``DYNAUNIQUE_LOG_LEVEL`` (default ``WARNING``) and ``AWS_ENDPOINT_URL_DYNAMODB``.
A warm container keeps its checker (models loaded once, hashed constraints confirmed so far).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from dynaunique.errors import ConfigurationError

from ._checker import Checker, streams_logger

_TRUE = ("1", "true", "yes", "on")
_checkers: dict[tuple[str, str | None, bool, str], Checker] = {}


class _JsonLines(logging.Formatter):
    """One JSON object a line: the event's fields and its message."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "dynaunique", {})
        return json.dumps({**fields, "level": record.levelname, "message": record.getMessage()},
                          default=str)


def _configure_logging() -> None:
    if streams_logger.handlers:  # configured by the application (or a warm container)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonLines())
    streams_logger.addHandler(handler)
    streams_logger.setLevel(os.environ.get("DYNAUNIQUE_LOG_LEVEL", "WARNING").upper())
    streams_logger.propagate = False


def checker() -> Checker:
    """The checker the environment configures (one per module, endpoint, repair setting and
    regions)."""
    module = os.environ.get("DYNAUNIQUE_MODULE")
    if not module:
        raise ConfigurationError("set DYNAUNIQUE_MODULE to the models module (a dotted path)")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or None
    repair = os.environ.get("DYNAUNIQUE_REPAIR", "").strip().lower() in _TRUE
    regions = os.environ.get("DYNAUNIQUE_REGIONS", "")
    key = (module, endpoint, repair, regions)
    if key not in _checkers:
        from dynaunique._user_models import open_models  # every tool's one model loader

        models, _ = open_models(module, endpoint)
        _checkers[key] = Checker(models, repair=repair,
                                 regions=[r.strip() for r in regions.split(",") if r.strip()])
    return _checkers[key]


def guard() -> Checker:
    """Deprecated: :func:`checker`; removed in the release after next."""
    warnings.warn("dynaunique.streams.aws_lambda.guard() is deprecated: use checker()",
                  DeprecationWarning, stacklevel=2)
    return checker()


def handler(event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
    """The Lambda entry point: a batch of stream records in, the failed ones out."""
    _configure_logging()
    records = event.get("Records")
    if not isinstance(records, list):
        raise ConfigurationError("not a DynamoDB Streams event: it has no Records list")
    found = checker()
    # On a global table (DYNAUNIQUE_REGIONS), a batch comes from one replica's stream: it is
    # judged on that replica, whatever region the models point at (often the home region).
    result = found.judge(records, region=_region_of(records) if found.regions else None)
    return {"batchItemFailures": [{"itemIdentifier": s} for s in result.failed]}


def _region_of(records: list[Any]) -> str | None:
    """The region of the stream a batch of records came from (each record's ``awsRegion``),
    None when they do not all name one."""
    regions = {r.get("awsRegion") for r in records if isinstance(r, Mapping)}
    return regions.pop() if len(regions) == 1 and None not in regions else None
