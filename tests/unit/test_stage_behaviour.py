"""The stage behaviour suite (``tests/stage_behaviour.py``) in memory: the stage's own fetch loop on an in-memory
log (``tests/memory_kafka.py``), a recording publisher for the dead letters, a pool that records what a stage
would execute."""

from __future__ import annotations

import asyncio
import json
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
from services.unit_of_work import Claim, Message, Outcome, UnitOfWork
from tests.memory_kafka import MemoryConsumer, MemoryLog
from tests.stage_behaviour import (
    RPC_KEY,
    STAGES,
    Behaviour,
    Letter,
    StageHarness,
    Valid,
    a_valid_record_is_applied_and_its_effect_appears,
    an_outage_pauses_the_stage_nothing_is_dead_lettered,
    cases,
    poison_goes_to_the_stage_dead_letter_topic,
    records_of_one_key_keep_their_order,
    redelivery_is_a_no_op,
    valid_record,
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
        if sql.startswith("INSERT INTO processed_events") and "RETURNING event_key" in sql:
            return [{"event_key": k} for k in args[1]]  # an empty database: every key is claimed now
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
        if sql.startswith("WITH ins AS (INSERT INTO rpc_request_ids"):
            return args[2]  # an empty database: the request id is new (its position is the one inserted)
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


Publish = Callable[[bytes, bytes, tuple[tuple[str, bytes], ...]], Awaitable[None]]


@asynccontextmanager
async def memory_broker(rt: Runtime, topic: str, log: MemoryLog) -> AsyncIterator[Publish]:
    """Run ``rt``'s stages in memory: batch stages' own fetch loops on a ``MemoryLog``; a stage with its own
    FastStream subscriber (the retriever's request/reply) on FastStream's ``TestKafkaBroker``."""
    for sc in rt.consumers:
        sc.factory = lambda sc=sc: MemoryConsumer(log, sc.topic, sc.group_id)  # type: ignore[misc]
        await sc.start()
    try:
        if rt.consumers:

            async def publish(value: bytes, key: bytes, headers: tuple[tuple[str, bytes], ...] = ()) -> None:
                log.append(topic, value, key=key, headers=headers)

            yield publish
        else:
            async with TestKafkaBroker(rt.broker) as broker:

                async def publish_faststream(
                    value: bytes, key: bytes, headers: tuple[tuple[str, bytes], ...] = ()
                ) -> None:
                    await broker.publish(value, topic, key=key, headers={k: v.decode() for k, v in headers})

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
        service_api_key=RPC_KEY,
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

    log = MemoryLog()
    applied = spy_on_apply(rt, stage.name)
    try:
        async with memory_broker(rt, topic, log) as publish:

            async def send(valid: Valid) -> None:
                await publish(valid.value, valid.key, valid.headers)

            async def valid() -> Valid:
                return valid_record(stage.name, settings.topic_namespace)

            async def effect(valid: Valid) -> bool:
                return await applied_in_memory(rt, stage, log, publisher, applied, valid)

            yield (
                StageHarness(
                    stage,
                    topic,
                    lambda value, key: publish(value, key, ()),
                    dead_letters,
                    lambda: len(rt.handlers),
                    postgres_down,
                    lambda: watch is not None and watch.paused,
                    redeliver,
                    valid,
                    send,
                    effect,
                ),
                InMemory(rt, publisher, pool, settings),
            )
    finally:
        await rt.store.close()


async def _reachable() -> str:
    return "ok"


Applied = list[tuple[set[bytes], list[Message]]]


def spy_on_apply(rt: Runtime, stage: str) -> Applied:
    """Record, for every transaction of the stage's unit of work, the records it applied fresh and the events it
    left to publish (the stage's own ``apply`` runs unchanged)."""
    applied: Applied = []
    handler = rt.handlers[stage]
    if not isinstance(handler, UnitOfWork):
        return applied
    inner = handler.apply

    async def spy(conn: Any, claim: Claim[Any], prepared: Any) -> Outcome:
        outcome = await inner(conn, claim, prepared)
        applied.append(({i.record.value for i in claim.fresh}, list(outcome.publish)))
        return outcome

    setattr(handler, "apply", spy)  # noqa: B010 (an instance attribute over the method)
    return applied


async def applied_in_memory(
    rt: Runtime, stage: Stage, log: MemoryLog, publisher: RecordingPublisher, applied: Applied, valid: Valid
) -> bool:
    """The record was applied fresh, its events reached the publisher (so the transaction committed) and the fetch
    loop committed its offset; the retriever (no unit of work): an ``ok`` reply on the reply topic."""
    for _ in range(500):
        if stage.replayable and _applied(stage, log, publisher, applied, valid):
            return True
        if not stage.replayable and any(
            k == valid.key and json.loads(v).get("ok") is True for t, v, k, _ in publisher.sent if "rpc.reply" in t
        ):
            return True
        await asyncio.sleep(0.01)
    return False


def _applied(stage: Stage, log: MemoryLog, publisher: RecordingPublisher, applied: Applied, valid: Valid) -> bool:
    sent = [(t, v, k, h) for t, v, k, h in publisher.sent]
    done = [out for fresh, out in applied if valid.value in fresh and all(m in sent for m in out)]
    committed = [o for (group, _), o in log.committed.items() if group.endswith(f"om-{stage.name}") and o > 0]
    return bool(done) and bool(committed)


@pytest.mark.parametrize(
    ("behaviour", "stage"),
    cases(
        (a_valid_record_is_applied_and_its_effect_appears, records_of_one_key_keep_their_order),
        replayable=(redelivery_is_a_no_op,),
    ),
)
async def test_behaviour(behaviour: Behaviour, stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, _):
        await behaviour(harness)


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_poison_goes_to_the_stage_dead_letter_topic(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, env):
        await poison_goes_to_the_stage_dead_letter_topic(harness)
    writes = [s for s in env.pool.statements if not s.lstrip().upper().startswith("SELECT")]
    # a poison record writes nothing else than the processed events and its dead-letter ledger row
    assert all("processed_events" in s or "INSERT INTO dead_letters" in s for s in writes), writes
    assert [t for t, *_ in env.publisher.sent] == [dlq_topic(env.settings, stage.name)]  # and publishes nothing else


@pytest.mark.parametrize("stage", [s for s in STAGES if s.replayable], ids=lambda s: s.name)
async def test_an_outage_pauses_the_stage_nothing_is_dead_lettered(stage: Stage, tmp_path: Path) -> None:
    async with in_memory(stage, tmp_path) as (harness, _):
        await an_outage_pauses_the_stage_nothing_is_dead_lettered(harness)
