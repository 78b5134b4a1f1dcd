import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
import pytest

from services.errors import InvalidPayloadError, ObjectStoreError, TransientError, VendorError
from services.kafka.clients import DLQ_MAX_BYTES, HEADERS_ROOM, INPUT_MAX_BYTES
from services.kafka.deadletters import dead_letter_headers, pg_text
from services.kafka.delivery import DeadLetters, run_batch
from services.kafka.records import Record
from services.kafka.watch import DependencyWatch


class FakePublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes | None, dict[str, str]]] = []

    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> None:
        self.sent.append((topic, value, key, headers))


def rec(offset: int, value: bytes = b"ok") -> Record:
    return Record("t", 0, offset, b"k", value, (("trace", b"1"),))


async def test_poison_record_is_isolated_and_neighbours_succeed() -> None:
    applied: list[int] = []

    async def handler(records: Sequence[Record]) -> None:
        if any(r.value == b"poison" for r in records):
            raise InvalidPayloadError("bad", field="x")
        applied.extend(r.offset for r in records)

    pub = FakePublisher()
    dlq = DeadLetters(pub, "dlq", "ingest")
    await run_batch([rec(1), rec(2, b"poison"), rec(3)], handler, dlq, attempts=3, base_delay=0.001, max_delay=0.01)
    assert applied == [1, 3]
    assert len(pub.sent) == 1
    topic, value, key, headers = pub.sent[0]
    assert (topic, value, key) == ("dlq", b"poison", b"k")
    assert headers["x-dlq-error-class"] == "InvalidPayloadError"
    assert headers["x-dlq-error-field"] == "x"
    assert headers["x-dlq-original-offset"] == "2" and headers["x-orig-trace"] == "1"


async def test_transient_error_is_retried_then_succeeds() -> None:
    calls = 0

    async def handler(records: Sequence[Record]) -> None:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TransientError("db blip")

    dlq = DeadLetters(FakePublisher(), "dlq", "s")
    await run_batch([rec(1)], handler, dlq, attempts=3, base_delay=0.001, max_delay=0.01)
    assert calls == 3 and dlq.count == 0


async def test_vendor_down_for_the_whole_budget_dead_letters_the_batch() -> None:
    async def handler(records: Sequence[Record]) -> None:
        raise VendorError("503")

    pub = FakePublisher()
    dlq = DeadLetters(pub, "dlq", "embed")
    await run_batch([rec(1), rec(2)], handler, dlq, attempts=2, base_delay=0.001, max_delay=0.01)
    assert [h["x-dlq-error-class"] for *_, h in pub.sent] == ["VendorError", "VendorError"]
    assert all(h["x-dlq-attempts"] == "2" for *_, h in pub.sent)


async def test_other_transient_errors_propagate_so_the_subscriber_rewinds() -> None:
    async def handler(records: Sequence[Record]) -> None:
        raise TransientError("database down")

    dlq = DeadLetters(FakePublisher(), "dlq", "s")
    try:
        await run_batch([rec(1)], handler, dlq, attempts=2, base_delay=0.001, max_delay=0.01)
    except TransientError:
        pass
    else:
        raise AssertionError("expected the error to propagate")
    assert dlq.count == 0


# --- issue 12: nothing wedges, nothing is lost -------------------------------------------------------------


class MemoryLedger:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, int, int], tuple[dict[str, str], bool, bytes | None]] = {}

    async def written(self, stage: str, record: Record) -> bool:
        return (stage, record.topic, record.partition, record.offset) in self.rows

    async def record(self, stage: str, record: Record, headers: dict[str, str], *, published: bool) -> None:
        key = (stage, record.topic, record.partition, record.offset)
        self.rows.setdefault(key, (headers, published, None if published else record.value))


class RefusingPublisher(FakePublisher):
    async def send(self, topic: str, value: bytes, *, key: bytes | None, headers: dict[str, str]) -> None:
        raise RuntimeError("MessageSizeTooLargeError: the message is too large")


def batch(n: int, poison: set[int]) -> list[Record]:
    return [rec(i, b"poison" if i in poison else b"ok") for i in range(n)]


async def test_unexpected_error_class_is_dead_lettered_after_the_budget_and_neighbours_applied() -> None:
    """A record Postgres-like code refuses with an error we never classified: never retried forever."""
    applied: list[int] = []
    calls = 0

    async def handler(records: Sequence[Record]) -> None:
        nonlocal calls
        calls += 1
        if any(r.value == b"poison" for r in records):
            raise KeyError("something nobody expected")
        applied.extend(r.offset for r in records)

    pub = FakePublisher()
    dlq = DeadLetters(pub, "dlq", "ingest")
    await run_batch(batch(64, {5, 40}), handler, dlq, attempts=2, base_delay=0.001, max_delay=0.002)
    assert sorted(applied) == [i for i in range(64) if i not in {5, 40}]
    assert [h["x-dlq-original-offset"] for *_, h in pub.sent] == ["5", "40"]
    assert {h["x-dlq-error-class"] for *_, h in pub.sent} == {"KeyError"}
    assert calls < 64  # bisected, not one transaction per record


