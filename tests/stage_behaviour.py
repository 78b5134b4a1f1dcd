"""One behaviour suite for every stage of the catalogue, run twice with the same body (as FastStream
does): in memory (``tests/unit/test_stage_behaviour.py``: FastStream's ``TestKafkaBroker``, a recording
publisher, a pool that records statements) and against the real broker
(``tests/integration/test_stage_behaviour.py``: the local Kafka, Postgres and S3).

What every stage owes, whatever its payload:

- ``poison_goes_to_the_stage_dead_letter_topic``: a poison record on its input topic goes to the stage's own
  dead-letter topic with its original bytes and key, the error class and the failing field in the headers —
  never dropped, never retried forever — and the stage's handler is the runtime's ``handlers[<name>]``;
- ``records_of_one_key_keep_their_order``: poison after poison on one key, each is dead-lettered, in log
  order (the partition moves on after each, and never reorders a key);
- ``redelivery_is_a_no_op``: a record delivered again (the stage sought back to the start of its input) is
  not dead-lettered twice;
- ``an_outage_pauses_the_stage_nothing_is_dead_lettered``: while Postgres is unreachable the stage holds
  (paused, nothing dead-lettered, nothing skipped) and, once it is back, resumes by itself. The retriever's
  request/reply stage has no dependency watch (a request is answered or dead-lettered, never held): the
  behaviour, like ``redelivery_is_a_no_op`` (it has no dead-letter ledger), does not apply to it
  (``Stage.replayable`` is False).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from services.stagekit import Stage
from services.stages import CATALOGUE

STAGES: tuple[Stage, ...] = CATALOGUE
POISON = b'{"this is": "not a contract of ours"'


@dataclass(frozen=True, slots=True)
class Letter:
    value: bytes
    key: bytes | None
    headers: dict[str, str]


@dataclass
class StageHarness:
    """What the body needs from an environment: where the stage's input topic is, how to publish to it
    and how to read the stage's dead letters back (waiting until ``n`` arrived)."""

    stage: Stage
    topic: str
    publish: Callable[[bytes, bytes], Awaitable[None]]
    dead_letters: Callable[[int], Awaitable[list[Letter]]]
    handler_count: Callable[[], int]
    postgres_down: Callable[[bool], None] = lambda down: None
    """Make Postgres unreachable for the stage (its pool and its probe), or reachable again."""
    paused: Callable[[], bool] = lambda: False
    """The stage's dependency watch says it is paused (what ``/readyz`` shows)."""
    redeliver: Callable[[], None] = lambda: None
    """Seek the stage's fetch loop back to the start of its input (what a rewind or a rebalance does)."""


async def poison_goes_to_the_stage_dead_letter_topic(h: StageHarness) -> None:
    key = f"behaviour/{h.stage.name}".encode()
    await h.publish(POISON, key)
    [letter] = await h.dead_letters(1)
    assert letter.value == POISON and letter.key == key
    assert letter.headers["x-dlq-stage"] == h.stage.name
    assert letter.headers["x-dlq-error-class"] == "InvalidPayloadError"
    assert letter.headers["x-dlq-original-topic"] == h.topic
    assert letter.headers["x-dlq-error-message"]
    assert h.handler_count() == 1


POISON_ONE = b'{"first": "poison of a key"'
POISON_TWO = b'{"second": "poison of the same key"'


async def records_of_one_key_keep_their_order(h: StageHarness) -> None:
    key = f"order/{h.stage.name}".encode()
    await h.publish(POISON_ONE, key)
    await h.publish(POISON_TWO, key)
    letters = await h.dead_letters(2)
    assert [lt.value for lt in letters] == [POISON_ONE, POISON_TWO]
    assert all(lt.key == key for lt in letters)
    offsets = [int(lt.headers["x-dlq-original-offset"]) for lt in letters]
    assert offsets == sorted(offsets)  # (FastStream's in-memory broker numbers nothing: both 0 there)


async def an_outage_pauses_the_stage_nothing_is_dead_lettered(h: StageHarness) -> None:
    import asyncio

    key = f"outage/{h.stage.name}".encode()
    h.postgres_down(True)
    try:
        await h.publish(POISON, key)
        for _ in range(300):
            if h.paused():
                break
            await asyncio.sleep(0.05)
        assert h.paused(), "the stage did not pause while Postgres was down"
        assert await h.dead_letters(0) == []  # held: nothing dead-lettered because a dependency was away
    finally:
        h.postgres_down(False)
    [letter] = await h.dead_letters(1)  # back: the poison is judged the data's, once
    assert letter.value == POISON and letter.key == key
    for _ in range(300):
        if not h.paused():
            break
        await asyncio.sleep(0.05)
    assert not h.paused()


async def redelivery_is_a_no_op(h: StageHarness) -> None:
    key = f"again/{h.stage.name}".encode()
    await h.publish(POISON, key)
    [first] = await h.dead_letters(1)
    h.redeliver()
    await h.publish(POISON_TWO, key)  # same key, same partition: after the redelivered record in the log
    letters = await h.dead_letters(2)
    assert [lt.value for lt in letters] == [POISON, POISON_TWO], [lt.value for lt in letters]
    assert letters[0].headers["x-dlq-original-offset"] == first.headers["x-dlq-original-offset"]
