"""The one way a batch stage is wired: subscribe its consumer group, then bind the handler the stage builds
(the handler needs the stage's DeadLetters, which the subscription creates)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from services import logs, tracing
from services.kafka.app import subscribe_batch
from services.kafka.delivery import BatchHandler, DeadLetters
from services.kafka.records import Record
from services.metrics import STAGE_BATCH_SECONDS, STAGE_FAILED, STAGE_PROCESSED
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


class InstrumentedHandler:
    """Metrics and trace spans around every call of a stage's batch handler (each retry attempt too)."""

    def __init__(self, stage: str, inner: BatchHandler) -> None:
        self.stage = stage
        self.inner = inner

    async def __call__(self, records: Sequence[Record]) -> None:
        start = time.perf_counter()
        try:
            with logs.stage_context(self.stage, records), tracing.stage_spans(self.stage, records):
                await self.inner(records)
        except BaseException:
            STAGE_FAILED.labels(self.stage).inc(len(records))
            raise
        else:
            STAGE_PROCESSED.labels(self.stage).inc(len(records))
        finally:
            STAGE_BATCH_SECONDS.labels(self.stage).observe(time.perf_counter() - start)


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
        handler=InstrumentedHandler(stage, late),
        max_records=max_records,
        description=description,
    )
    handler = build(rt, dead_letters)
    rt.extras[f"{stage}_handler"] = handler
    late.bind(handler)
    return handler
