"""Consumer lag per stage: log-end offset minus the group's committed offset, summed over partitions."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer

from services.kafka.clients import kafka_admin
from services.kafka.records import stop_consumer, topic_partitions
from services.settings import Settings


@dataclass(frozen=True, slots=True)
class Lag:
    stage: str
    group: str
    topic: str
    end: int
    committed: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


async def group_lag(settings: Settings, stage: str, logical_topic: str, *, group: str | None = None) -> Lag:
    """Lag of ``stage``'s group (or ``group``) on its input ``logical_topic`` (``services.stages.stage_lag``)."""
    topic = settings.topic(logical_topic)
    group = group or settings.group(stage)
    async with kafka_admin(settings.kafka_bootstrap_servers, request_timeout_ms=10_000) as admin:
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = await topic_partitions(consumer, topic)
            ends = await consumer.end_offsets(tps) if tps else {}
            committed = await admin.list_consumer_group_offsets(group, partitions=tps) if tps else {}
            begin = await consumer.beginning_offsets(tps) if tps else {}
        finally:
            await stop_consumer(consumer)
    done = sum(
        (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else begin.get(tp, 0)) for tp in tps
    )
    return Lag(stage, group, topic, sum(ends.values()), done)
