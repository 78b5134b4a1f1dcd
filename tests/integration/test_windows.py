"""Conversation windows on real Kafka + Postgres (retriever/windows.py): a window holds the hit and its thread
neighbours the viewer can see, never a message outside the viewer's principals, and the full arm reports it."""

from __future__ import annotations

from typing import Any

import httpx

from retriever import windows
from retriever.rows import fetch_chunks
from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import connect, eventually, fetchval, principal, produce
from tests.integration.test_index_context import conversation
from tests.integration.test_second_round import chunk_ids, scope


async def test_a_window_never_holds_a_neighbour_the_viewer_cannot_see(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest")
    g, h = principal(), principal()
    await produce(settings, *conversation(g, h).values())  # thread order A (g), S (h), B (g), C (g)
    ids = await eventually(lambda: chunk_ids(settings), until=lambda m: len(m) == 4)
    name = {v: k for k, v in ids.items()}
    conn = await connect(settings)
    try:

        async def window(viewer: tuple[str, ...], seed: str) -> list[str]:
            sc = scope(*viewer)
            rows = await fetch_chunks(conn, sc, [ids[seed]])
            found = await windows.windows(conn, sc, [ids[seed]], rows)
            members = found.get(ids[seed], [])
            assert all(m["external_id"] == name[m["chunk_id"]] for m in members)
            return [name[m["chunk_id"]] for m in members]

        # S (h) sits between A and B: a g-viewer's window of B skips over it to A, and never includes it
        assert await window((g,), "B") == ["A", "B", "C"]
        assert await window((g, h), "B") == ["S", "B", "C"]
        assert await window((h,), "S") == ["S"]  # its neighbours are all g's
        assert await window((g,), "A") == ["A", "B"]
        assert await window((h,), "B") == []  # a hit the viewer cannot see has no window at all
    finally:
        await conn.close()


async def test_retrieve_context_returns_the_window_with_each_message_under_the_acl(
    settings: Settings, pipeline: Any
) -> None:
    """The window is part of the passage (``Passage.window``), not only of the diagnostics: the g-viewer's hit B
    comes back with A and C around it and never with h's S, whose text never reaches the response."""
    rt = await pipeline("ingest", "embed")
    g, h = principal(), principal()
    await produce(settings, *conversation(g, h).values())
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) = 4 FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
    )
    headers = {"X-Api-Key": "test-key", "X-Principal-Groups": g}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/tools/retrieve_context", json={"query": "Which one was it?", "limit": 5}, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        by_id = {p["external_id"]: p for p in body["passages"]}
        assert "B" in by_id and "S" not in by_id
        assert [m["external_id"] for m in by_id["B"]["window"]] == ["A", "B", "C"]
        assert "zanzibar" not in r.text and all(
            m["external_id"] != "S" for p in body["passages"] for m in (p["window"] or [])
        )
