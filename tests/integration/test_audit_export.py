"""``audit.check_export`` and ``dynaunique check --export``: the audit of a DynamoDB export to S3.

The exports are written in AWS's documented layout by ``dynaunique.testing._exports`` (moto's
own export layout differs) from the items of the same planted tables ``check`` audits, and the
findings of both are compared as values (a Finding's fields, its lock and holders included).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import support.audit_models as fm
import support.secret_models as sm
from click.testing import CliRunner, Result
from support.declare import declare, pk_attr, sk_attr
from support.tables import raw_tables, scan_all

from dynaunique import audit
from dynaunique._lock.items import SECRET_ENV
from dynaunique.attributes import NumberAttribute, UnicodeAttribute
from dynaunique.cli import cli
from dynaunique.errors import AuditError
from dynaunique.testing._exports import upload, write_export

Account = fm.AuditAccount


@pytest.fixture
def raw(dynaunique_db: str) -> Any:
    return raw_tables(dynaunique_db, *fm.MODELS)


def export_of(raw: Any, table: str, root: Path, **options: Any) -> Path:
    """The table's items as they are now, written as an export under ``root``."""
    return write_export(root, table, scan_all(raw, table), **options)


def same_as_check(models: Any, path: Path | str, *, moved_on: bool = False,
                  **options: Any) -> audit.ExportReport:
    """``check_export`` of ``path``, asserted to find exactly what ``check`` finds now (and,
    unless the table ``moved_on`` since the export, to have read the same items)."""
    scanned = audit.check(models)
    exported = audit.check_export(models, str(path), **options)
    assert exported.findings == scanned.findings
    assert exported.secret_warnings == scanned.secret_warnings
    if not moved_on:
        assert exported.tables == scanned.tables
    return exported


def run(endpoint: str, module: str, *args: str) -> Result:
    return CliRunner(env={"COLUMNS": "250"}).invoke(
        cli, ["check", module, *args, "--endpoint", endpoint])


# --- the same findings as a scan -----------------------------------------------------------------


def test_the_export_of_the_planted_table_gives_exactly_the_checks_findings(
        raw: Any, tmp_path: Path) -> None:
    fm.seed_drift(raw)
    export_of(raw, fm.TABLE, tmp_path)
    # Runs of 4 rows: the rows are sorted on disk and merged, as a large table's would be.
    report = same_as_check(fm.MODELS, tmp_path, run_rows=4)
    assert len(report.findings) == len(fm.EXPECTED) == 8
    # No scan: every suspect is confirmed by one TransactGetItems of the live table.
    assert report.cost.requests == (("TransactGetItems", 8),)
    assert (report.export.suspects, report.export.cleared) == (8, 0)
    assert report.to_dict()["export"]["suspects"] == 8


def test_a_clean_table_exported_is_clean_and_reads_nothing_of_the_table(
        raw: Any, tmp_path: Path) -> None:
    Account(pk="ACCT#1", email="a@x.io", username="ada", phone="+1", tenant="t", slug="s").save()
    fm.AuditTeam(pk="TEAM#1", team_name="Red").save()
    report = same_as_check(fm.MODELS, export_of(raw, fm.TABLE, tmp_path, files=1))
    assert report.clean and report.cost.requests == ()
    assert report.tables == (audit.TableSummary(fm.TABLE, 7, 2, 5, 0, 0),)


def test_other_secret_locks_and_the_warning_are_the_checks(
        dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "the-application-secret")
    raw = raw_tables(dynaunique_db, *sm.MODELS)
    for n in range(3):
        sm.Patient(pk=f"P#{n}", email=f"{n}@x.io", phone=f"+1555000{n}").save()
    raw.delete_item(TableName=sm.TABLE, Key=sm.patient_key("P#2"))  # its locks are orphans
    export_of(raw, sm.TABLE, tmp_path)
    monkeypatch.setenv(SECRET_ENV, "a-mistyped-secret")
    report = same_as_check(sm.MODELS, tmp_path)
    assert sorted(f.kind.value for f in report.findings) == [
        "foreign_secret", "foreign_secret", "foreign_secret", "missing", "missing", "orphan"]
    assert [w.constraint for w in report.secret_warnings] == ["PHONE"]


