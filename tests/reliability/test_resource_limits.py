"""Resource limits on the real stack: every request's database time is bounded, a path walk that would
run for tens of seconds answers within its work budget with a partial result flagged as such, and ten
such walks at once cannot make a plain passage search wait for a connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Request

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import connect, envelope, eventually, fetchval, principal, produce

NODES = 400
FANOUT = 100


async def build_fan_graph(settings: Settings, group: str) -> str:
    """NODES entities, each with FANOUT outgoing facts to other nodes, all evidenced by one document the
    viewer can see: a walk of depth 4 at fan-out 100 has ~10^8 candidate paths. Returns node 0's id."""
    await produce(settings, envelope("fan/evidence", "evidence for the fan graph", principals=[group]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 1 FROM documents"))
    conn = await connect(settings)
    try:
        doc = await conn.fetchval("SELECT id FROM documents LIMIT 1")
        await conn.execute(
            "INSERT INTO entities (id, workspace, type, name, norm_name)"
            " SELECT md5('fan' || i)::uuid, 'default', 'person', 'Node ' || i, 'node ' || i"
            " FROM generate_series(0, $1 - 1) i",
            NODES,
        )
        await conn.execute(
            "INSERT INTO facts (id, workspace, subject_id, predicate, object_id, valid_from, confidence)"
            " SELECT md5('f' || i || '-' || j)::uuid, 'default', md5('fan' || i)::uuid, 'works_with',"
            "        md5('fan' || ((i + j) % $1))::uuid, '2024-01-01', 0.9"
            " FROM generate_series(0, $1 - 1) i, generate_series(1, $2) j",
            NODES,
            FANOUT,
        )
        await conn.execute(
            "INSERT INTO fact_evidence (fact_id, document_id, confidence) SELECT id, $1, 0.9 FROM facts", doc
        )
        await conn.execute("ANALYZE entities; ANALYZE facts; ANALYZE fact_evidence")
        return str(await conn.fetchval("SELECT md5('fan0')::uuid"))
    finally:
        await conn.close()


@pytest.fixture
async def fan(settings: Settings, pipeline: Any) -> AsyncIterator[tuple[httpx.AsyncClient, str, dict[str, str], Any]]:
    rt = await pipeline("ingest")
    group = principal()
    seed = await build_fan_graph(settings, group)
    headers = {"X-Api-Key": "test-key", "X-Principal-Groups": group}
    app = create_app(rt)

    @app.post("/tools/_test_sleep")
    async def sleep(request: Request) -> dict[str, str]:  # any route's connections carry the budget
        async with request.app.state.runtime.pool.acquire() as conn:
            await conn.execute("SELECT pg_sleep(30)")
        return {}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t", timeout=120) as client:
        yield client, seed, headers, rt


def walk(seed: str) -> dict[str, Any]:
    return {"seeds": [{"type": "person", "id": seed}], "max_depth": 4, "max_fanout": FANOUT, "limit": 200}


async def test_a_walk_past_its_budget_answers_partial_in_time(
    fan: tuple[httpx.AsyncClient, str, dict[str, str], Any],
) -> None:
    client, seed, headers, rt = fan
    started = time.monotonic()
    r = await client.post("/tools/query_paths", json=walk(seed), headers=headers)
    elapsed = time.monotonic() - started
    assert r.status_code == 200, r.text[:300]
    body = r.json()
    assert body["partial"] is True and 1 <= body["depth_walked"] < 4, {k: body[k] for k in ("partial", "depth_walked")}
    assert body["paths"], "the deepest complete level still answers"
    assert all(len(p["steps"]) <= body["depth_walked"] for p in body["paths"])
    assert elapsed < rt.settings.graph_walk_budget_ms / 1000 + 2.0, elapsed
    small = await client.post("/tools/query_paths", json=walk(seed) | {"max_depth": 1}, headers=headers)
    assert small.status_code == 200 and small.json()["partial"] is False and small.json()["depth_walked"] == 1


async def test_ten_heavy_walks_do_not_starve_passage_search(
    fan: tuple[httpx.AsyncClient, str, dict[str, str], Any],
) -> None:
    client, seed, headers, _ = fan
    walks = [
        asyncio.create_task(client.post("/tools/query_paths", json=walk(seed), headers=headers)) for _ in range(10)
    ]
    await asyncio.sleep(0.5)  # the walks hold what they can get
    started = time.monotonic()
    r = await client.post("/tools/search_knowledge_base", json={"query": "evidence fan graph"}, headers=headers)
    waited = time.monotonic() - started
    assert r.status_code == 200 and r.json()["passages"], r.text[:300]
    assert waited < 3.0, f"passage search waited {waited:.1f} s behind the walks"
    print(f"passage search behind 10 heavy walks: {waited:.2f} s")
    answers = await asyncio.gather(*walks)
    codes = sorted(a.status_code for a in answers)
    assert set(codes) <= {200, 429}, codes  # a walk answers (partial) or is told to come back; never 5xx
    assert 200 in codes
    for a in answers:
        if a.status_code == 429:
            assert a.json()["detail"]["field"] == "request" and a.headers["retry-after"]


async def test_every_request_has_a_database_time_budget(
    fan: tuple[httpx.AsyncClient, str, dict[str, str], Any],
) -> None:
    client, _, headers, rt = fan
    started = time.monotonic()
    r = await client.post("/tools/_test_sleep", headers=headers)
    elapsed = time.monotonic() - started
    assert r.status_code == 503, r.text[:300]
    assert r.json()["detail"]["field"] == "database" and r.json()["detail"]["errors"][0]["type"] == "budget_exhausted"
    assert elapsed < rt.settings.api_statement_timeout_ms / 1000 + 2.0, elapsed
    async with rt.pool.acquire() as conn:  # outside a request (stages): no budget, and none left behind
        assert await conn.fetchval("SHOW statement_timeout") == "0"
