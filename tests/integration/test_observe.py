"""Observability: the structured log events and the OpenTelemetry span of every write.

Every event is produced for real against the local server (a violation, a stale save, conflicts
the server injects, throttling answered by botocore, a migration run) and its fields are
asserted exactly; the resend after a lost answer and the foreign lock are in
``tests/reliability/test_observe_faults.py`` (they need the fault proxy and crafted locks). A
workload over a ``hashed=True`` constraint, with logging at DEBUG and tracing on, must leave the
raw value in no log output and no span. Without OpenTelemetry the library neither imports it
nor prints anything.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.declare import declare
from support.invariants import raw_client
from support.log_events import events, levels
from support.migrations_workspace import Workspace, open_workspace

from dynaunique import (
    ConcurrentModificationError,
    InvalidValueError,
    Model,
    UniqueViolation,
    atomic,
    normalizers,
)
from dynaunique._lock.locks import lock_key
from dynaunique._transport import clients
from dynaunique.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from dynaunique.observe import HASHED
from dynaunique.testing import create_tables, set_conflict_rate, use_endpoint

SECRET = "observe-secret"
#: The value the hashed constraint protects: it must appear nowhere.
SECRET_EMAIL = "Ada.Private@Lovelace.io"


Member = declare("Member", "observe_members", pk=UnicodeAttribute(hash_key=True),
                 email=UnicodeAttribute(unique=True, null=True), visits=NumberAttribute(default=0),
                 version=VersionAttribute())

Patient = declare("Patient", "observe_patients", meta={"lock_secret": SECRET},
                  pk=UnicodeAttribute(hash_key=True),
                  email=UnicodeAttribute(unique=True, hashed=True, null=True,
                                         normalize=normalizers.casefold),
                  note=UnicodeAttribute(null=True), version=VersionAttribute())


@pytest.fixture
def tables(dynaunique_db: str) -> str:
    use_endpoint(dynaunique_db, Member, Patient)
    create_tables(Member, Patient)
    return dynaunique_db


@pytest.fixture
def caught(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="dynaunique")
    return caplog


# --- the tracer: one SDK provider for the session (the global one can be set only once) ----------

_EXPORTER = InMemorySpanExporter()


class _Gated(SimpleSpanProcessor):
    """Exports only while a test of this module asks for spans: the provider stays set for the
    rest of the session, and the other tests' spans must not pile up in memory."""

    open = False

    def on_end(self, span: ReadableSpan) -> None:
        if self.open:
            super().on_end(span)


_GATE = _Gated(_EXPORTER)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_GATE)
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    _GATE.open = True
    try:
        yield _EXPORTER
    finally:
        _GATE.open = False
        _EXPORTER.clear()


def ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("dynaunique.")]


# --- log events ----------------------------------------------------------------------------------


