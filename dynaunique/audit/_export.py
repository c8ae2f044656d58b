"""A DynamoDB export to S3, read in AWS's documented layout: manifests checked, items streamed.

An export is the folder ``[prefix/]AWSDynamoDB/<ExportId>/`` holding ``manifest-summary.json``
(the export: table ARN, type, format, item count, the key of ``manifest-files.json``),
``manifest-files.json`` (one JSON object a line: ``dataFileS3Key``, ``itemCount``,
``md5Checksum`` — the base64 MD5 of the data file — and ``etag``) and ``data/*.json.gz``, gzip'd
lines ``{"Item": {...}}`` of DynamoDB JSON. It is read from a local folder or from S3
(``s3://bucket/prefix``), through botocore; every GetObject is counted on the audit's meter.

:func:`open_export` finds and checks the manifests; :meth:`Export.items` streams the items one
at a time (binary values decoded as a DynamoDB read returns them), checking each data file's item
count and checksum. Anything that does not match is an :class:`~dynaunique.errors.AuditError`
of one line. Only full exports in DynamoDB JSON are read (docs/decisions.md says why).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import attrs
import botocore.exceptions
import botocore.session
from botocore import xform_name

from dynaunique._transport.endpoint import target_for
from dynaunique.errors import AuditError

from ._tables import _Meter

SUMMARY = "manifest-summary.json"
_ROOT = "AWSDynamoDB"
_FULL = "FULL_EXPORT"


class _Hashing(io.RawIOBase):
    """A readable stream that computes the MD5 of everything read through it."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self.md5 = hashlib.md5(usedforsecurity=False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        self.md5.update(data)
        buffer[:len(data)] = data
        return len(data)


class _Folder:
    """An export in a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)

    def exists(self, name: str) -> bool:
        return (self.root / name).is_file()

    def listing(self, under: str) -> list[str]:
        base = self.root / under
        return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    def open(self, name: str) -> IO[bytes]:
        try:
            return open(self.root / name, "rb")
        except OSError as exc:
            raise AuditError(f"cannot read {self.root / name}: {exc.strerror}") from exc


class _Bucket:
    """An export under ``s3://bucket/prefix``, read with botocore."""

    def __init__(self, url: str, endpoint: str | None, region: str | None,
                 meter: _Meter) -> None:
        parts = urllib.parse.urlsplit(url)
        if not parts.netloc:
            raise AuditError(f"{url!r} names no bucket: use s3://bucket/prefix")
        self.bucket, self.prefix = parts.netloc, parts.path.strip("/")
        self.where = url
        self._meter = meter
        target = target_for(endpoint, region=region)
        credentials = target.credentials or (None, None)
        self._client = botocore.session.get_session().create_client(
            "s3", endpoint_url=target.endpoint, region_name=target.region,
            aws_access_key_id=credentials[0], aws_secret_access_key=credentials[1])

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _call(self, operation: str, **params: Any) -> Any:
        self._meter.add(operation)
        try:
            return getattr(self._client, xform_name(operation))(Bucket=self.bucket, **params)
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            raise AuditError(f"S3 refused {operation} of s3://{self.bucket}/"
                             f"{params.get('Key', params.get('Prefix', ''))}: "
                             f"{error.get('Code', '')}: {error.get('Message', '')}") from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise AuditError(f"S3 {operation} failed: {exc}") from exc

    def exists(self, name: str) -> bool:
        listed = self._call("ListObjectsV2", Prefix=self._key(name), MaxKeys=1)
        return any(o["Key"] == self._key(name) for o in listed.get("Contents", ()))

    def listing(self, under: str) -> list[str]:
        listed = self._call("ListObjectsV2", Prefix=self._key(under) + "/", Delimiter="/")
        return sorted(p["Prefix"].rstrip("/").rsplit("/", 1)[-1]
                      for p in listed.get("CommonPrefixes", ()))

    def open(self, name: str) -> IO[bytes]:
        body: IO[bytes] = self._call("GetObject", Key=self._key(name))["Body"]
        return body


