from collections.abc import Sequence

from services.errors import InvalidPayloadError, TransientError, VendorError
from services.kafka.delivery import DeadLetters, run_batch
from services.kafka.records import Record


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
