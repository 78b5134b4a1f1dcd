"""``orgmem replay <stage> --from earliest|<ISO time>``: re-apply a stage's input log.

The replay reads the stage's input topic with its own consumer (no consumer group, so the live
stage is not disturbed), from the earliest offset or the first offset at/after a time, up to the
end offsets taken when it starts, and feeds the records to the same handler the live stage uses,
in replay mode (already-processed events are re-applied). Every stage's apply logic is idempotent,
so a replay — or two — leaves the projection unchanged unless the code changed. Progress comes from
the remaining lag.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiokafka import AIOKafkaConsumer

from services.kafka.deadletters import PgDeadLetterLedger
from services.kafka.delivery import DeadLetters, run_stage_batch
from services.kafka.records import from_consumer_records, stop_consumer, topic_partitions
from services.kafka.topics import dlq_topic
from services.replaying import REPLAYING
from services.runtime import build_runtime
from services.settings import Settings
from services.stagekit import dependency_watch
from services.stages import STAGES, replayable_stages
from services.wiring import clients_for


@dataclass(frozen=True, slots=True)
class ReplayResult:
    stage: str
    topic: str
    records: int
    seconds: float
    dead_lettered: int

    @property
    def per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def parse_from(value: str) -> datetime | None:
    """``earliest`` -> None; otherwise a timezone-aware ISO time."""
    if value == "earliest":
        return None
    t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError("--from needs 'earliest' or a timezone-aware ISO time (e.g. 2024-05-01T00:00:00Z)")
    return t


async def replay(
    settings: Settings, stage: str, *, start: datetime | None, batch_size: int = 500, progress: Any = None
) -> ReplayResult:
    if stage not in replayable_stages():
        raise SystemExit(f"cannot replay {stage!r}; stages: {', '.join(replayable_stages())}")
    chosen = STAGES[stage]
    rt = await build_runtime(settings, clients_for(chosen.clients))
    await rt.start()
    topic = chosen.input_topic(settings)
    dead_letters = DeadLetters(rt.publisher, dlq_topic(settings, stage), stage, ledger=PgDeadLetterLedger(rt.pool))
    watch = dependency_watch(rt, stage, chosen.clients)
    handler = chosen.build_handler(rt, dead_letters)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        max_poll_records=batch_size,
    )
    await consumer.start()
    token = REPLAYING.set(True)
    began = time.perf_counter()
    done = 0
    try:
        tps = await topic_partitions(consumer, topic)
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        if start is None:
            for tp, first in (await consumer.beginning_offsets(tps)).items():
                consumer.seek(tp, first)
        else:
            found = await consumer.offsets_for_times({tp: int(start.timestamp() * 1000) for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                consumer.seek(tp, hit.offset if hit else ends[tp])
        starts = {tp: await consumer.position(tp) for tp in tps}
        total = sum(max(0, ends[tp] - starts[tp]) for tp in tps)
        if progress:
            progress(0, total)
        active = {tp for tp in tps if starts[tp] < ends[tp]}
        while active:
            batch = await consumer.getmany(*active, timeout_ms=1000, max_records=batch_size)
            # one handler call per poll, as the live subscriber does: a document's records all sit in one
            # partition, so joining the partitions' lists keeps every document's log order
            records = [r for tp, msgs in batch.items() for r in from_consumer_records(msgs) if r.offset < ends[tp]]
            if records:
                await run_stage_batch(records, handler, dead_letters, settings, watch)
                done += len(records)
            for tp in list(active):
                if await consumer.position(tp) >= ends[tp]:
                    active.discard(tp)
            if progress:
                progress(done, total)
        return ReplayResult(stage, topic, done, time.perf_counter() - began, dead_letters.count)
    finally:
        REPLAYING.reset(token)
        await stop_consumer(consumer)
        await rt.close()
