"""Delivery rules every stage shares.

- Bounded retry with full-jitter exponential backoff for ``TransientError``.
- Dead letters: ``<ns>.dlq.<stage>.v1`` keeps the original key and bytes; headers carry the error class,
  message, stage, attempts and the original topic/partition/offset.
- ``run_batch``: a batch is handled as a unit (one transaction in the stage); a permanent error is
  isolated by re-running records one by one so a single poison record never blocks its neighbours.
  Transient errors that outlive the retry budget dead-letter the batch when the error says so
  (vendor, object store), otherwise they propagate and the subscriber rewinds (NACK) to try again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import traceback
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from services.errors import ObjectStoreError, PermanentError, TransientError, VendorError
from services.kafka.records import Record
from services.metrics import STAGE_DEAD_LETTERED

log = logging.getLogger("orgmem.delivery")
T = TypeVar("T")

# Transient errors that are dead-lettered once the retry budget is spent (instead of rewinding forever):
DEAD_LETTER_AFTER_RETRIES: tuple[type[TransientError], ...] = (VendorError, ObjectStoreError)


class Publisher(Protocol):
    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> None: ...


async def with_retry(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base_delay: float,
    max_delay: float,
    what: str,
) -> T:
    """Call ``fn``; on ``TransientError`` sleep ``uniform(0, min(max, base * 2**n))`` and try again."""
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except TransientError as exc:
            if attempt == attempts:
                raise
            delay = random.uniform(0, min(max_delay, base_delay * 2 ** (attempt - 1)))
            log.warning(
                "%s: transient failure (attempt %d/%d), retrying in %.2fs: %s",
                what,
                attempt,
                attempts,
                delay,
                exc,
            )
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def dead_letter_headers(stage: str, record: Record, error: BaseException, attempts: int) -> dict[str, str]:
    message = str(error)[:2000]
    return {
        "x-dlq-stage": stage,
        "x-dlq-error-class": type(error).__name__,
        "x-dlq-error-message": message,
        "x-dlq-error-field": str(getattr(error, "field", "") or ""),
        "x-dlq-attempts": str(attempts),
        "x-dlq-failed-at": datetime.now(UTC).isoformat(),
        "x-dlq-original-topic": record.topic,
        "x-dlq-original-partition": str(record.partition),
        "x-dlq-original-offset": str(record.offset),
        "x-dlq-traceback": "".join(traceback.format_exception_only(type(error), error))[-1000:],
    }


class DeadLetters:
    def __init__(self, publisher: Publisher, topic: str, stage: str) -> None:
        self.publisher = publisher
        self.topic = topic
        self.stage = stage
        self.count = 0

    async def send(self, record: Record, error: BaseException, *, attempts: int = 1) -> None:
        headers = dead_letter_headers(self.stage, record, error, attempts)
        # keep the original headers too (prefixed), so a redrive can restore them
        for k, v in record.headers:
            if not k.startswith("x-dlq-"):
                headers[f"x-orig-{k}"] = v.decode("utf-8", "replace")
        await self.publisher.send(self.topic, record.value, key=record.key, headers=headers)
        self.count += 1
        STAGE_DEAD_LETTERED.labels(self.stage).inc()
        log.error(
            "dead-lettered %s [%s] to %s: %s: %s",
            record.position,
            self.stage,
            self.topic,
            type(error).__name__,
            error,
        )


BatchHandler = Callable[[Sequence[Record]], Awaitable[None]]


async def run_batch(
    records: Sequence[Record],
    handler: BatchHandler,
    dead_letters: DeadLetters,
    *,
    attempts: int,
    base_delay: float,
    max_delay: float,
) -> None:
    """Handle ``records`` with retries; isolate permanent failures; dead-letter what cannot succeed."""
    if not records:
        return
    what = f"{dead_letters.stage} batch of {len(records)} at {records[0].position}"
    try:
        await with_retry(
            lambda: handler(records), attempts=attempts, base_delay=base_delay, max_delay=max_delay, what=what
        )
        return
    except PermanentError as exc:
        if len(records) == 1:
            await dead_letters.send(records[0], exc)
            return
    except DEAD_LETTER_AFTER_RETRIES as exc:
        # The dependency stayed down for the whole retry budget: every record of the batch failed on it.
        for record in records:
            await dead_letters.send(record, exc, attempts=attempts)
        return
    # A permanent error in a batch: isolate: one record at a time, each with its own retry budget.
    for record in records:
        await run_batch([record], handler, dead_letters, attempts=attempts, base_delay=base_delay, max_delay=max_delay)
