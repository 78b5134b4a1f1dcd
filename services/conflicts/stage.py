"""Conflicts stage wiring (catalogue entry ``conflicts``): group ``om-conflicts`` on ``om.graph.v1``."""

from __future__ import annotations

from services.conflicts.handler import ConflictsHandler
from services.kafka.delivery import DeadLetters
from services.runtime import Runtime
from services.taxonomy import proposals


def build_handler(rt: Runtime, dead_letters: DeadLetters) -> ConflictsHandler:
    return ConflictsHandler(
        pool=rt.pool,
        dead_letters=dead_letters,
        registry=rt.registry,
        webhook=proposals.webhook_from_settings(rt.settings),
    )