async def test_postgres_refusing_the_data_is_permanent_at_once() -> None:
    calls = 0

    async def handler(records: Sequence[Record]) -> None:
        nonlocal calls
        calls += 1
        if any(r.value == b"poison" for r in records):
            raise asyncpg.exceptions.CharacterNotInRepertoireError("invalid byte sequence for encoding UTF8: 0x00")

    pub = FakePublisher()
    await run_batch(
        [rec(1, b"poison")], handler, DeadLetters(pub, "dlq", "ingest"), attempts=5, base_delay=1, max_delay=1
    )
    assert calls == 1  # no retries, no sleeping
    assert pub.sent[0][3]["x-dlq-error-class"] == "CharacterNotInRepertoireError"
    assert pub.sent[0][3]["x-dlq-attempts"] == "1"


def _watch(state: dict[str, bool], stage: str = "ingest") -> DependencyWatch:
    async def store() -> None:
        if not state["store"]:
            raise ObjectStoreError("connection refused")

    return DependencyWatch(stage, {"object_store": store}, base_delay=0.005, max_delay=0.02)


async def test_with_every_dependency_up_an_unclassified_error_of_one_record_is_its_own() -> None:
    async def handler(records: Sequence[Record]) -> None:
        if any(r.value == b"poison" for r in records):
            raise ValueError("this record breaks the code every time")

    pub = FakePublisher()
    await run_batch(
        batch(4, {2}),
        handler,
        DeadLetters(pub, "dlq", "s"),
        attempts=2,
        base_delay=0.001,
        max_delay=0.002,
        watch=_watch({"store": True}),
    )
    assert [h["x-dlq-original-offset"] for *_, h in pub.sent] == ["2"]


def _vendor_watch(state: dict[str, bool]) -> DependencyWatch:
    async def vendor() -> None:
        if not state["vendor"]:
            raise VendorError("embedding vendor 503")

    return DependencyWatch(
        "embed", {"embedding_vendor": vendor}, base_delay=0.005, max_delay=0.02, vendors=frozenset({"embedding_vendor"})
    )


@pytest.mark.parametrize(
    ("dependency", "stage", "error"),
    [
        ("object_store", "ingest", lambda: ObjectStoreError("connection refused")),
        ("embedding_vendor", "embed", lambda: VendorError("503")),  # a vendor the watch probes: an outage too
    ],
)
async def test_an_outage_pauses_the_stage_and_it_resumes_by_itself_without_dead_letters(
    dependency: str, stage: str, error: Callable[[], Exception]
) -> None:
    state = {"store": False, "vendor": False}
    applied: list[int] = []

    async def handler(records: Sequence[Record]) -> None:
        if not state["store"] or not state["vendor"]:
            raise error()
        applied.extend(r.offset for r in records)

    if dependency == "object_store":
        state["vendor"] = True
        watch = _watch(state, stage)
    else:
        state["store"] = True
        watch = _vendor_watch(state)
    pub = FakePublisher()
    task = asyncio.create_task(
        run_batch(
            batch(10, set()),
            handler,
            DeadLetters(pub, "dlq", stage),
            attempts=2,
            base_delay=0.001,
            max_delay=0.002,
            watch=watch,
        )
    )
    for _ in range(200):
        await asyncio.sleep(0.005)
        if watch.paused:
            break
    assert watch.paused and watch.state()["down"] == [dependency]
    await asyncio.sleep(0.1)
    assert not task.done() and applied == [] and pub.sent == []  # waiting, for as long as it takes
    state["store"] = state["vendor"] = True
    await asyncio.wait_for(task, 5)
    assert applied == list(range(10)) and pub.sent == []
    assert not watch.paused and watch.pauses == 1


async def test_a_vendor_error_with_the_vendor_probe_passing_is_the_records_own() -> None:
    """The vendor answers the probe but chokes on one text: that record is dead-lettered, its neighbours embed."""
    applied: list[int] = []

    async def handler(records: Sequence[Record]) -> None:
        if any(r.value == b"poison" for r in records):
            raise VendorError("500 on this input")
        applied.extend(r.offset for r in records)

    pub = FakePublisher()
    await run_batch(
        batch(6, {4}),
        handler,
        DeadLetters(pub, "dlq", "embed"),
        attempts=2,
        base_delay=0.001,
        max_delay=0.002,
        watch=_vendor_watch({"vendor": True}),
    )
    assert [h["x-dlq-original-offset"] for *_, h in pub.sent] == ["4"]
    assert pub.sent[0][3]["x-dlq-error-class"] == "VendorError" and sorted(applied) == [0, 1, 2, 3, 5]


