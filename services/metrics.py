"""Prometheus metrics (one registry per process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS = Counter("orgmem_http_requests_total", "HTTP requests", ["route", "method", "status"], registry=REGISTRY)
HTTP_LATENCY = Histogram(
    "orgmem_http_request_seconds",
    "HTTP request latency",
    ["route"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
INGRESS_ENVELOPES = Counter(
    "orgmem_ingress_envelopes_total",
    "Envelopes accepted or rejected at HTTP ingress",
    ["outcome"],
    registry=REGISTRY,
)
RETRIEVALS = Counter("orgmem_retrievals_total", "retrieve calls", ["tool", "transport"], registry=REGISTRY)
MEMORY_WRITES = Counter(
    "orgmem_memory_writes_total",
    "Agent memory writes by outcome (accepted, forgotten, forbidden, throttled_cap, throttled_cooldown)",
    ["outcome"],
    registry=REGISTRY,
)
