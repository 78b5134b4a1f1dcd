"""Prometheus metrics (one registry per process).

Per stage: records processed / failed / dead-lettered, batch latency, consumer lag (refreshed on
scrape, cached ``LAG_TTL_S``); embedding texts and tokens; retrieval latency per arm; rate-limit
rejections; HTTP; plus the process collectors (CPU, memory, open fds, GC, Python version).
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    platform_collector,
    process_collector,
)

REGISTRY = CollectorRegistry(auto_describe=True)
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

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

STAGE_PROCESSED = Counter(
    "orgmem_stage_records_processed_total", "records a stage handled successfully", ["stage"], registry=REGISTRY
)
STAGE_FAILED = Counter(
    "orgmem_stage_records_failed_total",
    "records in stage batches that raised (each attempt counts; retried or dead-lettered after)",
    ["stage"],
    registry=REGISTRY,
)
STAGE_DEAD_LETTERED = Counter(
    "orgmem_stage_records_dead_lettered_total",
    "records a stage sent to its dead-letter topic",
    ["stage"],
    registry=REGISTRY,
)
STAGE_BATCH_SECONDS = Histogram(
    "orgmem_stage_batch_seconds",
    "wall time of one stage batch (handler call)",
    ["stage"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
CONSUMER_LAG = Gauge(
    "orgmem_consumer_lag_records",
    "records in a stage's input topic its group has not committed",
    ["stage"],
    registry=REGISTRY,
)
EMBED_TEXTS = Counter("orgmem_embed_texts_total", "texts sent to the embedding model", ["model"], registry=REGISTRY)
EMBED_TOKENS = Counter("orgmem_embed_tokens_total", "tokens the embedding model consumed", ["model"], registry=REGISTRY)
RETRIEVAL_ARM_SECONDS = Histogram(
    "orgmem_retrieval_arm_seconds",
    "latency of one retrieval step (dense, lexical, relational, semantic, fetch, embed, rerank)",
    ["arm"],
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
RATE_LIMITED = Counter(
    "orgmem_rate_limit_rejections_total", "requests refused by a rate limit (429)", ["scope"], registry=REGISTRY
)
MEMORY_WRITES = Counter(
    "orgmem_memory_writes_total",
    "Agent memory writes by outcome (accepted, forgotten, forbidden, throttled_cap, throttled_cooldown)",
    ["outcome"],
    registry=REGISTRY,
)
STRUCTURED_IGNORED = Counter(
    "orgmem_structured_fields_ignored_total",
    "structured_fields keys no taxonomy predicate binds: kept with the document, no claim extracted",
    registry=REGISTRY,
)
