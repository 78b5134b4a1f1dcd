"""Produce ``ChangeEnvelope``s straight to ``om.envelopes.v1`` (keyed by document identity).

    async with EnvelopeProducer("127.0.0.1:19092") as producer:
        rec = await producer.send(envelope)          # validated, keyed, acks=all, idempotent
        recs = await producer.send_many(envelopes)   # pipelined

Invalid envelopes never reach the topic: ``send`` accepts a model or a dict and validates it first
(``InvalidPayloadError`` naming the field).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer

from schemas.envelope import ChangeEnvelope, envelope_from_json, validate_envelope
from schemas.validation import Rejected
from services.errors import InvalidPayloadError
from services.kafka.clients import INPUT_MAX_BYTES, producer_config


@dataclass(frozen=True, slots=True)
class ProducedRecord:
    envelope_id: str
    key: str
    partition: int
    offset: int


def to_envelope(item: ChangeEnvelope | Mapping[str, Any]) -> ChangeEnvelope:
    """The envelope as ingest will see it: the same check as HTTP ingress and the ingest stage (a model
    built in Python is re-validated from its JSON, the form it travels in)."""
    try:
        if isinstance(item, ChangeEnvelope):
            return envelope_from_json(item.model_dump_json())
        return validate_envelope(dict(item))
    except Rejected as exc:
        raise InvalidPayloadError(str(exc), field=exc.field) from None


class EnvelopeProducer:
    def __init__(self, bootstrap_servers: str, *, topic: str = "om.envelopes.v1", linger_ms: int = 5) -> None:
        self.topic = topic
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            **producer_config(client_id="orgmem-producer", linger_ms=linger_ms, max_request_size=INPUT_MAX_BYTES),
        )

    async def __aenter__(self) -> EnvelopeProducer:
        await self._producer.start()
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self._producer.stop()

    async def send(self, item: ChangeEnvelope | Mapping[str, Any]) -> ProducedRecord:
        env = to_envelope(item)
        md = await self._producer.send_and_wait(
            self.topic,
            env.model_dump_json().encode(),
            key=env.key.encode(),
            headers=[("x-event-type", b"envelope"), ("x-envelope-id", str(env.envelope_id).encode())],
        )
        return ProducedRecord(str(env.envelope_id), env.key, md.partition, md.offset)

    async def send_many(self, items: Iterable[ChangeEnvelope | Mapping[str, Any]]) -> list[ProducedRecord]:
        envs = [to_envelope(i) for i in items]  # validate all before producing any
        futures = [
            await self._producer.send(
                self.topic,
                e.model_dump_json().encode(),
                key=e.key.encode(),
                headers=[("x-event-type", b"envelope"), ("x-envelope-id", str(e.envelope_id).encode())],
            )
            for e in envs
        ]
        mds = await asyncio.gather(*futures)
        return [
            ProducedRecord(str(e.envelope_id), e.key, m.partition, m.offset) for e, m in zip(envs, mds, strict=True)
        ]

    async def send_raw(self, value: bytes, key: bytes | None = None) -> ProducedRecord:
        """Produce bytes as they are (tests and tools: a connector bug looks like this)."""
        md = await self._producer.send_and_wait(self.topic, value, key=key)
        return ProducedRecord("", (key or b"").decode("utf-8", "replace"), md.partition, md.offset)