def test_a_mixed_table_with_models_without_constraints(
        dynaunique_db: str, tmp_path: Path) -> None:
    # Told apart by what each requires: a user has a name, a note its stars.
    user = declare("ExportUser", "export_mixed", pk=pk_attr(), sk=sk_attr("USER"),
                   email=UnicodeAttribute(unique=True, null=True), name=UnicodeAttribute())
    note = declare("ExportNote", "export_mixed", pk=pk_attr(), sk=sk_attr("NOTE"),
                   email=UnicodeAttribute(null=True), stars=NumberAttribute())
    raw = raw_tables(dynaunique_db, user, note)
    user(pk="U#1", email="u1@x.io", name="one").save()
    user(pk="U#2", email="u2@x.io", name="two").save()
    # Notes carry an email too, unconstrained: never a duplicate of a user's, never missing.
    for n in range(3):
        note(pk=f"N#{n}", email="u1@x.io", stars=n).save()
    raw.delete_item(TableName="export_mixed", Key={"PK": {"S": "U#2"}, "SK": {"S": "USER"}})
    raw.put_item(TableName="export_mixed", Item={"PK": {"S": "U#3"}, "SK": {"S": "USER"},
                                                 "email": {"S": "u1@x.io"},
                                                 "name": {"S": "three"}})
    report = same_as_check([user, note], export_of(raw, "export_mixed", tmp_path))
    assert sorted((f.kind.value, f.lock_key) for f in report.findings) == [
        ("duplicate", "UNIQ#EMAIL#u1@x.io"), ("orphan", "UNIQ#EMAIL#u2@x.io")]
    assert report.tables[0].records == 5  # U#1, U#3 and the three notes


def test_an_unreadable_record_is_confirmed_by_a_consistent_read(
        raw: Any, tmp_path: Path) -> None:
    raw.put_item(TableName=fm.TABLE, Item={**fm.account_key("ACCT#BAD"), "email": {"N": "5"}})
    raw.put_item(TableName=fm.TABLE, Item={**fm.account_key("ACCT#ODD"), "email": {"N": "6"}})
    export_of(raw, fm.TABLE, tmp_path)
    # Since the export, ACCT#ODD was fixed (its email written as text, its lock missing).
    raw.put_item(TableName=fm.TABLE, Item={**fm.account_key("ACCT#ODD"), "email": {"S": "o@x"}})
    report = audit.check_export(fm.MODELS, str(tmp_path))
    assert report.findings == audit.check(fm.MODELS).findings
    assert [(f.kind.value, f.holders[0].label) for f in report.findings] == [
        ("missing", "ACCT#ODD / PROFILE"), ("unreadable", "ACCT#BAD / PROFILE")]


# --- suspects the live table clears --------------------------------------------------------------


def test_drift_fixed_since_the_export_is_not_reported(raw: Any, tmp_path: Path) -> None:
    fm.seed_drift(raw)
    export_of(raw, fm.TABLE, tmp_path)
    # Since the export: the orphan lock of ACCT#GONE was deleted, and so was TEAM#BLUE, the
    # record without its lock.
    raw.delete_item(TableName=fm.TABLE, Key=fm.lock_pk("UNIQ#EMAIL#gone@x.io"))
    raw.delete_item(TableName=fm.TABLE, Key={"PK": {"S": "TEAM#BLUE"}, "SK": {"S": "TEAM"}})
    report = same_as_check(fm.MODELS, tmp_path, moved_on=True)
    assert len(report.findings) == 6
    assert (report.export.suspects, report.export.cleared) == (8, 2)


