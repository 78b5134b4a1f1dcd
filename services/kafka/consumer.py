"""The fetch loop of a batch stage, and the invariant it owns (issue 20 §1).

**An offset is committed only for records the stage applied or dead-lettered.** The loop is ours (not
FastStream's subscriber loop, whose commit was ``consumer.commit()``: "every position the client has moved
to", including positions of records a failed fetch had drained and dropped). Each step:

1. note the position of every assigned partition (``before``) — everything below it was handled;
2. ``getmany``. If the fetch raises — whatever the cause: a record the parser cannot read, a corrupt batch,
   a bug — no record of that call is used, every partition is sought back to ``before`` (aiokafka may have
   moved positions past records it drained and then lost), and the loop **isolates**: it fetches one
   partition at a time, so the partitions that fetch cleanly go on and the one that fails is held (paused,
   retried with capped backoff, never skipped). While a partition is held the stage's ``DependencyWatch``
   reports ``kafka_fetch`` and ``/readyz`` answers 503;
3. hand the records to the stage (``handle``: retry, outage hold, bisect and dead-letter — ``delivery``).
   If that raises, the batch's partitions are sought back to its first records and retried after a pause;
4. commit exactly ``{partition: last handled offset + 1}`` for the partitions of the batch — never a
   position the loop did not hand to the stage.

A commit the group refuses (a rebalance moved the partition) is logged and dropped: the new owner starts
from the last committed offset, so its records are redelivered (at-least-once; every stage is idempotent).
A record that only the fetch level could not read no longer reaches step 2's fault path: the tolerant parser
(``services.kafka.tolerant``) hands it to the stage, which dead-letters it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import ConsumerStoppedError, IllegalStateError

from services.kafka.deadletters import safe_text
from services.kafka.records import Record, from_consumer_records
from services.kafka.watch import DependencyWatch

log = logging.getLogger("orgmem.kafka")
NACK_BACKOFF_S = 2.0
FETCH_BACKOFF_S = 0.5
FETCH_MAX_BACKOFF_S = 30.0
DRAIN_TIMEOUT_S = 30.0
ISOLATED_FETCH_MS = 1000


class Consumer(Protocol):
    """What the loop uses of ``AIOKafkaConsumer`` (an in-memory one stands in for unit tests)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Any]]: ...
    def assignment(self) -> set[TopicPartition]: ...
    async def position(self, partition: TopicPartition) -> int: ...
    def seek(self, partition: TopicPartition, offset: int) -> None: ...
    async def committed(self, partition: TopicPartition) -> int | None: ...
    async def seek_to_beginning(self, *partitions: TopicPartition) -> Any: ...
    async def commit(self, offsets: Any = None) -> None: ...
    def pause(self, *partitions: TopicPartition) -> None: ...
    def resume(self, *partitions: TopicPartition) -> None: ...


Handle = Callable[[Sequence[Record]], Awaitable[None]]


@dataclass(slots=True)
class _Held:
    until: float
    delay: float
    detail: str


