"""``mode: "fabric"`` (seed 003) on the real stack: the query's names seed the graph channel, a passage naming a
graph entity is boosted and carries the relations, and a private fact never reaches an outsider's passages."""

from __future__ import annotations

from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.helpers import envelope, eventually, fetchval, later, principal, produce

STAGES = ("ingest", "embed", "extract", "conflicts")


def headers(*groups: str) -> dict[str, str]:
    return {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}


async def test_fabric_boosts_passages_naming_graph_entities_under_the_acl(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline(*STAGES)
    team, secret = principal(), principal()
    await produce(
        settings,
        envelope("C1/1", "Priya Shah reports to Dana Lee.", principals=[team], event_time=later(0)),
        envelope(
            "C1/2", "The quarterly budget review is on Friday for everyone.", principals=[team], event_time=later(1)
        ),
        envelope("C1/3", "Dana Lee will present the budget review slides.", principals=[team], event_time=later(2)),
        envelope("S1/1", "Dana Lee reports to Omar Hale.", principals=[secret], event_time=later(3)),
    )
    await eventually(lambda: fetchval(settings, "SELECT count(*) = 2 FROM facts WHERE predicate = 'reports_to'"))
    await eventually(
        lambda: fetchval(settings, "SELECT count(*) = 4 FROM chunks WHERE NOT is_parent AND embedding IS NOT NULL")
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)), base_url="http://t") as c:
        q = {"query": "What will Dana Lee present at the budget review?", "limit": 10}
        plain = await c.post("/tools/retrieve_context", json=q, headers=headers(team))
        fab = await c.post("/tools/retrieve_context", json=q | {"mode": "fabric"}, headers=headers(team))
        assert plain.status_code == 200 and fab.status_code == 200, fab.text
        body = fab.json()
        diag = body["diagnostics"]["fabric"]
        assert diag["graph_unavailable"] is False and "Dana Lee" in diag["hints"]
        boosted = {p["external_id"]: p for p in body["passages"] if p["chunk_id"] in diag["boosted"]}
        assert "C1/3" in boosted and "C1/1" in boosted  # both name Dana Lee, an entity the graph returned
        rel = boosted["C1/3"]["graph_relations"]
        assert {"from": "Priya Shah", "relation": "reports_to", "to": "Dana Lee"} in rel
        assert body["passages"][0]["external_id"] in {"C1/3", "C1/1"}
        assert (
            "fabric" not in plain.json()["diagnostics"] and plain.json()["passages"][0].get("graph_relations") is None
        )

        # the team never sees the secret fact (Dana -> Omar), in facts or in any passage's relations
        text = fab.text
        assert "Omar Hale" not in text
        # the secret group sees its own fact through the fabric
        mine = await c.post(
            "/tools/retrieve_context",
            json={"query": "Who does Dana Lee report to?", "mode": "fabric"},
            headers=headers(secret),
        )
        assert "Omar Hale" in mine.text and "Priya Shah" not in mine.text
