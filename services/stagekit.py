"""The one way a batch stage is wired: subscribe its consumer group, then bind the handler the stage builds
(the handler needs the stage's DeadLetters, which the subscription creates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from services.health import check_kafka, check_postgres, check_store
from services.kafka.app import subscribe_batch
from services.kafka.deadletters import PgDeadLetterLedger
from services.kafka.delivery import BatchHandler, DeadLetters
from services.kafka.records import Record
from services.kafka.watch import DependencyWatch
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

    The handler is also kept in ``rt.extras["<stage>_handler"]`` (tests read it); the stage's dependency watch
    (outage vs poison, shown by ``/readyz``) in ``rt.watches[stage]``.
    """
    late = LateHandler()
    watch = dependency_watch(rt, stage)
    dead_letters = subscribe_batch(
        rt.broker,
        rt.settings,
        rt.publisher,
        stage=stage,
        topic=rt.settings.topic(topic),
        handler=late,
        max_records=max_records,
        description=description,
        watch=watch,
        ledger=PgDeadLetterLedger(rt.pool),
    )
    handler = build(rt, dead_letters)
    rt.extras[f"{stage}_handler"] = handler
    late.bind(handler)
    return handler


def dependency_watch(rt: Runtime, stage: str) -> DependencyWatch:
    """The stage's probes of Postgres, the object store and the broker, registered on the runtime."""
    s = rt.settings
    watch = rt.watches.get(stage)
    if watch is None:
        watch = DependencyWatch(
            stage,
            {
                "postgres": lambda: check_postgres(rt.pool),
                "object_store": lambda: check_store(rt.store),
                "kafka": lambda: check_kafka(s.kafka_bootstrap_servers),
            },
            max_delay=s.outage_max_delay_s,
        )
        rt.watches[stage] = watch
    return watch
