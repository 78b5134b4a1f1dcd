"""retrieve_context passages: access counts are incremented (batched, after the response) and
``believed_as_of`` bounds passages by when we held the document (``updated_at``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from retriever.wiring import get_service
from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, principal, produce

H = {"X-Api-Key": "test-key"}


async def test_access_counts_and_belief_bound(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "retrieve")
    g = principal()
    hdr = H | {"X-Principal-Groups": g}
    await produce(settings, envelope("A/1", "the zephyr rollout plan, first draft", principals=[g]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"))
    await asyncio.sleep(0.05)
    believed = await fetchval(settings, "SELECT now()")
    await asyncio.sleep(0.05)
    await produce(settings, envelope("B/1", "the zephyr rollout checklist", principals=[g]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM documents"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        body = {"query": "zephyr rollout", "arms": "lexical"}
        r = await c.post("/tools/retrieve_context", json=body, headers=hdr)
        assert r.status_code == 200, r.text
        assert {p["external_id"] for p in r.json()["passages"]} == {"A/1", "B/1"}
        r = await c.post("/tools/retrieve_context", json=body | {"believed_as_of": believed.isoformat()}, headers=hdr)
        assert [p["external_id"] for p in r.json()["passages"]] == ["A/1"]
        r = await c.post("/tools/search_knowledge_base", json=body, headers=hdr)
        assert r.status_code == 200, r.text
    # 3 responses returned A/1's chunk, 2 returned B/1's: counted once each, written off the request path
    counts = (
        "SELECT d.external_id, c.access_count FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE NOT c.is_parent"
    )

    async def read() -> dict[str, int]:
        raw = await fetchval(settings, f"SELECT json_object_agg(external_id, access_count) FROM ({counts}) s")
        return dict(json.loads(raw))

    got = await eventually(read, until=lambda d: d.get("A/1") == 3)
    assert got == {"A/1": 3, "B/1": 2}
    assert get_service(rt).access.flushed >= 2
