"""Delivery rules every stage shares.

- Bounded retry with full-jitter exponential backoff for anything that is not permanent.
- ``run_batch``: a batch is handled as a unit (one transaction in the stage). When it fails after its
  retry budget, the failure is classified:
  1. an outage, not poison — the stage's ``DependencyWatch`` finds a dependency down, or the error is of an
     infrastructure class (connection lost or refused, timeouts, Postgres SQLSTATE 08/53/57/58/XX,
     ``TransientError``): the stage holds (no offset moves), retries with capped backoff for as long as
     it takes, and resumes by itself. Nothing is dead-lettered because a dependency was away;
  2. otherwise the failure is the data's: the batch is bisected so every good neighbour is applied and
     each failing record ends in the dead-letter topic with its reason — whatever its error class; an
     unexpected class is permanent once its budget is spent, never "retry forever". Permanent errors
     (``PermanentError``; Postgres refusing the data: SQLSTATE 22/23/54) skip the retries;
  3. a vendor error (``VendorError``: timeout, connection, 5xx, 429) that outlives the budget: when the
     watch probes that vendor (the embed stage's embedder), a failing probe makes it an outage (case 1:
     hold, resume by itself) and a passing probe makes it the data's (case 2: bisect, dead-letter the
     record the vendor chokes on). A stage whose watch has no probe of the vendor dead-letters the batch
     (redrive once it is back);
  4. without a watch (unit tests), a ``TransientError`` propagates and the subscriber rewinds.
- Dead letters (``services.kafka.deadletters``) are idempotent per original position.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import asyncpg
from aiokafka.errors import KafkaConnectionError

from services.errors import PermanentError, TransientError, VendorError
from services.kafka.deadletters import DeadLetterLedger, DeadLetters, Publisher, dead_letter_headers, safe_text
from services.kafka.records import Record
from services.kafka.watch import DependencyWatch
from services.settings import Settings

__all__ = [
    "BatchHandler",
    "DeadLetterLedger",
    "DeadLetters",
    "Publisher",
    "dead_letter_headers",
    "is_permanent",
    "run_batch",
    "safe_text",
    "with_retry",
]

log = logging.getLogger("orgmem.delivery")
T = TypeVar("T")

# Transient errors that are dead-lettered once the retry budget is spent (no probe can tell their outage):
DEAD_LETTER_AFTER_RETRIES: tuple[type[TransientError], ...] = (VendorError,)
# SQLSTATE classes where Postgres refuses the data itself: 22 data exception (NUL in text, bad encoding,
# value out of range), 23 integrity constraint violation, 54 program limit exceeded (row / index entry too big).
DATA_REFUSED_SQLSTATE_CLASSES = ("22", "23", "54")
# SQLSTATE classes of an unwell server, not of a record: 08 connection, 53 insufficient resources, 57 operator
# intervention (shutdown, cannot connect now), 58 system error, XX internal error (e.g. a broken install).
OUTAGE_SQLSTATE_CLASSES = ("08", "53", "57", "58", "XX")
RECORD_SQLSTATES = ("57014",)  # query_canceled: a statement timeout is about the statement, i.e. the record


def is_permanent(exc: BaseException) -> bool:
    """Retrying cannot help: our own permanent errors and Postgres refusing the record's data."""
    if isinstance(exc, PermanentError):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or ""
        return state[:2] in DATA_REFUSED_SQLSTATE_CLASSES
    return False


def is_outage(exc: BaseException) -> bool:
    """The error says a dependency is unwell, whatever the record (see the module docstring)."""
    if isinstance(exc, VendorError):
        return False
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or ""
        return state[:2] in OUTAGE_SQLSTATE_CLASSES and state not in RECORD_SQLSTATES
    return isinstance(
        exc, (TransientError, OSError, asyncpg.exceptions.ConnectionDoesNotExistError, KafkaConnectionError)
    )


async def with_retry(
    fn: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base_delay: float,
    max_delay: float,
    what: str,
) -> T:
    """Call ``fn``; unless the error is permanent sleep ``uniform(0, min(max, base * 2**n))`` and try again."""
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except Exception as exc:
            if attempt == attempts or is_permanent(exc):
                raise
            delay = random.uniform(0, min(max_delay, base_delay * 2 ** (attempt - 1)))
            log.warning(
                "%s: %s (attempt %d/%d), retrying in %.2fs: %s",
                what,
                type(exc).__name__,
                attempt,
                attempts,
                delay,
                safe_text(exc, 300),
            )
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


BatchHandler = Callable[[Sequence[Record]], Awaitable[None]]


async def run_batch(
    records: Sequence[Record],
    handler: BatchHandler,
    dead_letters: DeadLetters,
    *,
    attempts: int,
    base_delay: float,
    max_delay: float,
    watch: DependencyWatch | None = None,
) -> None:
    """Handle ``records``: retry, wait out outages, isolate and dead-letter what fails on its own."""
    if not records:
        return
    what = f"{dead_letters.stage} batch of {len(records)} at {records[0].position}"
    while True:
        try:
            await with_retry(
                lambda: handler(records), attempts=attempts, base_delay=base_delay, max_delay=max_delay, what=what
            )
            if watch is not None:
                watch.resume(what)
            return
        except Exception as exc:
            failure: Exception = exc
        if is_permanent(failure):
            break
        if isinstance(failure, DEAD_LETTER_AFTER_RETRIES) and (watch is None or not watch.vendors):
            for record in records:  # the vendor stayed down for the whole budget and nothing probes it
                await dead_letters.send(record, failure, attempts=attempts)
            return
        if watch is None:
            if isinstance(failure, TransientError):
                raise failure  # cannot tell an outage from poison here: the subscriber rewinds
            break
        if await watch.wait_while_down(what):
            continue  # a dependency was down and is back: a fresh budget
        if is_outage(failure):
            await watch.hold(what, failure)  # the probes pass but the dependency still fails: hold on
            continue
        break  # every dependency is up and the error is not theirs: the failure is the data's
    if len(records) > 1:
        log.warning("%s failed (%s): isolating the failing record(s)", what, type(failure).__name__)
        mid = len(records) // 2
        for half in (records[:mid], records[mid:]):
            await run_batch(
                half, handler, dead_letters, attempts=attempts, base_delay=base_delay, max_delay=max_delay, watch=watch
            )
        return
    await dead_letters.send(records[0], failure, attempts=1 if is_permanent(failure) else attempts)


async def run_stage_batch(
    records: Sequence[Record],
    handler: BatchHandler,
    dead_letters: DeadLetters,
    settings: Settings,
    watch: DependencyWatch | None,
) -> None:
    """``run_batch`` with the deployment's retry policy (``RETRY_*``): the live subscriber and replay alike."""
    await run_batch(
        records,
        handler,
        dead_letters,
        attempts=settings.retry_attempts,
        base_delay=settings.retry_base_delay_s,
        max_delay=settings.retry_max_delay_s,
        watch=watch,
    )