_Source = _Folder | _Bucket


@attrs.frozen
class DataFile:
    """One line of ``manifest-files.json``."""

    #: The file's path relative to the export's folder (``data/<name>.json.gz``).
    name: str
    items: int
    md5: str


@attrs.frozen
class Export:
    """One export, its manifests checked; :meth:`items` streams what its data files hold."""

    where: str
    export_arn: str
    table: str
    exported_at: str | None
    item_count: int
    files: tuple[DataFile, ...]
    _source: Any = attrs.field(repr=False, eq=False, alias="source")
    _folder: str = attrs.field(repr=False, alias="folder")

    @property
    def export_id(self) -> str:
        """The ExportId (the last part of the export's ARN)."""
        return self.export_arn.rsplit("/", 1)[-1]

    def items(self) -> Iterator[dict[str, Any]]:
        """Every item, one data file after the other; a data file whose item count or checksum
        differs from its manifest line raises AuditError once it has been read."""
        for data in self.files:
            hashing = _Hashing(self._source.open(f"{self._folder}{data.name}"))
            count = 0
            try:
                with gzip.GzipFile(fileobj=io.BufferedReader(hashing, 1 << 16)) as lines:
                    for number, line in enumerate(lines, 1):
                        if line.strip():
                            count += 1
                            yield _item(line, data.name, number)
            except (OSError, EOFError) as exc:  # not gzip, or cut short
                raise AuditError(f"{data.name} of export {self.where} is not a complete gzip "
                                 f"file: {exc}") from exc
            digest = base64.b64encode(hashing.md5.digest()).decode("ascii")
            if digest != data.md5:
                raise AuditError(f"{data.name} of export {self.where} does not match its "
                                 f"checksum (md5 {digest}, the manifest says {data.md5})")
            if count != data.items:
                raise AuditError(f"{data.name} of export {self.where} holds {count} items, "
                                 f"its manifest line says {data.items}")


