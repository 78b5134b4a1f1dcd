"""One behaviour suite for every stage of the catalogue, run twice with the same body (as FastStream
does): in memory (``tests/unit/test_stage_behaviour.py``: FastStream's ``TestKafkaBroker``, a recording
publisher, a pool that records statements) and against the real broker
(``tests/integration/test_stage_behaviour.py``: the local Kafka, Postgres and S3).

What every stage owes, whatever its payload: a poison record on its input topic goes to the stage's own
dead-letter topic with its original bytes and key, the error class and the failing field in the headers —
never dropped, never retried forever — and the stage's handler is the runtime's ``handlers[<name>]``.
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
