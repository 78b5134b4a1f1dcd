"""Silent loss on the Kafka path (issue 20 §1), on the real broker.

A record whose header *key* is not UTF-8 (the Kafka protocol says String; aiokafka's own pure-Python record
builder writes whatever ``.encode`` returns) made the client library's fetch raise: records already drained
from other partitions were dropped while their offsets were committed, the partition holding the bad record
wedged for ever, and ``orgmem replay`` crashed on it. Expected: that one record dead-lettered with its raw
bytes and the reason, every other record applied, the committed offsets never past an unapplied record,
replay passing it. And a header the product does not read never makes a record fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiokafka.consumer.fetcher as fetcher
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from services.api.app import create_app
from services.kafka.clients import producer_config
from services.kafka.consumer import StageConsumer
from services.kafka.records import Record
from services.ops.dlq import read_dead_letters
from services.ops.replay import replay
from services.settings import Settings
from tests.integration.helpers import ensure_test_topics, envelope, eventually, fetchval, principal
from tests.kafka_raw import RawHeaderKey, python_record_builder

BAD_KEY = b"\xff\xfe"


@asynccontextmanager
async def raw_producer(settings: Settings) -> AsyncIterator[AIOKafkaProducer]:
    await ensure_test_topics(settings)
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers, **producer_config(client_id="kafkaloss-test")
    )
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


def _good(external_id: str, g: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    env = envelope(external_id, f"good record {external_id}", principals=[g])
    headers = [("x-event-type", b"envelope"), ("x-envelope-id", str(env.envelope_id).encode())]
    return env.model_dump_json().encode(), env.key.encode(), headers


async def produce_goods(settings: Settings, prefix: str, n: int, g: str) -> None:
    async with raw_producer(settings) as p:
        futures = []
        for i in range(n):
            value, key, headers = _good(f"{prefix}/{i}", g)
            futures.append(await p.send(settings.topic("envelopes"), value, key=key, headers=headers))
        await asyncio.gather(*futures)


async def produce_bad_header_key(settings: Settings, g: str) -> tuple[bytes, int, int]:
    """One valid envelope whose only fault is a header key that is not UTF-8; returns (value, partition, offset)."""
    value, key, headers = _good("BAD/key", g)
    with python_record_builder():
        async with raw_producer(settings) as p:
            meta = await p.send_and_wait(
                settings.topic("envelopes"), value, key=key, headers=[*headers, (RawHeaderKey(BAD_KEY), b"v")]
            )
    return value, meta.partition, meta.offset


async def committed_and_ends(settings: Settings, stage: str) -> tuple[dict[int, int], dict[int, int]]:
    topic = settings.topic("envelopes")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, group_id=settings.group(stage), enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.topic_partitions)]
        ends = await consumer.end_offsets(tps)
        committed = {tp.partition: (await consumer.committed(tp)) or 0 for tp in tps}
        return committed, {tp.partition: off for tp, off in ends.items()}
    finally:
        await asyncio.sleep(0)
        await consumer.stop()


async def test_a_non_utf8_header_key_is_dead_lettered_alone_and_nothing_else_is_lost(
    settings: Settings, pipeline: Any
) -> None:
    g = principal()
    await produce_goods(settings, "A", 100, g)
    bad_value, bad_partition, bad_offset = await produce_bad_header_key(settings, g)
    await produce_goods(settings, "B", 100, g)
    await pipeline("ingest")
    count = "SELECT count(*) FROM documents"
    await eventually(lambda: fetchval(settings, count), until=lambda n: n >= 200, timeout=60)

    # sent later, while the stage runs: none of them may be lost either
    await produce_goods(settings, "C", 60, g)
    await eventually(lambda: fetchval(settings, count), until=lambda n: n >= 260, timeout=60)
    letters = await eventually(lambda: read_dead_letters(settings, "ingest"), until=lambda ls: len(ls) >= 1)
    assert len(letters) == 1
    [letter] = letters
    assert letter.record.value == bad_value  # its raw bytes
    assert letter.record.header("x-dlq-original-partition") == str(bad_partition)
    assert letter.record.header("x-dlq-original-offset") == str(bad_offset)
    assert letter.record.header("x-dlq-error-class") == "InvalidPayloadError"
    assert letter.record.header("x-dlq-error-field") == "headers"
    assert "not UTF-8" in (letter.record.header("x-dlq-error-message") or "")
    assert "\\xff\\xfe" in (letter.record.header("x-dlq-error-message") or "")
    assert await fetchval(settings, count) == 260
    assert await fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'BAD/key'") == 0

    # every partition's committed offset reaches its end: the bad one moved on, nothing was skipped
    _, ends = await eventually(
        lambda: committed_and_ends(settings, "ingest"), until=lambda ce: ce[0] == ce[1], timeout=30
    )
    assert sum(ends.values()) == 261

    # the log keeps the bad record: a replay from the earliest offset passes it (its letter exists already)
    result = await replay(settings, "ingest", start=None)
    assert result.records == 261
    assert len(await read_dead_letters(settings, "ingest")) == 1
    assert await fetchval(settings, count) == 260


async def test_an_undecodable_value_of_a_header_nobody_reads_does_not_fail_the_record(
    settings: Settings, pipeline: Any
) -> None:
    g = principal()
    value, key, headers = _good("TRACE/1", g)
    async with raw_producer(settings) as p:
        await p.send_and_wait(
            settings.topic("envelopes"), value, key=key, headers=[*headers, ("x-trace", b"\xff\xfe\xfa")]
        )
    await pipeline("ingest")
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'TRACE/1'"),
        until=lambda n: n == 1,
        timeout=60,
    )
    await eventually(lambda: committed_and_ends(settings, "ingest"), until=lambda ce: ce[0] == ce[1], timeout=30)
    assert await read_dead_letters(settings, "ingest") == []


class Witness:
    """Wraps a running stage's fetch loop: every record handed to the stage, and a check of every commit
    against them — a commit past a record the stage did not handle fails the test."""

    def __init__(self, sc: StageConsumer) -> None:
        self.handled: dict[int, set[int]] = {}
        self.commits = 0
        self.violations: list[str] = []
        inner_handle = sc.handle
        consumer = sc.consumer
        assert consumer is not None
        inner_commit = consumer.commit

        async def handle(records: Sequence[Record]) -> None:
            await inner_handle(records)  # returns once every record is applied or dead-lettered
            for r in records:
                self.handled.setdefault(r.partition, set()).add(r.offset)

        async def commit(offsets: Any = None) -> None:
            assert offsets is not None, "the loop commits explicit offsets only"
            for tp, offset in offsets.items():
                missing = set(range(offset)) - self.handled.get(tp.partition, set())
                if missing:
                    self.violations.append(f"{tp.partition}:{offset} past {sorted(missing)[:5]}")
            self.commits += 1
            await inner_commit(offsets)

        sc.handle = handle
        consumer.commit = commit  # type: ignore[method-assign]


def stage_consumer(rt: Any, stage: str) -> StageConsumer:
    [sc] = [c for c in rt.consumers if c.stage == stage]
    assert isinstance(sc, StageConsumer)
    return sc


async def test_faults_injected_in_the_fetch_path_lose_nothing_and_commit_nothing_unapplied(
    settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiokafka's failure mode, injected: a partition's records drained (its position moved), then the fetch
    raises and the drained records are gone. The loop rewinds; nothing is lost, no commit passes them."""
    g = principal()
    original = fetcher.FetchResult.getall
    calls = {"with_records": 0, "raised": 0}

    def getall(self: Any, max_records: int | None = None) -> list[Any]:
        records: list[Any] = original(self, max_records)
        if records:
            calls["with_records"] += 1
            if calls["with_records"] % 3 == 0 and calls["raised"] < 4:
                calls["raised"] += 1
                raise RuntimeError("injected: the fetch failed after draining a partition")
        return records

    rt = await pipeline("ingest")
    witness = Witness(stage_consumer(rt, "ingest"))
    monkeypatch.setattr(fetcher.FetchResult, "getall", getall)
    for phase in range(4):  # records keep arriving while faults hit
        await produce_goods(settings, f"F{phase}", 50, g)
        await asyncio.sleep(0.3)
    count = "SELECT count(*) FROM documents"
    await eventually(lambda: fetchval(settings, count), until=lambda n: n >= 200, timeout=90)
    await eventually(lambda: committed_and_ends(settings, "ingest"), until=lambda ce: ce[0] == ce[1], timeout=30)
    assert calls["raised"] >= 1 and stage_consumer(rt, "ingest").fetch_faults == calls["raised"]
    assert await fetchval(settings, count) == 200
    assert witness.commits > 0 and witness.violations == []
    assert await read_dead_letters(settings, "ingest") == []


