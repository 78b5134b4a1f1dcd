"""Conflicts stage wiring: group ``om-conflicts`` on ``om.graph.v1``."""

from __future__ import annotations

from collections.abc import Sequence

from services.conflicts.handler import ConflictsHandler
from services.kafka.app import subscribe_batch
from services.kafka.records import Record
from services.runtime import Runtime
from services.taxonomy import default_registry, load_registry

STAGE = "conflicts"
BATCH = 200


def register(rt: Runtime) -> None:
    s = rt.settings
    registry = load_registry(s.taxonomy_registry_path) if s.taxonomy_registry_path else default_registry()
    handler: ConflictsHandler | None = None

    async def handle(records: Sequence[Record]) -> None:
        assert handler is not None
        await handler(records)

    dead_letters = subscribe_batch(
        rt.broker,
        s,
        rt.publisher,
        stage=STAGE,
        topic=s.topic("graph"),
        handler=handle,
        max_records=BATCH,
        description="Writes entities/facts/evidence: identity merge, dedup, exclusive close, retraction",
    )
    handler = ConflictsHandler(pool=rt.pool, dead_letters=dead_letters, registry=registry)
    rt.extras["conflicts_handler"] = handler
