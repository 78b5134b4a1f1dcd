"""Poison on the Kafka path, mixed with good records: every poison record ends in the DLQ exactly once, every
good record is applied, none is lost — and the stage keeps going (issue 12 §1–3, §5, §6)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from services.ops.dlq import read_dead_letters, read_stored_letters
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, fetchval, principal, produce
from tests.kafka_raw import RawHeaderKey
from tests.reliability.kafka_poison import Raw, good, poison, produce_raw_records

REFUSED_TITLE = "refused by a constraint"
UNEXPECTED_TITLE = "fails with an error class nobody classified"


async def _db_refusals(settings: Settings) -> None:
    """Two more things Postgres refuses, in this test's own schema: a CHECK constraint (SQLSTATE 23514) and a
    trigger raising P0001 (a class the delivery layer has no rule for: permanent once its budget is spent)."""
    from tests.integration.helpers import connect

    conn = await connect(settings)
    try:
        await conn.execute(
            f"ALTER TABLE documents ADD CONSTRAINT rel_probe CHECK (title IS DISTINCT FROM '{REFUSED_TITLE}')"
        )
        await conn.execute(
            "CREATE FUNCTION rel_unexpected() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF NEW.title = '{UNEXPECTED_TITLE}' THEN RAISE EXCEPTION 'unexpected' USING ERRCODE = 'P0001'; END IF;"
            " RETURN NEW; END $$"
        )
        await conn.execute(
            "CREATE TRIGGER rel_unexpected BEFORE INSERT OR UPDATE ON documents FOR EACH ROW"
            " EXECUTE FUNCTION rel_unexpected()"
        )
    finally:
        await conn.close()


def _titled(external_id: str, title: str, cls: str) -> Raw:
    env = envelope(external_id, "text", title=title)
    return Raw(cls, env.model_dump_json().encode(), env.key.encode())


async def _letters_of(settings: Settings) -> list[Any]:
    return await read_dead_letters(settings, "ingest") + await read_stored_letters(settings, "ingest")


@pytest.mark.timeout(240)
async def test_poison_mixed_with_good_records_every_poison_dead_lettered_once_every_good_applied(
    settings_factory: Any, pipeline: Any
) -> None:
    settings: Settings = await settings_factory(ingest_batch_size=100, retry_attempts=2)
    await _db_refusals(settings)
    g = principal()
    goods = [good(f"G/{i}", [g]) for i in range(300)]
    bad: list[Raw] = [p for i in range(3) for p in poison(i)]
    bad += [_titled(f"C/{i}", REFUSED_TITLE, "db_refused") for i in range(2)]
    bad += [_titled(f"U/{i}", UNEXPECTED_TITLE, "db_refused") for i in range(2)]
    mixed: list[Raw] = []
    step = len(goods) // len(bad)
    for i, r in enumerate(goods):
        mixed.append(r)
        if i % step == 0 and bad:
            mixed.append(bad.pop())
    mixed += bad
    n_poison = sum(r.cls != "good" for r in mixed)
    await produce_raw_records(settings, mixed)
    await pipeline("ingest", settings_override=settings)

    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == len(goods), timeout=180
    )
    letters = await eventually(lambda: _letters_of(settings), until=lambda ls: len(ls) >= n_poison, timeout=60)
    originals = Counter(lt.original if not lt.stored else lt.record.position for lt in letters)
    assert len(letters) == n_poison, Counter(lt.error_class for lt in letters)
    assert max(originals.values()) == 1  # exactly once each
    external = {r["external_id"] for r in await fetch(settings, "SELECT external_id FROM documents")}
    assert external == {f"G/{i}" for i in range(300)}  # every good one, nothing invented
    by_class = Counter(lt.error_class for lt in letters)
    assert by_class["InvalidPayloadError"] >= 3 * 9  # not JSON, wrong shape, oversized, bad headers, null values
    assert by_class["CheckViolationError"] == 2
    assert by_class["RaiseError"] == 2  # unexpected class: dead-lettered after its budget, not retried forever
    fields = {lt.record.header("x-dlq-error-field") for lt in letters}
    assert "headers" in fields and "document.text" in fields
    ledger = await fetchval(settings, "SELECT count(*) FROM dead_letters WHERE stage = 'ingest'")
    assert ledger == n_poison
    # the stage moved on: a record produced afterwards flows
    await produce(settings, envelope("AFTER/1", "after the poison", principals=[g]))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'AFTER/1'"),
        until=lambda n: n == 1,
    )


async def test_one_bad_header_among_200_valid_envelopes_200_applied_1_dead_lettered(
    settings: Settings, pipeline: Any
) -> None:
    """The test from the issue: the broker library's header decoding no longer loses the polled batch. An
    undecodable value of a header nobody reads (``x-source``) fails nothing; a header key that is not UTF-8
    dead-letters its record (issue 20 §1)."""
    g = principal()
    records = [good(f"H/{i}", [g]) for i in range(199)]
    odd = good("H/odd-value", [g])
    records.insert(50, Raw("good", odd.value, odd.key, (("x-source", b"caf\xe9"),)))
    bad = good("H/bad", [g])
    records.insert(101, Raw("bad_headers", bad.value, bad.key, ((RawHeaderKey(b"x-source-\xe9"), b"1"),)))
    await produce_raw_records(settings, records)
    await pipeline("ingest")
    letters = await eventually(lambda: _letters_of(settings), until=lambda ls: len(ls) >= 1, timeout=60)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n >= 200, timeout=60)
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 200
    assert len(letters) == 1 and letters[0].record.header("x-dlq-error-field") == "headers"
    assert letters[0].record.value == bad.value
    assert await fetchval(settings, "SELECT count(*) FROM documents WHERE external_id = 'H/bad'") == 0


@pytest.mark.parametrize("same_batch", [True, False])
async def test_reused_envelope_id_with_different_content_is_dead_lettered_whatever_the_batching(
    settings: Settings, pipeline: Any, same_batch: bool
) -> None:
    g = principal()
    first = envelope("I/1", "the original content", principals=[g])
    clash = envelope("I/1", "different content, same id", principals=[g], envelope_id=first.envelope_id)
    dup = envelope("I/1", "the original content", principals=[g], envelope_id=first.envelope_id)
    rt = await pipeline("ingest")
    if same_batch:
        await produce(settings, first, clash, dup)
    else:
        await produce(settings, first)
        await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 1)
        await produce(settings, clash)
        await produce(settings, dup)
    letters = await eventually(lambda: _letters_of(settings), until=lambda ls: len(ls) >= 1, timeout=60)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM processed_events"), until=lambda n: n >= 1)
    assert len(letters) == 1
    assert letters[0].error_class == "IdempotencyConflictError"
    assert letters[0].record.header("x-dlq-error-field") == "envelope_id"
    assert json.loads(letters[0].record.value)["document"]["text"] == "different content, same id"
    assert await fetchval(settings, "SELECT count(*) FROM document_versions") == 1
    assert await fetchval(settings, "SELECT current_version FROM documents") == 1
    assert rt is not None


async def test_http_ingress_answers_409_for_a_reused_envelope_id_with_different_content(
    settings: Settings, pipeline: Any
) -> None:
    import httpx

    from services.api.app import create_app

    rt = await pipeline("ingest")
    g = principal()
    first = envelope("I/http", "original", principals=[g])
    await produce(settings, first)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 1)
    app = create_app(rt)
    body = json.loads(first.model_dump_json())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        headers = {"X-Api-Key": "test-key"}
        same = await http.post("/ingress/envelope", json=body, headers=headers)
        assert same.status_code == 202  # a resend of the same content is fine (applied once)
        body["document"]["text"] = "changed"
        clash = await http.post("/ingress/envelope", json=body, headers=headers)
        assert clash.status_code == 409 and clash.json()["detail"]["field"] == "envelope_id"
        batch = await http.post(
            "/ingress/envelopes", json=[json.loads(envelope("I/x", "x").model_dump_json()), body], headers=headers
        )
        assert batch.status_code == 409 and batch.json()["detail"]["index"] == 1
