"""Conflicts stage wiring: group ``om-conflicts`` on ``om.graph.v1``."""

from __future__ import annotations

from services.conflicts.handler import ConflictsHandler
from services.kafka.app import subscribe_batch
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import LateHandler
from services.taxonomy import default_registry, load_registry

STAGE = "conflicts"
TOPIC = "graph"
BATCH = 200


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> ConflictsHandler:
    s = rt.settings
    registry = load_registry(s.taxonomy_registry_path) if s.taxonomy_registry_path else default_registry()
    return ConflictsHandler(pool=rt.pool, dead_letters=dead_letters, registry=registry)


def register(rt: Runtime) -> None:
    s = rt.settings
    late = LateHandler()
    dead_letters = subscribe_batch(
        rt.broker,
        s,
        rt.publisher,
        stage=STAGE,
        topic=s.topic(TOPIC),
        handler=late,
        max_records=BATCH,
        description="Writes entities/facts/evidence: identity merge, dedup, exclusive close, retraction",
    )
    handler = build_handler(rt, dead_letters)
    rt.extras["conflicts_handler"] = handler
    late.bind(handler)
