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
            json={"query": "who started the company?", "about": "Voltana Robotics", "mode": "graph_first", "arms": "lexical"},
            headers=headers(g),
        )
        assert r.status_code == 200, r.text
        got = [f for f in r.json()["structured_facts"] if f["predicate"] == "founded"]
        assert got and got[0]["direction"] == "incoming" and got[0]["subject"]["name"] == "Marla Kestrin"
        # and with explicit subjects
        r = await c.post(
            "/tools/retrieve_context",
            json={"query": "founders", "subjects": [{"type": "organization", "id": org}], "mode": "graph_first", "arms": "lexical"},
            headers=headers(g),
        )
        assert [f["predicate"] for f in r.json()["structured_facts"]] == ["founded"]