def test_a_transaction_the_export_caught_half_way_is_not_reported(
        raw: Any, tmp_path: Path) -> None:
    Account(pk="ACCT#1", email="a@x.io").save()
    items = scan_all(raw, fm.TABLE)
    # The export holds the record but not yet its lock, and an old lock already deleted.
    half = [i for i in items if not i["PK"]["S"].startswith("UNIQ#")] + [{
        **fm.lock_pk("UNIQ#EMAIL#old@x.io"), "owner": {"M": fm.account_key("ACCT#1")},
        "model": {"S": "AuditAccount"}, "constraint": {"S": "EMAIL"},
        "value": {"S": "old@x.io"}}]
    write_export(tmp_path, fm.TABLE, half)
    report = audit.check_export(fm.MODELS, str(tmp_path))
    assert report.clean
    assert (report.export.suspects, report.export.cleared) == (2, 2)
    assert report.cost.requests == (("TransactGetItems", 2),)


# --- the CLI, and an export in S3 ----------------------------------------------------------------


def test_cli_check_export_from_s3_prints_what_check_prints(
        raw: Any, dynaunique_db: str, tmp_path: Path) -> None:
    fm.seed_drift(raw)
    folder = export_of(raw, fm.TABLE, tmp_path, prefix="nightly")
    s3 = boto3.client("s3", endpoint_url=dynaunique_db, region_name="us-east-1")
    s3.create_bucket(Bucket="exports")
    upload(folder, s3, "exports", f"copied/{folder.relative_to(tmp_path)}/")
    url = f"s3://exports/copied/{folder.relative_to(tmp_path)}"
    scanned = run(dynaunique_db, fm.__name__, "--json")
    exported = run(dynaunique_db, fm.__name__, "--export", url, "--s3-endpoint", dynaunique_db,
                   "--json")
    assert (scanned.exit_code, exported.exit_code) == (1, 1), exported.output
    assert json.loads(exported.output)["findings"] == json.loads(scanned.output)["findings"]
    assert json.loads(exported.output)["export"]["where"] == url
    # The prefix holding AWSDynamoDB/ is enough when it holds one export; a table is printed.
    shown = run(dynaunique_db, fm.__name__, "--export", "s3://exports/copied/nightly",
                "--s3-endpoint", dynaunique_db)
    assert shown.exit_code == 1, shown.output
    assert "8 suspect(s) in the export, 0 cleared by a consistent read" in shown.output
    assert "orphan lock" in shown.output and "GetObject" in shown.output


def test_cli_export_and_segments_are_refused_together(dynaunique_db: str, tmp_path: Path) -> None:
    result = run(dynaunique_db, fm.__name__, "--export", str(tmp_path), "--segments", "2")
    assert result.exit_code == 2
    assert "--segments splits a scan" in result.output


# --- exports that cannot be audited: one line, exit 2 --------------------------------------------


