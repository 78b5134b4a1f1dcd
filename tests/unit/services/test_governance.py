"""Pure governance helpers: spend alert levels, the health fold, ACL intervals, purge batching,
archived-line reads, JSON log lines with the batch position, trace header propagation."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services import logs, tracing
from services.governance.access import intervals, state_at
from services.governance.budgets import alert_level
from services.governance.health import fold_status
from services.governance.holds import archived_line
from services.governance.retention import group_batches
from services.kafka.records import Record

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_alert_levels_at_80_and_100_percent() -> None:
    assert alert_level(0, 1000) is None
    assert alert_level(799, 1000) is None
    assert alert_level(800, 1000) == "warning"
    assert alert_level(999, 1000) == "warning"
    assert alert_level(1000, 1000) == "exhausted"
    assert alert_level(0, 0) == "exhausted"  # a zero budget stops optional work outright


def _stage(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "stage": "ingest",
        "error": None,
        "oldest_unprocessed_age_s": None,
        "dead_letters_waiting": 0,
    }
    return base | kw


def test_health_fold() -> None:
    up = [{"name": "postgres", "ok": True, "detail": "ok"}]
    assert fold_status(up, [_stage()], [], []) == ("ok", [])
    down = [{"name": "kafka", "ok": False, "detail": "refused"}]
    status, reasons = fold_status(up + down, [_stage(dead_letters_waiting=3)], [], [])
    assert status == "failing" and reasons == ["kafka down: refused"]
    status, reasons = fold_status(up, [_stage(oldest_unprocessed_age_s=301.0)], [], [])
    assert status == "degraded" and "oldest unprocessed record 301s old" in reasons[0]
    assert fold_status(up, [_stage(oldest_unprocessed_age_s=299.0)], [], [])[0] == "ok"
    assert fold_status(up, [_stage(dead_letters_waiting=2)], [], [])[0] == "degraded"
    warning = {"workspace": "w", "model": "*", "level": "warning"}
    assert fold_status(up, [], [warning], [])[0] == "ok"
    assert fold_status(up, [], [warning | {"level": "exhausted"}], [])[0] == "degraded"
    due = {"kind": "purge_due", "detail": "x"}
    assert fold_status(up, [], [], [due])[0] == "ok"
    assert fold_status(up, [], [], [due | {"kind": "blob_queue"}])[0] == "degraded"


def test_acl_intervals_and_state_at() -> None:
    rows = [
        {"valid_from": T0, "principals": ["group:b", "group:a"], "deleted": False},
        {"valid_from": T0 + timedelta(days=1), "principals": ["group:c"], "deleted": False},
        {"valid_from": T0 + timedelta(days=2), "principals": ["group:c"], "deleted": True},
    ]
    hist = intervals(rows)
    assert [h["valid_to"] for h in hist] == [T0 + timedelta(days=1), T0 + timedelta(days=2), None]
    assert hist[0]["principals"] == ["group:a", "group:b"] and hist[2]["principals"] == []
    assert state_at(hist, T0 - timedelta(seconds=1)) is None
    assert state_at(hist, T0) == hist[0]
    assert state_at(hist, T0 + timedelta(days=1)) == hist[1]  # closed-open: the boundary is the new state
    assert state_at(hist, T0 + timedelta(days=9)) == hist[2]


def _due(ws: str, reason: str, kind: str = "*") -> dict[str, object]:
    return {
        "id": uuid.uuid4(),
        "workspace": ws,
        "reason": reason,
        "p_source": "slack",
        "p_kind": kind,
        "max_age_days": 30,
        "purge_tombstoned_after_days": None,
    }


def test_purge_batches_are_bounded_and_never_mix_policies() -> None:
    rows = [_due("a", "max_age") for _ in range(5)] + [_due("a", "tombstoned"), _due("b", "max_age")]
    batches = group_batches(rows, 2)
    assert [len(b.document_ids) for b in batches] == [2, 2, 1, 1, 1]
    assert {(b.workspace, b.reason) for b in batches} == {("a", "max_age"), ("a", "tombstoned"), ("b", "max_age")}
    assert sum(len(b.document_ids) for b in batches) == len(rows)
    assert all(len({r for r in b.document_ids}) == len(b.document_ids) for b in batches)


def test_archived_line_reads_one_envelope_and_sees_purged_lines() -> None:
    data = b'{"envelope_id": "a"}\n\n{"envelope_id": "c"}\n'
    assert archived_line(data, "k#0") == '{"envelope_id": "a"}'
    assert archived_line(data, "k#1") is None  # blanked by a purge
    assert archived_line(data, "k#2") == '{"envelope_id": "c"}'
    assert archived_line(data, "k#9") is None
    with pytest.raises(ValueError):
        archived_line(b"not json\n", "k#0")


def _record(offset: int, envelope_id: str | None = None, traceparent: str | None = None) -> Record:
    headers: list[tuple[str, bytes]] = []
    if envelope_id:
        headers.append(("x-envelope-id", envelope_id.encode()))
    if traceparent:
        headers.append(("traceparent", traceparent.encode()))
    return Record("om.envelopes.v1", 3, offset, b"w/s/x", b"{}", tuple(headers))


def test_json_log_lines_carry_the_batch_position(caplog: pytest.LogCaptureFixture) -> None:
    fmt = logs.JsonFormatter()
    rec = logging.LogRecord("orgmem.ingest", logging.INFO, __file__, 1, "applied %d", (2,), None)
    assert "topic" not in json.loads(fmt.format(rec))
    with logs.stage_context("ingest", [_record(7, "e-1"), _record(9, "e-2")]):
        line = json.loads(fmt.format(rec))
    assert line["msg"] == "applied 2" and line["stage"] == "ingest" and line["topic"] == "om.envelopes.v1"
    assert line["partition"] == 3 and line["offset"] == [7, 9] and line["envelope_id"] == ["e-1", "e-2"]
    with logs.stage_context("ingest", [_record(7, "e-1")]):
        one = json.loads(fmt.format(rec))
    assert one["offset"] == 7 and one["envelope_id"] == "e-1"


def test_stage_spans_continue_the_record_trace_and_tag_what_is_published() -> None:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    tracing.use_provider(provider)
    try:
        assert tracing.headers_for(b"k", {}) == {}  # no current span: nothing to propagate
        with tracing.span("ingress.envelope"):
            parent = tracing.headers_for(b"w/s/x", {"a": "b"})
        assert parent["a"] == "b" and parent["traceparent"].startswith("00-")
        with tracing.stage_spans("ingest", [_record(1, "e-1", parent["traceparent"]), _record(2)]):
            child = tracing.headers_for(b"w/s/x", {})
            other = tracing.headers_for(b"another-key", {})
        assert other == {}
        [ingest, ingress] = sorted(exp.get_finished_spans(), key=lambda s: s.name)
        assert ingest.name == "ingest.process" and ingest.parent is not None
        assert ingest.parent.span_id == ingress.context.span_id
        assert child["traceparent"].split("-")[1] == format(ingress.context.trace_id, "032x")
        assert child["traceparent"].split("-")[2] == format(ingest.context.span_id, "016x")
    finally:
        tracing.use_provider(None)
    assert tracing.headers_for(b"w/s/x", {"x": "y"}) == {"x": "y"}


def test_otlp_needs_its_exporter_and_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.errors import ConfigurationError
    from services.settings import load_settings

    settings = load_settings(_env_file=None, database_url="postgresql://x/y", kafka_bootstrap_servers="k:1")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert tracing.configure(settings) is False and not tracing.enabled()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigurationError) as err:
            tracing.configure(settings)
        assert err.value.context["setting"] == "OTEL_EXPORTER_OTLP_ENDPOINT" and "org-memory[otlp]" in str(err.value)
    else:  # installed: tracing turns on
        assert tracing.configure(settings) is True
        tracing.use_provider(None)


def test_rate_limit_refusals_are_counted() -> None:
    from services.metrics import REGISTRY
    from services.throttle import WriteThrottle

    def count(scope: str) -> float:
        value = REGISTRY.get_sample_value("orgmem_rate_limit_rejections_total", {"scope": scope})
        return value or 0.0

    cool, cap = count("memory_write_cooldown"), count("memory_write_cap")
    now = [0.0]
    t = WriteThrottle(cooldown_s=10, cap=2, clock=lambda: now[0])
    assert t.try_claim("user:x", "s") is None
    assert t.try_claim("user:x", "s") is not None  # cooldown
    now[0] = 20.0
    assert t.try_claim("user:x", "s") is None
    now[0] = 40.0
    assert t.try_claim("user:x", "s") is not None  # cap
    assert count("memory_write_cooldown") == cool + 1 and count("memory_write_cap") == cap + 1
