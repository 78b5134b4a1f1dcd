"""The Kafka door refuses what the HTTP door refuses: records produced straight to the envelopes topic
with a NUL, a lone surrogate, a UTC-year edge or nesting between the old parsers' limits are
dead-lettered naming the same field, and the good records around them are applied."""

from __future__ import annotations

import json
import uuid
from typing import Any

from schemas.envelope import envelope_from_json
from schemas.validation import Rejected
from services.ops.dlq import read_dead_letters
from services.settings import Settings
from tests.integration.helpers import eventually, fetchval, produce_raw
from tests.reliability.strategies import deep_json

G = f"group:{uuid.uuid4()}"


def body(external_id: str, **over: Any) -> dict[str, Any]:
    return {
        "envelope_id": str(uuid.uuid4()),
        "source": {"system": "slack", "external_id": external_id},
        "event_time": "2024-05-08T13:56:00Z",
        "document": {"kind": "message", "text": "hello"},
        "author": {"email": "a@example.com"},
        "acl": {"principals": [G]},
    } | over


POISON: dict[str, bytes] = {
    "nul-text": json.dumps(body("p/1", document={"kind": "message", "text": "a\x00b"})).encode(),
    "surrogate-title": json.dumps(body("p/2", document={"kind": "message", "text": "x", "title": "\ud800"})).encode(),
    "nul-structured-key": json.dumps(body("p/3", structured_fields={"ti\x00tle": "CTO"})).encode(),
    "utc-year-1989": json.dumps(body("p/4", event_time="1990-01-01T00:30:00+01:00")).encode(),
    "offset-overflow": json.dumps(body("p/5", event_time="9999-12-31T23:00:00-02:00")).encode(),
    "nested-300": json.dumps(body("p/6"))
    .replace('"author"', '"structured_fields": ' + deep_json(300) + ', "author"', 1)
    .encode(),
}  # fmt: skip


def expected_field(raw: bytes) -> str:
    try:
        envelope_from_json(raw)
    except Rejected as exc:
        return exc.field
    raise AssertionError("poison must be refused")


async def test_poison_refused_at_http_is_dead_lettered_on_kafka_naming_the_same_field(
    settings: Settings, pipeline: Any
) -> None:
    await pipeline("ingest")
    good = []
    for i, (name, raw) in enumerate(POISON.items()):
        await produce_raw(settings, raw, key=name.encode())
        ok = body(f"good/{i}")
        good.append(ok["envelope_id"])
        await produce_raw(settings, json.dumps(ok).encode(), key=f"good-{i}".encode())
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) FROM processed_events WHERE stage = 'ingest' AND event_key = ANY($1::text[])",
            good,
        ),
        until=lambda n: n == len(good),
        timeout=60,
    )

    async def letters() -> Any:
        got = await read_dead_letters(settings, "ingest")
        return got if len(got) >= len(POISON) else None

    by_key = {(lt.record.key or b"").decode(): lt for lt in await eventually(letters, timeout=60)}
    assert set(by_key) == set(POISON), set(by_key)  # each poison record dead-lettered, nothing else
    for name, raw in POISON.items():
        letter = by_key[name]
        assert letter.error_class == "InvalidPayloadError", (name, letter.error_class)
        assert letter.record.header("x-dlq-error-field") == expected_field(raw), name
        assert letter.record.value == raw