def test_a_unique_violation_is_one_info_event_with_its_fields(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    Member(pk="A", email="ada@x.io").save()
    with pytest.raises(UniqueViolation):
        Member(pk="B", email="ada@x.io").save()
    assert events(caught, "unique_violation") == [{
        "event": "unique_violation", "model": "Member", "constraint": "EMAIL",
        "fields": ["email"], "hashed": False, "value": "ada@x.io",
        "lock_key": lock_key("EMAIL", ("ada@x.io",)), "holder": {"pk": "A"},
    }]
    assert levels(caught, "unique_violation") == {"INFO"}
    message = next(r.getMessage() for r in caught.records
                   if getattr(r, "dynaunique", {}).get("event") == "unique_violation")
    assert message == "unique violation: Member email 'ada@x.io' is held by {'pk': 'A'}"


def test_a_hashed_violation_shows_the_lock_key_digest_never_the_value(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    Patient(pk="P1", email=SECRET_EMAIL).save()
    with pytest.raises(UniqueViolation):
        Patient(pk="P2", email=SECRET_EMAIL).save()
    digest_key = lock_key("EMAIL", (SECRET_EMAIL.casefold(),), secret=SECRET.encode())
    assert events(caught, "unique_violation") == [{
        "event": "unique_violation", "model": "Patient", "constraint": "EMAIL",
        "fields": ["email"], "hashed": True, "value": HASHED, "lock_key": digest_key,
        "holder": {"pk": "P1"},
    }]
    assert SECRET_EMAIL not in caught.text


def _save_a_stale_copy() -> None:
    """Save a copy of Member A loaded before another copy was saved: refused."""
    Member(pk="A", email="a@x.io").save()
    stale = Member.get("A", consistent_read=True)
    fresh = Member.get("A", consistent_read=True)
    fresh.visits = 1
    fresh.save()
    stale.visits = 2
    with pytest.raises(ConcurrentModificationError):
        stale.save()


def test_a_stale_save_is_refused_with_an_info_event(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    _save_a_stale_copy()
    assert events(caught, "stale_write_refused") == [
        {"event": "stale_write_refused", "model": "Member", "key": {"pk": "A"}}]
    assert levels(caught, "stale_write_refused") == {"INFO"}


def test_conflicts_are_retried_with_an_info_event_each(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    set_conflict_rate(tables, 0.5, seed=7)
    for i in range(6):
        Member(pk=f"M{i}", email=f"m{i}@x.io").save()
    set_conflict_rate(tables, 0)
    retries = events(caught, "retry")
    assert retries, "a conflict rate of 0.5 over six transactions retried nothing"
    for fields in retries:
        assert set(fields) == {"event", "operation", "reason", "code", "attempt", "delay"}
        assert fields["operation"] == "TransactWriteItems"
        assert fields["reason"] == "conflict"
        assert fields["code"] == "TransactionCanceledException"
        assert fields["attempt"] >= 1
        # Full jitter under Meta's base_backoff_ms (25 ms by default): 0 ≤ delay ≤ cap.
        assert 0 <= fields["delay"] <= 0.025 * 2 ** fields["attempt"]
    assert levels(caught, "retry") == {"INFO"}
    assert len(Member.get("M5", consistent_read=True).email or "") == 7


def _throttle_once(client: Any) -> Any:
    """A ``before-send`` handler that answers the first request with DynamoDB's throttling
    error (botocore parses it as it would the wire's), then lets requests through."""
    answered = []

    def handler(request: Any, **_: Any) -> AWSResponse | None:
        if answered:
            return None
        answered.append(request)
        body = (b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
                b'"message":"Rate of requests exceeds the allowed throughput."}')
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"},
                           _Raw(body))

    client.meta.events.register_first("before-send.dynamodb", handler)
    return handler


class _Raw(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


def test_throttling_is_retried_with_a_warning_event(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    client = clients.client_for(Member)
    handler = _throttle_once(client)
    try:
        Member(pk="T", email="t@x.io").save()
    finally:
        client.meta.events.unregister("before-send.dynamodb", handler)
    [fields] = events(caught, "retry")
    assert {k: v for k, v in fields.items() if k != "delay"} == {
        "event": "retry", "operation": "TransactWriteItems", "reason": "throttling",
        "code": "ThrottlingException", "attempt": 1}
    assert levels(caught, "retry") == {"WARNING"}
    assert Member.get("T", consistent_read=True).email == "t@x.io"


def test_debug_logs_each_request_by_operation_and_table_only(
        tables: str, caught: pytest.LogCaptureFixture) -> None:
    Member(pk="A", email="debug@x.io").save()
    Member.get("A", consistent_read=True)  # PynamoDB's own read: not dynaunique's request
    assert events(caught, "request") == [
        {"event": "request", "operation": "TransactWriteItems", "table": ["observe_members"]}]
    assert levels(caught, "request") == {"DEBUG"}
    assert "debug@x.io" not in caught.text


def test_silent_below_info_nothing_is_built(tables: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="dynaunique")
    Member(pk="A", email="a@x.io").save()
    with pytest.raises(UniqueViolation):
        Member(pk="B", email="a@x.io").save()
    assert [r for r in caplog.records if r.name.startswith("dynaunique")] == []


# --- migration progress --------------------------------------------------------------------------


@pytest.fixture
def ws(dynaunique_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    yield open_workspace(tmp_path, dynaunique_db, "observe_migration", monkeypatch)


def test_a_migration_reports_its_progress_as_events(
        ws: Workspace, caught: pytest.LogCaptureFixture) -> None:
    for i in range(5):
        ws.put_raw(f"ACCT#{i:03d}", email=f"user{i}@x.io", status="active")
    ws.deploy(email=", unique=True")
    assert ws.project().make_migrations().changed
    ws.project(segments=1).executor().migrate()
    progress = events(caught, "migration_progress")
    assert [p["state"] for p in progress] == ["started", "running", "finished"]
    # The table's item count from DescribeTable (the local server reports it exactly).
    label, total = "0001_initial: fill Account.EMAIL", 5
    zero = {"scanned": 0, "records": 0, "written": 0, "deleted": 0, "duplicates": 0}
    done = {"scanned": 5, "records": 5, "written": 5, "deleted": 0, "duplicates": 0}
    assert progress[0] == {"event": "migration_progress", "state": "started", "phase": label,
                           **zero, "total": total}
    assert progress[1] == {"event": "migration_progress", "state": "running", "phase": label,
                           **done, "total": total, "segment": 0, "segments": 1}
    assert progress[2] == {"event": "migration_progress", "state": "finished", "phase": label,
                           **done, "total": total}
    assert levels(caught, "migration_progress") == {"INFO"}


# --- spans ---------------------------------------------------------------------------------------


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v)
            for k, v in (span.attributes or {}).items()}


def test_one_span_per_write_with_its_attributes(tables: str,
                                               spans: InMemorySpanExporter) -> None:
    member = Member(pk="A", email="a@x.io")
    member.save()
    member.update(actions=[Member.visits.set(3)])
    with atomic():
        Member(pk="B", email="b@x.io").save()
        member.email = "a2@x.io"
        member.save()
    with pytest.raises(UniqueViolation):
        Member(pk="C", email="b@x.io").save()
    member.delete()
    got = [(s.name, _attrs(s)) for s in ours(spans)]
    assert got == [
        ("dynaunique.save", {
            "dynaunique.model": "Member", "dynaunique.operation": "save",
            "dynaunique.constraints": ["EMAIL"], "dynaunique.items": 2,
            "dynaunique.round_trips": 1, "dynaunique.retries": 0, "dynaunique.outcome": "ok"}),
        ("dynaunique.update", {
            "dynaunique.model": "Member", "dynaunique.operation": "update",
            "dynaunique.constraints": [], "dynaunique.items": 1,
            "dynaunique.round_trips": 1, "dynaunique.retries": 0, "dynaunique.outcome": "ok"}),
        ("dynaunique.atomic", {
            "dynaunique.model": "Member", "dynaunique.operation": "atomic",
            "dynaunique.constraints": ["EMAIL"], "dynaunique.items": 5,
            "dynaunique.round_trips": 1, "dynaunique.retries": 0, "dynaunique.outcome": "ok"}),
        ("dynaunique.save", {
            "dynaunique.model": "Member", "dynaunique.operation": "save",
            "dynaunique.constraints": ["EMAIL"], "dynaunique.items": 2,
            # The refused transaction and the read of the lock's owner (issue 36).
            "dynaunique.round_trips": 2, "dynaunique.retries": 0,
            "dynaunique.outcome": "unique_violation"}),
        ("dynaunique.delete", {
            "dynaunique.model": "Member", "dynaunique.operation": "delete",
            "dynaunique.constraints": ["EMAIL"], "dynaunique.items": 2,
            "dynaunique.round_trips": 1, "dynaunique.retries": 0, "dynaunique.outcome": "ok"}),
    ]
    failed = ours(spans)[3]
    assert failed.status.status_code is trace.StatusCode.ERROR
    [exception] = [e for e in failed.events if e.name == "exception"]
    assert (exception.attributes or {})["exception.type"].endswith("UniqueViolation")


def test_retries_and_round_trips_are_counted_on_the_span(
        tables: str, spans: InMemorySpanExporter, caught: pytest.LogCaptureFixture) -> None:
    set_conflict_rate(tables, 0.5, seed=7)
    for i in range(6):
        Member(pk=f"M{i}", email=f"m{i}@x.io").save()
    set_conflict_rate(tables, 0)
    saves = ours(spans)
    assert len(saves) == 6
    retried = sum(_attrs(s)["dynaunique.retries"] for s in saves)
    assert retried == len(events(caught, "retry")) > 0
    for span in saves:
        assert _attrs(span)["dynaunique.round_trips"] == _attrs(span)["dynaunique.retries"] + 1


def test_a_stale_save_span_says_concurrent_modification(
        tables: str, spans: InMemorySpanExporter) -> None:
    _save_a_stale_copy()
    assert _attrs(ours(spans)[-1])["dynaunique.outcome"] == "concurrent_modification"


def _span_ids_at_send(model: type[Model]) -> tuple[list[int], Any]:
    """Record the current span's id as each request of ``model``'s client is sent (both
    senders fire botocore's ``before-send``)."""
    seen: list[int] = []

    def record(**_: Any) -> None:
        seen.append(trace.get_current_span().get_span_context().span_id)

    clients.client_for(model).meta.events.register_last("before-send.dynamodb", record)
    return seen, record


def test_the_span_is_current_while_the_sync_request_is_sent(
        tables: str, spans: InMemorySpanExporter) -> None:
    seen, record = _span_ids_at_send(Member)
    try:
        Member(pk="A", email="a@x.io").save()
    finally:
        clients.client_for(Member).meta.events.unregister("before-send.dynamodb", record)
    [span] = ours(spans)
    assert span.context is not None
    assert seen == [span.context.span_id]


def test_botocore_spans_nest_under_the_dynaunique_span(
        tables: str, spans: InMemorySpanExporter) -> None:
    instrumentation = pytest.importorskip("opentelemetry.instrumentation.botocore")
    instrumentor = instrumentation.BotocoreInstrumentor()
    instrumentor.instrument()
    try:
        Member(pk="A", email="a@x.io").save()
    finally:
        instrumentor.uninstrument()
    [ours_span] = ours(spans)
    children = [s for s in spans.get_finished_spans() if not s.name.startswith("dynaunique.")]
    assert [s.name for s in children] == ["DynamoDB.TransactWriteItems"]
    assert ours_span.context is not None and children[0].parent is not None
    assert children[0].parent.span_id == ours_span.context.span_id
    assert children[0].context is not None
    assert children[0].context.trace_id == ours_span.context.trace_id


def test_a_write_that_heals_an_orphan_counts_it_on_its_span(
        tables: str, spans: InMemorySpanExporter) -> None:
    """Issue 36: the orphan (its owner deleted around the library) is taken over; the span
    counts it, and the refused attempt, the owner's read and the takeover are its round trips."""
    Member(pk="GONE", email="o@x.io").save()
    raw_client(tables).delete_item(TableName="observe_members", Key={"pk": {"S": "GONE"}})
    _EXPORTER.clear()
    Member(pk="NEW", email="o@x.io").save()
    [span] = ours(spans)
    got = _attrs(span)
    assert (got["dynaunique.healed_orphans"], got["dynaunique.round_trips"],
            got["dynaunique.items"], got["dynaunique.outcome"]) == (1, 3, 3, "ok")


@pytest.mark.anyio
async def test_async_writes_have_the_same_spans_current_while_sent(
        dynaunique_aio_db: str, spans: InMemorySpanExporter) -> None:
    use_endpoint(dynaunique_aio_db, Member)
    create_tables(Member)
    seen, record = _span_ids_at_send(Member)
    try:
        member = Member(pk="A", email="a@x.io")
        await member.asave()
        await member.aupdate(actions=[Member.visits.set(2)])
        async with atomic():
            await Member(pk="B", email="b@x.io").asave()
        with pytest.raises(UniqueViolation):
            await Member(pk="C", email="a@x.io").asave()
        await member.adelete()
    finally:
        clients.client_for(Member).meta.events.unregister("before-send.dynamodb", record)
    got = ours(spans)
    assert [(s.name, _attrs(s)["dynaunique.outcome"], _attrs(s)["dynaunique.items"])
            for s in got] == [
        ("dynaunique.save", "ok", 2), ("dynaunique.update", "ok", 1),
        ("dynaunique.atomic", "ok", 2), ("dynaunique.save", "unique_violation", 2),
        ("dynaunique.delete", "ok", 2)]
    # The refused save sends twice under its span: the transaction, then the read of the
    # lock's owner (issue 36: it holds the value, so the refusal stands).
    ids = [s.context.span_id for s in got if s.context is not None]
    assert seen == [*ids[:4], ids[3], ids[4]]


# --- privacy -------------------------------------------------------------------------------------


def test_a_hashed_value_appears_in_no_log_line_and_no_span(
        tables: str, spans: InMemorySpanExporter) -> None:
    """Logging at DEBUG to a real formatter (fields included), tracing on, and a workload that
    creates, violates, moves, goes stale, is retried and deletes over a hashed constraint."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s %(dynaunique)s"))
    log = logging.getLogger("dynaunique")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        set_conflict_rate(tables, 0.4, seed=3)
        first = Patient(pk="P1", email=SECRET_EMAIL)
        first.save()
        with pytest.raises(UniqueViolation) as violation:
            Patient(pk="P2", email=SECRET_EMAIL.upper()).save()
        stale = Patient.get("P1", consistent_read=True)
        first.note = "moved"
        first.email = "other-" + SECRET_EMAIL
        first.save()
        stale.note = "stale"
        with pytest.raises(ConcurrentModificationError):
            stale.save()
        with atomic():
            Patient(pk="P3", email=SECRET_EMAIL).save()
        first.delete()
        set_conflict_rate(tables, 0)
    finally:
        log.removeHandler(handler)
        log.setLevel(logging.NOTSET)
    text = stream.getvalue()
    assert "unique_violation" in text and "stale_write_refused" in text
    assert "request" in text
    span_text = repr([(s.name, s.attributes, [(e.name, e.attributes) for e in s.events])
                      for s in spans.get_finished_spans()])
    assert len(ours(spans)) == 6
    for raw in (SECRET_EMAIL, SECRET_EMAIL.casefold(), SECRET_EMAIL.upper()):
        assert raw not in text
        assert raw not in span_text
        assert raw not in str(violation.value)


def test_a_hashed_value_refused_before_sending_appears_in_no_span_and_no_log(
        tables: str, spans: InMemorySpanExporter, caught: pytest.LogCaptureFixture) -> None:
    """A hashed value DynamoDB would refuse (a lone surrogate), and a lookup of it: the
    InvalidValueError the span records (message and stack trace) never quotes it."""
    bad = SECRET_EMAIL + "\ud800"
    with pytest.raises(InvalidValueError):
        Patient(pk="P1", email=bad).save()
    with pytest.raises(InvalidValueError):
        Patient.get_by_unique("email", bad)
    with pytest.raises(Patient.DoesNotExist):
        Patient.get_by_unique("email", SECRET_EMAIL)
    (span,) = ours(spans)
    assert (span.name, _attrs(span)["dynaunique.outcome"]) == ("dynaunique.save", "error")
    (event,) = span.events
    assert event.attributes is not None
    assert event.attributes["exception.message"] == (
        "Patient.email = <hashed> cannot be stored as a UnicodeAttribute: it is not valid UTF-8 "
        "(it holds a lone surrogate)")
    span_text = repr([(s.name, s.attributes, [(e.name, e.attributes) for e in s.events])
                      for s in spans.get_finished_spans()])
    log_text = repr([(r.getMessage(), getattr(r, "dynaunique", None)) for r in caught.records])
    for raw in (SECRET_EMAIL, SECRET_EMAIL.casefold()):
        for text in (span_text, log_text):
            assert raw not in text and repr(raw)[1:-1] not in text


# --- without OpenTelemetry -----------------------------------------------------------------------

_WITHOUT_OTEL = textwrap.dedent("""
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError("opentelemetry is not installed")
            return None

    sys.meta_path.insert(0, Block())
    from dynaunique import Model, UniqueViolation
    from dynaunique.attributes import UnicodeAttribute
    from dynaunique.testing import create_tables, use_endpoint

    class Plain(Model):
        class Meta:
            table_name = "observe_no_otel"

        pk = UnicodeAttribute(hash_key=True)
        email = UnicodeAttribute(unique=True, null=True)

    use_endpoint(sys.argv[1], Plain)
    create_tables(Plain)
    Plain(pk="A", email="a@x.io").save()
    try:
        Plain(pk="B", email="a@x.io").save()
    except UniqueViolation:
        pass
    else:
        raise SystemExit("no violation")
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    print("otel modules:", loaded)
""")


def test_without_opentelemetry_writes_work_import_nothing_and_print_nothing(
        dynaunique_db: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _WITHOUT_OTEL, dynaunique_db], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "otel modules: []\n"
    assert done.stderr == ""


@pytest.mark.anyio
async def test_async_writes_log_the_same_events(dynaunique_aio_db: str,
                                                caught: pytest.LogCaptureFixture) -> None:
    """The events come from the generators both senders drive: asave logs what save logs."""
    use_endpoint(dynaunique_aio_db, Member)
    create_tables(Member)
    set_conflict_rate(dynaunique_aio_db, 0.5, seed=7)
    for i in range(6):
        await Member(pk=f"M{i}", email=f"m{i}@x.io").asave()
    set_conflict_rate(dynaunique_aio_db, 0)
    with pytest.raises(UniqueViolation):
        await Member(pk="B", email="m0@x.io").asave()
    assert events(caught, "unique_violation") == [{
        "event": "unique_violation", "model": "Member", "constraint": "EMAIL",
        "fields": ["email"], "hashed": False, "value": "m0@x.io",
        "lock_key": lock_key("EMAIL", ("m0@x.io",)), "holder": {"pk": "M0"},
    }]
    retries = events(caught, "retry")
    assert retries and {r["reason"] for r in retries} == {"conflict"}
    assert [r["operation"] for r in events(caught, "request")] == ["TransactWriteItems"] * (
        7 + len(retries)) + ["GetItem"]   # the refusal's read of the lock's owner
