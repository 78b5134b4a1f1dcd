"""Conflicts stage wiring: group ``om-conflicts`` on ``om.graph.v1``."""

from __future__ import annotations

from services.conflicts.handler import ConflictsHandler
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import register_batch_stage
from services.taxonomy import default_registry, load_registry, proposals

STAGE = "conflicts"
TOPIC = "graph"
BATCH = 200


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> ConflictsHandler:
    s = rt.settings
    registry = load_registry(s.taxonomy_registry_path) if s.taxonomy_registry_path else default_registry()
    return ConflictsHandler(
        pool=rt.pool, dead_letters=dead_letters, registry=registry, webhook=proposals.webhook_from_settings(s)
    )


def register(rt: Runtime) -> None:
    register_batch_stage(
        rt,
        stage=STAGE,
        topic=TOPIC,
        build=build_handler,
        max_records=BATCH,
        description="Writes entities/facts/evidence: identity merge, dedup, exclusive close, retraction",
    )
