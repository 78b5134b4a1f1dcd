"""An in-memory stand-in for the broker under a stage's fetch loop (``services.kafka.consumer.Consumer``).

``MemoryLog`` keeps partitioned topics and each group's committed offsets; ``MemoryConsumer`` reads it the way
``AIOKafkaConsumer`` does, including the behaviour the loop must survive: ``fault`` (set by a test) runs inside
``getmany`` after the partitions before it were drained *and their positions moved* — exactly how aiokafka
lost records when a later partition failed to parse — and raises whatever it raises.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import ConsumerStoppedError
from aiokafka.structs import ConsumerRecord


@dataclass
class MemoryLog:
    partitions: int = 3
    topics: dict[str, list[list[ConsumerRecord[bytes, bytes]]]] = field(default_factory=dict)
    committed: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    commits: list[tuple[str, dict[TopicPartition, int]]] = field(default_factory=list)

    def partition_for(self, key: bytes | None) -> int:
        return zlib.crc32(key or b"") % self.partitions

    def append(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: tuple[tuple[str, bytes], ...] = (),
        partition: int | None = None,
    ) -> tuple[int, int]:
        parts = self.topics.setdefault(topic, [[] for _ in range(self.partitions)])
        p = self.partition_for(key) if partition is None else partition
        offset = len(parts[p])
        parts[p].append(ConsumerRecord(topic, p, offset, 0, 0, key, value, None, len(key or b""), len(value), headers))
        return p, offset

    def end(self, topic: str) -> dict[int, int]:
        return {p: len(recs) for p, recs in enumerate(self.topics.get(topic, []))}


Fault = Callable[[TopicPartition, list[TopicPartition]], None]
"""Called in ``getmany`` before partition ``tp`` is drained, with the partitions drained so far; may raise."""


class MemoryConsumer:
    def __init__(self, log: MemoryLog, topic: str, group_id: str) -> None:
        self.log = log
        self.topic = topic
        self.group_id = group_id
        self.positions: dict[TopicPartition, int] = {}
        self.paused_tps: set[TopicPartition] = set()
        self.fault: Fault | None = None
        self.stopped = False

    async def start(self) -> None:
        self.log.topics.setdefault(self.topic, [[] for _ in range(self.log.partitions)])
        for p in range(self.log.partitions):
            tp = TopicPartition(self.topic, p)
            self.positions[tp] = self.log.committed.get((self.group_id, tp), 0)

    async def stop(self) -> None:
        self.stopped = True

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    async def position(self, partition: TopicPartition) -> int:
        return self.positions[partition]

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.positions[partition] = offset

    async def committed(self, partition: TopicPartition) -> int | None:
        return self.log.committed.get((self.group_id, partition))

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self.positions):
            self.positions[tp] = 0

    async def commit(self, offsets: Any = None) -> None:
        if offsets is None:  # aiokafka: every current position (what FastStream's ack did)
            offsets = dict(self.positions)
        self.log.commits.append((self.group_id, dict(offsets)))
        for tp, offset in offsets.items():
            self.log.committed[(self.group_id, tp)] = offset

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused_tps.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused_tps.difference_update(partitions)

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        if self.stopped:
            raise ConsumerStoppedError()
        wanted = [tp for tp in (partitions or sorted(self.positions)) if tp not in self.paused_tps]
        out: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        room = max_records if max_records is not None else 1 << 30
        for tp in wanted:
            if room <= 0:
                break
            records = self.log.topics[tp.topic][tp.partition][self.positions[tp] :][:room]
            if not records:
                continue
            if self.fault is not None:
                self.fault(tp, list(out))
            out[tp] = records
            self.positions[tp] = records[-1].offset + 1
            room -= len(records)
        if not out:
            await asyncio.sleep(min(timeout_ms, 50) / 1000)
        return out
