"""The one way a batch stage is wired: subscribe its consumer group, then bind the handler the stage builds
(the handler needs the stage's DeadLetters, which the subscription creates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from services.kafka.app import subscribe_batch
from services.kafka.delivery import BatchHandler, DeadLetters
from services.kafka.records import Record
from services.runtime import Runtime

H = TypeVar("H", bound=BatchHandler)


class LateHandler:
    """A batch handler bound after subscription."""

    def __init__(self) -> None:
        self._handler: BatchHandler | None = None

    def bind(self, handler: BatchHandler) -> None:
        self._handler = handler

    async def __call__(self, records: Sequence[Record]) -> None:
        if self._handler is None:
            raise RuntimeError("stage handler used before it was bound")
        await self._handler(records)


def register_batch_stage(
    rt: Runtime,
    *,
    stage: str,
    topic: str,
    build: Callable[[Runtime, DeadLetters], H],
    max_records: int,
    description: str,
) -> H:
    """Subscribe ``stage`` (its consumer group) to the logical ``topic`` and bind ``build(rt, dead_letters)``.

    The handler is also kept in ``rt.extras["<stage>_handler"]`` (tests read it).
    """
    late = LateHandler()
    dead_letters = subscribe_batch(
        rt.broker,
        rt.settings,
        rt.publisher,
        stage=stage,
        topic=rt.settings.topic(topic),
        handler=late,
        max_records=max_records,
        description=description,
    )
    handler = build(rt, dead_letters)
    rt.extras[f"{stage}_handler"] = handler
    late.bind(handler)
    return handler
