"""``POST /tools/preload`` (seed 002, relevance-conditioned preload) on the real stack: memories first, passages
after, one item per document, packed to the budget with numbered citations, and only what the viewer may see."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import eventually
from tests.integration.retriever_fixtures import DOCS, VIEWERS, hierarchy_file, load_corpus


@pytest.fixture
async def api(
    settings_factory: Any, pipeline: Any, tmp_path: Path
) -> AsyncIterator[tuple[Settings, httpx.AsyncClient]]:
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path))
    rt = await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as client:
        yield s, client


async def test_preload_packs_memories_then_passages_for_the_viewer_only(
    api: tuple[Settings, httpx.AsyncClient],
) -> None:
    _, client = api
    alice = VIEWERS["alice"].headers()
    body = {"text": "Remember: the quasar rollout codename decision is final.", "kind": "decision"}
    src = {"agent": "planner", "session_id": "s1", "event_id": "e1"}
    wrote = await client.post("/v1/memories", json=body | {"source": src}, headers=alice)
    assert wrote.status_code == 202, wrote.text
    mid = wrote.json()["memory_id"]

    async def has_memory() -> bool:
        r = await client.post("/tools/preload", json={"text": "quasar rollout codename"}, headers=alice)
        assert r.status_code == 200, r.text
        return any(i["kind"] == "memory" and i["external_id"] == mid for i in r.json()["items"])

    await eventually(has_memory, timeout=60, interval=0.5)
    r = await client.post("/tools/preload", json={"text": "quasar rollout codename", "top_k": 3}, headers=alice)
    out = r.json()
    items = out["items"]
    assert items[0]["kind"] == "memory" and items[0]["citation"] == 1
    assert [i["citation"] for i in items] == list(range(1, len(items) + 1))
    assert len({i["document_id"] for i in items}) == len(items)  # one item per document
    assert sum(i["kind"] == "passage" for i in items) <= 3
    visible = {d.external_id for d in DOCS if "alice" in d.visible_to} | {mid}
    assert {i["external_id"] for i in items} <= visible
    for i in items:
        assert f"[{i['citation']}] " in out["block"] and i["text"] in out["block"]

    # the budget holds, and a tighter budget keeps the first items (memories) and drops the rest
    small = await client.post(
        "/tools/preload", json={"text": "quasar rollout codename", "max_tokens": 30}, headers=alice
    )
    assert small.status_code == 200
    assert small.json()["tokens"] <= 30
    assert small.json()["items"] and small.json()["items"][0]["kind"] == "memory"

    # another viewer never gets alice's memory or her team's passages
    bob = await client.post(
        "/tools/preload", json={"text": "quasar rollout codename"}, headers=VIEWERS["bob"].headers()
    )
    seen = {i["external_id"] for i in bob.json()["items"]}
    assert mid not in seen and seen <= {d.external_id for d in DOCS if "bob" in d.visible_to}
    nobody = await client.post("/tools/preload", json={"text": "quasar"}, headers=VIEWERS["nobody"].headers())
    assert nobody.status_code == 200 and nobody.json()["items"] == [] and nobody.json()["block"] == ""


async def test_preload_validates_its_request(api: tuple[Settings, httpx.AsyncClient]) -> None:
    _, client = api
    h = VIEWERS["alice"].headers()
    r = await client.post("/tools/preload", json={"text": ""}, headers=h)
    assert r.status_code == 422 and "text" in r.text
    r = await client.post("/tools/preload", json={"text": "x", "principal_id": "user:someone"}, headers=h)
    assert r.status_code == 422 and "principal_id" in r.text  # identity never comes from the request
    r = await client.post("/tools/preload", json={"text": "x"})
    assert r.status_code == 401
