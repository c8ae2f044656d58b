"""The pure parts of the export audit: the on-disk sort, DynamoDB JSON as an export writes it,
the keys a manifest names, and the writer's layout read back by the reader."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from dynaunique.audit import _export, _spill
from dynaunique.audit._export import _attribute, _relative, open_export
from dynaunique.audit._spill import _Spill
from dynaunique.errors import AuditError
from dynaunique.testing._exports import _json_attribute, write_export


def test_rows_come_back_sorted_by_key_then_kind_and_equal_rows_in_arrival_order() -> None:
    rows = [("b", 1, "b1"), ("a", 1, "a1"), ("b", 0, "lock-b"), ("a", 1, "a2"), ("", 2, "u"),
            ("b", 1, "b2"), ("a", 0, "lock-a")]
    with _Spill(run_rows=2) as spill:
        for row in rows:
            spill.add(row)
        assert (spill.count, spill.runs) == (7, 3)
        assert list(spill.sorted()) == [
            ("", 2, "u"), ("a", 0, "lock-a"), ("a", 1, "a1"), ("a", 1, "a2"),
            ("b", 0, "lock-b"), ("b", 1, "b1"), ("b", 1, "b2")]


def test_more_runs_than_open_files_are_merged_first_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_spill, "_FAN_IN", 3)
    with _Spill(run_rows=1) as spill:
        for n in range(10):
            spill.add((f"k{n % 3}", 1, n))
        assert spill.runs == 10
        assert [row[2] for row in spill.sorted()] == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]


def test_rows_that_fit_in_one_run_never_touch_the_disk(tmp_path: Path) -> None:
    with _Spill(run_rows=10, directory=str(tmp_path)) as spill:
        spill.add(("z", 0, {"PK": {"S": "z"}}))
        spill.add(("a", 1, {"PK": {"B": b"\x00"}}))
        assert list(spill.sorted()) == [("a", 1, {"PK": {"B": b"\x00"}}),
                                        ("z", 0, {"PK": {"S": "z"}})]
        assert next(p.name for p in tmp_path.iterdir()).startswith("dynaunique-spill-")
        assert list(next(tmp_path.iterdir()).iterdir()) == []
    assert list(tmp_path.iterdir()) == []  # the temporary directory is gone


def test_binaries_are_base64_in_an_export_and_bytes_when_read() -> None:
    stored = {"M": {"b": {"B": b"\x01\xff"}, "l": {"L": [{"BS": [b"x", b"y"]}, {"N": "1"}]},
                    "s": {"SS": ["a"]}, "n": {"NULL": True}}}
    written = _json_attribute(stored)
    assert written == {"M": {"b": {"B": "Af8="}, "l": {"L": [{"BS": ["eA==", "eQ=="]},
                                                             {"N": "1"}]},
                             "s": {"SS": ["a"]}, "n": {"NULL": True}}}
    assert _attribute(json.loads(json.dumps(written))) == stored


def test_manifest_keys_are_read_relative_to_the_exports_folder() -> None:
    assert _relative("pre/fix/AWSDynamoDB/0123-ab/data/x.json.gz", "k") == "data/x.json.gz"
    assert _relative("AWSDynamoDB/0123-ab/manifest-files.json", "k") == "manifest-files.json"
    with pytest.raises(AuditError, match=r"^k 'data/x.json.gz' is not under AWSDynamoDB/"):
        _relative("data/x.json.gz", "k")
    with pytest.raises(AuditError, match=r"^k is missing or not a string$"):
        _relative(None, "k")


def test_the_writers_layout_is_the_documented_one_and_reads_back(tmp_path: Path) -> None:
    items = [{"PK": {"S": f"K#{n}"}, "bin": {"B": bytes([n])}} for n in range(5)]
    folder = write_export(tmp_path, "people", items, files=2, prefix="daily",
                          export_id="01234567890123-a1b2c3d4", export_type=None)
    assert folder == tmp_path / "daily" / "AWSDynamoDB" / "01234567890123-a1b2c3d4"
    summary = json.loads((folder / "manifest-summary.json").read_text())
    assert "exportType" not in summary  # as exports before incremental ones were
    assert (summary["itemCount"], summary["outputFormat"], summary["tableArn"],
            summary["manifestFilesS3Key"]) == (
        5, "DYNAMODB_JSON", "arn:aws:dynamodb:us-east-1:123456789012:table/people",
        "daily/AWSDynamoDB/01234567890123-a1b2c3d4/manifest-files.json")
    lines = [json.loads(line) for line in (folder / "manifest-files.json").read_text().splitlines()]
    assert [line["itemCount"] for line in lines] == [3, 2]
    assert all(line["dataFileS3Key"].startswith("daily/AWSDynamoDB/01234567890123-a1b2c3d4/"
                                                "data/") for line in lines)
    assert all(len(base64.b64decode(line["md5Checksum"])) == 16 for line in lines)
    export = open_export(str(tmp_path / "daily"))
    assert (export.table, export.item_count, export.export_id) == (
        "people", 5, "01234567890123-a1b2c3d4")
    assert sorted(i["PK"]["S"] for i in export.items()) == [f"K#{n}" for n in range(5)]
    assert {bytes(i["bin"]["B"]) for i in export.items()} == {bytes([n]) for n in range(5)}


def test_a_line_that_is_no_item_is_named(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match=r"^line 3 of data/x is not a DYNAMODB_JSON item"):
        _export._item(b'{"Keys": {}}', "data/x", 3)
