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
