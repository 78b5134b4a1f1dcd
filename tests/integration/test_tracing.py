"""One envelope posted to the HTTP ingress yields one connected trace across ingest -> embed / extract
-> conflicts (W3C traceparent in the Kafka record headers); retrieve_context has a span per arm.
Spans are collected with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services import tracing
from services.settings import Settings
from tests.integration.admin_helpers import api_client
from tests.integration.helpers import envelope, eventually, principal

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    tracing.use_provider(provider)
    try:
        yield exp
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def _named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_one_envelope_is_one_trace_across_the_stages(
    settings: Settings, pipeline: Any, exporter: InMemorySpanExporter
) -> None:
    rt = await pipeline("ingest", "embed", "extract", "conflicts", "retrieve")
    g = principal()
    env = envelope("trace-1", "Dana Reyes founded Acme Robotics in 2019.", principals=[g])
    async with api_client(rt) as client:
        r = await client.post("/ingress/envelope", json=env.model_dump(mode="json"), headers={"X-Api-Key": "test-key"})
        assert r.status_code == 202, r.text
        wanted = ("ingest.process", "embed.process", "extract.process", "conflicts.process")
        spans = await eventually(
            lambda: _async(exporter.get_finished_spans()),
            until=lambda ss: all(_named(ss, n) for n in wanted),
            timeout=60,
        )
        [root] = _named(spans, "ingress.envelope")
        [ingest] = _named(spans, "ingest.process")
        [embed] = _named(spans, "embed.process")
        [extract] = _named(spans, "extract.process")
        conflicts = _named(spans, "conflicts.process")
        trace_id = root.context.trace_id
        for sp in (ingest, embed, extract, *conflicts):
            assert sp.context.trace_id == trace_id, sp.name
        assert root.parent is None
        assert ingest.parent is not None and ingest.parent.span_id == root.context.span_id
        assert embed.parent is not None and embed.parent.span_id == ingest.context.span_id
        assert extract.parent is not None and extract.parent.span_id == ingest.context.span_id
        assert all(c.parent is not None and c.parent.span_id == extract.context.span_id for c in conflicts)
        assert ingest.attributes is not None and ingest.attributes["orgmem.envelope_id"] == str(env.envelope_id)
        assert ingest.attributes["orgmem.topic"] == settings.topic("envelopes")
        assert isinstance(ingest.attributes["orgmem.offset"], int)

        exporter.clear()
        resp = await client.post(
            "/tools/retrieve_context",
            json={"query": "who founded Acme Robotics?"},
            headers={"X-Api-Key": "test-key", "X-Principal-Groups": g},
        )
        assert resp.status_code == 200, resp.text
        assert [p["external_id"] for p in resp.json()["passages"]][:1] == ["trace-1"]
        spans = exporter.get_finished_spans()
        [call] = _named(spans, "retrieve_context")
        arms = {s.name for s in spans if s.parent is not None and s.parent.span_id == call.context.span_id}
        assert {"retrieve.dense", "retrieve.lexical", "retrieve.relational", "retrieve.fetch"} <= arms
        assert all(s.context.trace_id == call.context.trace_id for s in spans if s.name.startswith("retrieve."))


async def _async(value: Any) -> Any:
    return value
