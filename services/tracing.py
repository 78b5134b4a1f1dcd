"""OpenTelemetry tracing: one trace per envelope across the Kafka hops, a span per retrieval arm.

- Off unless configured: with no provider every span is OpenTelemetry's non-recording span (cheap).
  ``configure(settings)`` installs an SDK provider exporting over OTLP/HTTP when
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (needs the optional ``opentelemetry-exporter-otlp-proto-http``);
  tests install their own provider with ``use_provider`` (the SDK's in-memory exporter).
- Propagation: W3C ``traceparent`` in Kafka record headers. HTTP ingress opens the root span and the
  produced record carries it; each stage opens ``<stage>.process`` per traced record as a child of the
  record's ``traceparent`` (``stage_spans``), and whatever the stage then publishes under the same Kafka
  key carries that span's ``traceparent`` (``TracedPublisher``), so ingest -> embed / extract -> conflicts
  is one connected trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.errors import ConfigurationError
from services.kafka.app import BrokerPublisher
from services.kafka.records import Record
from services.settings import Settings

TRACEPARENT = "traceparent"
_PROPAGATOR = TraceContextTextMapPropagator()
_provider: Any = None
_by_key: contextvars.ContextVar[dict[bytes, Span] | None] = contextvars.ContextVar("orgmem_span_by_key", default=None)


def use_provider(provider: Any) -> None:
    """Send spans to ``provider`` (an SDK ``TracerProvider``); ``None`` switches tracing off again."""
    global _provider
    _provider = provider


def configure(settings: Settings) -> bool:
    """Install an OTLP-exporting provider when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. True if tracing is on."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or _provider is not None:
        return _provider is not None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise ConfigurationError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but opentelemetry-exporter-otlp-proto-http is not installed"
            " (pip install 'org-memory[otlp]')",
            setting="OTEL_EXPORTER_OTLP_ENDPOINT",
        ) from exc
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME", "orgmem")
    provider = TracerProvider(resource=Resource.create({"service.name": name, "orgmem.schema": settings.db_schema}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider)
    return True


def tracer() -> Tracer:
    if _provider is None:
        return trace.NoOpTracer()
    return _provider.get_tracer("orgmem")  # type: ignore[no-any-return]


def enabled() -> bool:
    return _provider is not None


@contextlib.contextmanager
def span(name: str, *, parent: Context | None = None, kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    with tracer().start_as_current_span(name, context=parent, kind=kind) as sp:
        yield sp


def set_attributes(sp: Span, **attrs: Any) -> None:
    if sp.is_recording():
        for k, v in attrs.items():
            if v is not None:
                sp.set_attribute(f"orgmem.{k}", v if isinstance(v, (str, int, float, bool)) else str(v))


def record_span(name: str, start_s: float, end_s: float, **attrs: Any) -> None:
    """A finished child span of the current span from two ``time.time()`` instants (retrieval arms that
    run concurrently are timed by the caller)."""
    if _provider is None:
        return
    sp = tracer().start_span(name, start_time=int(start_s * 1e9))
    set_attributes(sp, **attrs)
    sp.end(end_time=int(end_s * 1e9))


def inject(headers: dict[str, str], sp: Span | None = None) -> dict[str, str]:
    """``headers`` plus the ``traceparent`` of ``sp`` (default: the current span), if one is recording."""
    target = sp or trace.get_current_span()
    if not target.get_span_context().is_valid:
        return headers
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(target))
    return headers | carrier if TRACEPARENT in carrier else headers


def extract(record: Record) -> Context | None:
    value = record.header(TRACEPARENT)
    if not value:
        return None
    ctx = _PROPAGATOR.extract({TRACEPARENT: value})
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


@contextlib.contextmanager
def stage_spans(stage: str, records: Sequence[Record]) -> Iterator[None]:
    """One ``<stage>.process`` span per traced record (child of its ``traceparent``), current for the
    handler's publishes by Kafka key. Untraced records open no span."""
    if _provider is None:
        yield
        return
    spans: dict[bytes, Span] = {}
    opened: list[Span] = []
    for r in records:
        parent = extract(r)
        if parent is None:
            continue
        sp = tracer().start_span(f"{stage}.process", context=parent, kind=SpanKind.CONSUMER)
        set_attributes(
            sp,
            stage=stage,
            topic=r.topic,
            partition=r.partition,
            offset=r.offset,
            envelope_id=r.header("x-envelope-id"),
        )
        opened.append(sp)
        if r.key is not None:
            spans[r.key] = sp
    token = _by_key.set(spans)
    failed: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        failed = exc
        raise
    finally:
        _by_key.reset(token)
        end = time.time_ns()
        for sp in opened:
            if failed is not None:
                sp.record_exception(failed)
                sp.set_status(trace.Status(trace.StatusCode.ERROR, type(failed).__name__))
            sp.end(end_time=end)


def headers_for(key: bytes | None, headers: dict[str, str]) -> dict[str, str]:
    """The headers of a record about to be produced: the span of the consumed record with the same key
    (inside ``stage_spans``), else the current span (HTTP ingress)."""
    if _provider is None:
        return headers
    spans = _by_key.get()
    if spans and key is not None and key in spans:
        return inject(headers, spans[key])
    return inject(headers)


class TracedPublisher(BrokerPublisher):
    """``BrokerPublisher`` that adds ``traceparent`` to what it produces (nothing when tracing is off)."""

    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> Any:
        return await super().send(topic, value, key=key, headers=headers_for(key, headers))

    async def send_many(self, items: list[tuple[str, bytes, bytes | None, dict[str, str]]]) -> None:
        if _provider is not None:
            items = [(t, v, k, headers_for(k, h)) for t, v, k, h in items]
        await super().send_many(items)
