"""The stage behaviour suite (``tests/stage_behaviour.py``) in memory: the stage's own fetch loop on an in-memory
log (``tests/memory_kafka.py``), a recording publisher for the dead letters, a pool that records what a stage
would execute."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from faststream.kafka import TestKafkaBroker

from embedder.hashing import HashingEmbedder
from services.embedding_config import embedding_config
from services.kafka.app import build_broker
from services.kafka.topics import dlq_topic
from services.objectstore import build_object_store
from services.runtime import Clients, Runtime
from services.settings import Settings
from services.stagekit import Stage
from tests.memory_kafka import MemoryConsumer, MemoryLog
from tests.stage_behaviour import STAGES, Letter, StageHarness, poison_goes_to_the_stage_dead_letter_topic


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes | None, dict[str, str]]] = []

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> None:
        self.sent.append((topic, value, key, headers))

    async def send_many(self, items: list[tuple[str, bytes, bytes | None, dict[str, str]]]) -> None:
        self.sent.extend(items)


class RecordingConn:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.log.append(sql)
        return []

    async def execute(self, sql: str, *args: Any) -> str:
        self.log.append(sql)
        return ""

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.log.append(sql)
        return None

    async def executemany(self, sql: str, args: Any) -> None:
        self.log.append(sql)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield


class RecordingPool:
    def __init__(self) -> None:
        self.statements: list[str] = []

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[RecordingConn]:
        yield RecordingConn(self.statements)

    async def close(self) -> None: ...


Publish = Callable[[bytes, bytes], Awaitable[None]]


@asynccontextmanager
async def memory_broker(rt: Runtime, topic: str) -> AsyncIterator[Publish]:
    """Run ``rt``'s stages in memory: batch stages' own fetch loops on a ``MemoryLog``; a stage with its own
    FastStream subscriber (the retriever's request/reply) on FastStream's ``TestKafkaBroker``."""
    log = MemoryLog()
    for sc in rt.consumers:
        sc.factory = lambda sc=sc: MemoryConsumer(log, sc.topic, sc.group_id)  # type: ignore[misc]
        await sc.start()
    try:
        if rt.consumers:

            async def publish(value: bytes, key: bytes) -> None:
                log.append(topic, value, key=key)

            yield publish
        else:
            async with TestKafkaBroker(rt.broker) as broker:

                async def publish_faststream(value: bytes, key: bytes) -> None:
                    await broker.publish(value, topic, key=key)

                yield publish_faststream
    finally:
        for sc in rt.consumers:
            await sc.stop()


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_poison_goes_to_the_stage_dead_letter_topic(stage: Stage, tmp_path: Path) -> None:
    settings = Settings(
        database_url="postgresql://in-memory/none",
        kafka_bootstrap_servers="in-memory:9092",
        embedding_provider="hash",
        object_store_backend="fs",
        object_store_path=tmp_path,
        topic_namespace="mem",
    )
    publisher, pool = RecordingPublisher(), RecordingPool()
    embedding = embedding_config(settings)
    rt = Runtime(
        settings=settings,
        pool=pool,
        store=build_object_store(settings),
        broker=build_broker(settings),
        publisher=publisher,  # type: ignore[arg-type]
        embedding=embedding,
        clients=Clients(embedder=HashingEmbedder(dim=embedding.dim)),
    )
    stage.register(rt)
    topic = stage.input_topic(settings)
    dlq = dlq_topic(settings, stage.name)

    async def dead_letters(n: int) -> list[Letter]:
        for _ in range(500):
            letters = [Letter(v, k, h) for t, v, k, h in publisher.sent if t == dlq]
            if len(letters) >= n:
                return letters
            await asyncio.sleep(0.01)
        return letters

    async with memory_broker(rt, topic) as publish:
        harness = StageHarness(stage, topic, publish, dead_letters, lambda: len(rt.handlers))
        await poison_goes_to_the_stage_dead_letter_topic(harness)
    writes = [s for s in pool.statements if not s.lstrip().upper().startswith("SELECT")]
    # a poison record writes nothing else than the processed events and its dead-letter ledger row
    assert all("processed_events" in s or "INSERT INTO dead_letters" in s for s in writes), writes
    assert [t for t, *_ in publisher.sent] == [dlq_topic(settings, stage.name)]  # and publishes nothing else
    await rt.store.close()