def _item(line: bytes, name: str, number: int) -> dict[str, Any]:
    try:
        parsed = json.loads(line)
        item = parsed["Item"]
        if not isinstance(item, dict):
            raise TypeError("Item is not a map")
        if b'"B' not in line:  # no binary anywhere (B, BS, BOOL): the item is as read
            return item
        return {k: _attribute(v) for k, v in item.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AuditError(f"line {number} of {name} is not a DYNAMODB_JSON item "
                         f"{{\"Item\": {{...}}}}: {type(exc).__name__}: {exc}") from exc


def _attribute(value: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB JSON attribute value as a read returns it: binaries as bytes, not base64."""
    (kind, raw), = value.items()
    if kind == "B":
        return {"B": base64.b64decode(raw)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) for v in raw]}
    if kind == "M":
        return {"M": {k: _attribute(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_attribute(v) for v in raw]}
    return value


def _json(source: _Source, name: str) -> Any:
    with source.open(name) as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AuditError(f"{name} of export {source.where} is not JSON: {exc}") from exc


def _locate(source: _Source) -> str:
    """The export's folder (relative to the source, ending in ``/`` unless it is the source)."""
    if source.exists(SUMMARY):
        return ""
    found = [f"{_ROOT}/{export_id}/" for export_id in source.listing(_ROOT)
             if source.exists(f"{_ROOT}/{export_id}/{SUMMARY}")]
    if len(found) == 1:
        return found[0]
    if not found:
        raise AuditError(f"no DynamoDB export at {source.where}: no {SUMMARY} there nor in "
                         f"{_ROOT}/<ExportId>/")
    raise AuditError(f"{len(found)} exports at {source.where} ("
                     + ", ".join(f.split("/")[1] for f in found) + "): give the folder of one")


def _relative(key: Any, field: str) -> str:
    """A key a manifest names (``[prefix/]AWSDynamoDB/<id>/data/x.json.gz``), relative to the
    export's folder, so that an export copied elsewhere is still read."""
    if not isinstance(key, str) or not key:
        raise AuditError(f"{field} is missing or not a string")
    parts = key.split("/")
    if _ROOT in parts and len(parts) > parts.index(_ROOT) + 2:
        return "/".join(parts[parts.index(_ROOT) + 2:])
    raise AuditError(f"{field} {key!r} is not under {_ROOT}/<ExportId>/")


def _summary_field(summary: dict[str, Any], field: str, kind: type) -> Any:
    value = summary.get(field)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise AuditError(f"{SUMMARY} has no {field} ({kind.__name__})")
    return value


def open_export(path: str, *, s3_endpoint: str | None = None, region: str | None = None,
                meter: _Meter | None = None) -> Export:
    """The export at ``path`` (a folder, or ``s3://bucket/prefix``), its manifests checked.

    ``path`` is the export's own folder, or the folder (prefix) holding ``AWSDynamoDB/`` with
    exactly one export in it.

    :raises AuditError: no export there, a manifest missing or malformed, an incremental export
        or one not in DynamoDB JSON, or a files manifest that disagrees with the summary.
    """
    meter = meter if meter is not None else _Meter()
    source: _Source
    if path.startswith("s3://"):
        source = _Bucket(path, s3_endpoint, region, meter)
    else:
        if not Path(path).is_dir():
            raise AuditError(f"no folder {path!r} (give an export's folder or s3://bucket/prefix)")
        source = _Folder(Path(path))
    folder = _locate(source)
    where = f"{source.where.rstrip('/')}/{folder}".rstrip("/")
    summary = _json(source, f"{folder}{SUMMARY}")
    if not isinstance(summary, dict):
        raise AuditError(f"{SUMMARY} of export {where} is not a JSON object")
    export_type = summary.get("exportType", _FULL)
    if export_type != _FULL:
        raise AuditError(f"export {where} is an {export_type}: only full exports can be audited "
                         "(an incremental one holds only the changes of a time window)")
    if summary.get("outputFormat") != "DYNAMODB_JSON":
        raise AuditError(f"export {where} is in {summary.get('outputFormat')!r}: only "
                         "DYNAMODB_JSON exports are read")
    arn = _summary_field(summary, "exportArn", str)
    table_arn = _summary_field(summary, "tableArn", str)
    if ":table/" not in table_arn:
        raise AuditError(f"{SUMMARY} of export {where}: tableArn {table_arn!r} names no table")
    total = _summary_field(summary, "itemCount", int)
    files_name = folder + _relative(summary.get("manifestFilesS3Key"), "manifestFilesS3Key")
    files = _data_files(source, files_name, where)
    listed = sum(f.items for f in files)
    if listed != total:
        raise AuditError(f"the files manifest of export {where} lists {listed} items, its "
                         f"summary says {total}")
    return Export(where, arn, table_arn.split(":table/", 1)[1].split("/", 1)[0],
                  summary.get("exportTime"), total, files, source=source, folder=folder)


def _data_files(source: _Source, name: str, where: str) -> tuple[DataFile, ...]:
    files: list[DataFile] = []
    with source.open(name) as handle:
        lines = handle.read().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            count, md5 = entry["itemCount"], entry["md5Checksum"]
            if not isinstance(count, int) or not isinstance(md5, str):
                raise TypeError("itemCount must be a number and md5Checksum a string")
            files.append(DataFile(_relative(entry["dataFileS3Key"], "dataFileS3Key"), count,
                                  md5))
        except (ValueError, KeyError, TypeError, AuditError) as exc:
            raise AuditError(f"line {number} of the files manifest of export {where} is "
                             f"malformed: {type(exc).__name__}: {exc}") from exc
    return tuple(files)
