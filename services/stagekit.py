"""Small pieces every stage's wiring uses."""

from __future__ import annotations

from collections.abc import Sequence

from services.kafka.delivery import BatchHandler
from services.kafka.records import Record


class LateHandler:
    """A batch handler bound after subscription (the handler needs the DeadLetters the subscription makes)."""

    def __init__(self) -> None:
        self._handler: BatchHandler | None = None

    def bind(self, handler: BatchHandler) -> None:
        self._handler = handler

    async def __call__(self, records: Sequence[Record]) -> None:
        if self._handler is None:
            raise RuntimeError("stage handler used before it was bound")
        await self._handler(records)
