"""Poison for the Kafka path: records that bypass every producer-side validation."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer

from services.kafka.clients import producer_config
from services.settings import Settings
from tests.integration.helpers import ensure_test_topics, envelope
from tests.kafka_raw import RawHeaderKey, python_record_builder


@dataclass(frozen=True, slots=True)
class Raw:
    cls: str  # the poison class (README "Reliability" table), "good" for a valid envelope
    value: bytes | None
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    envelope_id: str | None = None


def good(external_id: str, principals: list[str], text: str | None = None) -> Raw:
    env = envelope(external_id, text or f"good record {external_id}", principals=principals)
    return Raw(
        "good", env.model_dump_json().encode(), env.key.encode(), (("x-event-type", b"envelope"),), str(env.envelope_id)
    )


def _body(external_id: str, **changes: object) -> dict[str, object]:
    body: dict[str, object] = json.loads(envelope(external_id, "poison").model_dump_json())
    body.update(changes)
    return body


def poison(i: int) -> list[Raw]:
    """One of each poison class, unique per ``i``."""
    key = f"default/slack/P{i}".encode()
    nul = _body(f"P{i}/nul")
    nul["document"] = {"kind": "message", "title": None, "text": "Postgres refuses this \u0000 text"}
    return [
        Raw("not_json", b"{definitely not json " + str(i).encode(), key),
        Raw("not_json", b"\xff\xfe\x00 binary " + str(i).encode(), key),
        Raw("wrong_shape", json.dumps({"hello": "world", "i": i}).encode(), key),
        Raw("wrong_shape", json.dumps([1, 2, 3]).encode(), key),
        Raw("wrong_shape", json.dumps(_body(f"P{i}/tz", event_time="2024-05-08T13:56:00")).encode(), key),
        Raw("wrong_shape", json.dumps(_body(f"P{i}/op", op="explode")).encode(), key),
        # accepted by the 8 MB topic, refused by the schema (2 M characters of text at most)
        Raw(
            "oversized",
            json.dumps(_body(f"P{i}/big", document={"kind": "message", "text": "x" * 3_000_000})).encode(),
            key,
        ),
        # a header key that is not UTF-8 (a header *value* nobody reads never makes a record fail: issue 20 §1)
        Raw("bad_headers", good(f"P{i}/hdr", []).value, key, ((RawHeaderKey(b"x-\xff\xfe"), b"1"),)),
        Raw("null_value", None, key),
        Raw("null_value", b"", key),
        Raw("db_refused", json.dumps(nul).encode(), key),
    ]


async def produce_raw_records(settings: Settings, records: list[Raw]) -> None:
    await ensure_test_topics(settings)
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers, **producer_config(client_id="poison-test")
    )
    with python_record_builder():  # it writes a header key that is not UTF-8 as it is
        await producer.start()
        try:
            futures = [
                await producer.send(settings.topic("envelopes"), r.value, key=r.key, headers=list(r.headers))
                for r in records
            ]
            for f in futures:
                await f
        finally:
            await producer.stop()


def unique_id() -> str:
    return uuid.uuid4().hex[:8]
