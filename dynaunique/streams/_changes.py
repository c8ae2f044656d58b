"""A stream record as a :class:`Change`, and the lock keys a change makes worth re-checking.

No I/O. A stream record says what one item was and became (``OldImage``/``NewImage``); it says
nothing about the other items of its transaction, which arrive as separate records, possibly in
another batch or shard, interleaved with other transactions'. So a change is never judged: it
only names *suspects* — the lock keys its images require or are, with the records to read with
each — and the guard judges each suspect on one consistent read of what is stored now
(:func:`dynaunique.audit._judge._recheck`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dynaunique._lock.items import key_id, key_of, owner_key
from dynaunique._lock.locks import TypedKey
from dynaunique.audit._stored import _interpret, _is_lock_item, _lock_info
from dynaunique.audit._tables import _Table
from dynaunique.errors import DynauniqueError

#: The ``eventName`` of a stream record.
EVENTS = ("INSERT", "MODIFY", "REMOVE")


class StreamRecordError(DynauniqueError):
    """A stream record is not one DynamoDB delivers (no keys, an unknown event, no images).

    The guard reports the record as failed (the Lambda handler lists it in
    ``batchItemFailures``); it never guesses what the record meant.
    """


@attrs.frozen
class Change:
    """One stream record: what one item of ``table`` was and became."""

    #: ``INSERT``, ``MODIFY`` or ``REMOVE``.
    event: str
    #: The record's ``SequenceNumber`` (what Lambda's ``batchItemFailures`` names).
    sequence: str
    table: str
    #: The item's primary key, typed.
    keys: TypedKey
    #: The item before (None for an INSERT) and after (None for a REMOVE) the write.
    old: dict[str, Any] | None = attrs.field(repr=False)
    new: dict[str, Any] | None = attrs.field(repr=False)


def table_of_arn(arn: str) -> str:
    """The table name in a stream or table ARN (``arn:aws:dynamodb:…:table/NAME/stream/…``)."""
    _, _, resource = arn.partition(":table/")
    name = resource.split("/", 1)[0]
    if not name:
        raise StreamRecordError(f"not a DynamoDB table or stream ARN: {arn!r}")
    return name


def _binary(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StreamRecordError(f"a binary value is not base64: {value!r}") from exc


def _typed(value: Any) -> Any:
    """One attribute value as botocore hands it over: Lambda's JSON carries binaries as base64
    text (``{"B": "AAE="}``), GetRecords as bytes; both become bytes."""
    if not isinstance(value, Mapping) or len(value) != 1:
        raise StreamRecordError(f"not a DynamoDB attribute value: {value!r}")
    (kind, raw), = value.items()
    if (kind == "M" and not isinstance(raw, Mapping)) or (
            kind in ("BS", "L") and not isinstance(raw, list)):
        raise StreamRecordError(f"not a DynamoDB attribute value: {value!r}")
    if kind == "B":
        return {"B": _binary(raw)}
    if kind == "BS":
        return {"BS": [_binary(v) for v in raw]}
    if kind == "M":
        return {"M": {name: _typed(v) for name, v in raw.items()}}
    if kind == "L":
        return {"L": [_typed(v) for v in raw]}
    return {kind: raw}


def _image(data: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    image = data.get(name)
    if image is None:
        return None
    if not isinstance(image, Mapping):
        raise StreamRecordError(f"the record's {name} is not a map")
    return {attr: _typed(value) for attr, value in image.items()}


def change_of(record: Mapping[str, Any], table: str | None = None) -> Change:
    """A stream record (as GetRecords returns it, or as Lambda delivers it in ``Records``) as a
    :class:`Change`. ``table``: the table it was read from (Lambda's records name it in
    ``eventSourceARN`` instead).

    :raises StreamRecordError: the record is not one DynamoDB delivers, or it carries no image
        where its event has one (the stream's view type must be ``NEW_AND_OLD_IMAGES``).
    """
    if not isinstance(record, Mapping):  # Lambda's JSON may hold "x", null or 5 as a record
        raise StreamRecordError(f"not a DynamoDB stream record: {record!r}")
    data = record.get("dynamodb")
    event = record.get("eventName")
    if not isinstance(data, Mapping) or event not in EVENTS:
        raise StreamRecordError(f"not a DynamoDB stream record (eventName {event!r})")
    sequence = data.get("SequenceNumber")
    keys = data.get("Keys")
    if not isinstance(sequence, str) or not isinstance(keys, Mapping) or not keys:
        raise StreamRecordError("a stream record without SequenceNumber or Keys")
    if table is None:
        arn = record.get("eventSourceARN")
        if not isinstance(arn, str):
            raise StreamRecordError(f"stream record {sequence} names no eventSourceARN")
        table = table_of_arn(arn)
    old, new = _image(data, "OldImage"), _image(data, "NewImage")
    if (event != "INSERT" and old is None) or (event != "REMOVE" and new is None):
        raise StreamRecordError(
            f"stream record {sequence} ({event}) lacks its images: the stream's view type "
            "must be NEW_AND_OLD_IMAGES")
    return Change(str(event), sequence, table, {k: _typed(v) for k, v in keys.items()}, old,
                  new)


@attrs.define
class Suspects:
    """What some changes make worth re-reading: lock key → the records to read with it, and
    records whose locks could not be computed from an image (re-read on their own)."""

    locks: dict[str, dict[Any, TypedKey]] = attrs.field(factory=dict)
    unreadable: dict[Any, TypedKey] = attrs.field(factory=dict)

    def add_lock(self, key: str, records: Sequence[TypedKey]) -> None:
        """Re-check lock ``key`` with ``records`` (and whatever was asked before)."""
        wanted = self.locks.setdefault(key, {})
        for record in records:
            wanted.setdefault(key_id(record), record)

    def merge(self, other: Suspects) -> None:
        """Add ``other``'s suspects to these."""
        for key, records in other.locks.items():
            self.add_lock(key, list(records.values()))
        self.unreadable.update(other.unreadable)


def suspects_of(table: _Table, change: Change) -> Suspects:
    """The lock keys ``change`` touches, with the records to read with each.

    A lock item's change: its key, with the owners its images name. A record's change: the
    lock keys its old or its new image requires (as the audit computes them: ``claim`` says
    whose record it is, ``locks_of`` what it requires) — for a MODIFY, only those required by
    one image and not the other — with the record. An item no loaded
    model claims — a record of a model without constraints on a shared table, a system item —
    touches none. An image whose locks cannot be computed makes the record a suspect of its own.
    """
    found = Suspects()
    images = [image for image in (change.old, change.new) if image is not None]
    probe = {**change.keys, **(images[0] if images else {})}
    kind = _is_lock_item(table, probe)
    if kind is None:  # a dynaunique system item (ledger, checkpoints)
        return found
    if kind:
        owners = [owner_key(table.key_attributes, _lock_info(table, image).owner)
                  for image in images]
        found.add_lock(str(change.keys[table.hash_attr]["S"]),
                       [owner for owner in owners if owner is not None])
        return found
    key = key_of(table.key_attributes, change.keys)
    if key is None:
        return found
    required = []
    for image in images:
        record = _interpret(table, key, image, keep_item=False)
        if record.requires is None:
            found.unreadable.setdefault(key_id(key), key)
        required.append(set(record.requires or {}))
    if len(required) == 2 and not found.unreadable:
        # A change that leaves the record's lock keys as they were cannot have broken them:
        # only the keys it stopped or started requiring are suspects.
        required = [required[0] ^ required[1]]
    for lock_key in sorted(set().union(*required)):
        found.add_lock(lock_key, [key])
    return found
