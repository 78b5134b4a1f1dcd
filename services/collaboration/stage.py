"""Collaboration stage wiring: group ``om-collab`` on ``om.documents.v1``."""

from __future__ import annotations

from services.collaboration.handler import CollabHandler
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.stagekit import register_batch_stage

STAGE = "collab"
TOPIC = "documents"
BATCH = 500


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> CollabHandler:
    return CollabHandler(pool=rt.pool, dead_letters=dead_letters)


def register(rt: Runtime) -> None:
    register_batch_stage(
        rt,
        stage=STAGE,
        topic=TOPIC,
        build=build_handler,
        max_records=BATCH,
        description="Aggregates person-person collaboration edges (co-participation, threads) with decay",
    )
