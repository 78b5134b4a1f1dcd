"""A plain view of one consumed record, independent of the client library."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int | None = None

    @property
    def position(self) -> str:
        """``topic:partition:offset`` — the processed-event key for offset-keyed stages."""
        return f"{self.topic}:{self.partition}:{self.offset}"

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v.decode("utf-8", "replace")
        return None


def from_consumer_records(raw: Any) -> list[Record]:
    """Accept an aiokafka ``ConsumerRecord`` or a tuple/list of them (FastStream batch ``raw_message``)."""
    items: Iterable[Any] = raw if isinstance(raw, (tuple, list)) else (raw,)
    return [
        Record(
            topic=r.topic,
            partition=r.partition,
            offset=r.offset,
            key=r.key,
            value=r.value if r.value is not None else b"",
            headers=tuple(
                (k, v if isinstance(v, bytes) else b"" if v is None else str(v).encode("utf-8", "replace"))
                for k, v in (r.headers or ())
            ),
            timestamp_ms=r.timestamp,
        )
        for r in items
    ]


async def stop_consumer(consumer: Any) -> None:
    """Stop an aiokafka consumer. Yields once first: a group-less consumer stopped before its internal
    reset task ever ran would otherwise raise CancelledError out of ``stop()`` (aiokafka 0.14)."""
    import asyncio

    await asyncio.sleep(0)
    await consumer.stop()


async def topic_partitions(consumer: Any, topic: str) -> list[Any]:
    """All partitions of ``topic`` (metadata refreshed first) as TopicPartitions, sorted."""
    from aiokafka.structs import TopicPartition

    cluster = await consumer._client.fetch_all_metadata()  # the consumer's own cache only knows subscriptions
    return [TopicPartition(topic, p) for p in sorted(cluster.partitions_for_topic(topic) or set())]
