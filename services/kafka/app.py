"""Broker factory, the publisher, and the one way batch stages subscribe.

Every batch stage: its own consumer group and fetch loop (``services.kafka.consumer.StageConsumer``, not a
FastStream subscriber): an offset is committed only for records the stage applied or dead-lettered, i.e.
after the stage's transaction committed and its downstream events were published; ``auto_offset_reset
=earliest`` so a new group (replay, rebuild) starts from the beginning of the log. Bodies and headers reach the
stage as bytes: stages validate them and dead-letter what fails, so a malformed record can never wedge a
partition or lose its batch. A batch that fails as a whole is rewound and retried, never committed. FastStream
remains the broker of the request/reply retriever stage and of the AsyncAPI document
(``services.stages.specification_broker``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata
from faststream.kafka import KafkaBroker
from pydantic import BaseModel

from services.kafka.clients import producer_config
from services.kafka.consumer import StageConsumer
from services.kafka.delivery import BatchHandler, DeadLetterLedger, DeadLetters, run_stage_batch
from services.kafka.records import Record
from services.kafka.topics import dlq_topic
from services.kafka.watch import DependencyWatch
from services.settings import Settings

log = logging.getLogger("orgmem.kafka")


def build_broker(settings: Settings) -> KafkaBroker:
    return KafkaBroker(
        # a list: FastStream takes a comma-separated string as one host (a cluster's bootstrap has several)
        [h.strip() for h in settings.kafka_bootstrap_servers.split(",") if h.strip()],
        **producer_config(client_id="orgmem"),
        logger=logging.getLogger("orgmem.faststream"),
        log_level=logging.DEBUG,
    )


class BrokerPublisher:
    """Implements ``delivery.Publisher`` with a dedicated idempotent aiokafka producer (acks=all).

    ``send`` waits for the broker's acknowledgement and returns the record metadata (HTTP ingress
    reports partition/offset); ``send_many`` enqueues everything first and then awaits all acks, so a
    stage's downstream events leave in a few produce requests. FastStream's own publish path is not
    used for these bulk emits (its per-message middleware costs more than the send itself).
    """

    def __init__(self, settings: Settings) -> None:
        self._bootstrap = settings.kafka_bootstrap_servers
        self._started: AIOKafkaProducer | None = None

    @property
    def _producer(self) -> AIOKafkaProducer:
        if self._started is None:
            raise RuntimeError("publisher used before start()")
        return self._started

    async def start(self) -> None:
        if self._started is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self._bootstrap, **producer_config(client_id="orgmem-publisher")
            )
            await producer.start()
            self._started = producer

    async def stop(self) -> None:
        if self._started is not None:
            await self._started.stop()
            self._started = None

    @staticmethod
    def _headers(headers: dict[str, str]) -> list[tuple[str, bytes]]:
        return [(k, v.encode("utf-8", "backslashreplace")) for k, v in headers.items()]

    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> RecordMetadata:
        return await self._producer.send_and_wait(topic, value, key=key, headers=self._headers(headers))

    async def send_many(self, items: list[tuple[str, bytes, bytes | None, dict[str, str]]]) -> None:
        """Enqueue all, then wait for every acknowledgement (raises if any failed)."""
        futures = [await self._producer.send(t, v, key=k, headers=self._headers(h)) for t, v, k, h in items]
        if futures:
            await asyncio.gather(*futures)


def subscribe_batch(
    consumers: list[StageConsumer],
    settings: Settings,
    publisher: BrokerPublisher,
    *,
    stage: str,
    topic: str,
    handler: BatchHandler,
    max_records: int,
    watch: DependencyWatch | None = None,
    ledger: DeadLetterLedger | None = None,
) -> DeadLetters:
    """Add the fetch loop of ``stage`` (its consumer group on ``topic``, feeding ``handler`` through
    ``run_stage_batch``) to ``consumers``. Returns the stage's DLQ sender.

    ``watch`` tells outages from poison (the stage pauses instead of dead-lettering) and shows a partition the
    loop cannot fetch; ``ledger`` makes dead letters idempotent and keeps the ones the broker refuses."""
    dead_letters = DeadLetters(publisher, dlq_topic(settings, stage), stage, ledger=ledger)

    async def handle(records: Sequence[Record]) -> None:
        await run_stage_batch(records, handler, dead_letters, settings, watch)

    consumers.append(
        StageConsumer(
            stage=stage,
            topic=topic,
            group_id=settings.group(stage),
            bootstrap_servers=settings.kafka_bootstrap_servers,
            handle=handle,
            max_records=max_records,
            watch=watch,
        )
    )
    return dead_letters


def document_publisher(broker: KafkaBroker, topic: str, model: type[BaseModel], description: str) -> None:
    """Declare what a topic carries so the AsyncAPI document shows its payload schema."""
    broker.publisher(topic, schema=model, title=f"{topic}:publish", description=description)
