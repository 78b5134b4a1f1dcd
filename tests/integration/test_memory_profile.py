"""The distilled profile (``memory_profile``, deterministic) on the real pipeline: role and interests from the
viewer's person's graph facts, preferences and durable facts from its own memories, every item citing its sources,
and a fact whose evidence the viewer cannot see left out."""

from __future__ import annotations

from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, principal, produce
from tests.integration.test_procedures import hdr


async def test_profile_cites_sources_and_hides_what_the_viewer_cannot_see(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "extract", "conflicts", "retrieve")
    alice, team, secret_team = principal("user"), principal(), principal()
    me: dict[str, Any] = {
        "author_name": "Zora Quill",
        "author_email": "zora@corp.example",
        "identities": [{"namespace": "principal", "value": alice, "verified": True}],
    }
    await produce(
        settings,
        envelope("zq-1", "Zora Quill is the Head of Payments.", principals=[team], **me),
        envelope("zq-2", "Zora Quill works on Project Falcon.", principals=[secret_team], **me),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        for text, kind in (("I prefer async standups.", "preference"), ("My on-call week is the first.", "fact")):
            r = await c.post("/v1/memories", json={"text": text, "kind": kind}, headers=hdr(alice, team))
            assert r.status_code == 202, r.text
        await eventually(
            lambda: fetchval(
                settings,
                "SELECT (SELECT count(*) FROM facts WHERE predicate IN ('has_title', 'works_on')) >= 2"
                " AND (SELECT count(*) FROM documents WHERE source_system = 'agent') = 2",
            ),
            timeout=60,
        )

        async def profile(*groups: str) -> dict[str, Any]:
            r = await c.post("/tools/memory_profile", json={}, headers=hdr(alice, *groups))
            assert r.status_code == 200, r.text
            body: dict[str, Any] = r.json()
            return body

        p = await profile(team)
        assert p["principal_id"] == alice and p["method"] == "deterministic"
        # the extractor reads "Head of Payments" as the title Head at the organisation Payments
        assert [i["text"] for i in p["role"]] == ["Head"] and p["role"][0]["source_document_ids"]
        assert [i["text"] for i in p["interests"]] == ["I prefer async standups."]
        assert p["interests"][0]["memory_ids"] and p["interests"][0]["detail"] == "preference"
        assert [i["text"] for i in p["durable_facts"]] == ["My on-call week is the first.", "works at Payments"]
        assert "Falcon" not in str(p)  # its only evidence is a secret-team document
        assert p["summary"]["text"].startswith("Head;") and len(p["summary"]["source_document_ids"]) == 3
        # the control: holding the secret team, the fact is there
        both = await profile(team, secret_team)
        assert "works on Falcon" in [i["text"] for i in both["interests"]]
        r = await c.post("/tools/memory_profile", json={}, headers=hdr(None, team))
        assert r.status_code == 403 and r.json()["detail"]["field"] == "X-Principal-Id", r.text
