"""The fetch loop's invariant (issue 20 §1): an offset is committed only for records the stage applied or
dead-lettered — with faults injected in the fetch path the way aiokafka failed (partitions drained, their
positions moved, then the call raised)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from aiokafka import TopicPartition

from services.kafka.consumer import StageConsumer
from services.kafka.records import Record, from_consumer_records
from services.kafka.watch import DependencyWatch
from tests.memory_kafka import MemoryConsumer, MemoryLog

TOPIC = "t.envelopes.v1"
GROUP = "g"


class Applied:
    """The stage: remembers every record it applied (``fail`` makes a whole batch fail once per record)."""

    def __init__(self) -> None:
        self.offsets: dict[int, set[int]] = {}
        self.batches = 0
        self.fail_on: set[tuple[int, int]] = set()

    async def __call__(self, records: Sequence[Record]) -> None:
        self.batches += 1
        for r in records:
            if (r.partition, r.offset) in self.fail_on:
                self.fail_on.discard((r.partition, r.offset))
                raise RuntimeError("the batch failed as a whole")
        for r in records:
            self.offsets.setdefault(r.partition, set()).add(r.offset)

    def count(self) -> int:
        return sum(len(v) for v in self.offsets.values())


def check_commits(log: MemoryLog, applied: Applied) -> None:
    """No commit ever passed a record that was not applied (commits happen after the batch's apply, so the
    final applied set witnesses every earlier commit too)."""
    for _, offsets in log.commits:
        for tp, offset in offsets.items():
            missing = set(range(offset)) - applied.offsets.get(tp.partition, set())
            assert not missing, f"committed {tp.partition}:{offset} past unapplied {sorted(missing)[:5]}"


def fill(log: MemoryLog, n: int) -> None:
    for i in range(n):
        log.append(TOPIC, f"v{i}".encode(), key=f"k{i}".encode())


async def prime(sc: StageConsumer) -> None:
    """The loop's consumer started, no background task: the test drives ``step`` itself."""
    sc.consumer = sc.factory()
    await sc.consumer.start()


async def run_until(sc: StageConsumer, done: object, *, steps: int = 500) -> None:
    for _ in range(steps):
        await sc.step()
        if callable(done) and done():
            return
    raise AssertionError("the loop did not get there")


def loop(
    log: MemoryLog, applied: Applied, watch: DependencyWatch | None = None
) -> tuple[StageConsumer, MemoryConsumer]:
    consumer = MemoryConsumer(log, TOPIC, GROUP)
    sc = StageConsumer(
        stage="ingest",
        topic=TOPIC,
        group_id=GROUP,
        bootstrap_servers="memory",
        handle=applied,
        max_records=25,
        watch=watch,
        batch_timeout_ms=1,
        nack_backoff_s=0.0,
        fetch_backoff_s=0.0,
        fetch_max_backoff_s=0.0,
        factory=lambda: consumer,
    )
    return sc, consumer


async def test_a_fetch_that_raises_after_draining_other_partitions_loses_nothing() -> None:
    log, applied = MemoryLog(), Applied()
    sc, consumer = loop(log, applied)
    sc.max_records = 1000  # a fetch drains a whole partition before it reaches the next one
    raised = 0

    def fault(tp: TopicPartition, drained: list[TopicPartition]) -> None:
        nonlocal raised
        if drained and raised < 5:  # only once something was drained (and its position moved): the loss case
            raised += 1
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    consumer.fault = fault
    await prime(sc)
    for phase in range(1, 6):  # records keep arriving; every phase's first fetch fails after draining one
        fill(log, 60)
        await run_until(sc, lambda: applied.count() == 60 * phase)  # noqa: B023
        check_commits(log, applied)
    assert raised == 5 and sc.fetch_faults == 5
    assert all(len(applied.offsets[p]) == n for p, n in log.end(TOPIC).items())
    check_commits(log, applied)
    assert {tp.partition: off for (_, tp), off in log.committed.items()} == log.end(TOPIC)


async def test_what_the_old_subscriber_did_loses_records_the_invariant_exists_for_a_reason() -> None:
    """The witness can fail: committing the consumer's positions after a fault (FastStream's ack) loses records."""
    log, applied = MemoryLog(), Applied()
    fill(log, 60)
    consumer = MemoryConsumer(log, TOPIC, GROUP)
    await consumer.start()

    def fault(tp: TopicPartition, drained: list[TopicPartition]) -> None:
        if drained:
            raise RuntimeError("parse")

    consumer.fault = fault
    with contextlib.suppress(RuntimeError):
        await consumer.getmany(max_records=100)
    consumer.fault = None

    got = await consumer.getmany(max_records=100)
    await applied([r for msgs in got.values() for r in from_consumer_records(msgs)])
    await consumer.commit()  # every position, as ``consumer.commit()`` without offsets does
    try:
        check_commits(log, applied)
    except AssertionError:
        return
    raise AssertionError("the witness did not see the loss")


async def test_a_partition_that_keeps_failing_is_held_the_others_go_on_and_readyz_would_say_so() -> None:
    log, applied = MemoryLog(), Applied()
    fill(log, 120)
    watch = DependencyWatch("ingest", {})
    sc, consumer = loop(log, applied, watch)
    broken = {1}

    def fault(tp: TopicPartition, drained: list[TopicPartition]) -> None:
        if tp.partition in broken:
            raise RuntimeError("CorruptRecordException: invalid CRC")

    consumer.fault = fault
    ends = log.end(TOPIC)
    await prime(sc)
    await run_until(sc, lambda: all(len(applied.offsets.get(p, ())) == ends[p] for p in (0, 2)))
    for _ in range(20):
        await sc.step()
    assert 1 not in applied.offsets  # held: not one record of it skipped, none applied
    assert (GROUP, TopicPartition(TOPIC, 1)) not in log.committed
    assert watch.paused
    state = watch.state()
    assert "kafka_fetch" in state["down"]  # type: ignore[operator]
    assert f"{TOPIC}:1" in str(state["detail"])
    check_commits(log, applied)

    broken.clear()  # the partition fetches again: it resumes where it stopped
    await run_until(sc, lambda: applied.count() == 120 and not watch.paused)
    check_commits(log, applied)
    assert {tp.partition: off for (_, tp), off in log.committed.items()} == ends


async def test_a_batch_that_fails_is_rewound_and_retried_never_committed_past() -> None:
    log, applied = MemoryLog(), Applied()
    fill(log, 90)
    applied.fail_on = {(0, 3), (2, 10)}
    sc, _ = loop(log, applied)
    await prime(sc)
    await run_until(sc, lambda: applied.count() == 90)
    check_commits(log, applied)
    assert not applied.fail_on


async def test_the_loop_survives_any_exception_and_stop_drains() -> None:
    log, applied = MemoryLog(), Applied()
    fill(log, 10)
    sc, consumer = loop(log, applied)
    sc.nack_backoff_s = 0.01

    async def boom(*_: object) -> dict[int, int]:
        raise KeyError("not a Kafka error")

    consumer.position = boom  # type: ignore[method-assign,assignment]
    await sc.start()
    await asyncio.sleep(0.05)
    assert sc.running  # the step failed, the loop did not die
    del consumer.position
    for _ in range(100):
        if applied.count() == 10:
            break
        await asyncio.sleep(0.02)
    await sc.stop()
    assert applied.count() == 10 and not sc.running
    check_commits(log, applied)
