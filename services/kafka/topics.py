"""Every topic the system owns, with explicit partitions and configs, created by our code."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError, for_code

from services.kafka.clients import DLQ_MAX_BYTES, INPUT_MAX_BYTES, kafka_admin
from services.settings import Settings

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
NO_FSYNC = {"flush.messages": str(2**63 - 1)}
"""With ``DERIVED_TOPICS_FSYNC=false`` derived topics (re-emitted by a replay of their producer) are not fsynced per
message: the local broker fsyncs every append (``deploy/kafka.sh`` ``log.flush.interval.messages=1``, so an
acknowledged record survives a power cut on one broker), which capped ingest's two events per envelope at ~2,500
acknowledged records/s on this disk. Default on: a power cut must not lose a derived event on the single broker
either; a replicated cluster can turn it off and rely on replication. docs/scaling.md "Ingest speed"."""

# Stages that consume and can dead-letter. Names are stable: they appear in topic and group names.
STAGES: tuple[str, ...] = ("ingest", "embed", "extract", "conflicts", "collab", "retrieve")
# The input topic of each stage (its dead letters are that topic's records).
STAGE_INPUTS: dict[str, str] = {
    "ingest": "envelopes",
    "embed": "chunks",
    "extract": "documents",
    "conflicts": "graph",
    "collab": "documents",
    "retrieve": "rpc.retrieve",
}


@dataclass(frozen=True, slots=True)
class TopicSpec:
    logical: str  # e.g. "envelopes" -> "<ns>.envelopes.v1"
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    description: str = ""


def replication_configs(settings: Settings) -> dict[str, str]:
    """``min.insync.replicas`` of a replicated topic (with acks=all: a write survives one broker's loss)."""
    rf = settings.topic_replication_factor
    isr = settings.topic_min_insync_replicas or (min(2, rf) if rf > 1 else None)
    return {} if isr is None else {"min.insync.replicas": str(isr)}


def topic_specs(settings: Settings) -> list[TopicSpec]:
    p = settings.topic_partitions
    specs = _base_specs(settings, p)
    extra = replication_configs(settings)
    if extra:
        specs = [TopicSpec(s.logical, s.partitions, {**s.configs, **extra}, s.description) for s in specs]
    return specs


def _base_specs(settings: Settings, p: int) -> list[TopicSpec]:
    derived = {} if settings.derived_topics_fsync else NO_FSYNC
    specs = [
        TopicSpec(
            "envelopes",
            p,
            {
                "retention.ms": "-1",
                "retention.bytes": "-1",
                "cleanup.policy": "delete",
                "max.message.bytes": str(INPUT_MAX_BYTES),
            },
            "ChangeEnvelope events from connectors and HTTP ingress; infinite retention (source of truth)",
        ),
        TopicSpec(
            "chunks",
            p,
            {"retention.ms": str(7 * DAY_MS), **derived},
            "chunks needing vectors, ingest -> embedder",
        ),
        TopicSpec(
            "documents",
            p,
            {"retention.ms": str(7 * DAY_MS), **derived},
            "document changed/deleted/ACL, ingest -> graph stages",
        ),
        TopicSpec(
            "graph",
            p,
            {"retention.ms": str(7 * DAY_MS), **derived},
            "extracted graph facts, extractor -> conflicts",
        ),
        TopicSpec(
            "rpc.retrieve",
            p,
            {"retention.ms": str(HOUR_MS), **derived},
            "retrieve requests (reply_to + correlation_id)",
        ),
    ]
    specs += [
        TopicSpec(
            f"dlq.{stage}",
            min(p, 3),
            # anything the input topic accepted, plus the dead-letter headers
            {"retention.ms": str(30 * DAY_MS), "max.message.bytes": str(DLQ_MAX_BYTES)},
            f"dead letters of the {stage} stage",
        )
        for stage in STAGES
    ]
    return specs


def dlq_topic(settings: Settings, stage: str) -> str:
    return settings.topic(f"dlq.{stage}")


@dataclass(frozen=True, slots=True)
class TopicsResult:
    created: list[str]
    updated: list[str]  # existing topics whose configs differed from the spec and were set to it


async def ensure_topics(settings: Settings) -> list[str]:
    """Create missing topics and bring existing ones to the spec's configs; returns the names created now."""
    return (await apply_topics(settings)).created


async def apply_topics(settings: Settings) -> TopicsResult:
    """Create missing topics; set the configs of existing ones that differ from the spec (``orgmem topics create``)."""
    async with kafka_admin(settings.kafka_bootstrap_servers) as admin:
        existing = set(await admin.list_topics())
        specs = {settings.topic(s.logical): s for s in topic_specs(settings)}
        created: list[str] = []
        for name, spec in specs.items():  # one by one: a concurrent creator must not fail the others
            if name in existing:
                continue
            try:
                rf = settings.topic_replication_factor
                await admin.create_topics([NewTopic(name, spec.partitions, rf, topic_configs=spec.configs)])
                created.append(name)
            except TopicAlreadyExistsError:
                existing.add(name)
        updated: list[str] = []
        present = [n for n in specs if n in existing and n not in created and specs[n].configs]
        if present:
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in present])
            current = _topic_configs(described)
            stale = [n for n in present if any(current.get(n, {}).get(k) != v for k, v in specs[n].configs.items())]
            if stale:
                # AlterConfigs replaces a topic's whole override set: send the full spec of each topic
                responses = await admin.alter_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, n, configs=dict(specs[n].configs)) for n in stale]
                )
                for response in responses:
                    for error_code, error_message, _type, name in getattr(response, "resources", []):
                        if error_code:
                            raise for_code(error_code)(f"altering the configs of {name}: {error_message}")
                updated = stale
        return TopicsResult(created, updated)


def _topic_configs(responses: list[object]) -> dict[str, dict[str, str]]:
    """``{topic: {config: value}}`` from DescribeConfigs responses (aiokafka returns raw protocol structs)."""
    out: dict[str, dict[str, str]] = {}
    for response in responses:
        for resource in getattr(response, "resources", []):
            # (error_code, error_message, resource_type, resource_name, config_entries)
            name, entries = resource[3], resource[4]
            out[name] = {e[0]: e[1] for e in entries}
    return out


async def topic_configs(settings: Settings, names: list[str]) -> dict[str, dict[str, str]]:
    async with kafka_admin(settings.kafka_bootstrap_servers) as admin:
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
        return _topic_configs(described)


async def describe_topics(settings: Settings) -> list[dict[str, object]]:
    async with kafka_admin(settings.kafka_bootstrap_servers) as admin:
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
