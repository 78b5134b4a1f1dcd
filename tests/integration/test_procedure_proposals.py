"""Procedure proposals on the real stack: a draft is not searchable and is seen only by its scope; approve
publishes it through the procedure path (searchable), reject keeps it unsearchable; decisions are idempotent,
the other verb is 409; sources must be visible to the caller and to the whole scope (all-visible)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import eventually, fetchval, principal
from tests.integration.test_procedures import hdr

STEPS = ["Rotate the key in the vault", "Restart the billing workers", "Check the error rate"]


async def _titles(c: httpx.AsyncClient, query: str, headers: dict[str, str]) -> list[str]:
    r = await c.post("/tools/search_procedural_memory", json={"query": query}, headers=headers)
    assert r.status_code == 200, r.text
    return [h["procedure"]["name"] for h in r.json()["results"]]


async def test_proposal_lifecycle(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "retrieve")
    alice, bob, team = principal("user"), principal("user"), principal()
    body = {"title": "Rotate the billing key", "steps": STEPS, "source": {"session_id": "s1", "event_id": "e1"}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/v1/procedure-proposals", json=body, headers=hdr(alice, team))
        assert r.status_code == 201, r.text
        p = r.json()
        assert p["status"] == "pending" and p["scope"] == [alice] and p["proposer"] == alice and p["created"]
        again = await c.post("/v1/procedure-proposals", json=body, headers=hdr(alice, team))
        assert again.json()["proposal_id"] == p["proposal_id"] and again.json()["created"] is False
        pid = p["proposal_id"]
        # a pending draft: another user neither lists nor reads nor decides it; nothing was published
        listed = await c.get("/v1/procedure-proposals", headers=hdr(bob, team))
        assert listed.status_code == 200 and listed.json()["proposals"] == []
        assert (await c.get(f"/v1/procedure-proposals/{pid}", headers=hdr(bob, team))).status_code == 404
        r = await c.post(f"/v1/procedure-proposals/{pid}/approve", headers=hdr(bob, team))
        assert r.status_code == 404 and r.json()["detail"]["field"] == "proposal_id", r.text
        mine = await c.get("/v1/procedure-proposals", params={"status": "pending"}, headers=hdr(alice, team))
        assert [x["proposal_id"] for x in mine.json()["proposals"]] == [pid]
        assert await fetchval(settings, "SELECT count(*) FROM documents WHERE kind = 'procedure'") == 0

        other = body | {"title": "Rotate the billing key by hand", "source": {"session_id": "s1", "event_id": "e2"}}
        rid = (await c.post("/v1/procedure-proposals", json=other, headers=hdr(alice, team))).json()["proposal_id"]
        r = await c.post(f"/v1/procedure-proposals/{rid}/reject", json={"reason": "duplicate"}, headers=hdr(alice))
        assert r.status_code == 200 and r.json()["status"] == "rejected" and r.json()["reason"] == "duplicate"
        assert (await c.post(f"/v1/procedure-proposals/{rid}/reject", headers=hdr(alice))).status_code == 200
        r = await c.post(f"/v1/procedure-proposals/{rid}/approve", headers=hdr(alice))
        assert r.status_code == 409 and r.json()["detail"]["field"] == "status", r.text

        r = await c.post(f"/v1/procedure-proposals/{pid}/approve", headers=hdr(alice, team))
        assert r.status_code == 200, r.text
        approved = r.json()
        assert approved["status"] == "approved" and approved["decided_by"] == alice and approved["procedure_id"]
        again = await c.post(f"/v1/procedure-proposals/{pid}/approve", headers=hdr(alice, team))
        assert again.status_code == 200 and again.json()["procedure_id"] == approved["procedure_id"]
        r = await c.post(f"/v1/procedure-proposals/{pid}/reject", headers=hdr(alice, team))
        assert r.status_code == 409 and r.json()["detail"]["field"] == "status"
        # approved: searchable through the procedure path; the rejected one never is; bob sees neither
        await eventually(
            lambda: _titles(c, "rotate billing key", hdr(alice, team)),
            until=lambda t: "Rotate the billing key" in t,
            timeout=30,
        )
        assert "Rotate the billing key by hand" not in await _titles(c, "rotate billing key", hdr(alice, team))
        assert await _titles(c, "rotate billing key", hdr(bob, team)) == []
        assert await fetchval(settings, "SELECT count(*) FROM procedure_versions") == 1


async def test_proposal_sources_and_scope(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "retrieve")
    alice, carol, team = principal("user"), principal("user"), principal()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        private = await c.post("/v1/memories", json={"text": "My private billing runbook notes."}, headers=hdr(alice))
        shared = await c.post(
            "/v1/memories", json={"text": "Team billing runbook notes.", "scope": team}, headers=hdr(alice, team)
        )
        assert private.status_code == shared.status_code == 202, (private.text, shared.text)
        mine, ours = private.json()["memory_id"], shared.json()["memory_id"]
        await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM documents WHERE source_system = 'agent'"))
        base: dict[str, Any] = {"title": "Billing runbook", "steps": STEPS}

        r = await c.post("/v1/procedure-proposals", json=base | {"source_ids": [str(uuid.uuid4())]}, headers=hdr(alice))
        assert r.status_code == 422 and r.json()["detail"]["field"] == "source_ids", r.text
        r = await c.post("/v1/procedure-proposals", json=base | {"source_ids": [mine]}, headers=hdr(carol, team))
        assert r.status_code == 422 and r.json()["detail"]["field"] == "source_ids", r.text  # not carol's to cite
        r = await c.post(
            "/v1/procedure-proposals", json=base | {"source_ids": [mine], "scope": [team]}, headers=hdr(alice, team)
        )
        assert r.status_code == 422 and r.json()["detail"]["field"] == "scope", r.text  # the team cannot see it
        r = await c.post("/v1/procedure-proposals", json=base | {"scope": [carol]}, headers=hdr(alice, team))
        assert r.status_code == 422 and r.json()["detail"]["field"] == "scope"

        r = await c.post(
            "/v1/procedure-proposals",
            json=base | {"source_ids": [ours], "scope": sorted([team, alice])},
            headers=hdr(alice, team),
        )
        assert r.status_code == 201, r.text
        pid = r.json()["proposal_id"]
        assert len(r.json()["source_document_ids"]) == 1
        # carol holds the team: she sees it but does not hold the whole scope (alice's principal): 403
        seen = await c.get(f"/v1/procedure-proposals/{pid}", headers=hdr(carol, team))
        assert seen.status_code == 200, seen.text
        r = await c.post(f"/v1/procedure-proposals/{pid}/approve", headers=hdr(carol, team))
        assert r.status_code == 403 and r.json()["detail"]["field"] == "proposal_id", r.text
        # the only source is forgotten: the derived draft is shown to nobody (all-visible needs a live source)
        assert (await c.delete(f"/v1/memories/{ours}", headers=hdr(alice, team))).status_code == 202
        await eventually(
            lambda: fetchval(
                settings, "SELECT count(*) FROM documents WHERE source_system = 'agent' AND deleted_at IS NOT NULL"
            )
        )
        assert (await c.get(f"/v1/procedure-proposals/{pid}", headers=hdr(alice, team))).status_code == 404
