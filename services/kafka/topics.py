"""Every topic the system owns, with explicit partitions and configs, created by our code."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from services.settings import Settings

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

# Stages that consume and can dead-letter. Names are stable: they appear in topic and group names.
STAGES: tuple[str, ...] = ("ingest", "embed", "extract", "conflicts", "collab", "retrieve")


@dataclass(frozen=True, slots=True)
class TopicSpec:
    logical: str  # e.g. "envelopes" -> "<ns>.envelopes.v1"
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    description: str = ""


def topic_specs(settings: Settings) -> list[TopicSpec]:
    p = settings.topic_partitions
    specs = [
        TopicSpec(
            "envelopes",
            p,
            {
                "retention.ms": "-1",
                "retention.bytes": "-1",
                "cleanup.policy": "delete",
                "max.message.bytes": "8388608",
            },
            "ChangeEnvelope events from connectors and HTTP ingress; infinite retention (source of truth)",
        ),
        TopicSpec("chunks", p, {"retention.ms": str(7 * DAY_MS)}, "chunks needing vectors, ingest -> embedder"),
        TopicSpec(
            "documents",
            p,
            {"retention.ms": str(7 * DAY_MS)},
            "document changed/deleted/ACL, ingest -> graph stages",
        ),
        TopicSpec("graph", p, {"retention.ms": str(7 * DAY_MS)}, "extracted graph facts, extractor -> conflicts"),
        TopicSpec("rpc.retrieve", p, {"retention.ms": str(HOUR_MS)}, "retrieve requests (reply_to + correlation_id)"),
    ]
    specs += [
        TopicSpec(
            f"dlq.{stage}",
            min(p, 3),
            {"retention.ms": str(30 * DAY_MS)},
            f"dead letters of the {stage} stage",
        )
        for stage in STAGES
    ]
    return specs


def dlq_topic(settings: Settings, stage: str) -> str:
    return settings.topic(f"dlq.{stage}")


async def ensure_topics(settings: Settings) -> list[str]:
    """Create missing topics; returns the names created now. Existing topics are left as they are."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers, request_timeout_ms=30_000)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(settings.topic(s.logical), s.partitions, 1, topic_configs=s.configs)
            for s in topic_specs(settings)
            if settings.topic(s.logical) not in existing
        ]
        created: list[str] = []
        for topic in wanted:  # one by one: a concurrent creator must not fail the others
            try:
                await admin.create_topics([topic])
                created.append(topic.name)
            except TopicAlreadyExistsError:
                pass
        return created
    finally:
        await admin.close()


async def describe_topics(settings: Settings) -> list[dict[str, object]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers, request_timeout_ms=30_000)
    await admin.start()
    try:
        names = [settings.topic(s.logical) for s in topic_specs(settings)]
        existing = set(await admin.list_topics())
        present = [n for n in names if n in existing]
        out: list[dict[str, object]] = []
        described = await admin.describe_topics(present) if present else []
        by_name = {d["topic"]: d for d in described}
        for name in names:
            d = by_name.get(name)
            out.append({"topic": name, "exists": d is not None, "partitions": len(d["partitions"]) if d else 0})
        return out
    finally:
        await admin.close()
