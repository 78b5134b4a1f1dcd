"""`orgmem rebuild`: a fresh projection generation built from the log, identical, switched in when caught up."""

from __future__ import annotations

from typing import Any

import pytest

from services import generations
from services.ops.rebuild import rebuild
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce


async def _projection(settings: Settings) -> list[tuple[Any, ...]]:
    rows = await fetch(
        settings,
        "SELECT d.id, d.current_version, d.content_hash, d.principals, d.deleted_at,"
        " count(c.id) FILTER (WHERE c.embedding IS NOT NULL) AS vectors"
        " FROM documents d LEFT JOIN chunks c ON c.document_id = d.id"
        " GROUP BY d.id ORDER BY d.id",
    )
    return [tuple(r) for r in rows]


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_rebuild_builds_identical_generation_and_switches(settings: Settings, pipeline: Any) -> None:
    await pipeline("ingest", "embed")
    g = [principal() for _ in range(2)]
    envs = [envelope(f"RB/{i}", f"rebuild me {i}", principals=[g[i % 2]], event_time=later(i)) for i in range(40)]
    envs.append(envelope("RB/3", op="delete", event_time=later(100)))
    await produce(settings, *envs)
    await eventually(
        lambda: fetchval(
            settings,
            "SELECT count(*) FROM chunks WHERE NOT is_parent AND NOT deleted AND embedding IS NOT NULL",
        ),
        until=lambda v: v == 39,
    )
    live = await _projection(settings)

    result = await rebuild(settings, settle_s=0.5)
    assert result.generation == "g1" and result.db_schema == f"{settings.db_schema}_g1"
    active = await generations.resolve(settings)
    assert active.db_schema == result.db_schema and active.group_prefix == f"{settings.group_prefix}g1-"
    assert active.topic("chunks") == f"{settings.topic_namespace}.g1.chunks.v1"
    assert active.topic("envelopes") == settings.topic("envelopes")
    assert await _projection(active) == live


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_rebuild_keeps_governance_state_and_purged_documents_stay_purged(
    settings: Settings, pipeline: Any
) -> None:
    from tests.integration.admin_helpers import ADMIN, api_client

    rt = await pipeline("ingest")
    g = principal()
    await produce(
        settings,
        envelope("GV/keep", "held text", principals=[g]),
        envelope("GV/gone", "expired text", principals=[g]),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM documents"), until=lambda n: n == 2)
    keep_id = str(await fetchval(settings, "SELECT id FROM documents WHERE external_id = 'GV/keep'"))
    async with api_client(rt) as client:
        hold = await client.post(
            "/v1/admin/legal-holds",
            json={"workspace": "default", "document_ids": [keep_id], "reason": "case"},
            headers=ADMIN,
        )
        assert hold.status_code == 201
        assert (
            await client.put("/v1/admin/budgets/default", json={"daily_tokens": 7}, headers=ADMIN)
        ).status_code == 200
        policy = {"workspace": "default", "max_age_days": 30}
        assert (await client.put("/v1/admin/retention/policies", json=policy, headers=ADMIN)).status_code == 200
        run = (await client.post("/v1/admin/retention/run", params={"apply": "true"}, headers=ADMIN)).json()
        assert [b["documents"] for b in run["batches"]] == [1]

    result = await rebuild(settings, settle_s=0.5)
    active = await generations.resolve(settings)
    assert active.db_schema == result.db_schema
    # the log still holds both envelopes, but the new generation has only the unpurged one
    assert [r["external_id"] for r in await fetch(active, "SELECT external_id FROM documents")] == ["GV/keep"]
    rt2 = await pipeline(settings_override=active)
    async with api_client(rt2) as client:
        holds = (await client.get("/v1/admin/legal-holds", headers=ADMIN)).json()
        assert [h["id"] for h in holds] == [hold.json()["id"]]
        spend = (await client.get("/v1/admin/spend", headers=ADMIN)).json()
        assert spend["budgets"] == [{"workspace": "default", "model": "*", "daily_tokens": 7}]
        assert (await client.get("/v1/admin/retention/policies", headers=ADMIN)).json()[0]["max_age_days"] == 30
        audits = (await client.get("/v1/admin/audits/retention", headers=ADMIN)).json()["items"]
        assert [a["run_id"] for a in audits] == [run["run_id"]]
        again = (await client.post("/v1/admin/retention/run", headers=ADMIN)).json()
        assert again["due"] == 0 and again["held"] == 1  # the hold still keeps the old document
