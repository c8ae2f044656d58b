"""Write items as a DynamoDB export to S3 in AWS's documented layout, to test what reads one.

moto's ``ExportTableToPointInTime`` writes another layout than DynamoDB's, so the tests and the
benchmark build their exports here, from the documentation of the output format:
``[prefix/]AWSDynamoDB/<ExportId>/`` with ``manifest-summary.json``, ``manifest-files.json`` (one
JSON line a data file: ``itemCount``, ``md5Checksum`` — base64 MD5 of the file — ``etag``,
``dataFileS3Key``), their ``.checksum`` files, ``_started``, and ``data/<name>.json.gz``: gzip'd
lines ``{"Item": {...}}`` of DynamoDB JSON (binaries in base64). Not API.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"


def _json_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """An attribute value as botocore reads it → as an export writes it (binaries base64)."""
    (kind, raw), = value.items()
    if kind == "B":
        return {"B": base64.b64encode(bytes(raw)).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(bytes(v)).decode("ascii") for v in raw]}
    if kind == "M":
        return {"M": {k: _json_attribute(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [_json_attribute(v) for v in raw]}
    return dict(value)


def _md5(path: Path) -> hashlib._Hash:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest


def write_export(root: str | Path, table: str, items: Iterable[Mapping[str, Any]], *,
                 files: int = 3, prefix: str = "", export_id: str | None = None,
                 region: str = "us-east-1", export_type: str | None = "FULL_EXPORT",
                 export_time: str = "2026-01-01T00:00:00.000Z") -> Path:
    """Write ``items`` (DynamoDB JSON as a read returns it) under ``root`` as an export of
    ``table`` spread over ``files`` data files (some may be empty, as DynamoDB's may); return
    the export's folder, ``root/[prefix/]AWSDynamoDB/<ExportId>``.

    ``export_type=None`` leaves ``exportType`` out of the summary (as exports before incremental
    ones did); ``prefix`` is the S3 prefix the manifests' keys carry.
    """
    export_id = export_id or f"{uuid.uuid4().int % 10**14:014d}-{uuid.uuid4().hex[:8]}"
    key_prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    base = f"{key_prefix}AWSDynamoDB/{export_id}"
    folder = Path(root) / base
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "_started").write_bytes(b"")
    names = [f"{uuid.uuid4().hex[:26]}.json.gz" for _ in range(files)]
    counts = [0] * files
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(gzip.open(folder / "data" / name, "wt", encoding="utf-8"))
                for name in names]
        for number, item in enumerate(items):
            slot = number % files
            line = json.dumps({"Item": {k: _json_attribute(v) for k, v in item.items()}},
                              separators=(",", ":"))
            outs[slot].write(line + "\n")
            counts[slot] += 1
    lines = []
    for name, count in zip(names, counts, strict=True):
        digest = _md5(folder / "data" / name)
        lines.append(json.dumps({
            "itemCount": count, "md5Checksum": base64.b64encode(digest.digest()).decode("ascii"),
            "etag": digest.hexdigest(), "dataFileS3Key": f"{base}/data/{name}"}))
    (folder / "manifest-files.json").write_text("\n".join(lines) + "\n")
    table_arn = f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}"
    summary: dict[str, Any] = {
        "version": "2020-06-30", "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": export_time, "endTime": export_time, "tableArn": table_arn,
        "tableId": str(uuid.uuid4()), "exportTime": export_time,
        "s3Bucket": "dynaunique-exports", "s3Prefix": prefix or None, "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None, "manifestFilesS3Key": f"{base}/manifest-files.json",
        "billedSizeBytes": sum((folder / "data" / n).stat().st_size for n in names),
        "itemCount": sum(counts), "outputFormat": "DYNAMODB_JSON",
    }
    if export_type is not None:
        summary["exportType"] = export_type
    (folder / "manifest-summary.json").write_text(json.dumps(summary, indent=3))
    for manifest in ("manifest-summary", "manifest-files"):
        (folder / f"{manifest}.checksum").write_text(
            _md5(folder / f"{manifest}.json").hexdigest())
    return folder


def upload(folder: Path, client: Any, bucket: str, key_prefix: str = "") -> None:
    """Put every file under ``folder`` into ``bucket`` (keys: ``key_prefix`` + relative path),
    with a botocore S3 ``client``."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{key_prefix}{path.relative_to(folder).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
