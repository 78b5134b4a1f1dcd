"""Dead letters: list, show and redrive ``<ns>.dlq.<stage>.v1``.

Dead letters live in the topic; the few the broker refused (e.g. larger than the topic allows) are kept in the
projection's ``dead_letters`` table instead (``published = false``) — ``list``/``show``/``redrive`` cover both.

Redrive re-produces each dead letter's original bytes (key and headers restored) to its original
topic, committing progress in the consumer group ``<prefix>om-dlq-redrive-<stage>`` so a dead letter
is redriven once even if the command is run again. A filtered redrive (``--error-class``) never
commits past a letter it skipped, so those stay for a later redrive. Fix the cause first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.db.pool import quote_ident
from services.kafka.clients import producer_config
from services.kafka.deadletters import stored_letters
from services.kafka.records import Record, from_consumer_records, stop_consumer, topic_partitions
from services.kafka.topics import dlq_topic
from services.settings import Settings


@dataclass(frozen=True, slots=True)
class DeadLetter:
    record: Record
    stored: bool = False  # kept in Postgres (the broker refused it); ``record`` is the original record then

    @property
    def error_class(self) -> str:
        return self.record.header("x-dlq-error-class") or "?"

    @property
    def message(self) -> str:
        return self.record.header("x-dlq-error-message") or ""

    @property
    def original(self) -> str:
        r = self.record
        return (
            f"{r.header('x-dlq-original-topic')}:{r.header('x-dlq-original-partition')}:"
            f"{r.header('x-dlq-original-offset')}"
        )

    def summary(self) -> dict[str, object]:
        return {
            "position": self.record.position,
            "key": (self.record.key or b"").decode("utf-8", "replace"),
            "error_class": self.error_class,
            "error_field": self.record.header("x-dlq-error-field") or None,
            "message": self.message[:300],
            "original": self.original,
            "failed_at": self.record.header("x-dlq-failed-at"),
            "stored_in": "postgres" if self.stored else "topic",
        }


async def read_dead_letters(
    settings: Settings, stage: str, *, group: str | None = None, limit: int | None = None
) -> list[DeadLetter]:
    """Read dead letters from the start (or the group's committed position) up to the current end."""
    topic = dlq_topic(settings, stage)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tps = await topic_partitions(consumer, topic)
        if not tps:
            return []
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        if group is None:
            for tp, first in (await consumer.beginning_offsets(tps)).items():
                consumer.seek(tp, first)
        out: list[DeadLetter] = []
        remaining = {tp for tp in tps if await consumer.position(tp) < ends[tp]}
        while remaining and (limit is None or len(out) < limit):
            batch = await consumer.getmany(*remaining, timeout_ms=2000, max_records=500)
            for tp, msgs in batch.items():
                for rec in from_consumer_records(msgs):
                    if rec.offset < ends[tp]:
                        out.append(DeadLetter(rec))
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
            if not batch:
                break
        return out[:limit] if limit else out
    finally:
        await stop_consumer(consumer)


async def _connect(settings: Settings) -> asyncpg.Connection:
    conn: asyncpg.Connection = await asyncpg.connect(
        settings.database_url, server_settings={"search_path": f"{quote_ident(settings.db_schema)}, public"}
    )
    return conn


def _stored_letter(row: Any) -> DeadLetter:
    headers: dict[str, str] = json.loads(bytes(row["headers"]))
    record = Record(
        topic=row["topic"],
        partition=row["kafka_partition"],
        offset=row["kafka_offset"],
        key=None if row["record_key"] is None else bytes(row["record_key"]),
        value=bytes(row["value"] or b""),
        headers=tuple((k, v.encode()) for k, v in headers.items()),
    )
    return DeadLetter(record, stored=True)


async def read_stored_letters(settings: Settings, stage: str, *, limit: int | None = None) -> list[DeadLetter]:
    """Dead letters the broker refused, kept in Postgres and not redriven yet."""
    conn = await _connect(settings)
    try:
        return [_stored_letter(r) for r in await stored_letters(conn, stage, limit=limit)]
    finally:
        await conn.close()


async def redrive_stored(
    settings: Settings,
    stage: str,
    producer: AIOKafkaProducer,
    *,
    error_class: str | None,
    dry_run: bool,
    position: str | None = None,
) -> int:
    conn = await _connect(settings)
    sent = 0
    try:
        for letter in [_stored_letter(r) for r in await stored_letters(conn, stage)]:
            if (error_class and letter.error_class != error_class) or (position and letter.record.position != position):
                continue
            r = letter.record
            headers = [(k[len("x-orig-") :], v) for k, v in r.headers if k.startswith("x-orig-")]
            headers.append(("x-redriven-from", f"postgres:{stage}:{r.position}".encode()))
            if not dry_run:
                await producer.send_and_wait(r.topic, r.value, key=r.key, headers=headers)
                await conn.execute(
                    "UPDATE dead_letters SET redriven_at = now(), value = NULL WHERE stage = $1 AND topic = $2"
                    " AND kafka_partition = $3 AND kafka_offset = $4",
                    stage,
                    r.topic,
                    r.partition,
                    r.offset,
                )
            sent += 1
        return sent
    finally:
        await conn.close()


async def redrive(
    settings: Settings,
    stage: str,
    *,
    error_class: str | None = None,
    dry_run: bool = False,
    position: str | None = None,
) -> int:
    """Re-produce dead letters (topic and Postgres-stored) to their original topics; returns how many.
    ``position`` (a dead letter's ``topic:partition:offset``) redrives that one only, like a class filter."""
    group = f"{settings.group_prefix}om-dlq-redrive-{stage}"
    topic = dlq_topic(settings, stage)
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers, **producer_config(client_id="orgmem-redrive")
    )
    await consumer.start()
    await producer.start()
    sent = 0
    try:
        await consumer.getmany(timeout_ms=3000, max_records=1)  # join the group, get assignment
        tps = list(consumer.assignment())
        for tp in tps:
            committed = await consumer.committed(tp)
            if committed is None:
                consumer.seek(tp, (await consumer.beginning_offsets([tp]))[tp])
            else:
                consumer.seek(tp, committed)
        ends = await consumer.end_offsets(tps) if tps else {}
        held: set[Any] = set()
        commit_at: dict[Any, int] = {}
        while tps and any([await consumer.position(tp) < ends[tp] for tp in tps]):
            batch = await consumer.getmany(timeout_ms=2000, max_records=500)
            if not batch:
                break
            for tp, msgs in batch.items():
                for rec in from_consumer_records(msgs):
                    letter = DeadLetter(rec)
                    original = rec.header("x-dlq-original-topic")
                    other = position is not None and rec.position != position
                    skip = (error_class and letter.error_class != error_class) or other
                    if skip or not original:
                        held.add(tp)  # skipped: progress in this partition stops here, a later redrive sees it
                        continue
                    headers = [(k[len("x-orig-") :], v) for k, v in rec.headers if k.startswith("x-orig-")]
                    headers.append(("x-redriven-from", rec.position.encode()))
                    if not dry_run:
                        await producer.send_and_wait(original, rec.value, key=rec.key, headers=headers)
                    sent += 1
                    if tp not in held:
                        commit_at[tp] = rec.offset + 1
            if not dry_run and commit_at:
                await consumer.commit(dict(commit_at))
        return sent + await redrive_stored(
            settings, stage, producer, error_class=error_class, dry_run=dry_run, position=position
        )
    finally:
        await producer.stop()
        await stop_consumer(consumer)
