"""A dead letter can always be written (issue 12 §2): every DLQ topic takes what its input takes, ``orgmem topics
create`` brings existing topics to the spec, and a letter the broker still refuses is kept in Postgres while the
partition moves on."""

from __future__ import annotations

import json
from typing import Any

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from services.kafka.clients import DLQ_MAX_BYTES, kafka_admin
from services.kafka.topics import apply_topics, dlq_topic, topic_configs
from services.ops.dlq import read_dead_letters, read_stored_letters, redrive
from services.settings import Settings
from tests.integration.helpers import ensure_test_topics, envelope, eventually, fetchval, principal, produce
from tests.reliability.kafka_poison import Raw, produce_raw_records


def _oversized(external_id: str, chars: int) -> Raw:
    """Valid JSON the 8 MB envelopes topic accepts, refused by the schema (text > 2 M characters)."""
    body: dict[str, Any] = json.loads(envelope(external_id, "x").model_dump_json())
    body["document"]["text"] = "y" * chars
    return Raw("oversized", json.dumps(body).encode(), f"default/slack/{external_id}".encode())


async def _configs_of(settings: Settings, topic: str) -> dict[str, str]:
    return (await topic_configs(settings, [topic]))[topic]


async def test_topics_create_updates_the_configs_of_existing_topics(settings: Settings) -> None:
    dlq = dlq_topic(settings, "ingest")
    async with kafka_admin(settings.kafka_bootstrap_servers) as admin:  # a DLQ as the old code created it
        await admin.create_topics([NewTopic(dlq, 3, 1, topic_configs={"retention.ms": "1000"})])
    before = (await topic_configs(settings, [dlq]))[dlq]
    assert int(before["max.message.bytes"]) < DLQ_MAX_BYTES
    result = await apply_topics(settings)
    assert dlq in result.updated and dlq not in result.created
    # the broker applies an AlterConfigs asynchronously: read until it shows (or time out)
    after = await eventually(
        lambda: _configs_of(settings, dlq), until=lambda c: int(c["max.message.bytes"]) == DLQ_MAX_BYTES
    )
    assert int(after["max.message.bytes"]) == DLQ_MAX_BYTES and after["retention.ms"] == str(30 * 86_400_000)
    again = await apply_topics(settings)
    assert again.created == [] and again.updated == []  # idempotent


async def test_an_oversized_poison_record_reaches_the_dlq_topic_and_the_partition_moves_on(
    settings: Settings, pipeline: Any
) -> None:
    big = _oversized("BIG/1", 7_500_000)
    assert 7_000_000 < len(big.value or b"") < 8 * 1024 * 1024
    await produce_raw_records(settings, [big])
    g = principal()
    await produce(settings, envelope("AFTER/big", "after the big one", principals=[g]))
    await pipeline("ingest")
    letters = await eventually(lambda: read_dead_letters(settings, "ingest"), until=lambda ls: len(ls) == 1, timeout=90)
    assert letters[0].record.value == big.value and letters[0].record.header("x-dlq-error-field") == "document.text"
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'AFTER/big'"),
        until=lambda n: n == 1,
    )


async def test_a_letter_the_broker_refuses_is_kept_in_postgres_listed_and_redriven(
    settings: Settings, pipeline: Any
) -> None:
    await pipeline("ingest")  # (starting brings every topic to the spec, so shrink the DLQ afterwards)
    await ensure_test_topics(settings)
    dlq = dlq_topic(settings, "ingest")
    async with kafka_admin(settings.kafka_bootstrap_servers) as admin:  # an operator shrank the DLQ topic
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, dlq, configs={"max.message.bytes": "200000"})]
        )
    big = _oversized("BIG/2", 2_100_000)
    await produce_raw_records(settings, [big])
    g = principal()
    await produce(settings, envelope("AFTER/refused", "after the refused letter", principals=[g]))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'AFTER/refused'"),
        until=lambda n: n == 1,
        timeout=90,
    )
    stored = await eventually(lambda: read_stored_letters(settings, "ingest"), until=lambda ls: len(ls) == 1)
    assert stored[0].record.value == big.value and stored[0].error_class == "InvalidPayloadError"
    assert "x-dlq-publish-error" in dict(stored[0].record.headers)
    assert await read_dead_letters(settings, "ingest") == []
    assert await redrive(settings, "ingest") == 1  # back to the envelopes topic, out of the stored list
    assert await read_stored_letters(settings, "ingest") == []
    assert await fetchval(settings, "SELECT count(*) FROM dead_letters WHERE redriven_at IS NOT NULL") == 1
