"""Dead letters: ``<ns>.dlq.<stage>.v1`` keeps the original key and bytes; headers carry the error class,
message, field, stage, attempts and the original topic/partition/offset (original headers as ``x-orig-*``).

Writes are idempotent and can always land somewhere:
- the ledger (table ``dead_letters``) is keyed by stage + original topic/partition/offset: a record whose
  letter was written already (a rewound batch, a redelivery) is not written again;
- a letter the broker refuses (or a broker that keeps failing) is stored in the ledger with its bytes
  (``published = false``) and the partition moves on; ``orgmem dlq list`` shows those too.
"""

from __future__ import annotations

import json
import logging
import traceback
from datetime import UTC, datetime
from typing import Any, Protocol

import asyncpg

from services.kafka.records import Record
from services.metrics import STAGE_DEAD_LETTERED

log = logging.getLogger("orgmem.delivery")
ORIGINAL_HEADERS_MAX = 64 * 1024  # bytes of original headers copied onto a letter


def safe_text(value: object, limit: int | None = None) -> str:
    """``str(value)`` that any UTF-8 encoder and Postgres ``text`` accept (no NUL, no lone surrogate)."""
    text = str(value)
    if limit is not None:
        text = text[:limit]
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


class Publisher(Protocol):
    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> Any: ...


class DeadLetterLedger(Protocol):
    async def written(self, stage: str, record: Record) -> bool:
        """True if a letter for this stage and original position was published or stored before."""

    async def record(self, stage: str, record: Record, headers: dict[str, str], *, published: bool) -> None:
        """Note the letter; ``published=False`` stores its bytes (the broker would not take it)."""


def dead_letter_headers(stage: str, record: Record, error: BaseException, attempts: int) -> dict[str, str]:
    headers = {
        "x-dlq-stage": stage,
        "x-dlq-error-class": type(error).__name__,
        "x-dlq-error-message": safe_text(error, 2000),
        "x-dlq-error-field": safe_text(getattr(error, "field", "") or ""),
        "x-dlq-attempts": str(attempts),
        "x-dlq-failed-at": datetime.now(UTC).isoformat(),
        "x-dlq-original-topic": record.topic,
        "x-dlq-original-partition": str(record.partition),
        "x-dlq-original-offset": str(record.offset),
        "x-dlq-traceback": safe_text("".join(traceback.format_exception_only(type(error), error))[-1000:]),
    }
    # keep the original headers too (prefixed), so a redrive can restore them
    room = ORIGINAL_HEADERS_MAX
    for k, v in record.headers:
        if k.startswith("x-dlq-"):
            continue
        text = safe_text(v.decode("utf-8", "backslashreplace"))
        room -= len(k) + len(text)
        if room < 0:
            headers["x-dlq-original-headers-truncated"] = "true"
            break
        headers[f"x-orig-{safe_text(k)}"] = text
    return headers


class DeadLetters:
    def __init__(self, publisher: Publisher, topic: str, stage: str, *, ledger: DeadLetterLedger | None = None) -> None:
        self.publisher = publisher
        self.topic = topic
        self.stage = stage
        self.ledger = ledger
        self.count = 0
        self.stored = 0  # letters kept in the ledger because the broker would not take them

    async def send(self, record: Record, error: BaseException, *, attempts: int = 1) -> None:
        if self.ledger is not None and await self.ledger.written(self.stage, record):
            log.info("dead letter for %s [%s] already written, not again", record.position, self.stage)
            return
        headers = dead_letter_headers(self.stage, record, error, attempts)
        try:
            await self.publisher.send(self.topic, record.value, key=record.key, headers=headers)
            published = True
        except Exception as exc:  # the letter must land somewhere: the ledger keeps it when the broker will not
            if self.ledger is None:
                raise
            headers["x-dlq-publish-error"] = safe_text(f"{type(exc).__name__}: {exc}", 500)
            published = False
            self.stored += 1
            log.error(
                "dead letter for %s [%s] refused by %s, stored in Postgres: %s",
                record.position,
                self.stage,
                self.topic,
                headers["x-dlq-publish-error"],
            )
        if self.ledger is not None:
            await self.ledger.record(self.stage, record, headers, published=published)
        self.count += 1
        STAGE_DEAD_LETTERED.labels(self.stage).inc()
        log.error(
            "dead-lettered %s [%s] to %s: %s: %s",
            record.position,
            self.stage,
            self.topic if published else "the dead_letters table",
            type(error).__name__,
            safe_text(error, 500),
        )


class PgDeadLetterLedger:
    """``DeadLetterLedger`` on the projection's ``dead_letters`` table."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def written(self, stage: str, record: Record) -> bool:
        async with self.pool.acquire() as conn:
            found = await conn.fetchval(
                "SELECT true FROM dead_letters WHERE stage = $1 AND topic = $2 AND kafka_partition = $3"
                " AND kafka_offset = $4",
                stage,
                record.topic,
                record.partition,
                record.offset,
            )
        return bool(found)

    async def record(self, stage: str, record: Record, headers: dict[str, str], *, published: bool) -> None:
        async with self.pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO dead_letters (stage, topic, kafka_partition, kafka_offset, record_key, value, headers,"
                " error_class, error_message, published) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
                " ON CONFLICT DO NOTHING",
                stage,
                record.topic,
                record.partition,
                record.offset,
                record.key,
                None if published else record.value,
                json.dumps(headers).encode(),
                headers["x-dlq-error-class"],
                headers["x-dlq-error-message"],
                published,
            )


async def stored_letters(conn: asyncpg.Connection, stage: str, *, limit: int | None = None) -> list[asyncpg.Record]:
    """Letters kept in Postgres because the broker refused them (not redriven yet), oldest first."""
    return list(
        await conn.fetch(
            "SELECT topic, kafka_partition, kafka_offset, record_key, value, headers, error_class, error_message,"
            " failed_at FROM dead_letters WHERE stage = $1 AND NOT published AND redriven_at IS NULL"
            " ORDER BY failed_at, kafka_offset LIMIT $2",
            stage,
            limit,
        )
    )
