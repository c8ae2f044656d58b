"""Read a table's stream shard by shard, and remember where each shard was left in the ledger.

The stream is found with DescribeTable (``LatestStreamArn``), its shards with DescribeStream
(paged), and each shard is read with GetShardIterator and GetRecords until GetRecords returns
no ``NextShardIterator`` (the shard is closed and read to its end) or no record (an open shard
read to where the writes are now). A child shard is read only once its parent is (DynamoDB keeps
a key's changes in order only along that lineage).

Each shard's position is a ledger item of the table itself,
``UNIQ#~STREAM#<consumer>#<stream label>#<shard id>`` (:data:`~dynaunique.migrations._ledger
.STREAM_PREFIX`), written after each page is judged: the sequence number of the last record
handled, and whether the shard is done. A restart resumes after it, so it neither misses a
record nor judges one twice — except the page it was judging when it stopped, which it judges
again (judging is a read; only its log events repeat). A checkpoint write is itself a change of
the table, so a page holding nothing but checkpoints writes none (it would feed itself).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import botocore.client
from pynamodb.connection import Connection

from dynaunique._lock.locks import untyped
from dynaunique._transport import regions as _regions
from dynaunique._transport.answers import Refused, error_for
from dynaunique._transport.connection import RetryPolicy, _meta_value, exchange, send
from dynaunique._transport.endpoint import region_in_url
from dynaunique._write.writes import now
from dynaunique.audit._tables import _in_region, _Table
from dynaunique.errors import ConfigurationError, DynauniqueError
from dynaunique.migrations._dynamo import (
    LEDGER_ATTR,
    ConditionFailed,
    MissingTableError,
    TableKeys,
    call,
)
from dynaunique.migrations._kinds import LedgerKind
from dynaunique.migrations._ledger import STREAM_PREFIX, ledger_key

from ._checker import BatchResult, Checker

_POLICY = RetryPolicy(max_conflict_retries=8, base_delay=0.05, max_delay=2.0)
#: Where a shard without a checkpoint starts: its oldest record, or only what comes next.
STARTS = {"trim-horizon": "TRIM_HORIZON", "latest": "LATEST"}


class StreamsError(DynauniqueError):
    """The stream could not be read (refused, or its records were trimmed before being read)."""


class _StreamsConnection(Connection):
    """PynamoDB's connection, talking to the DynamoDB Streams API instead (same settings,
    botocore's retries off: :func:`dynaunique._transport.connection.send` decides every resend)."""

    @property
    def client(self) -> Any:
        if self._client is None:
            config = botocore.client.Config(
                connect_timeout=self._connect_timeout_seconds,
                read_timeout=self._read_timeout_seconds,
                retries={"total_max_attempts": 1, "mode": "standard"})
            self._client = self.session.create_client(
                "dynamodbstreams", self.region, endpoint_url=self.host, config=config)
        return self._client

    def dispatch(self, operation_name: str, operation_kwargs: dict[str, Any]) -> Any:
        return self._make_api_call(operation_name, operation_kwargs)


def streams_connection(table: _Table, region: str | None = None) -> Connection:
    """A Streams API connection for ``table``'s models: their endpoint when it is not AWS's own
    DynamoDB endpoint (a local server serves both APIs), signed as their connection is (for
    ``region`` when given: that replica's stream)."""
    meta = table.models[0].Meta
    if region is not None:
        meta = _regions.in_region(meta, region)
    # As the models' own connection reads them: Meta first, then PynamoDB's settings file.
    host = _meta_value(meta, "host")
    if host is not None and region_in_url(host) is not None:
        host = None  # https://dynamodb.<region>.amazonaws.com: Streams has its own endpoint
    return _StreamsConnection(
        region=_meta_value(meta, "region"), host=host,
        connect_timeout_seconds=_meta_value(meta, "connect_timeout_seconds"),
        read_timeout_seconds=_meta_value(meta, "read_timeout_seconds"),
        aws_access_key_id=getattr(meta, "aws_access_key_id", None),
        aws_secret_access_key=getattr(meta, "aws_secret_access_key", None),
        aws_session_token=getattr(meta, "aws_session_token", None))