async def test_an_infrastructure_error_the_probes_miss_holds_the_stage_until_it_works_again() -> None:
    """E.g. Postgres answering SELECT 1 but failing every statement with XX000 (a broken install)."""
    broken = {"on": True}
    applied: list[int] = []

    async def handler(records: Sequence[Record]) -> None:
        if broken["on"]:
            raise asyncpg.exceptions.InternalServerError("incompatible library: version mismatch")
        applied.extend(r.offset for r in records)

    watch = _watch({"store": True})
    pub = FakePublisher()
    task = asyncio.create_task(
        run_batch(
            batch(6, set()),
            handler,
            DeadLetters(pub, "dlq", "ingest"),
            attempts=2,
            base_delay=0.001,
            max_delay=0.002,
            watch=watch,
        )
    )
    await asyncio.sleep(0.2)
    assert watch.paused and watch.state()["down"] == ["postgres"] and not task.done()
    broken["on"] = False
    await asyncio.wait_for(task, 5)
    assert applied == list(range(6)) and pub.sent == [] and not watch.paused


async def test_dead_letters_are_written_once_per_original_position() -> None:
    pub = FakePublisher()
    dlq = DeadLetters(pub, "dlq", "ingest", ledger=MemoryLedger())
    r = rec(7, b"poison")
    await dlq.send(r, InvalidPayloadError("bad", field="x"))
    await dlq.send(r, InvalidPayloadError("bad", field="x"))  # the batch rewound and failed again
    assert len(pub.sent) == 1 and dlq.count == 1


async def test_a_letter_the_broker_refuses_is_stored_and_the_partition_moves_on() -> None:
    ledger = MemoryLedger()
    dlq = DeadLetters(RefusingPublisher(), "dlq", "ingest", ledger=ledger)
    r = rec(9, b"x" * 1000)
    await dlq.send(r, InvalidPayloadError("too big", field="document.text"))
    ((headers, published, value),) = ledger.rows.values()
    assert not published and value == r.value and dlq.stored == 1
    assert "MessageSizeTooLargeError" in headers["x-dlq-publish-error"]


def test_dead_letter_headers_survive_nul_surrogates_and_undecodable_originals() -> None:
    r = Record("t", 0, 1, None, b"v", (("bad", b"\xff\xfe"), ("ok", b"1")))
    headers = dead_letter_headers(
        "ingest", r, InvalidPayloadError("text has \x00 and \ud800", field="document.text"), 1
    )
    for v in headers.values():
        v.encode("utf-8")  # no lone surrogate survives (a NUL may: a header is bytes)
    assert headers["x-dlq-error-field"] == "document.text"
    assert "\x00" in headers["x-dlq-error-message"]
    assert "\x00" not in pg_text(headers["x-dlq-error-message"])  # what the ledger's text column gets
    json.dumps(headers)
    assert headers["x-orig-ok"] == "1"


def test_every_dlq_topic_accepts_what_its_input_accepts_plus_headers() -> None:
    from services.kafka.topics import STAGE_INPUTS, topic_specs
    from services.settings import load_settings

    specs = {
        s.logical: s
        for s in topic_specs(
            load_settings(
                _env_file=None, topic_namespace="x", database_url="postgresql://x/y", kafka_bootstrap_servers="x:1"
            )
        )
    }
    broker_default = 1048588
    for stage, logical in STAGE_INPUTS.items():
        accepted = int(specs[logical].configs.get("max.message.bytes", broker_default))
        assert int(specs[f"dlq.{stage}"].configs["max.message.bytes"]) >= accepted + HEADERS_ROOM
    assert DLQ_MAX_BYTES == INPUT_MAX_BYTES + HEADERS_ROOM


async def test_safe_parser_keeps_raw_bytes_and_never_fails_on_a_bad_header() -> None:
    from aiokafka.structs import ConsumerRecord

    from services.kafka.decode import safe_batch_parser
    from services.kafka.records import from_consumer_records

    raw = tuple(
        ConsumerRecord("t", 0, i, 0, 0, b"k", b"{}", None, 2, 2, [("x-h", b"\xff\xfe" if i == 1 else b"fine")])
        for i in range(3)
    )
    seen: list[Any] = []

    async def original(records: Any) -> Any:
        for r in records:
            for _, v in r.headers:
                v.decode()  # what FastStream's own parser does, and what failed the whole poll
        seen.append(records)

        class Msg:
            raw_message: Any = None

        return Msg()

    msg = await safe_batch_parser(raw, original)
    records = from_consumer_records(msg.raw_message)
    assert [r.headers for r in records][1] == (("x-h", b"\xff\xfe"),)  # the handler still sees the raw bytes
