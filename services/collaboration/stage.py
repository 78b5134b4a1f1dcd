"""Collaboration stage wiring: group ``om-collab`` on ``om.documents.v1``."""

from __future__ import annotations

from services.collaboration.handler import CollabHandler
from services.kafka.app import subscribe_batch
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import LateHandler

STAGE = "collab"
TOPIC = "documents"
BATCH = 500


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> CollabHandler:
    return CollabHandler(pool=rt.pool, dead_letters=dead_letters)


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
        description="Aggregates person-person collaboration edges (co-participation, threads) with decay",
    )
    handler = build_handler(rt, dead_letters)
    rt.extras["collab_handler"] = handler
    late.bind(handler)
