"""Cluster mode: replicated topics carry min.insync.replicas (2 by default); the single broker's specs unchanged."""

from __future__ import annotations

import pytest

from services.kafka.topics import topic_specs
from services.settings import Settings

pytestmark = pytest.mark.unit


def _settings(**kw: object) -> Settings:
    return Settings(database_url="postgresql://x@127.0.0.1/x", kafka_bootstrap_servers="127.0.0.1:1", **kw)  # type: ignore[arg-type]


def test_single_broker_specs_have_no_isr_override() -> None:
    assert all("min.insync.replicas" not in s.configs for s in topic_specs(_settings()))


def test_replicated_topics_get_min_insync_replicas_two() -> None:
    specs = topic_specs(_settings(topic_replication_factor=3))
    assert specs and all(s.configs["min.insync.replicas"] == "2" for s in specs)
    assert all(
        s.configs["min.insync.replicas"] == "3"
        for s in topic_specs(_settings(topic_replication_factor=5, topic_min_insync_replicas=3))
    )


def test_derived_topics_keep_the_fsync_unless_turned_off() -> None:
    """By default every topic keeps the local broker's fsync per append; ``DERIVED_TOPICS_FSYNC=false`` lets the
    derived topics (which a replay of their producer re-emits) use Kafka's default flushing, never the source of truth
    or the dead letters."""
    default = {s.logical: s.configs.get("flush.messages") for s in topic_specs(_settings())}
    assert all(v is None for v in default.values())
    flush = {s.logical: s.configs.get("flush.messages") for s in topic_specs(_settings(derived_topics_fsync=False))}
    assert flush["envelopes"] is None
    assert all(v is None for k, v in flush.items() if k.startswith("dlq."))
    assert {k for k, v in flush.items() if v is not None} == {"chunks", "documents", "graph", "rpc.retrieve"}
