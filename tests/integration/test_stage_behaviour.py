"""The stage behaviour suite (``tests/stage_behaviour.py``) against the real broker: each stage started by
``start_runtime`` on isolated settings, the poison produced to Kafka, the dead letters read back from Kafka."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from services.ops.dlq import read_dead_letters
from services.settings import Settings
from services.stagekit import Stage
from tests.integration.helpers import ensure_test_topics, eventually
from tests.stage_behaviour import STAGES, Letter, StageHarness, poison_goes_to_the_stage_dead_letter_topic


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
async def test_poison_goes_to_the_stage_dead_letter_topic(stage: Stage, settings: Settings, pipeline: Any) -> None:
    await ensure_test_topics(settings)
    rt = await pipeline(stage.name)
    topic = stage.input_topic(settings)

    async def publish(value: bytes, key: bytes) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, value, key=key)
        finally:
            await producer.stop()

    async def dead_letters(n: int) -> list[Letter]:
        async def read() -> list[Letter]:
            letters = await read_dead_letters(settings, stage.name)
            return [Letter(d.record.value, d.record.key, {k: v.decode() for k, v in d.record.headers}) for d in letters]

        return await eventually(read, until=lambda found: len(found) >= n, timeout=60)

    await poison_goes_to_the_stage_dead_letter_topic(
        StageHarness(stage, topic, publish, dead_letters, lambda: len(rt.handlers))
    )