async def test_a_partition_that_cannot_be_fetched_is_held_reported_by_readyz_and_resumes(
    settings: Settings, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault the parser cannot absorb (here: every fetch of partition 1 raises): the other partitions go on,
    partition 1 is held — nothing of it skipped or committed — and ``/readyz`` says so until it fetches again."""
    g = principal()
    original = fetcher.FetchResult.getall
    broken = {1}

    def getall(self: Any, max_records: int | None = None) -> list[Any]:
        if self._topic_partition.partition in broken:
            raise RuntimeError("injected: partition 1 cannot be parsed")
        records: list[Any] = original(self, max_records)
        return records

    monkeypatch.setattr(fetcher.FetchResult, "getall", getall)
    await produce_goods(settings, "P", 90, g)
    _, ends = await committed_and_ends(settings, "ingest")
    assert ends[1] > 0 and ends[0] + ends[2] > 0
    rt = await pipeline("ingest")
    witness = Witness(stage_consumer(rt, "ingest"))
    count = "SELECT count(*) FROM documents"
    await eventually(lambda: fetchval(settings, count), until=lambda n: n >= ends[0] + ends[2], timeout=60)
    watch = rt.watches["ingest"]
    await eventually(lambda: _true(watch.paused), timeout=30)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.get("/readyz")
        assert r.status_code == 503, r.text
        assert "kafka_fetch" in r.json()["paused"]["ingest"]["down"]
        committed, _ = await committed_and_ends(settings, "ingest")
        assert committed[1] == 0 and 1 not in witness.handled  # held: nothing of it applied, nothing committed
        assert await fetchval(settings, count) == ends[0] + ends[2]

        broken.clear()  # it fetches again: it resumes where it stopped
        await eventually(lambda: fetchval(settings, count), until=lambda n: n == 90, timeout=90)
        await eventually(lambda: _true(not watch.paused), timeout=30)
        assert (await c.get("/readyz")).status_code == 200
    await eventually(lambda: committed_and_ends(settings, "ingest"), until=lambda ce: ce[0] == ce[1], timeout=30)
    assert witness.violations == []


async def _true(value: bool) -> bool:
    return value


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_rebuild_passes_a_record_with_a_non_utf8_header_key(settings: Settings, pipeline: Any) -> None:
    """``orgmem rebuild`` reads the envelopes log from the earliest offset through the same fetch loop: the bad
    record is dead-lettered in the new generation, every good one is in it."""
    from services import generations
    from services.ops.rebuild import rebuild

    g = principal()
    await produce_goods(settings, "R", 20, g)
    await produce_bad_header_key(settings, g)
    await produce_goods(settings, "S", 20, g)
    await pipeline("ingest")
    count = "SELECT count(*) FROM documents"
    await eventually(lambda: fetchval(settings, count), until=lambda n: n >= 40, timeout=60)
    result = await rebuild(settings, settle_s=0.5)
    active = await generations.resolve(settings)
    assert active.db_schema == result.db_schema
    assert await fetchval(active, count) == 40
    letters = await eventually(lambda: read_dead_letters(active, "ingest"), until=lambda ls: len(ls) >= 1)
    assert len(letters) == 1 and letters[0].record.header("x-dlq-error-field") == "headers"
