"""Worldbuilder on the real stack: ``worldbuilder_kb`` (participates vs author), ``worldbuilder_lookup``
(evidence on every field, cached by evidence-document set, re-grounded per viewer and after an ACL change)
and the platform-user identity bridge."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

# no embed stage: lexical + relational arms only (the dense arm is not under test here)
STAGES = ("ingest", "extract", "conflicts", "collab", "retrieve")


def headers(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def _drained(settings: Settings, n: int) -> None:
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) FROM processed_events WHERE stage = 'conflicts'"),
        until=lambda v: v >= n,
    )


async def test_kb_participates_is_not_author(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g = principal()
    bea = {"email": "bea@corp.example", "display_name": "Bea Nolan"}
    await produce(
        settings,
        envelope(
            "D/1",
            "zephyr budget review with finance",
            principals=[g],
            author_email="al@corp.example",
            author_name="Al Moss",
            participants=[bea],
        ),
        envelope(
            "D/2", "zephyr launch notes", principals=[g], author_email="bea@corp.example", author_name="Bea Nolan"
        ),
        envelope("D/3", "zephyr ops rota", principals=[g], author_email="cal@corp.example", author_name="Cal Ruiz"),
    )
    await _drained(settings, 3)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

        async def kb(**kw: Any) -> dict[str, Any]:
            r = await c.post("/tools/worldbuilder_kb", json={"query": "zephyr"} | kw, headers=headers(g))
            assert r.status_code == 200, r.text
            return dict(r.json())

        everything = await kb()
        assert {d["external_id"] for d in everything["results"]} == {"D/1", "D/2", "D/3"}
        d1 = next(d for d in everything["results"] if d["external_id"] == "D/1")
        roles = {p["person"]["name"]: p["roles"] for p in d1["people"]}
        assert roles == {"Al Moss": ["author"], "Bea Nolan": ["participant"]}
        assert d1["passages"] and d1["passages"][0]["snippet"].startswith("zephyr budget")
        about = await kb(about="Bea Nolan")
        assert {d["external_id"] for d in about["results"]} == {"D/1", "D/2"}
        assert [p["name"] for p in about["resolved"]["about"]] == ["Bea Nolan"]
        author = await kb(author="Bea Nolan")
        assert {d["external_id"] for d in author["results"]} == {"D/2"}
        by_email = await kb(author="bea@corp.example")
        assert {d["external_id"] for d in by_email["results"]} == {"D/2"}
        both = await kb(about="Al Moss", author="Bea Nolan")
        assert both["results"] == []
        nobody = await kb(about="Zed Unknown")
        assert nobody["results"] == [] and nobody["diagnostics"]["worldbuilder"]["about"] == "no visible person matched"
        bad = await c.post("/tools/worldbuilder_kb", json={"query": "zephyr", "limit": 0}, headers=headers(g))
        assert bad.status_code == 422 and "limit" in bad.text
        # /docs lists every seed-001 primitive and route
        paths = set((await c.get("/openapi.json")).json()["paths"])
        assert {
            "/tools/retrieve_context",
            "/tools/search_knowledge_base",
            "/tools/worldbuilder_kb",
            "/tools/query_facts",
            "/tools/diff_facts",
            "/tools/query_paths",
            "/tools/worldbuilder_lookup",
            "/tools/search_procedural_memory",
            "/v1/procedural-memories",
            "/v1/promotions",
            "/v1/taxonomy-proposals",
            "/v1/taxonomy-proposals/{proposal_id}/applied",
            "/v1/taxonomy-proposals/{proposal_id}/rejected",
            "/v1/graph/persons/by-platform-user/{platform_user_id}",
            "/v1/graph/persons/{person_id}",
            "/v1/graph/entities/{entity_id}",
        } <= paths


async def test_lookup_regrounds_per_viewer_and_after_acl_change(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g, secret = principal(), principal()
    pu = uuid.uuid4()
    await produce(
        settings,
        envelope(
            "W/1",
            "Priya Shah reports to Dana Lee.",
            principals=[g],
            author_email="priya@corp.example",
            author_name="Priya Shah",
            identities=[{"namespace": "platform_user", "value": str(pu), "verified": True}],
        ),
        envelope("W/2", "Priya Shah is on the Search team.", principals=[g], event_time=later(1)),
        envelope("W/3", "Priya Shah works on Project Phoenix.", principals=[g], event_time=later(2)),
        envelope("W/4", "Priya Shah is the VP of Engineering.", principals=[secret], event_time=later(3)),
    )
    await _drained(settings, 4)
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM facts WHERE predicate = 'has_title'"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

        async def look(*groups: str, **kw: Any) -> dict[str, Any]:
            body = {"name": "Priya Shah", "type": "person"} | kw
            r = await c.post("/tools/worldbuilder_lookup", json=body, headers=headers(*groups))
            assert r.status_code == 200, r.text
            return dict(r.json())

        w4 = await fetchval(settings, "SELECT id::text FROM documents WHERE external_id = 'W/4'")
        full = await look(g, secret)
        p = full["profile"]
        assert full["cache"] == "miss"
        assert p["title"]["value"] == "VP of Engineering" and p["title"]["evidence"] == [w4]
        assert p["manager"]["value"] == "Dana Lee" and p["manager"]["as_of"]
        assert p["team"]["value"] == "Search"
        assert [x["value"] for x in p["current_projects"]] == ["Phoenix"]
        assert p["platform_user_id"] == str(pu)
        assert "VP of Engineering" in p["summary"]["value"] and w4 in p["summary"]["evidence"]
        assert w4 in full["evidence_documents"]
        assert full["synthesis"] == {
            "requested": False,
            "used": False,
            "reason": "deterministic (synthesize not requested)",
        }
        assert (await look(g, secret))["cache"] == "hit"
        # a viewer who cannot see W/4 gets the profile without what W/4 supports — never the cached title
        part = await look(g)
        assert part["cache"] == "miss"
        assert part["profile"]["title"] is None
        assert part["profile"]["manager"]["value"] == "Dana Lee"
        assert "VP of Engineering" not in str(part) and w4 not in str(part)
        assert (await look(g))["cache"] == "hit"
        # W/4 becomes visible to g: the next profile for g carries the title
        await produce(settings, envelope("W/4", op="acl", principals=[g, secret], acl_event_time=later(100)))
        await eventually(
            lambda: fetchval(settings, "SELECT principals FROM documents WHERE external_id = 'W/4'"),
            until=lambda v: g in v,
        )
        after = await look(g)
        assert after["profile"]["title"]["value"] == "VP of Engineering"
        # and private again: the cached profile is re-grounded on the hit, the title goes
        await produce(settings, envelope("W/4", op="acl", principals=[secret], acl_event_time=later(200)))
        await eventually(
            lambda: fetchval(settings, "SELECT principals FROM documents WHERE external_id = 'W/4'"),
            until=lambda v: g not in v,
        )
        again = await look(g)
        assert again["profile"]["title"] is None and w4 not in str(again)
        # synthesis asked for without an LLM: deterministic, and it says so
        synth = await look(g, synthesize=True)
        assert synth["synthesis"]["used"] is False and "LLM_BASE_URL" in synth["synthesis"]["reason"]
        # an entity no viewer-visible document names: 404 naming the field; 422 for neither name nor subject
        r = await c.post("/tools/worldbuilder_lookup", json={"name": "Priya Shah"}, headers=headers(principal()))
        assert r.status_code == 404 and "name" in r.text
        r = await c.post("/tools/worldbuilder_lookup", json={}, headers=headers(g))
        assert r.status_code == 422
        # identity bridge
        r = await c.get(f"/v1/graph/persons/by-platform-user/{pu}", headers=headers(g))
        assert r.status_code == 200, r.text
        assert r.json()["name"] == "Priya Shah" and r.json()["platform_user_id"] == str(pu)
        assert (
            await c.get(f"/v1/graph/persons/by-platform-user/{pu}", headers=headers(principal()))
        ).status_code == 404
        assert (
            await c.get(f"/v1/graph/persons/by-platform-user/{uuid.uuid4()}", headers=headers(g))
        ).status_code == 404
        assert (await c.get("/v1/graph/persons/by-platform-user/not-a-uuid", headers=headers(g))).status_code == 422


async def test_lookup_team_project_and_glossary_profiles(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g = principal()
    await produce(
        settings,
        envelope("T/1", "Eve Park is on the Platform team.", principals=[g]),
        envelope("T/2", "Alice Wong leads the Platform team.", principals=[g], event_time=later(1)),
        envelope("T/3", "Dan Cho works on Project Phoenix.", principals=[g], event_time=later(2)),
        envelope("T/4", "SLO stands for service level objective.", principals=[g], event_time=later(3)),
    )
    await _drained(settings, 4)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:

        async def look(name: str, kind: str) -> dict[str, Any]:
            r = await c.post("/tools/worldbuilder_lookup", json={"name": name, "type": kind}, headers=headers(g))
            assert r.status_code == 200, r.text
            return dict(r.json()["profile"])

        team = await look("Platform", "team")
        assert [m["value"] for m in team["members"]] == ["Eve Park"]
        assert [o["value"] for o in team["owners"]] == ["Alice Wong"]
        assert all(m["evidence"] and m["as_of"] for m in team["members"] + team["owners"])
        project = await look("Phoenix", "project")
        assert "Dan Cho" in [m["value"] for m in project["members"]]
        term = await look("SLO", "glossary_term")
        assert term["definition"]["value"] == "service level objective"
        assert term["summary"]["value"] == "SLO: service level objective."
