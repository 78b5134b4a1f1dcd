"""Graph reads answer from both ends (issue 15 §1): a fact is found from its subject AND its object, with
its direction and both display names; entity cards and ``retrieve_context`` likewise; person↔project
collaboration edges from authorship / participation; passages' access counts; belief bounds passages."""

from __future__ import annotations

from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

# no embed stage: the dense arm is not under test here (lexical arm only)
STAGES = ("ingest", "extract", "conflicts", "collab", "retrieve")


def headers(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def test_facts_from_the_object_end(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g, other = principal(), principal()
    await produce(settings, envelope("F/1", "Marla Kestrin founded Voltana Robotics in 2019.", principals=[g]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM facts WHERE predicate = 'founded'"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/tools/query_facts", json={"about": "Voltana Robotics"}, headers=headers(g))
        assert r.status_code == 200, r.text
        body = r.json()
        assert [s["name"] for s in body["subjects"]] == ["Voltana Robotics"]
        [fact] = [f for f in body["facts"] if f["predicate"] == "founded"]
        assert fact["direction"] == "incoming"
        assert fact["subject"]["name"] == "Marla Kestrin" and fact["object"]["name"] == "Voltana Robotics"
        # and from the subject end, the same fact, outgoing
        r = await c.post("/tools/query_facts", json={"about": "Marla Kestrin"}, headers=headers(g))
        [fact2] = [f for f in r.json()["facts"] if f["predicate"] == "founded"]
        assert fact2["id"] == fact["id"] and fact2["direction"] == "outgoing"
        # another viewer sees neither the fact nor the organization
        r = await c.post("/tools/query_facts", json={"about": "Voltana Robotics"}, headers=headers(other))
        assert r.json()["facts"] == [] and r.json()["subjects"] == []
        # the entity card lists it as incoming, with names
        org = body["subjects"][0]["id"]
        card = await c.get(f"/v1/graph/entities/{org}", headers=headers(g))
        assert card.status_code == 200, card.text
        assert card.json()["name"] == "Voltana Robotics"
        [inc] = [f for f in card.json()["incoming"] if f["predicate"] == "founded"]
        assert inc["subject"]["name"] == "Marla Kestrin" and inc["direction"] == "incoming"
        # retrieve_context with about gets the same fact
        r = await c.post(
            "/tools/retrieve_context",
            json={
                "query": "who started the company?",
                "about": "Voltana Robotics",
                "mode": "graph_first",
                "arms": "lexical",
            },
            headers=headers(g),
        )
        assert r.status_code == 200, r.text
        got = [f for f in r.json()["structured_facts"] if f["predicate"] == "founded"]
        assert got and got[0]["direction"] == "incoming" and got[0]["subject"]["name"] == "Marla Kestrin"
        # and with explicit subjects
        r = await c.post(
            "/tools/retrieve_context",
            json={
                "query": "founders",
                "subjects": [{"type": "organization", "id": org}],
                "mode": "graph_first",
                "arms": "lexical",
            },
            headers=headers(g),
        )
        assert [f["predicate"] for f in r.json()["structured_facts"]] == ["founded"]


async def test_person_project_edges_on_both_cards(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g, secret = principal(), principal()
    bea = [{"email": "bea@corp.example", "display_name": "Bea Nolan"}]
    al: dict[str, Any] = {"author_email": "al@corp.example", "author_name": "Al Moss"}
    await produce(
        settings,
        envelope("P/1", "Status of Project Heron: the migration is on track.", principals=[g], participants=bea, **al),
        envelope("P/2", "Project Heron load tests done.", principals=[g], event_time=later(10), **al),
        envelope("K/1", "Project Kite kickoff notes.", principals=[g], **al),
        # a private document names Kite: under the all-visible rule Kite disappears for g
        envelope("K/2", "Project Kite budget draft.", principals=[secret], author_email="cal@corp.example"),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 4 FROM processed_events WHERE stage = 'conflicts'"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/tools/query_facts", json={"about": "Heron"}, headers=headers(g))
        [heron] = r.json()["subjects"]
        assert heron["type"] == "project" and heron["name"] == "Heron"
        card = await c.get(f"/v1/graph/entities/{heron['id']}", headers=headers(g))
        assert card.status_code == 200, card.text
        people = {x["entity"]["name"]: x for x in card.json()["contributors"]}
        assert set(people) == {"Al Moss", "Bea Nolan"}
        assert people["Al Moss"]["roles"] == ["author"] and people["Al Moss"]["count"] == 2
        assert people["Bea Nolan"]["roles"] == ["participant"] and people["Bea Nolan"]["count"] == 1
        assert people["Al Moss"]["weight"] > people["Bea Nolan"]["weight"]
        al_id = people["Al Moss"]["entity"]["id"]
        pc = await c.get(f"/v1/graph/persons/{al_id}", headers=headers(g))
        assert pc.status_code == 200, pc.text
        # Kite is named by a document g cannot see: not on g's card
        [proj] = pc.json()["projects"]
        assert proj["entity"]["name"] == "Heron" and len(proj["evidence"]) == 2
        both = await c.get(f"/v1/graph/persons/{al_id}", headers=headers(g, secret))
        assert {x["entity"]["name"] for x in both.json()["projects"]} == {"Heron", "Kite"}
        r = await c.post("/tools/query_facts", json={"about": "Kite"}, headers=headers(g, secret))
        [kite] = r.json()["subjects"]
        assert (await c.get(f"/v1/graph/entities/{kite['id']}", headers=headers(g))).status_code == 404
        kc = await c.get(f"/v1/graph/entities/{kite['id']}", headers=headers(g, secret))
        assert len(kc.json()["contributors"]) == 2
