"""The seed-001 MCP tools over streamable HTTP (real uvicorn server, the SDK's own client):
``worldbuilder_lookup`` and ``search_procedural_memory`` answer like their HTTP routes, under the
caller's ACL."""

from __future__ import annotations

from typing import Any

import httpx

from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session, serve_app
from tests.integration.helpers import envelope, eventually, fetchval, principal, produce

PORT = 8070  # this branch's port


def headers(*groups: str, user: str | None = None) -> dict[str, str]:
    h = {"X-Api-Key": "test-key", "X-Principal-Groups": ",".join(groups)}
    if user:
        h["X-Principal-Id"] = user
    return h


async def test_worldbuilder_and_procedure_tools_over_mcp(settings: Settings, pipeline: Any) -> None:
    rt = await pipeline("ingest", "extract", "conflicts", "collab", "retrieve")
    g, outsider = principal(), principal()
    await produce(settings, envelope("W/1", "Priya Shah reports to Dana Lee.", principals=[g]))
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM facts WHERE predicate = 'reports_to'"))
    app = create_app(rt)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        body = {"name": "Incident response", "steps": ["Page the on-call", "Freeze deploys"], "scope": [g]}
        r = await c.post("/v1/procedural-memories", json=body, headers=headers(g, user=principal("user")))
        assert r.status_code == 202, r.text
    await eventually(lambda: fetchval(settings, "SELECT count(*) FROM procedure_versions"))
    async with serve_app(app, port=PORT) as url:
        async with mcp_session(url, headers(g)) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"worldbuilder_lookup", "search_procedural_memory"} <= names
            res = await session.call_tool("worldbuilder_lookup", {"name": "Priya Shah", "type": "person"})
            assert not res.is_error, res
            profile = res.structured_content["profile"]
            assert profile["manager"]["value"] == "Dana Lee" and profile["manager"]["evidence"]
            text = "\n".join(getattr(x, "text", "") for x in res.content)
            assert "manager: Dana Lee [evidence" in text
            res = await session.call_tool("search_procedural_memory", {"query": "incident on-call"})
            assert not res.is_error, res
            [hit] = res.structured_content["results"]
            assert hit["procedure"]["steps"] == ["Page the on-call", "Freeze deploys"]
            bad = await session.call_tool("worldbuilder_lookup", {})
            assert bad.is_error
        async with mcp_session(url, headers(outsider)) as session:
            res = await session.call_tool("worldbuilder_lookup", {"name": "Priya Shah"})
            assert res.is_error and "Dana Lee" not in str(res)
            res = await session.call_tool("search_procedural_memory", {"query": "incident on-call"})
            assert res.structured_content["results"] == []
