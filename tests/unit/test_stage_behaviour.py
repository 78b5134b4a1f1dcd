"""The stage behaviour suite (``tests/stage_behaviour.py``) in memory: the stage's own fetch loop on an in-memory
log (``tests/memory_kafka.py``), a recording publisher for the dead letters, a pool that records what a stage
would execute."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
from tests.stage_behaviour import (
    STAGES,
    Letter,
    StageHarness,
    an_outage_pauses_the_stage_nothing_is_dead_lettered,
    poison_goes_to_the_stage_dead_letter_topic,
    records_of_one_key_keep_their_order,
    redelivery_is_a_no_op,
)


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
    """Records statements; keeps the dead-letter ledger's rows (so a redelivered poison is not written twice)."""

    def __init__(self, log: list[str], letters: set[tuple[Any, ...]] | None = None) -> None:
        self.log = log
        self.letters = letters if letters is not None else set()

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.log.append(sql)
        return []

    async def execute(self, sql: str, *args: Any) -> str:
        self.log.append(sql)
        if sql.startswith("INSERT INTO dead_letters"):
            self.letters.add(tuple(args[:4]))  # stage, topic, partition, offset
        return ""

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.log.append(sql)
        if sql.startswith("SELECT true FROM dead_letters"):
            return tuple(args[:4]) in self.letters or None
        return None

    async def executemany(self, sql: str, args: Any) -> None:
        self.log.append(sql)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield


class RecordingPool:
    def __init__(self) -> None:
        self.statements: list[str] = []
        self.letters: set[tuple[Any, ...]] = set()
        self.down = False  # unreachable: every acquire is refused, as a dead server's would be

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[RecordingConn]:
        if self.down:
            raise ConnectionRefusedError(111, "Connect call failed (in-memory Postgres is down)")
        yield RecordingConn(self.statements, self.letters)

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


@dataclass
class InMemory:
    rt: Runtime
    publisher: RecordingPublisher
    pool: RecordingPool
    settings: Settings


@asynccontextmanager
async def in_memory(stage: Stage, tmp_path: Path) -> AsyncIterator[tuple[StageHarness, InMemory]]:
    settings = Settings(
        database_url="postgresql://in-memory/none",
        kafka_bootstrap_servers="in-memory:9092",
        embedding_provider="hash",
        object_store_backend="fs",
        object_store_path=tmp_path,
        topic_namespace="mem",
        outage_max_delay_s=0.2,
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
    watch = rt.watches.get(stage.name)
    if watch is not None:
        watch.probes["kafka"] = _reachable  # the in-memory log is always there; Postgres is the pool's
    topic = stage.input_topic(settings)
    dlq = dlq_topic(settings, stage.name)

    async def dead_letters(n: int) -> list[Letter]:
        for _ in range(500):
            letters = [Letter(v, k, h) for t, v, k, h in publisher.sent if t == dlq]
            if len(letters) >= n:
                return letters
            await asyncio.sleep(0.01)
        return letters

    def postgres_down(down: bool) -> None:
        pool.down = down

    def redeliver() -> None:
        for sc in rt.consumers:
            assert sc.consumer is not None
            for tp in sc.consumer.assignment():
                sc.consumer.seek(tp, 0)

    try:
        async with memory_broker(rt, topic) as publish:
            yield (
                StageHarness(
                    stage,
                    topic,
                    publish,
                    dead_letters,
                    lambda: len(rt.handlers),
                    postgres_down,
                    lambda: watch is not None and watch.paused,
                    redeliver,
                ),
                InMemory(rt, publisher, pool, settings),
            )
    finally:
        await rt.store.close()


async def _reachable() -> str:
    return "ok"


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_poison_goes_to_the_stage_dead_letter_topic(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, env):
        await poison_goes_to_the_stage_dead_letter_topic(harness)
    writes = [s for s in env.pool.statements if not s.lstrip().upper().startswith("SELECT")]
    # a poison record writes nothing else than the processed events and its dead-letter ledger row
    assert all("processed_events" in s or "INSERT INTO dead_letters" in s for s in writes), writes
    assert [t for t, *_ in env.publisher.sent] == [dlq_topic(env.settings, stage.name)]  # and publishes nothing else


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_records_of_one_key_keep_their_order(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, _):
        await records_of_one_key_keep_their_order(harness)


@pytest.mark.parametrize("stage", [s for s in STAGES if s.replayable], ids=lambda s: s.name)
async def test_redelivery_is_a_no_op(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, _):
        await redelivery_is_a_no_op(harness)


@pytest.mark.parametrize("stage", [s for s in STAGES if s.replayable], ids=lambda s: s.name)
async def test_an_outage_pauses_the_stage_nothing_is_dead_lettered(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, _):
        await an_outage_pauses_the_stage_nothing_is_dead_lettered(harness)