def _summary(folder: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((folder / "manifest-summary.json").read_text())
    return loaded


def _rewrite(folder: Path, **fields: Any) -> None:
    (folder / "manifest-summary.json").write_text(json.dumps({**_summary(folder), **fields}))


def _no_summary(folder: Path) -> None:
    (folder / "manifest-summary.json").unlink()


def _not_json(folder: Path) -> None:
    (folder / "manifest-summary.json").write_text("{not json")


def _bad_files_line(folder: Path) -> None:
    (folder / "manifest-files.json").write_text('{"itemCount": 3}\n')


def _corrupt(folder: Path) -> None:
    data = sorted((folder / "data").iterdir())[0]
    with gzip.open(data, "at") as out:
        out.write('{"Item": {"PK": {"S": "ACCT#X"}, "SK": {"S": "PROFILE"}}}\n')


def _truncated(folder: Path) -> None:
    data = sorted((folder / "data").iterdir())[0]
    data.write_bytes(data.read_bytes()[:20])


@pytest.mark.parametrize(("spoil", "message"), [
    (_no_summary, r"^no DynamoDB export at .*: no manifest-summary\.json there nor in "
                  r"AWSDynamoDB/<ExportId>/$"),
    (_not_json, r"^manifest-summary\.json of export .* is not JSON: "),
    (lambda f: _rewrite(f, exportType="INCREMENTAL_EXPORT"),
     r"^export .* is an INCREMENTAL_EXPORT: only full exports can be audited "),
    (lambda f: _rewrite(f, outputFormat="ION"), r"is in 'ION': only DYNAMODB_JSON exports"),
    (lambda f: _rewrite(f, tableArn="arn:aws:dynamodb:us-east-1:1:table/payroll"),
     r"^export \S+ is of table 'payroll'; the models use 'audit_accounts'$"),
    (lambda f: _rewrite(f, itemCount=99),
     r"^the files manifest of export .* lists 2 items, its summary says 99$"),
    (lambda f: _rewrite(f, manifestFilesS3Key=None), r"manifestFilesS3Key is missing"),
    (_bad_files_line, r"^line 1 of the files manifest of export .* is malformed: KeyError"),
    (_corrupt, r"^data/\S+ of export .* does not match its checksum \(md5 \S+, the manifest "
               r"says \S+\)$"),
    (_truncated, r"^data/\S+ of export .* is not a complete gzip file"),
], ids=["missing", "not-json", "incremental", "ion", "other-table", "count", "no-files-key",
        "files-line", "checksum", "truncated"])
def test_an_export_that_cannot_be_audited_is_one_clear_error(
        raw: Any, dynaunique_db: str, tmp_path: Path, spoil: Any, message: str) -> None:
    Account(pk="ACCT#1", email="a@x.io").save()
    folder = export_of(raw, fm.TABLE, tmp_path, files=1)
    spoil(folder)
    with pytest.raises(AuditError, match=message):
        audit.check_export(fm.MODELS, str(folder))
    result = run(dynaunique_db, fm.__name__, "--export", str(folder))
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith("Error: ") and "\n" not in line


def test_a_folder_with_two_exports_asks_which(raw: Any, tmp_path: Path) -> None:
    export_of(raw, fm.TABLE, tmp_path, export_id="00000000000001-aaaaaaaa")
    export_of(raw, fm.TABLE, tmp_path, export_id="00000000000002-bbbbbbbb")
    with pytest.raises(AuditError, match=r"2 exports at .* \(00000000000001-aaaaaaaa, "
                                         r"00000000000002-bbbbbbbb\): give the folder of one"):
        audit.check_export(fm.MODELS, str(tmp_path))
    report = audit.check_export(fm.MODELS,
                                str(tmp_path / "AWSDynamoDB" / "00000000000002-bbbbbbbb"))
    assert report.clean and report.export.where.endswith("00000000000002-bbbbbbbb")


# --- the benchmark, run small so it keeps working ------------------------------------------------


@pytest.mark.external  # the benchmark harness (tests/README.md, "Two runs")
def test_the_benchmark_measures_each_strategy_on_a_small_export(tmp_path: Path) -> None:
    from benchmarks import export_audit

    out = tmp_path / "results.json"
    export_audit.main(["--items", "700", "--run-rows", "50", "--spill", "runs,sqlite,memory",
                       "--json", str(out)])
    results = json.loads(out.read_text())
    assert [r["spill"] for r in results] == ["runs", "sqlite", "memory"]
    for result in results:
        # 5 live records with a lock deleted by hand (confirmed), none exported half-written
        # among 700 items (a record in every 20,000 is), all 700 items read.
        assert (result["items"], result["suspects"], result["cleared"]) == (700, 5, 0)
        assert result["findings"]["missing"] == 5
        assert set(result["rss_mb"]) == {"start", "10%", "50%", "100%", "end", "peak"}
