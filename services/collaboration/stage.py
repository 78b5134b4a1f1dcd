"""Collaboration stage wiring: group ``om-collab`` on ``om.documents.v1``."""

from __future__ import annotations

from collections.abc import Sequence

from services.collaboration.handler import CollabHandler
from services.kafka.app import subscribe_batch
from services.kafka.records import Record
from services.runtime import Runtime

STAGE = "collab"
BATCH = 500


def register(rt: Runtime) -> None:
    s = rt.settings
    handler: CollabHandler | None = None

    async def handle(records: Sequence[Record]) -> None:
        assert handler is not None
        await handler(records)

    dead_letters = subscribe_batch(
        rt.broker,
        s,
        rt.publisher,
        stage=STAGE,
        topic=s.topic("documents"),
        handler=handle,
        max_records=BATCH,
        description="Aggregates person-person collaboration edges (co-participation, threads) with decay",
    )
    handler = CollabHandler(pool=rt.pool, dead_letters=dead_letters)
    rt.extras["collab_handler"] = handler
