"""Write path on real Kafka + Postgres + S3: envelopes -> ingest -> embed -> projection."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from ingest.archive import read_archived
from services.api.app import create_app
from services.ops.dlq import read_dead_letters
from services.settings import Settings
from tests.integration.helpers import (
    envelope,
    eventually,
    fetch,
    fetchval,
    later,
    principal,
    produce,
    produce_raw,
)

API_KEY = {"X-Api-Key": "test-key"}


async def lexical(settings: Settings, words: str, viewer: list[str]) -> list[str]:
    """Text search under the any-visible ACL rule, as the retriever's lexical arm does it."""
    rows = await fetch(
        settings,
        "SELECT DISTINCT d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE NOT c.is_parent AND NOT c.deleted AND c.principals && $2::text[]"
        " AND c.tsv @@ websearch_to_tsquery('english', $1) ORDER BY 1",
        words,
        viewer,
    )
    return [r["external_id"] for r in rows]


async def test_direct_produce_reaches_projection_with_vectors(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g = principal()
    await produce(settings, envelope("C1/1", "Priya reports to Dana since the reorg.", principals=[g]))
    rows = await eventually(
        lambda: fetch(settings, "SELECT * FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
    )
    assert rows[0]["principals"] == [g]
    assert rows[0]["embedding_model"] == "hash/v1-384"
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 1
    # the raw envelope is archived in S3 under the document row's blob key
    key = await fetchval(settings, "SELECT blob_key FROM documents")
    rt = await pipeline()  # a runtime without stages, for its object store
    blob = json.loads(await read_archived(rt.store, key))
    assert blob["source"]["external_id"] == "C1/1"


async def test_http_ingress_202_then_searchable_only_by_viewers(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest")
    g, other = principal(), principal()
    env = envelope("DOC-1", "The quarterly roadmap for Project Atlas moves search to pgvector.", principals=[g])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/ingress/envelope", json=json.loads(env.model_dump_json()), headers=API_KEY)
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["topic"] == settings.topic("envelopes") and body["offset"] >= 0
        assert (await c.post("/ingress/envelope", json={}, headers={"X-Api-Key": "wrong"})).status_code == 401
    assert await eventually(lambda: lexical(settings, "roadmap atlas", [g])) == ["DOC-1"]
    assert await lexical(settings, "roadmap atlas", [other]) == []
    assert await lexical(settings, "roadmap atlas", []) == []


async def test_http_ingress_rejects_bad_input_naming_the_field_and_produces_nothing(
    settings: Settings, pipeline: Any
) -> None:
    rt = await pipeline("ingest")
    good = json.loads(envelope("X/1", "fine").model_dump_json())
    cases = {
        "event_time": {**good, "event_time": "2024-05-08T13:56:00"},  # no timezone
        "source.system": {**good, "source": {"system": "Bad System", "external_id": "x"}},
        "acl.principals.0": {**good, "acl": {"principals": ["everyone"]}},
        "document": {**good, "document": None},
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        for field, body in cases.items():
            r = await c.post("/ingress/envelope", json=body, headers=API_KEY)
            assert r.status_code == 422, (field, r.text)
            assert r.json()["detail"]["field"] == field
        future = {**good, "event_time": "2999-01-01T00:00:00Z"}
        r = await c.post("/ingress/envelope", json=future, headers=API_KEY)
        assert r.status_code == 422 and r.json()["detail"]["field"] == "event_time"
        big = {**good, "document": {"kind": "message", "text": "x" * 5_000_000}}
        r = await c.post("/ingress/envelope", json=big, headers=API_KEY)
        assert r.status_code == 413
        # batch: one bad envelope -> nothing produced
        r = await c.post("/ingress/envelopes", json=[good, cases["event_time"]], headers=API_KEY)
        assert r.status_code == 422 and r.json()["detail"]["index"] == 1
    assert await fetchval(settings, "SELECT count(*) FROM documents") == 0


async def test_same_envelope_twice_is_one_version(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g = principal()
    env = envelope("T/1", "only once", principals=[g])
    await produce(settings, env, env)
    await produce(settings, env)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage = 'ingest'"))
    await eventually(lambda: _count_done(settings, 1))
    assert await fetchval(settings, "SELECT count(*) FROM document_versions") == 1
    assert await fetchval(settings, "SELECT current_version FROM documents") == 1


async def _count_done(settings: Settings, n: int) -> bool:
    return bool(await fetchval(settings, "SELECT count(*) FROM documents") == n)


async def test_older_version_after_newer_keeps_newer_content(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g = principal()
    newer = envelope("W/1", "Dana now leads the Search team.", principals=[g], event_time=later(60))
    older = envelope("W/1", "Lee leads the Search team.", principals=[g], event_time=later(0))
    await produce(settings, newer, older)
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'"),
        until=lambda v: v == 2,
    )
    assert await lexical(settings, "Dana", [g]) == ["W/1"]
    assert await lexical(settings, "Lee", [g]) == []
    assert await fetchval(settings, "SELECT current_version FROM documents") == 1


async def test_delete_tombstones_and_acl_changes_visibility(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g, h = principal(), principal()
    await produce(
        settings,
        envelope("A/1", "alpha bravo", principals=[g]),
        envelope("A/2", "alpha charlie", principals=[g]),
    )
    await eventually(lambda: lexical(settings, "alpha", [g]))
    await produce(
        settings,
        envelope("A/1", op="delete", event_time=later(5)),
        envelope("A/2", op="acl", principals=[h], event_time=later(5)),
    )
    await eventually(lambda: lexical(settings, "alpha", [h]), until=lambda v: v == ["A/2"])
    assert await lexical(settings, "alpha", [g]) == []  # A/1 deleted, A/2 moved to h
    row = (await fetch(settings, "SELECT deleted_at, current_version FROM documents WHERE external_id='A/1'"))[0]
    assert row["deleted_at"] is not None and row["current_version"] == 1  # the id stays
    # an older ACL change loses (last writer wins on acl_event_time)
    await produce(settings, envelope("A/2", op="acl", principals=[g], event_time=later(1)))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'"),
        until=lambda v: v == 5,
    )
    assert await lexical(settings, "alpha", [h]) == ["A/2"]


async def test_bad_kafka_records_are_dead_lettered_and_the_next_good_one_flows(
    settings: Settings, pipeline: Any
) -> None:
    await pipeline("ingest")
    g = principal()
    await produce_raw(settings, b"{not json", key=b"k1")
    bad_tz = json.loads(envelope("B/1", "x").model_dump_json())
    bad_tz["event_time"] = "2024-05-08T13:56:00"
    await produce_raw(settings, json.dumps(bad_tz).encode(), key=b"k2")
    structured_no_author = json.loads(envelope("B/2", "x", author_email=None).model_dump_json())
    structured_no_author["structured_fields"] = {"title": "VP"}
    await produce_raw(settings, json.dumps(structured_no_author).encode(), key=b"k3")
    await produce(settings, envelope("B/3", "the good one", principals=[g]))
    assert await eventually(lambda: lexical(settings, "good", [g])) == ["B/3"]
    letters = await eventually(lambda: _letters(settings, 3))
    by_key = {(lt.record.key or b"").decode(): lt for lt in letters}
    assert by_key["k1"].error_class == "InvalidPayloadError"
    assert by_key["k2"].error_class == "InvalidPayloadError"
    assert by_key["k2"].record.header("x-dlq-error-field") == "event_time"
    assert by_key["k3"].error_class == "UnresolvedAuthorError"
    assert by_key["k1"].record.value == b"{not json"  # original bytes kept
    assert by_key["k1"].record.header("x-dlq-original-topic") == settings.topic("envelopes")


async def _letters(settings: Settings, n: int) -> Any:
    letters = await read_dead_letters(settings, "ingest")
    return letters if len(letters) >= n else None


async def _true(value: bool) -> bool:
    return value


async def test_object_store_down_leaves_no_document_without_blob(settings_factory: Any, pipeline: Any) -> None:
    broken = await settings_factory(s3_endpoint="127.0.0.1:9", retry_attempts=2)
    rt = await pipeline("ingest", settings_override=broken)
    g = principal()
    await produce(broken, envelope("S/1", "needs its blob", principals=[g]))
    # an outage is not poison (issue 12): the stage pauses and says so, nothing is dead-lettered
    watch = rt.watches["ingest"]
    await eventually(lambda: _true(watch.paused), timeout=60)
    assert watch.state()["down"] == ["object_store"]
    assert await fetchval(broken, "SELECT count(*) FROM documents") == 0
    assert await fetchval(broken, "SELECT count(*) FROM processed_events") == 0
    assert await read_dead_letters(broken, "ingest") == []


async def test_replay_twice_leaves_projection_unchanged(settings: Settings, pipeline: Any) -> None:
    from services.ops.replay import replay

    await pipeline("ingest", "embed")
    groups = [principal() for _ in range(3)]
    envs = [
        envelope(
            f"R/{i}",
            f"replay document {i} about topic {i % 7}",
            principals=[groups[i % 3]],
            event_time=later(i),
        )
        for i in range(60)
    ]
    envs += [
        envelope("R/1", op="delete", event_time=later(500)),
        envelope("R/2", op="acl", principals=[groups[2]], event_time=later(500)),
    ]
    await produce(settings, *envs)
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'"),
        until=lambda v: v == len(envs),
    )
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) = 0 FROM chunks WHERE NOT is_parent AND NOT deleted AND embedding IS NULL",
        )
    )
    before = await _fingerprint(settings)
    for _ in range(2):
        result = await replay(settings, "ingest", start=None)
        assert result.records == len(envs) and result.dead_lettered == 0
        assert await _fingerprint(settings) == before


async def _fingerprint(settings: Settings) -> dict[str, Any]:
    return {
        "documents": [
            tuple(r)
            for r in await fetch(
                settings,
                "SELECT id, current_version, content_hash, principals, deleted_at, event_time"
                " FROM documents ORDER BY id",
            )
        ],
        "versions": await fetchval(settings, "SELECT count(*) FROM document_versions"),
        "chunks": [
            tuple(r)
            for r in await fetch(
                settings,
                "SELECT id, content_hash, principals, deleted, embedding_model FROM chunks ORDER BY id",
            )
        ],
        "people": await fetchval(settings, "SELECT count(*) FROM people"),
    }


async def test_participants_and_people_resolve_by_identity_keys(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    uid = str(uuid.uuid4())
    ident = [{"namespace": "platform_user", "value": uid, "verified": True}]
    await produce(
        settings,
        envelope(
            "P/1",
            "hello",
            principals=[principal()],
            author_email="ana@northwind.example",
            author_name="Ana",
            participants=[{"email": "omar@northwind.example", "display_name": "Omar", "role": "to"}],
        ),
        envelope("P/2", "again", principals=[principal()], author_email="ana@northwind.example", identities=ident),
    )
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage='ingest'"),
        until=lambda v: v == 2,
    )
    people = await fetch(
        settings,
        "SELECT p.display_name, array_agg(a.namespace ORDER BY a.namespace) AS ns"
        " FROM people p JOIN person_aliases a ON a.person_id = p.id GROUP BY p.id"
        " ORDER BY p.display_name",
    )
    assert [(p["display_name"], p["ns"]) for p in people] == [
        ("Ana", ["email", "platform_user"]),
        ("Omar", ["email"]),
    ]
    roles = await fetch(settings, "SELECT role FROM participants ORDER BY role")
    assert [r["role"] for r in roles] == ["author", "author", "to"]


async def test_dlq_redrive_sends_each_dead_letter_back_once(settings: Settings, pipeline: Any) -> None:
    from services.ops.dlq import redrive

    await pipeline("ingest")
    await produce_raw(settings, b"{still broken", key=b"r1")
    await eventually(lambda: _letters(settings, 1))
    assert await redrive(settings, "ingest", dry_run=True) == 1
    assert await redrive(settings, "ingest") == 1  # back to om.envelopes.v1 ...
    letters = await eventually(lambda: _letters(settings, 2))  # ... fails again, dead-lettered again
    again = [lt for lt in letters if lt.record.header("x-orig-x-redriven-from")]
    assert len(again) == 1 and again[0].record.value == b"{still broken"
    assert await redrive(settings, "ingest", error_class="NoSuchError") == 0
    assert await redrive(settings, "ingest") == 1  # only the new letter: the first was redriven already
