"""Memory consolidation on the real stack (seed 002, corrected): agent-written duplicates, near-duplicates and
contradicted statements are merged by superseding — the absorbed memories stop ranking but stay stored, the merge
is recorded and listed under the all-visible rule, never widens access, and undo restores the ranking exactly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from retriever.wiring import get_service
from services.api.app import create_app
from services.consolidation.run import consolidate
from services.settings import Settings
from tests.integration.helpers import eventually, fetch
from tests.integration.retriever_fixtures import T1, VIEWERS, hierarchy_file

ALICE = VIEWERS["alice"].headers()
BOB = VIEWERS["bob"].headers()
ADMIN = ALICE | {"X-Principal-Roles": "admin"}

NEAR_A = "Alice prefers the blue dashboard layout for the weekly finance review meetings"
NEAR_B = "Alice prefers the blue dashboard layout for the weekly finance review meetings with charts"
OLD = "Alice prefers dark mode"
NEW = "Alice prefers light mode now"


@pytest.fixture
async def api(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> AsyncIterator[tuple[Settings, Any, httpx.AsyncClient]]:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    rt = await pipeline("ingest", "embed", settings_override=s)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as client:
        yield s, rt, client


async def _remember(client: httpx.AsyncClient, text: str, event: str, scope: str | None = None) -> str:
    body: dict[str, Any] = {
        "text": text,
        "kind": "preference",
        "source": {"agent": "a", "session_id": event, "event_id": event},
    }
    if scope:
        body["scope"] = scope
    r = await client.post("/v1/memories", json=body, headers=ALICE)
    assert r.status_code == 202, r.text
    return str(r.json()["memory_id"])


async def _ranking(client: httpx.AsyncClient, query: str) -> list[tuple[str, float]]:
    r = await client.post("/tools/search_knowledge_base", json={"query": query, "limit": 20}, headers=ALICE)
    assert r.status_code == 200, r.text
    # scores to 4 places: the recency decay moves them by ~1e-6 between two queries a few seconds apart
    return [(p["external_id"], round(p["score"], 4)) for p in r.json()["passages"]]


async def test_consolidation_supersedes_lists_and_undoes_exactly(
    api: tuple[Settings, Any, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, rt, client = api
    # access counts frozen, as in evaluation: otherwise each query's own access boost moves the next ranking
    monkeypatch.setattr(get_service(rt).access, "record", lambda chunk_ids: None)
    near_a = await _remember(client, NEAR_A, "e1")
    near_b = await _remember(client, NEAR_B, "e2")
    dup_1 = await _remember(client, "Team lunch is on Thursdays", "e3")
    dup_2 = await _remember(client, "team lunch is on thursdays!", "e4")
    old = await _remember(client, OLD, "e5")
    new = await _remember(client, NEW, "e6")
    # the same text at another scope (another ACL) must never be merged with the user-scope one
    shared = await _remember(client, NEAR_A, "e7", scope=f"group:{T1}")
    ids = {near_a, near_b, dup_1, dup_2, old, new, shared}

    async def embedded() -> bool:
        rows = await fetch(
            settings,
            "SELECT count(DISTINCT d.external_id) AS n FROM documents d JOIN chunks c ON c.document_id = d.id"
            " WHERE d.source_system = 'agent' AND NOT c.is_parent AND c.embedding IS NOT NULL",
        )
        return bool(rows[0]["n"] == len(ids))

    await eventually(embedded, timeout=60, interval=0.5)
    before = {q: await _ranking(client, q) for q in ("blue dashboard layout finance", "team lunch", "mode")}

    dry = await consolidate(rt.pool, "default", sim=settings.consolidation_sim, apply=False, actor="test")
    assert not dry.applied and all(m.consolidation_id is None for m in dry.merges)
    assert await _ranking(client, "team lunch") == before["team lunch"]  # a dry run changes nothing

    report = await consolidate(rt.pool, "default", sim=settings.consolidation_sim, apply=True, actor="test")
    doc = {r["external_id"]: r["id"] for r in await fetch(settings, "SELECT id, external_id FROM documents")}
    ext = {v: k for k, v in doc.items()}
    got = {(m.reason, ext[m.survivor_id], tuple(sorted(ext[a] for a in m.absorbed_ids))) for m in report.merges}
    dups = tuple(sorted({dup_1, dup_2} - {next(ext[m.survivor_id] for m in report.merges if m.reason == "exact")}))
    assert got == {
        ("similar", near_b, (near_a,)),  # the longer, more specific text survives
        ("exact", ({dup_1, dup_2} - set(dups)).pop(), dups),
        ("contradiction", new, (old,)),  # the newest statement wins
    }
    absorbed = {near_a, old, *dups}
    after = {q: await _ranking(client, q) for q in before}
    for ranking in after.values():
        assert not absorbed & {e for e, _ in ranking}  # absorbed memories stop ranking ...
    assert shared in {e for e, _ in after["blue dashboard layout finance"]}  # ... the other scope's copy does not
    # ... but stay stored and readable: not deleted, text intact
    rows = await fetch(
        settings,
        "SELECT d.external_id, d.deleted_at, string_agg(c.text, ' ') AS text FROM documents d"
        " JOIN chunks c ON c.document_id = d.id AND c.is_parent WHERE d.external_id = ANY($1::text[])"
        " GROUP BY d.external_id, d.deleted_at",
        sorted(absorbed),
    )
    assert {r["external_id"] for r in rows} == absorbed and all(r["deleted_at"] is None for r in rows)
    assert any(OLD in r["text"] for r in rows)

    # a second run finds nothing new (absorbed memories are not candidates again)
    again = await consolidate(rt.pool, "default", sim=settings.consolidation_sim, apply=True, actor="test")
    assert again.merges == []

    # listed to the memories' owner and to admins, not to another viewer
    mine = (await client.get("/v1/consolidations", headers=ALICE)).json()["consolidations"]
    assert len(mine) == 3 and all(c["created_by"] == "test" for c in mine)
    assert (await client.get("/v1/consolidations", headers=BOB)).json()["consolidations"] == []
    assert len((await client.get("/v1/consolidations", headers=ADMIN)).json()["consolidations"]) == 3

    # undo: another viewer gets 404 (no oracle), the owner restores the exact pre-merge ranking
    for c in mine:
        assert (await client.post(f"/v1/consolidations/{c['id']}/undo", headers=BOB)).status_code == 404
    for c in mine:
        r = await client.post(f"/v1/consolidations/{c['id']}/undo", headers=ALICE)
        assert r.status_code == 200, r.text
        assert r.json()["restored_chunks"] >= 1 and r.json()["consolidation"]["undone_by"]
    assert (await client.post(f"/v1/consolidations/{mine[0]['id']}/undo", headers=ALICE)).status_code == 409
    assert {q: await _ranking(client, q) for q in before} == before
    rows = await fetch(settings, "SELECT count(*) AS n FROM memory_consolidations WHERE undone_at IS NULL")
    assert rows[0]["n"] == 0


async def test_consolidation_routes_validate(api: tuple[Settings, Any, httpx.AsyncClient]) -> None:
    _, _, client = api
    assert (await client.get("/v1/consolidations")).status_code == 401
    assert (await client.get("/v1/consolidations?limit=0", headers=ALICE)).status_code == 422
    r = await client.post("/v1/consolidations/not-a-uuid/undo", headers=ALICE)
    assert r.status_code == 422
    r = await client.post("/v1/consolidations/00000000-0000-0000-0000-000000000000/undo", headers=ALICE)
    assert r.status_code == 404 and "consolidation_id" in r.text
