"""Graph HTTP routes and the collaboration stage on the real stack."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetch, fetchval, later, principal, produce

STAGES = ("ingest", "extract", "conflicts", "collab")


def headers(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def test_tools_and_cards(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g, other = principal(), principal()
    await produce(
        settings,
        envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[g], event_time=later(0)),
        envelope("C1/2", "Dana Lee reports to Omar Hale.", principals=[g], event_time=later(1)),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM facts WHERE predicate = 'reports_to'"))
    await produce(settings, envelope("C1/3", "Priya Shah reports to Sam Ortiz.", principals=[g], event_time=later(60)))
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 3 FROM facts WHERE predicate = 'reports_to'"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        r = await c.post("/tools/query_facts", json={"about": "Priya Shah"}, headers=headers(g))
        assert r.status_code == 200, r.text
        now = [f["object"]["name"] for f in r.json()["facts"] if f["predicate"] == "reports_to"]
        assert now == ["Sam Ortiz"]
        r = await c.post(
            "/tools/query_facts",
            json={"about": "Priya Shah", "as_of": later(30).isoformat()},
            headers=headers(g),
        )
        assert [f["object"]["name"] for f in r.json()["facts"] if f["predicate"] == "reports_to"] == ["Dana Lee"]
        bad = await c.post(
            "/tools/query_facts", json={"about": "Priya Shah", "as_of_grain": "week"}, headers=headers(g)
        )
        assert bad.status_code == 422
        assert (await c.post("/tools/query_facts", json={"about": "Priya Shah"}, headers=headers(other))).json()[
            "facts"
        ] == []
        diff = await c.post(
            "/tools/diff_facts",
            json={
                "about": "Priya Shah",
                "from_time": later(30).isoformat(),
                "to_time": later(90).isoformat(),
            },
            headers=headers(g),
        )
        assert diff.status_code == 200, diff.text
        [change] = [x for x in diff.json()["changed"] if x["predicate"] == "reports_to"]
        assert (
            change["before"][0]["object"]["name"] == "Dana Lee" and change["after"][0]["object"]["name"] == "Sam Ortiz"
        )
        paths = await c.post(
            "/tools/query_paths",
            json={"about": "Priya Shah", "as_of": later(30).isoformat()},
            headers=headers(g),
        )
        assert paths.status_code == 200, paths.text
        reached = {n["name"] for p in paths.json()["paths"] for n in p["nodes"]}
        assert {"Dana Lee", "Omar Hale"} <= reached
        priya = paths.json()["seeds"][0]["id"]
        card = await c.get(f"/v1/graph/persons/{priya}", headers=headers(g))
        assert card.status_code == 200, card.text
        assert card.json()["name"] == "Priya Shah"
        assert [f["object"]["name"] for f in card.json()["facts"] if f["predicate"] == "reports_to"] == ["Sam Ortiz"]
        old = await c.get(f"/v1/graph/persons/{priya}", params={"as_of": later(30).isoformat()}, headers=headers(g))
        assert [f["object"]["name"] for f in old.json()["facts"] if f["predicate"] == "reports_to"] == ["Dana Lee"]
        assert (await c.get(f"/v1/graph/persons/{priya}", headers=headers(other))).status_code == 404
        assert (
            await c.get(f"/v1/graph/entities/{priya}", params={"as_of_grain": "week"}, headers=headers(g))
        ).status_code == 422


async def test_collaboration_edges_count_once_and_follow_deletes(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    g = principal()
    team = [
        {"email": "b@corp.example", "display_name": "Bea"},
        {"email": "c@corp.example", "display_name": "Cal"},
    ]
    await produce(
        settings,
        envelope(
            "M/1",
            "Attendees\nAl, Bea, Cal\nTranscript\nAl: hi",
            kind="meeting",
            principals=[g],
            author_email="a@corp.example",
            participants=team,
        ),
        envelope(
            "T/1",
            "Al: follow-up",
            principals=[g],
            author_email="a@corp.example",
            participants=team[:1],
            event_time=later(5),
        ),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 3 FROM collaboration_edges"))
    ab = await fetch(
        settings,
        "SELECT e.count, e.weight FROM collaboration_edges e"
        " JOIN people a ON a.id IN (e.a_id, e.b_id) AND a.primary_email = 'a@corp.example'"
        " JOIN people b ON b.id IN (e.a_id, e.b_id) AND b.primary_email = 'b@corp.example'",
    )
    assert ab[0]["count"] == 2
    # replay the collaboration stage from the beginning: nothing double counts
    replay = settings.model_copy(update={"group_prefix": settings.group_prefix + "replay-"})
    rt2 = await pipeline("collab", settings_override=replay)
    await eventually(lambda: asyncio.sleep(0, rt2.handlers["collab"].documents >= 2))
    await asyncio.sleep(1.0)
    assert await fetchval(settings, "SELECT sum(count) FROM collaboration_edges") == 4
    # a deleted document takes its share with it
    await produce(settings, envelope("T/1", op="delete", principals=[g], event_time=later(6)))
    await eventually(lambda: fetchval(settings, "SELECT sum(count) = 3 FROM collaboration_edges"))
    # the replay group (rt2) may apply the delete first: wait for the live group to see it too
    await eventually(lambda: asyncio.sleep(0, rt.handlers["collab"].documents >= 3))
    assert await fetchval(settings, "SELECT sum(count) FROM collaboration_edges") == 3