@attrs.frozen
class Position:
    """Where one shard was left: after ``sequence`` (None: nothing read yet), ``done`` when the
    shard was closed and read to its end."""

    shard: str
    sequence: str | None = None
    done: bool = False


class Checkpoints:
    """The shards' positions of one consumer of one stream, as ledger items of the table."""

    def __init__(self, table: _Table, consumer: str, label: str) -> None:
        if not consumer or "#" in consumer:
            raise ConfigurationError(f"consumer name {consumer!r} may not be empty or hold '#'")
        self.table = table
        self.consumer = consumer
        self.label = label
        self.keys = TableKeys(table.name, table.hash_attr, table.range_attr)

    def _key(self, shard: str) -> dict[str, Any]:
        return ledger_key(self.keys, self.consumer, STREAM_PREFIX, self.label, shard)

    def get(self, shard: str) -> Position | None:
        """The stored position of ``shard`` (strongly consistent), or None."""
        item = call(self.table.connection, "get_item", TableName=self.table.name,
                    Key=self._key(shard), ConsistentRead=True).get("Item")
        if item is None or LEDGER_ATTR not in item:
            return None
        data = untyped(item[LEDGER_ATTR])
        return Position(shard, data.get("sequence"), bool(data.get("done")))

    def save(self, position: Position, previous: Position | None) -> None:
        """Store ``position``, if the stored one is still ``previous`` (another consumer of
        the same name moving it is a mistake, not a race to win).

        :raises ConfigurationError: the stored position is not ``previous``.
        """
        ledger: dict[str, Any] = {
            "kind": {"S": LedgerKind.STREAM.value}, "consumer": {"S": self.consumer},
            "stream": {"S": self.label}, "shard": {"S": position.shard},
            "done": {"BOOL": position.done}, "updated": {"S": now()}}
        if position.sequence is not None:
            ledger["sequence"] = {"S": position.sequence}
        guard: dict[str, Any] = {"ExpressionAttributeNames": {"#l": LEDGER_ATTR,
                                                              "#s": "sequence"}}
        if previous is None or previous.sequence is None:
            guard["ConditionExpression"] = "attribute_not_exists(#l.#s)"
        else:
            guard["ConditionExpression"] = "#l.#s = :s"
            guard["ExpressionAttributeValues"] = {":s": {"S": previous.sequence}}
        try:
            call(self.table.connection, "put_item", TableName=self.table.name,
                 Item={**self._key(position.shard), LEDGER_ATTR: {"M": ledger}}, **guard)
        except ConditionFailed:
            raise ConfigurationError(
                f"the checkpoint of shard {position.shard} of consumer {self.consumer!r} moved "
                "under this one: another consumer of that name reads the stream (give each "
                "its own name)") from None


def _only_checkpoints(table: _Table, records: list[Mapping[str, Any]]) -> bool:
    prefix = STREAM_PREFIX
    for record in records:
        keys = record.get("dynamodb", {}).get("Keys", {})
        if not str(keys.get(table.hash_attr, {}).get("S", "")).startswith(prefix):
            return False
    return True


