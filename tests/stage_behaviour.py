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
- ``a_valid_record_is_applied_and_its_effect_appears`` (the happy path): a valid record of the stage's input —
  in memory hand-built (``valid_record``), on the broker what the stage's upstream really wrote for one envelope
  — is applied: its effect appears (on the broker: the stage's row or downstream event; in memory: the stage's
  ``apply`` saw it fresh, committed, and its outgoing events reached the publisher; the retriever: a reply with
  ``ok``) and nothing is dead-lettered;
- ``an_outage_pauses_the_stage_nothing_is_dead_lettered``: while Postgres is unreachable the stage holds
  (paused, nothing dead-lettered, nothing skipped) and, once it is back, resumes by itself. The retriever's
  request/reply stage has no dependency watch (a request is answered or dead-lettered, never held): the
  behaviour, like ``redelivery_is_a_no_op`` (it has no dead-letter ledger), does not apply to it
  (``Stage.replayable`` is False).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from orgmem_sdk.kafka_transport import CORRELATION_ID, DEADLINE, REPLY_TO
from orgmem_sdk.signing import sign_rpc
from schemas.envelope import ChangeEnvelope
from schemas.events import ChunksToEmbed, DocumentChange, DocumentEvent
from schemas.graph import ExtractedEntity, GraphEvent, IdentityKey
from schemas.tools import RpcRequest, RpcViewer
from services.stagekit import Stage
from services.stages import CATALOGUE

STAGES: tuple[Stage, ...] = CATALOGUE
POISON = b'{"this is": "not a contract of ours"'


@dataclass(frozen=True, slots=True)
class Letter:
    value: bytes
    key: bytes | None
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Valid:
    """A valid input record of a stage."""

    value: bytes
    key: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


async def _no_valid() -> Valid:
    raise NotImplementedError("this environment has no valid record")


async def _no_effect(valid: Valid) -> bool:
    return False


async def _no_send(valid: Valid) -> None:
    raise NotImplementedError


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
    valid: Callable[[], Awaitable[Valid]] = _no_valid
    """A valid input record of the stage in this environment."""
    send: Callable[[Valid], Awaitable[None]] = _no_send
    """Publish a record with its headers to the stage's input topic."""
    effect: Callable[[Valid], Awaitable[bool]] = _no_effect
    """Wait (bounded) for the effect of ``valid``; whether it appeared."""


async def a_valid_record_is_applied_and_its_effect_appears(h: StageHarness) -> None:
    valid = await h.valid()
    await h.send(valid)
    assert await h.effect(valid), f"{h.stage.name}: a valid record left no effect"
    assert await h.dead_letters(0) == []  # and nothing of it was dead-lettered


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


Behaviour = Callable[[StageHarness], Awaitable[None]]


def cases(every_stage: tuple[Behaviour, ...], replayable: tuple[Behaviour, ...] = ()) -> list[Any]:
    """``pytest.param(behaviour, stage)`` for each behaviour and every stage it applies to (``replayable``: the
    behaviours the retriever's request/reply stage does not owe)."""
    return [
        pytest.param(b, s, id=f"{b.__name__}[{s.name}]")
        for b in (*every_stage, *replayable)
        for s in STAGES
        if b in every_stage or s.replayable
    ]


WORKSPACE = "behaviour"
RPC_KEY = "behaviour-key"
"""The ``SERVICE_API_KEY`` of the in-memory runtime (single-key mode: the retriever serves what it signs)."""


def rpc_request(namespace: str, key: str, reply_to: str) -> Valid:
    """A signed ``whoami`` request (``retrieve`` stage) answered on ``reply_to``."""
    cid = uuid.uuid4().hex
    body = RpcRequest(tool="whoami", viewer=RpcViewer(principal_id=f"user:{uuid.uuid4()}"), request={})
    value = body.model_dump_json().encode()
    deadline = str(int((time.time() + 60) * 1000))
    headers = ((REPLY_TO, reply_to.encode()), (CORRELATION_ID, cid.encode()), (DEADLINE, deadline.encode()))
    signed = sign_rpc(key, request_id=cid, reply_to=reply_to, deadline=deadline, body=value)
    return Valid(value, cid.encode(), headers + tuple(signed))


def valid_record(stage: str, namespace: str) -> Valid:
    """A hand-built valid input record of ``stage`` (the in-memory environment has no upstream to ask)."""
    doc, at = uuid.uuid4(), datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    key = f"{WORKSPACE}/slack/{doc}"
    if stage == "ingest":
        env = ChangeEnvelope.model_validate(
            {
                "envelope_id": str(uuid.uuid4()),
                "workspace": WORKSPACE,
                "op": "upsert",
                "source": {"system": "slack", "external_id": str(doc)},
                "event_time": at.isoformat(),
                "acl": {"principals": [f"group:{uuid.uuid4()}"]},
                "document": {"kind": "message", "title": None, "text": "the happy path of a stage"},
            }
        )
        return Valid(env.model_dump_json().encode(), key.encode())
    if stage == "embed":
        chunks = ChunksToEmbed(workspace=WORKSPACE, document_id=doc, version=1, chunk_ids=[uuid.uuid4()])
        return Valid(chunks.model_dump_json().encode(), key.encode())
    if stage in ("extract", "collab"):
        ev = DocumentEvent(
            event_id=uuid.uuid4(),
            change=DocumentChange.CHANGED,
            workspace=WORKSPACE,
            document_id=doc,
            key=key,
            version=1,
            kind="message",
            event_time=at,
            principals=[f"group:{uuid.uuid4()}"],
        )
        return Valid(ev.model_dump_json().encode(), key.encode())
    if stage == "conflicts":
        person = ExtractedEntity(
            ref=0, type="person", name="Ada Lovelace", identity=IdentityKey(namespace="email", value="ada@example.com")
        )
        graph = GraphEvent(
            event_id=uuid.uuid4(),
            workspace=WORKSPACE,
            document_id=doc,
            key=key,
            version=1,
            event_time=at,
            entities=[person],
        )
        return Valid(graph.model_dump_json().encode(), key.encode())
    if stage == "retrieve":
        return rpc_request(namespace, RPC_KEY, f"{namespace}.rpc.reply.behaviour.v1")
    raise AssertionError(f"no valid record for stage {stage!r}")
