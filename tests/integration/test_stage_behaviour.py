"""The stage behaviour suite (``tests/stage_behaviour.py``) against the real broker: each stage started by
``start_runtime`` on isolated settings, records produced to Kafka, the dead letters read back from Kafka; an
outage is the stage's own Postgres pool refusing connections (the shared server stays up)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer

from services.ops.dlq import read_dead_letters
from services.settings import Settings
from services.stagekit import Stage
from tests.integration.helpers import ensure_test_topics, eventually
from tests.stage_behaviour import (
    STAGES,
    Letter,
    StageHarness,
    an_outage_pauses_the_stage_nothing_is_dead_lettered,
    poison_goes_to_the_stage_dead_letter_topic,
    records_of_one_key_keep_their_order,
    redelivery_is_a_no_op,
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
        )
    finally:
        down["pool"] = False
        await producer.stop()


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_poison_goes_to_the_stage_dead_letter_topic(
    stage: Stage, settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_the_broker(stage, settings, pipeline, monkeypatch) as h:
        await poison_goes_to_the_stage_dead_letter_topic(h)


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_records_of_one_key_keep_their_order(
    stage: Stage, settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_the_broker(stage, settings, pipeline, monkeypatch) as h:
        await records_of_one_key_keep_their_order(h)


@pytest.mark.parametrize("stage", [s for s in STAGES if s.replayable], ids=lambda s: s.name)
async def test_redelivery_is_a_no_op(
    stage: Stage, settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with on_the_broker(stage, settings, pipeline, monkeypatch) as h:
        await redelivery_is_a_no_op(h)


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
