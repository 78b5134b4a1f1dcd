"""Procedural memory on the real stack: written through the log (a ``procedure`` envelope on the
envelopes topic), versioned (same name + scope supersedes, older kept), deleted by tombstone, searched
with the same ACL as passages."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import eventually, fetchval, principal

STAGES = ("ingest", "retrieve")
STEPS = ["Page the on-call", "Freeze deploys", "Open the incident channel"]


def hdr(user: str | None = None, *groups: str) -> dict[str, str]:
    h = {"X-Api-Key": "test-key"}
    if user:
        h["X-Principal-Id"] = user
    if groups:
        h["X-Principal-Groups"] = ",".join(groups)
    return h


async def test_procedures_version_supersede_delete_and_search(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    alice, team, outsider = principal("user"), principal(), principal("user")
    body = {
        "name": "Incident response",
        "description": "What to do when production is down",
        "steps": STEPS,
        "when_to_use": "a sev-1 outage",
        "tools": ["pagerduty", "slack"],
        "scope": [team],
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/v1/procedural-memories", json=body, headers=hdr(alice, team))
        assert r.status_code == 202, r.text
        pid = r.json()["procedure_id"]
        assert r.json()["offset"] >= 0
        # it went through the log: ingest made a document of kind procedure with version 1
        await eventually(lambda: fetchval(settings, "SELECT count(*) FROM procedure_versions"))
        assert await fetchval(settings, "SELECT kind FROM documents WHERE id = $1", uuid.UUID(pid)) == "procedure"
        v2 = body | {"steps": [*STEPS, "Write the postmortem"]}
        r = await c.post("/v1/procedural-memories", json=v2, headers=hdr(alice, team))
        assert r.status_code == 202 and r.json()["procedure_id"] == pid
        await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM procedure_versions"))
        detail = (await c.get(f"/v1/procedural-memories/{pid}", headers=hdr(None, team))).json()
        assert detail["current"]["version"] == 2 and detail["current"]["steps"][-1] == "Write the postmortem"
        assert [(v["version"], v["status"]) for v in detail["versions"]] == [(2, "current"), (1, "superseded")]
        assert detail["versions"][1]["steps"] == STEPS  # the older version is kept
        # the same name in another scope is another procedure
        other = await c.post("/v1/procedural-memories", json=body | {"scope": []}, headers=hdr(alice, team))
        assert other.status_code == 202 and other.json()["procedure_id"] != pid
        assert other.json()["scope"] == [alice]
        await eventually(lambda: fetchval(settings, "SELECT count(*) = 3 FROM procedure_versions"))

        r = await c.post(
            "/tools/search_procedural_memory", json={"query": "production down outage"}, headers=hdr(None, team)
        )
        assert r.status_code == 200, r.text
        [hit] = r.json()["results"]  # the team sees its procedure, not alice's private one
        assert hit["procedure"]["procedure_id"] == pid and hit["procedure"]["version"] == 2
        assert len(hit["procedure"]["steps"]) == 4 and hit["procedure"]["tools"] == ["pagerduty", "slack"]
        mine = await c.post("/tools/search_procedural_memory", json={"query": "outage"}, headers=hdr(alice, team))
        assert len(mine.json()["results"]) == 2
        nothing = await c.post("/tools/search_procedural_memory", json={"query": "outage"}, headers=hdr(outsider))
        assert nothing.json()["results"] == []
        assert (await c.get(f"/v1/procedural-memories/{pid}", headers=hdr(outsider))).status_code == 404

        # writing into a scope the caller does not hold, bad input: 422 naming the field
        r = await c.post("/v1/procedural-memories", json=body, headers=hdr(outsider))
        assert r.status_code == 422 and r.json()["detail"]["field"] == "scope"
        r = await c.post("/v1/procedural-memories", json=body | {"steps": []}, headers=hdr(alice, team))
        assert r.status_code == 422 and "steps" in r.text
        assert (await c.delete(f"/v1/procedural-memories/{pid}", headers=hdr(outsider))).status_code == 404

        # delete = tombstone: search stops returning it, the versions stay
        r = await c.delete(f"/v1/procedural-memories/{pid}", headers=hdr(None, team))
        assert r.status_code == 202 and r.json()["op"] == "delete"
        await eventually(
            lambda: fetchval(settings, "SELECT deleted_at IS NOT NULL FROM documents WHERE id = $1", uuid.UUID(pid))
        )
        r = await c.post("/tools/search_procedural_memory", json={"query": "outage"}, headers=hdr(None, team))
        assert r.json()["results"] == []
        detail = (await c.get(f"/v1/procedural-memories/{pid}", headers=hdr(None, team))).json()
        assert detail["current"] is None and {v["status"] for v in detail["versions"]} == {"deleted"}
        assert len(detail["versions"]) == 2