class Reader:
    """Reads ``table``'s stream for ``checker``, shard by shard, checkpointing in the ledger.

    ``region``: read that replica's stream (a global table), judge on what that replica holds
    and keep the checkpoints there, under a stream label that names the region.
    """

    def __init__(self, checker: Checker, table: _Table, *, start: str = "trim-horizon",
                 consumer: str = "watch", limit: int = 1000, max_pages: int = 100,
                 connection: Connection | None = None, region: str | None = None) -> None:
        if start not in STARTS:
            raise ConfigurationError(f"--from must be one of {', '.join(STARTS)}, not {start!r}")
        self.checker = checker
        self.region = region
        if region is not None:
            table = _in_region(table, region)
        self.table = table
        self.start = STARTS[start]
        self.limit = limit
        #: GetRecords pages read from one shard in one pass at most, so that a pass ends even
        #: while writes keep coming (the next pass goes on from there).
        self.max_pages = max_pages
        self.streams = connection if connection is not None else streams_connection(table,
                                                                                    region)
        self.arn, label = self._stream()
        if region is not None:
            label = f"{region}@{label}"
        self.checkpoints = Checkpoints(table, consumer, label)
        #: Per shard: the position in the ledger (as read or last written), the sequence number
        #: of the last record read (ahead of the ledger after a page of checkpoints only), and
        #: the open iterator.
        self._stored: dict[str, Position | None] = {}
        self._read: dict[str, str | None] = {}
        self._iterators: dict[str, str] = {}
        self._done: set[str] = set()

    def _send(self, operation: str, **params: Any) -> dict[str, Any]:
        return send(self.streams, operation, params, policy=_POLICY, error=StreamsError)

    @property
    def guard(self) -> Checker:
        """Deprecated: :attr:`checker`; removed in the release after next."""
        warnings.warn("Reader.guard is deprecated: use Reader.checker", DeprecationWarning,
                      stacklevel=2)
        return self.checker

    def _stream(self) -> tuple[str, str]:
        try:
            table = call(self.table.connection, "describe_table",
                         TableName=self.table.name)["Table"]
        except MissingTableError:
            if self.region is None:
                raise
            raise ConfigurationError(
                f"table {self.table.name!r} has no replica in {self.region}: --regions names "
                "the regions of a global table's replicas") from None
        spec = table.get("StreamSpecification") or {}
        arn = table.get("LatestStreamArn")
        if not spec.get("StreamEnabled") or not arn:
            raise ConfigurationError(
                f"table {self.table.name!r} has no stream: enable one with view type "
                "NEW_AND_OLD_IMAGES (deploy/cloudformation/dynaunique-table.yaml)")
        if spec.get("StreamViewType") != "NEW_AND_OLD_IMAGES":
            raise ConfigurationError(
                f"the stream of table {self.table.name!r} has view type "
                f"{spec.get('StreamViewType')}; the stream guard needs NEW_AND_OLD_IMAGES")
        return str(arn), str(table.get("LatestStreamLabel") or arn.rsplit("/", 1)[-1])

    def shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream (DescribeStream, page after page), parents first."""
        shards: list[dict[str, Any]] = []
        params: dict[str, Any] = {"StreamArn": self.arn}
        while True:
            description = self._send("DescribeStream", **params)["StreamDescription"]
            shards.extend(description.get("Shards", []))
            last = description.get("LastEvaluatedShardId")
            if not last:
                break
            params["ExclusiveStartShardId"] = last
        ids = {s["ShardId"] for s in shards}
        ordered: list[dict[str, Any]] = []
        placed: set[str] = set()
        while len(ordered) < len(shards):
            ready = [s for s in shards if s["ShardId"] not in placed and (
                s.get("ParentShardId") not in ids or s.get("ParentShardId") in placed)]
            if not ready:  # a cycle cannot happen; read the rest in DescribeStream's order
                ready = [s for s in shards if s["ShardId"] not in placed]
            for shard in ready:
                ordered.append(shard)
                placed.add(shard["ShardId"])
        return ordered

    def _position(self, shard: str) -> Position | None:
        if shard not in self._stored:
            self._stored[shard] = self.checkpoints.get(shard)
        return self._stored[shard]

    def _iterator(self, shard: dict[str, Any]) -> str | None:
        shard_id = shard["ShardId"]
        if shard_id in self._iterators:
            return self._iterators[shard_id]
        sequence = self._last_read(shard_id)
        params: dict[str, Any] = {"StreamArn": self.arn, "ShardId": shard_id}
        if sequence is not None:
            params.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=sequence)
        elif self.start == "LATEST" and "EndingSequenceNumber" in shard.get(
                "SequenceNumberRange", {}):
            return None  # a closed shard, and only what comes next was asked for
        else:
            params["ShardIteratorType"] = self.start
        return str(self._send("GetShardIterator", **params)["ShardIterator"])

    def _last_read(self, shard: str) -> str | None:
        if shard not in self._read:
            position = self._position(shard)
            self._read[shard] = position.sequence if position is not None else None
        return self._read[shard]

    def _checkpoint(self, position: Position) -> None:
        self.checkpoints.save(position, self._position(position.shard))
        self._stored[position.shard] = position
        self._read[position.shard] = position.sequence

    def read_shard(self, shard: dict[str, Any], on_batch: Callable[[BatchResult], None]) -> bool:
        """Read one shard from its position to its current end (at most ``max_pages`` pages);
        False when a record failed (the shard is left at the record before it, to be read
        again)."""
        shard_id = shard["ShardId"]
        pages = 0
        iterator = self._iterator(shard)
        if iterator is None:  # closed, and only what comes next was asked for: skipped
            self._checkpoint(Position(shard_id, None, done=True))
            self._done.add(shard_id)
            return True
        while iterator is not None:
            params = {"ShardIterator": iterator, "Limit": self.limit}
            answer = exchange(self.streams, "GetRecords", params, policy=_POLICY,
                              error=StreamsError)
            if isinstance(answer, Refused):
                if answer.code == "TrimmedDataAccessException":
                    raise StreamsError(
                        f"shard {shard_id}'s records after the checkpoint were trimmed (streams "
                        "keep 24 hours) before they were read: run dynaunique check to cover "
                        "the gap") from answer.cause
                if answer.code != "ExpiredIteratorException":
                    raise error_for(answer, "GetRecords", params, error=StreamsError)
                self._iterators.pop(shard_id, None)  # expired: start again from the position
                iterator = self._iterator(shard)
                continue
            page = answer.data
            records = list(page.get("Records", []))
            following = page.get("NextShardIterator")
            sequence = self._last_read(shard_id)
            if records:
                result = self.checker.judge(records, table=self.table.name, region=self.region)
                on_batch(result)
                if result.failed:
                    handled = [r["dynamodb"]["SequenceNumber"] for r in records]
                    first = handled.index(result.failed[0]) if result.failed[0] in handled else 0
                    if first > 0:
                        self._checkpoint(Position(shard_id, handled[first - 1]))
                    else:
                        self._read[shard_id] = sequence
                    self._iterators.pop(shard_id, None)
                    return False
                sequence = str(records[-1]["dynamodb"]["SequenceNumber"])
            if following is None:
                self._checkpoint(Position(shard_id, sequence, done=True))
                self._iterators.pop(shard_id, None)
                self._done.add(shard_id)
                return True
            if records and not _only_checkpoints(self.table, records):
                self._checkpoint(Position(shard_id, sequence))
            elif records:
                self._read[shard_id] = sequence
            self._iterators[shard_id] = iterator = str(following)
            pages += 1
            if not records or pages >= self.max_pages:
                return True
        return True

    def read_all(self, on_batch: Callable[[BatchResult], None]) -> bool:
        """One pass: every shard not done, parents before children, each to its current end.
        False when a record could not be handled."""
        ok = True
        shards = self.shards()
        ids = {s["ShardId"] for s in shards}
        for shard in shards:
            shard_id = shard["ShardId"]
            position = self._position(shard_id)
            if shard_id in self._done or (position is not None and position.done):
                self._done.add(shard_id)
                continue
            parent = shard.get("ParentShardId")
            if parent in ids and parent not in self._done:
                continue  # its parent is not read to its end yet (it failed this pass)
            ok = self.read_shard(shard, on_batch) and ok
        return ok

    def run(self, on_batch: Callable[[BatchResult], None], *, once: bool = False,
            poll_seconds: float = 2.0, max_seconds: float | None = None,
            sleep: Callable[[float], None] = time.sleep) -> bool:
        """Read pass after pass, ``poll_seconds`` apart, until ``max_seconds`` have passed
        (None: until interrupted); ``once``: one pass. False when a record failed."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        ok = True
        while True:
            ok = self.read_all(on_batch) and ok
            if once:
                return ok
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return ok
                sleep(min(poll_seconds, left))
            else:
                sleep(poll_seconds)
