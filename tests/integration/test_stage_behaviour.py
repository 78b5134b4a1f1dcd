"""The stage behaviour suite (``tests/stage_behaviour.py``) against the real broker: each stage started by
``start_runtime`` on isolated settings, records produced to Kafka, the dead letters read back from Kafka; an
outage is the stage's own Postgres pool refusing connections (the shared server stays up).

The happy path's valid record is what the stage's upstream really writes for one envelope: the upstream
stages' own handlers run once on it in-process (their events captured instead of published), then the record
is produced to the stage under test, and its effect is read back — its row in Postgres or its event on Kafka."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

import extractor.stage
import ingest.stage
from schemas.events import ChunksToEmbed, DocumentEvent
from services.kafka.records import Record
from services.ops.dlq import read_dead_letters
from services.runtime import Runtime
from services.settings import Settings
from services.stagekit import Stage
from services.unit_of_work import Message
from tests.integration.helpers import ensure_test_topics, envelope, eventually, fetchval, principal
from tests.stage_behaviour import (
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
    rpc_request,
)


@asynccontextmanager
async def on_the_broker(
    stage: Stage, settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[StageHarness]:
    await ensure_test_topics(settings)
    rt = await pipeline(stage.name)
    topic = stage.input_topic(settings)
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
    await producer.start()

    async def publish(value: bytes, key: bytes) -> None:
        await producer.send_and_wait(topic, value, key=key)

    async def dead_letters(n: int) -> list[Letter]:
        async def read() -> list[Letter]:
            letters = await read_dead_letters(settings, stage.name)
            return [Letter(d.record.value, d.record.key, {k: v.decode() for k, v in d.record.headers}) for d in letters]

        return await eventually(read, until=lambda found: len(found) >= n, timeout=60)

    down = {"pool": False}
    acquire: Callable[..., Any] = asyncpg.pool.Pool.acquire

    def refusing_acquire(self: asyncpg.Pool, *args: Any, **kwargs: Any) -> Any:
        if down["pool"] and self is rt.pool:
            raise ConnectionRefusedError(111, "Connect call failed (injected: Postgres is unreachable)")
        return acquire(self, *args, **kwargs)

    monkeypatch.setattr(asyncpg.pool.Pool, "acquire", refusing_acquire)

    def postgres_down(value: bool) -> None:
        down["pool"] = value

    def redeliver() -> None:
        for sc in rt.consumers:
            assert sc.consumer is not None
            for tp in sc.consumer.assignment():
                sc.consumer.seek(tp, 0)

    async def send(valid: Valid) -> None:
        await producer.send_and_wait(topic, valid.value, key=valid.key, headers=list(valid.headers))

    async def valid() -> Valid:
        return await upstream_record(stage.name, rt)

    async def effect(valid: Valid) -> bool:
        return await effect_on_the_broker(stage.name, settings, valid)

    watch = rt.watches.get(stage.name)
    try:
        yield StageHarness(
            stage,
            topic,
            publish,
            dead_letters,
            lambda: len(rt.handlers),
            postgres_down,
            lambda: watch is not None and watch.paused,
            redeliver,
            valid,
            send,
            effect,
        )
    finally:
        down["pool"] = False
        await producer.stop()


class Captured:
    """A publisher that keeps what an upstream stage would have published."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def send_many(self, items: list[Message]) -> None:
        self.sent.extend(items)


class NoDeadLetters:
    async def send(self, record: Record, exc: BaseException, **_: Any) -> None:
        raise AssertionError(f"the upstream stage refused the happy path's record: {exc}")


async def _upstream(rt: Runtime, build: Any, record: Record, topic: str) -> Record:
    """Run an upstream stage's handler once on ``record``; its event on ``topic`` (logical) as a record."""
    captured = Captured()
    handler = build(dataclasses.replace(rt, publisher=captured), NoDeadLetters())  # type: ignore[arg-type]
    await handler([record])
    [(name, value, key, _)] = [m for m in captured.sent if m[0] == rt.settings.topic(topic)]
    return Record(name, 0, 0, key, value)


