"""MCP over streamable HTTP (real uvicorn server, the SDK's own client) and over stdio (``orgmem mcp`` as a
subprocess, the SDK's ``stdio_client``), on the real stack: tools, identity, scoped memory, no leaks."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session, serve_app
from tests.integration.helpers import eventually, produce
from tests.integration.retriever_fixtures import ALICE, DAVE, DOCS, T1, VIEWERS, hierarchy_file, load_corpus

REPO = Path(__file__).resolve().parents[2]
TEAMMATE = f"user:{uuid.uuid4()}"  # another member of team 1
TOOLS = {
    "retrieve_context",
    "search_knowledge_base",
    "query_facts",
    "diff_facts",
    "query_paths",
    "remember",
    "forget",
    "worldbuilder_kb",
    "worldbuilder_lookup",
    "search_procedural_memory",
    "preload",
    "propose_procedure",
    "memory_profile",
    "list_memories",
    "get_memory",
    "update_memory",
    "whoami",
}


def headers(principal: str | None, groups: tuple[str, ...] | None = (), key: str = "test-key") -> dict[str, str]:
    h = {"X-Api-Key": key}
    if principal:
        h["X-Principal-Id"] = principal
    if groups:
        h["X-Principal-Groups"] = ",".join(groups)
    return h


ALICE_H = headers(f"user:{ALICE}", (f"group:{T1}",))
TEAMMATE_H = headers(TEAMMATE, (f"group:{T1}",))
BOB_H = headers(VIEWERS["bob"].principal, VIEWERS["bob"].groups)


@pytest.fixture
async def served(settings_factory: Any, pipeline: Any, tmp_path: Path) -> AsyncIterator[tuple[Settings, str]]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tok-alice": {"principal_id": f"user:{ALICE}", "groups": [f"group:{T1}"]},
                "tok-dave": {"principal_id": f"user:{DAVE}"},  # no groups: the org directory's
            }
        )
    )
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy_file(tmp_path), mcp_tokens_path=tokens)
    rt = await pipeline("ingest", "embed", settings_override=s)
    await load_corpus(s)
    async with serve_app(create_app(rt)) as url:
        yield s, url


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def _retrieve(session: ClientSession, query: str, **extra: Any) -> Any:
    return await session.call_tool("retrieve_context", {"query": query, "limit": 20, **extra})


async def test_tools_listed_with_contract_schemas(served: tuple[Settings, str]) -> None:
    _, url = served
    async with mcp_session(url, ALICE_H) as session:
        listed = (await session.list_tools()).tools
    by_name = {t.name: t for t in listed}
    assert set(by_name) == TOOLS
    assert "DEFAULT TOOL" in (by_name["retrieve_context"].description or "")
    schema = by_name["retrieve_context"].input_schema
    assert schema["required"] == ["query"] and "max_tokens" in schema["properties"]
    assert by_name["remember"].input_schema["properties"]["kind"]["enum"] == [
        "note",
        "decision",
        "preference",
        "fact",
        "procedure",
    ]


async def test_remember_then_retrieve_scoped_and_no_leaks(served: tuple[Settings, str]) -> None:
    _, url = served
    async with mcp_session(url, ALICE_H) as alice:
        wrote = await alice.call_tool(
            "remember",
            {
                "text": "Team decision: the flurbix deploy freeze starts on Fridays at noon.",
                "kind": "decision",
                "scope": f"group:{T1}",
                "source": {"agent": "test-agent", "session_id": "s1", "event_id": "e1"},
            },
        )
        assert not wrote.is_error, _text(wrote)
        memory_id = wrote.structured_content["memory_id"]
        assert wrote.structured_content["principals"] == [f"group:{T1}"]
        hit = await alice.call_tool("retrieve_context", {"query": "quintrel", "limit": 5})
        assert hit.structured_content["passages"][0]["external_id"] == "team-1"
        assert "[1]" in _text(hit) and "slack team-1" in _text(hit)

    async def teammate_finds() -> bool:
        async with mcp_session(url, TEAMMATE_H) as mate:
            r = await _retrieve(mate, "flurbix deploy freeze")
            return any(p["external_id"] == memory_id for p in r.structured_content["passages"])

    await eventually(teammate_finds, timeout=60, interval=0.5)

    secrets = [memory_id, "flurbix"] + [d.word for d in DOCS if "bob" not in d.visible_to]
    async with mcp_session(url, BOB_H) as bob:
        results = [
            await _retrieve(bob, "flurbix deploy freeze"),
            await _retrieve(bob, "quasar migration codename rollout", limit=50),
            await bob.call_tool("search_knowledge_base", {"query": "flurbix freeze quintrel zorblax", "limit": 50}),
            await bob.call_tool("query_facts", {"about": "flurbix"}),
            await bob.call_tool("query_paths", {"about": "flurbix"}),
            await bob.call_tool(
                "diff_facts",
                {"about": "flurbix", "from_time": "2020-01-01T00:00:00Z", "to_time": "2030-01-01T00:00:00Z"},
            ),
        ]
        results.append(await bob.call_tool("worldbuilder_kb", {"query": "flurbix freeze quintrel zorblax"}))
        results.append(await bob.call_tool("search_procedural_memory", {"query": "flurbix deploy freeze"}))
        for doc in DOCS:
            results.append(await _retrieve(bob, doc.word))
        unknown = await bob.call_tool("worldbuilder_lookup", {"name": "flurbix"})
        assert unknown.is_error and memory_id not in _text(unknown)
        forgot = await bob.call_tool("forget", {"memory_id": memory_id})
    for r in results:
        assert not r.is_error, _text(r)
        content = {k: v for k, v in (r.structured_content or {}).items() if k not in ("diagnostics", "temporal_plan")}
        dumped = _text(r) + json.dumps(content)  # diagnostics/plan echo the viewer's own query, nothing else
        for secret in secrets:
            assert secret not in dumped, (secret, dumped[:300])
        for p in (r.structured_content or {}).get("passages", []):
            assert p["external_id"] in {d.external_id for d in DOCS if "bob" in d.visible_to}
        assert memory_id not in json.dumps(r.structured_content)
    assert forgot.is_error and "author" in _text(forgot)  # bob is not the author

    async with mcp_session(url, ALICE_H) as alice:
        gone = await alice.call_tool("forget", {"memory_id": memory_id})
        assert not gone.is_error, _text(gone)

    async def forgotten() -> bool:
        async with mcp_session(url, TEAMMATE_H) as mate:
            r = await _retrieve(mate, "flurbix deploy freeze")
            return not any(p["external_id"] == memory_id for p in r.structured_content["passages"])

    await eventually(forgotten, timeout=60, interval=0.5)


async def test_identity_is_required_and_never_from_arguments(served: tuple[Settings, str]) -> None:
    _, url = served
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url) as http:
        assert (await http.post("/mcp", json=init, headers=accept)).status_code == 401
        assert (await http.post("/mcp", json=init, headers=accept | {"X-Api-Key": "wrong"})).status_code == 401
        bad_token = accept | {"Authorization": "Bearer nope"}
        r = await http.post("/mcp", json=init, headers=bad_token)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        ok = await http.post("/mcp", json=init, headers=accept | {"X-Api-Key": "test-key"})
        assert ok.status_code == 200
        evil_host = await http.post("/mcp", json=init, headers=accept | {"X-Api-Key": "test-key", "Host": "evil.test"})
        assert evil_host.status_code in (400, 421)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client surfaces the 401 as an error
        async with mcp_session(url, {"X-Api-Key": "wrong"}) as s:
            await s.list_tools()

    # a bearer token maps to its principal; the body cannot choose another viewer
    async with mcp_session(url, {"Authorization": "Bearer tok-alice"}) as tok:
        r = await _retrieve(tok, "zorblax")
        assert [p["external_id"] for p in r.structured_content["passages"]][:1] == ["alice-private"]
        smuggled = await tok.call_tool("retrieve_context", {"query": "wobbert", "principal_id": "user:x"})
        assert smuggled.is_error and "principal_id" in _text(smuggled)

    # no principal at all: nothing private
    async with mcp_session(url, {"X-Api-Key": "test-key"}) as anon:
        r = await _retrieve(anon, "quasar migration codename rollout", limit=50)
        assert r.structured_content["passages"] == []
        w = await anon.call_tool("remember", {"text": "anonymous note"})
        assert w.is_error and "X-Principal-Id" in _text(w)


async def test_bad_arguments_are_tool_errors_naming_the_field(served: tuple[Settings, str]) -> None:
    _, url = served
    async with mcp_session(url, ALICE_H) as s:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("retrieve_context", {"query": ""}, "query"),
            ("retrieve_context", {"query": "x", "mode": "sideways"}, "mode"),
            ("retrieve_context", {"query": "who owns quasar", "mode": "graph_first"}, "subjects"),
            ("remember", {"text": "x" * 20_001}, "text"),
            ("remember", {"text": "x", "scope": "group:not-a-uuid"}, "scope"),
            ("remember", {"text": "x", "scope": f"group:{uuid.uuid4()}"}, "scope"),
            ("forget", {"memory_id": "not-a-uuid"}, "memory_id"),
            ("query_paths", {"max_depth": "deep"}, "max_depth"),
            ("worldbuilder_lookup", {}, "name"),
            ("search_procedural_memory", {"query": "x", "limit": 99}, "limit"),
        ]
        for tool, args, field in cases:
            r = await s.call_tool(tool, args)
            assert r.is_error, (tool, args)
            assert field in _text(r), (tool, field, _text(r))


async def test_stdio_server(served: tuple[Settings, str]) -> None:
    settings, _ = served
    env = settings.to_env() | {"PYTHONPATH": str(REPO)}
    env.pop("SERVICE_API_KEY", None)  # stdio needs no API key: its principal is fixed at start
    orgmem = str(Path(sys.executable).parent / "orgmem")
    params = StdioServerParameters(
        command=orgmem, args=["mcp", "--principal", f"user:{ALICE}", "--groups", f"group:{T1}"], env=env, cwd=REPO
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        assert {t.name for t in (await s.list_tools()).tools} == TOOLS
        r = await _retrieve(s, "quintrel")
        assert r.structured_content["passages"][0]["external_id"] == "team-1"
        r = await _retrieve(s, "vexmorn wobbert snarfle")
        assert {p["external_id"] for p in r.structured_content["passages"]} <= {
            d.external_id for d in DOCS if "alice" in d.visible_to
        }
        w = await s.call_tool("remember", {"text": "stdio note about the glimmerwick", "scope": "user"})
        assert not w.is_error and w.structured_content["principals"] == [f"user:{ALICE}"]
    refused = await asyncio.create_subprocess_exec(
        orgmem, "mcp", env=env, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(refused.communicate(), 60)
    assert refused.returncode == 2 and b"--principal" in err


async def test_bearer_without_groups_uses_the_directory(served: tuple[Settings, str]) -> None:
    settings, url = served
    async with mcp_session(url, {"Authorization": "Bearer tok-dave"}) as dave:
        before = await _retrieve(dave, "quintrel")
        assert "team-1" not in {p["external_id"] for p in before.structured_content["passages"]}
        membership = ChangeEnvelope.model_validate(
            {
                "envelope_id": str(uuid.uuid4()),
                "op": "membership",
                "source": {"system": "directory", "external_id": T1},
                "event_time": "2024-01-01T00:00:00Z",
                "membership": {"group": f"group:{T1}", "added": [f"user:{DAVE}"]},
            }
        )
        await produce(settings, membership)

        async def sees() -> bool:
            r = await _retrieve(dave, "quintrel")
            return "team-1" in {p["external_id"] for p in r.structured_content["passages"]}

        await eventually(sees, timeout=60, interval=0.5)