class StageConsumer:
    """One stage's consumer group on its input topic, run by ``start``/``stop`` (see the module docstring)."""

    def __init__(
        self,
        *,
        stage: str,
        topic: str,
        group_id: str,
        bootstrap_servers: str,
        handle: Handle,
        max_records: int,
        watch: DependencyWatch | None = None,
        batch_timeout_ms: int = 100,
        nack_backoff_s: float = NACK_BACKOFF_S,
        fetch_backoff_s: float = FETCH_BACKOFF_S,
        fetch_max_backoff_s: float = FETCH_MAX_BACKOFF_S,
        factory: Callable[[], Consumer] | None = None,
    ) -> None:
        self.stage = stage
        self.topic = topic
        self.group_id = group_id
        self.bootstrap_servers = bootstrap_servers
        self.handle = handle
        self.max_records = max_records
        self.watch = watch
        self.batch_timeout_ms = batch_timeout_ms
        self.nack_backoff_s = nack_backoff_s
        self.fetch_backoff_s = fetch_backoff_s
        self.fetch_max_backoff_s = fetch_max_backoff_s
        self.factory: Callable[[], Consumer] = factory or self._aiokafka
        self.consumer: Consumer | None = None
        self.committed: dict[TopicPartition, int] = {}
        """What this loop committed, per partition (the invariant's witness in tests)."""
        self.fetch_faults = 0
        self.gaps = 0
        self._isolating: list[TopicPartition] = []
        self._held: dict[TopicPartition, _Held] = {}
        self._retrying: dict[TopicPartition, float] = {}  # released from a hold, not fetched cleanly yet: its delay
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._others_had_a_turn = True  # a held partition is retried only after a fetch of the healthy ones

    def _aiokafka(self) -> Consumer:
        consumer: Consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap_servers,
            group_id=self.group_id,
            client_id=f"orgmem-{self.stage}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.max_records,
            max_poll_interval_ms=15 * 60 * 1000,
        )
        return consumer

    async def start(self) -> None:
        if self._task is not None:
            return
        self._stopping = False
        self.consumer = self.factory()
        await self.consumer.start()
        self._task = asyncio.create_task(self._run(), name=f"orgmem-{self.stage}-consume")

    async def stop(self, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Stop fetching; the batch in flight finishes (and commits) within ``drain_timeout_s``."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), drain_timeout_s)
            except TimeoutError:
                log.warning("%s: the batch in flight did not finish within %.0fs", self.stage, drain_timeout_s)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            await asyncio.sleep(0)  # see records.stop_consumer
            await consumer.stop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.step()
            except ConsumerStoppedError:
                return
            except Exception:  # the loop never dies: whatever failed, nothing was committed for it
                log.exception("%s: consume step failed; retrying in %.1fs", self.stage, self.nack_backoff_s)
                await asyncio.sleep(self.nack_backoff_s)

    def _c(self) -> Consumer:
        if self.consumer is None:
            raise ConsumerStoppedError()
        return self.consumer

    async def step(self) -> int:
        """One fetch-handle-commit round; returns the number of records handled (0 if none or the fetch failed)."""
        c = self._c()
        self._release_held(c)
        before = await self._positions(c)
        scope: tuple[TopicPartition, ...] = ()
        timeout_ms = self.batch_timeout_ms
        if self._isolating:
            tp = self._isolating.pop(0)
            if tp not in before or tp in self._held:
                return 0
            scope = (tp,)
            timeout_ms = max(timeout_ms, ISOLATED_FETCH_MS)  # long enough for its data to arrive
        try:
            fetched = await c.getmany(*scope, timeout_ms=timeout_ms, max_records=self.max_records)
        except ConsumerStoppedError:
            raise
        except Exception as exc:
            await self._fetch_failed(c, before, scope, exc)
            return 0
        if scope:
            self._fetch_ok(scope[0])
        else:
            self._others_had_a_turn = True
        if not scope and not self._held and not self._retrying and self.watch is not None:
            self.watch.fetch_ok()
        records = [r for msgs in fetched.values() for r in from_consumer_records(msgs)]
        if not records:
            return 0
        self._note_gaps(records, before)
        try:
            await self.handle(records)
        except Exception:
            log.exception(
                "%s: batch of %d failed, rewinding to retry after %.1fs", self.stage, len(records), self.nack_backoff_s
            )
            self._rewind_batch(c, records)
            await asyncio.sleep(self.nack_backoff_s)
            return 0
        await self._commit(c, records)
        return len(records)

    async def _positions(self, c: Consumer) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp in sorted(c.assignment()):
            with contextlib.suppress(IllegalStateError):  # revoked meanwhile
                out[tp] = await c.position(tp)
        return out

    async def _rewind(self, c: Consumer, before: dict[TopicPartition, int]) -> None:
        """Every assigned partition back to where the last handled record left it."""
        for tp in c.assignment():
            try:
                if tp in before:
                    c.seek(tp, before[tp])
                    continue
                committed = await c.committed(tp)  # assigned during the failed fetch
                if committed is not None:
                    c.seek(tp, committed)
                else:
                    await c.seek_to_beginning(tp)
            except IllegalStateError:
                continue

    async def _fetch_failed(
        self, c: Consumer, before: dict[TopicPartition, int], scope: tuple[TopicPartition, ...], exc: Exception
    ) -> None:
        self.fetch_faults += 1
        await self._rewind(c, before)
        detail = safe_text(f"{type(exc).__name__}: {exc}", 300)
        if not scope:
            # which partition? fetch them one at a time: the clean ones go on, the failing one is held
            self._isolating = sorted(tp for tp in before if tp not in self._held)
            log.error(
                "%s: fetch failed (%s); positions rewound, fetching partition by partition to isolate it",
                self.stage,
                detail,
            )
            if self.watch is not None:
                self.watch.fetch_fault("*", detail)
            await asyncio.sleep(self.fetch_backoff_s)
            return
        tp = scope[0]
        previous = self._retrying.pop(tp, None)
        delay = self.fetch_backoff_s if previous is None else min(self.fetch_max_backoff_s, previous * 2)
        self._held[tp] = _Held(time.monotonic() + random.uniform(delay / 2, delay), delay, detail)
        with contextlib.suppress(IllegalStateError):
            c.pause(tp)
        log.error(
            "%s: %s:%d cannot be fetched at offset %s (%s): held, retrying in %.1fs; nothing past it is committed",
            self.stage,
            tp.topic,
            tp.partition,
            before.get(tp),
            detail,
            delay,
        )
        if self.watch is not None:
            self.watch.fetch_fault(f"{tp.topic}:{tp.partition}", f"at offset {before.get(tp)}: {detail}")
            self.watch.fetch_ok("*")

    def _fetch_ok(self, tp: TopicPartition) -> None:
        if self._retrying.pop(tp, None) is not None:
            log.warning("%s: %s:%d fetches again", self.stage, tp.topic, tp.partition)
        if self.watch is not None:
            self.watch.fetch_ok(f"{tp.topic}:{tp.partition}")
            if not self._isolating:
                self.watch.fetch_ok("*")

    def _release_held(self, c: Consumer) -> None:
        """A held partition whose backoff ran out is retried on its own (and held again if it still fails) —
        after the healthy partitions had a fetch of their own, so a failing one never starves them."""
        now = time.monotonic()
        for tp, held in list(self._held.items()):
            if held.until <= now and self._others_had_a_turn and not self._isolating:
                self._others_had_a_turn = False
                del self._held[tp]
                self._retrying[tp] = held.delay
                with contextlib.suppress(IllegalStateError):
                    c.resume(tp)
                self._isolating.append(tp)
        assigned = c.assignment()
        for tp in [tp for tp in (*self._held, *self._retrying) if tp not in assigned]:  # revoked: new owner's now
            self._held.pop(tp, None)
            self._retrying.pop(tp, None)
            if self.watch is not None:
                self.watch.fetch_ok(f"{tp.topic}:{tp.partition}")

    def _note_gaps(self, records: Sequence[Record], before: dict[TopicPartition, int]) -> None:
        first: dict[TopicPartition, int] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            first.setdefault(tp, r.offset)
        for tp, offset in first.items():
            if tp in before and offset > before[tp]:
                # control batches or retention can leave gaps; nothing between was ever handed out to anyone
                self.gaps += 1
                log.info("%s: %s:%d resumed at %d, not %d", self.stage, tp.topic, tp.partition, offset, before[tp])

    def _rewind_batch(self, c: Consumer, records: Sequence[Record]) -> None:
        earliest: dict[TopicPartition, int] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            earliest[tp] = min(r.offset, earliest.get(tp, r.offset))
        for tp, offset in earliest.items():
            with contextlib.suppress(IllegalStateError):
                c.seek(tp, offset)

    async def _commit(self, c: Consumer, records: Sequence[Record]) -> None:
        """Commit ``last handled offset + 1`` of each partition of the batch — only those."""
        offsets: dict[TopicPartition, int] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            offsets[tp] = max(r.offset + 1, offsets.get(tp, 0))
        try:
            await c.commit(offsets)
        except ConsumerStoppedError:
            raise
        except Exception as exc:  # a rebalance took the partition: its new owner redelivers from the last commit
            log.warning("%s: commit of %d partition(s) refused: %s", self.stage, len(offsets), safe_text(exc, 300))
            return
        self.committed.update(offsets)