async def upstream_record(stage: str, rt: Runtime) -> Valid:
    """The stage's input for one envelope (author, one participant, a group ACL), as its upstream writes it."""
    s = rt.settings
    if stage == "retrieve":
        reply_to = s.topic("rpc.reply.behaviour")
        admin = AIOKafkaAdminClient(bootstrap_servers=s.kafka_bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(reply_to, 1, 1)])
        finally:
            await admin.close()
        return rpc_request(s.topic_namespace, "test-key", reply_to)
    env = envelope(
        f"happy-{uuid.uuid4()}",
        "Ada and Grace review the launch plan on Tuesday.",
        principals=[principal()],
        author_email="ada@example.com",
        participants=[{"email": "grace@example.com", "role": "to"}],
    )
    record = Record(s.topic("envelopes"), 0, 0, env.key.encode(), env.model_dump_json().encode())
    if stage != "ingest":
        wanted = "chunks" if stage == "embed" else "documents"
        record = await _upstream(rt, ingest.stage.build_handler, record, wanted)
    if stage == "conflicts":
        record = await _upstream(rt, extractor.stage.build_handler, record, "graph")
    assert record.key is not None
    return Valid(record.value, record.key)


async def effect_on_the_broker(stage: str, settings: Settings, valid: Valid) -> bool:
    """The stage's own effect of ``valid``: its row in Postgres, or its event on its output topic."""
    if stage in ("ingest", "extract"):
        return await on_topic(settings, "documents" if stage == "ingest" else "graph", valid.key)
    if stage == "retrieve":
        return await on_topic(settings, "rpc.reply.behaviour", valid.key, ok=True)
    if stage == "embed":
        chunks = ChunksToEmbed.model_validate_json(valid.value).chunk_ids
        sql = "SELECT count(*) = $2 FROM chunks WHERE id = ANY($1::uuid[]) AND embedding IS NOT NULL"
        return await _eventually_true(settings, sql, chunks, len(chunks))
    doc = DocumentEvent.model_validate_json(valid.value) if stage == "collab" else None
    if doc is not None:
        sql = "SELECT count(*) > 0 FROM collab_contributions WHERE document_id = $1"
        return await _eventually_true(settings, sql, doc.document_id)
    return await _eventually_true(settings, "SELECT count(*) > 0 FROM entities WHERE type = 'person'")


async def _eventually_true(settings: Settings, sql: str, *args: Any) -> bool:
    for _ in range(300):
        if await fetchval(settings, sql, *args):
            return True
        await asyncio.sleep(0.1)
    return False


async def on_topic(settings: Settings, logical: str, key: bytes, *, ok: bool | None = None) -> bool:
    """A record keyed ``key`` on the topic (read from its beginning, bounded); ``ok``: a reply's verdict."""
    topic = settings.topic(logical)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        for _ in range(60):
            parts = consumer.partitions_for_topic(topic) or set()
            if parts:
                break
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.5)
        consumer.assign([TopicPartition(topic, p) for p in parts])
        await consumer.seek_to_beginning()
        for _ in range(60):
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    if r.key == key and (ok is None or json.loads(r.value).get("ok") is ok):
                        return True
        return False
    finally:
        await consumer.stop()


@pytest.mark.parametrize(
    ("behaviour", "stage"),
    cases(
        (
            a_valid_record_is_applied_and_its_effect_appears,
            poison_goes_to_the_stage_dead_letter_topic,
            records_of_one_key_keep_their_order,
        ),
        replayable=(redelivery_is_a_no_op,),
    ),
)
async def test_behaviour(
    behaviour: Behaviour, stage: Stage, settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_the_broker(stage, settings, pipeline, monkeypatch) as h:
        await behaviour(h)


@pytest.mark.parametrize("stage", [s for s in STAGES if s.replayable], ids=lambda s: s.name)
async def test_an_outage_pauses_the_stage_nothing_is_dead_lettered(
    stage: Stage, settings_factory: Any, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings: Settings = await settings_factory(outage_max_delay_s=0.5)
    async with on_the_broker(stage, settings, _on(pipeline, settings), monkeypatch) as h:
        await an_outage_pauses_the_stage_nothing_is_dead_lettered(h)


def _on(pipeline: Any, settings: Settings) -> Any:
    async def start(*stages: str) -> Any:
        return await pipeline(*stages, settings_override=settings)

    return start
