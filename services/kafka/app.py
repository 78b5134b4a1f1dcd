"""Broker factory and the one way stages subscribe.

Every subscriber: its own consumer group, ``batch=True``, ``AckPolicy.NACK_ON_ERROR`` (offsets are
committed only after the handler returned, i.e. after the stage's transaction committed and its
downstream events were published), ``auto_offset_reset=earliest`` so a new group (replay, rebuild)
starts from the beginning of the log. Bodies are passed through undecoded: stages validate bytes
themselves and dead-letter what fails, so a malformed record can never wedge a partition.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.structs import RecordMetadata
from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from pydantic import BaseModel

from services.kafka.delivery import BatchHandler, DeadLetters, run_batch
from services.kafka.records import from_consumer_records
from services.kafka.topics import dlq_topic
from services.settings import Settings

log = logging.getLogger("orgmem.kafka")
NACK_BACKOFF_S = 2.0


def build_broker(settings: Settings) -> KafkaBroker:
    return KafkaBroker(
        settings.kafka_bootstrap_servers,
        client_id="orgmem",
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=1024 * 1024,
        max_request_size=8 * 1024 * 1024,
        request_timeout_ms=30_000,
        logger=logging.getLogger("orgmem.faststream"),
        log_level=logging.DEBUG,
    )


class BrokerPublisher:
    """Implements ``delivery.Publisher`` on a FastStream broker; returns the record metadata."""

    def __init__(self, broker: KafkaBroker) -> None:
        self.broker = broker

    async def send(
        self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]
    ) -> RecordMetadata:
        result = await self.broker.publish(value, topic=topic, key=key, headers=headers)
        return result  # type: ignore[no-any-return]

    async def send_many(self, items: list[tuple[str, bytes, bytes | None, dict[str, str]]]) -> None:
        """Publish concurrently (the producer batches them) and wait for every acknowledgement."""
        if items:
            await asyncio.gather(*(self.send(t, v, key=k, headers=h) for t, v, k, h in items))


async def _passthrough_decoder(msg: Any) -> Any:
    return msg.body


def subscribe_batch(
    broker: KafkaBroker,
    settings: Settings,
    publisher: BrokerPublisher,
    *,
    stage: str,
    topic: str,
    handler: BatchHandler,
    max_records: int,
    description: str,
) -> DeadLetters:
    """Register ``handler`` for ``topic`` in the stage's consumer group. Returns the stage's DLQ sender."""
    dead_letters = DeadLetters(publisher, dlq_topic(settings, stage), stage)

    @broker.subscriber(
        topic,
        group_id=settings.group(stage),
        batch=True,
        max_records=max_records,
        batch_timeout_ms=100,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        auto_offset_reset="earliest",
        max_poll_interval_ms=15 * 60 * 1000,
        decoder=_passthrough_decoder,
        title=f"{stage}:{topic}",
        description=description,
    )
    async def consume(body: Any, message: KafkaMessage) -> None:
        records = from_consumer_records(message.raw_message)
        try:
            await run_batch(
                records,
                handler,
                dead_letters,
                attempts=settings.retry_attempts,
                base_delay=settings.retry_base_delay_s,
                max_delay=settings.retry_max_delay_s,
            )
        except Exception:
            log.exception("%s: batch failed, rewinding to retry after %.0fs", stage, NACK_BACKOFF_S)
            await asyncio.sleep(NACK_BACKOFF_S)
            raise

    return dead_letters


def document_publisher(broker: KafkaBroker, topic: str, model: type[BaseModel], description: str) -> None:
    """Declare what a topic carries so the AsyncAPI document shows its payload schema."""
    broker.publisher(topic, schema=model, title=f"{topic}:publish", description=description)
