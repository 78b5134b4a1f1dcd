"""Collaboration stage wiring (catalogue entry ``collab``): group ``om-collab`` on ``om.documents.v1``."""

from __future__ import annotations

from services.collaboration.handler import CollabHandler
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> CollabHandler:
    return CollabHandler(pool=rt.pool, dead_letters=dead_letters)
