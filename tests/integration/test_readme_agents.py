"""The README's agents sections, executed: every block marked ``<!-- snippet: NAME -->`` runs against the
real stack (a real API server and pipeline started here), with only its placeholders replaced — the API
URL, the API key, ``user:<uuid>`` / ``group:<team-uuid>``, the Kafka namespace, the agents path — and a
scripted model standing in for Gemini. Python snippets that are programs run as their own processes
with only the SDK (``retriever/sdk``) on ``PYTHONPATH``; ADK's CLI runs as ``adk api_server``.

The viewer sends only a user id everywhere (ADK, MCP's default config): its groups come from the org
directory, fed here by a membership envelope."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.adk.tools.mcp_tool import McpToolset
from mcp import ClientSession, StdioServerParameters, stdio_client

from orgmem_sdk.client import OrgMemoryClient
from schemas.envelope import ChangeEnvelope
from services.api.app import create_app
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session, serve_app
from tests.integration.helpers import eventually, fetchval, produce
from tests.integration.retriever_fixtures import T1, hierarchy_file

REPO = Path(__file__).resolve().parents[2]
SDK_DIR = REPO / "retriever" / "sdk"
BIN = Path(sys.executable).parent
KEY = "test-key"
ALICE_ID, MATE_ID = uuid.uuid4(), uuid.uuid4()
ALICE, MATE, TEAM = f"user:{ALICE_ID}", f"user:{MATE_ID}", f"group:{T1}"
FACT = "The payments team owns billing since March."
INSPECTOR_VERSION = "0.15.0"  # the newest release whose CLI runs on Node 20 (0.16.0+ declare node >= 22.7.5)
INSPECTOR_DIR = Path(os.environ.get("ORGMEM_MCP_INSPECTOR_DIR", "/tmp/sdk-inspector"))


def snippet(name: str) -> tuple[str, str]:
    """(language, code) of the fenced block right after ``<!-- snippet: name -->`` in docs/agents.md (the agents
    guide) or README.md."""
    text = (REPO / "docs" / "agents.md").read_text() + "\n" + (REPO / "README.md").read_text()
    m = re.search(rf"<!-- snippet: {re.escape(name)} -->\n```(\w+)\n(.*?)\n```", text, re.DOTALL)
    assert m, f"docs/agents.md and README.md have no snippet {name!r}"
    return m.group(1), m.group(2)


@dataclass
class Org:
    settings: Settings
    url: str
    fact_id: str
    hierarchy: Path

    def fill(self, code: str, *, user: str = ALICE) -> str:
        return (
            code.replace("http://127.0.0.1:8000", self.url)
            .replace("<ORGMEM_AGENT_KEY>", KEY)
            .replace("$ORGMEM_AGENT_KEY", KEY)
            .replace("user:<uuid>", user)
            .replace("group:<team-uuid>", TEAM)
            .replace('namespace="om"', f'namespace="{self.settings.topic_namespace}"')
            .replace("127.0.0.1:19092", self.settings.kafka_bootstrap_servers)
        )


def _membership(group: str, members: list[str]) -> ChangeEnvelope:
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(uuid.uuid4()),
            "op": "membership",
            "source": {"system": "directory", "external_id": group},
            "event_time": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
            "membership": {"group": group, "added": members},
        }
    )


@pytest.fixture
async def org(settings_factory: Any, pipeline: Any, tmp_path: Path) -> AsyncIterator[Org]:
    hierarchy = hierarchy_file(tmp_path)
    s: Settings = await settings_factory(org_hierarchy_path=hierarchy)
    rt = await pipeline("ingest", "embed", "retrieve", settings_override=s)
    await produce(s, _membership(TEAM, [ALICE, MATE]))

    async def applied() -> int:
        return int(await fetchval(s, "SELECT count(*) FROM group_memberships WHERE valid_to IS NULL"))

    await eventually(applied, until=lambda n: n == 2, timeout=60)
    async with serve_app(create_app(rt)) as url, OrgMemoryClient.http(url, KEY) as om:
        fact = await om.remember({"text": FACT, "scope": TEAM, "source": {"event_id": "seed"}}, principal_id=ALICE)

        async def mate_sees() -> bool:
            ctx = await om.retrieve_context({"query": "who owns billing?"}, principal_id=MATE)
            return any(p.external_id == fact.memory_id for p in ctx.passages)

        await eventually(mate_sees, timeout=60, interval=0.5)
        yield Org(s, url, fact.memory_id, hierarchy)


async def run_program(code: str, tmp: Path, *, env: dict[str, str] | None = None, timeout: float = 90) -> str:
    """Run a snippet as its own Python process (SDK only on the path); its stdout, or a failure."""
    path = tmp / f"snippet_{uuid.uuid4().hex[:8]}.py"
    path.write_text(code)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(path),
        cwd=tmp,
        env={"PYTHONPATH": str(SDK_DIR), "PATH": os.environ["PATH"], "HOME": str(tmp), "ORGMEM_AGENT_KEY": KEY}
        | (env or {}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, f"{path.name} exited {proc.returncode}:\n{err.decode()[-4000:]}"
    return out.decode()


def _ephemeral_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def line(out: str, label: str) -> str:
    return next(x for x in out.splitlines() if x.startswith(label + ":"))[len(label) + 1 :].strip()


async def test_sdk_snippets(org: Org, tmp_path: Path) -> None:
    # sdk-http: whoami, retrieve, remember at team scope, LangChain async, InvalidRequestError.field
    out = await run_program(org.fill(snippet("sdk-http")[1]), tmp_path)
    scopes = json.loads(line(out, "scopes").replace("'", '"'))
    assert scopes[0] == "user" and TEAM in scopes
    assert org.fact_id in line(out, "passages") and org.fact_id in line(out, "documents")
    mid, principals = line(out, "remembered").split(" ", 1)
    assert principals == f"['{TEAM}']"
    assert line(out, "invalid") == "limit"

    async with OrgMemoryClient.http(org.url, KEY) as om:

        async def listed() -> set[str]:
            return {m.memory_id for m in (await om.list_memories(principal_id=ALICE)).memories}

        await eventually(listed, until=lambda ids: mid in ids, timeout=60, interval=0.5)

        # sdk-verbs: list (team scope, paginated; mine), update (a new version), get (history)
        out = await run_program(org.fill(snippet("sdk-verbs")[1]), tmp_path)
        assert line(out, "memory").startswith(f"{mid} {TEAM} Billing moves to the payments team")
        assert line(out, "version") == "1 -> 2" and line(out, "history") == "[1]"

        async def version() -> int:
            return (await om.get_memory(mid, principal_id=MATE)).version

        await eventually(version, until=lambda v: v == 2, timeout=60, interval=0.5)
        assert (await om.get_memory(mid, principal_id=MATE)).text.endswith("Confirmed on Monday.")

    # sdk-sync-kafka: the blocking twin over Kafka request/reply, groups from the directory
    out = await run_program(org.fill(snippet("sdk-sync-kafka")[1], user=MATE), tmp_path)
    assert org.fact_id in line(out, "passages")

    # langchain-sync: invoke() on a retriever built on an async client
    out = await run_program(org.fill(snippet("langchain-sync")[1], user=MATE), tmp_path)
    assert org.fact_id in line(out, "documents")


AGENT_PY = '''
"""A helper agent whose scripted model calls load_memory once, then answers with what it returned."""
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.load_memory_tool import load_memory_tool
from google.genai import types


class ScriptedLlm(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1] if llm_request.contents else None
        answered = [p.function_response for p in (last.parts or []) if p.function_response] if last else []
        if answered:
            text = f"memories: {answered[0].response}"
        else:
            call = types.FunctionCall(name="load_memory", args={"query": "who owns billing"})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text=text)]))


root_agent = LlmAgent(name="helper", model=ScriptedLlm(model="scripted"), tools=[load_memory_tool])
'''


@contextlib.asynccontextmanager
async def adk_api_server(org: Org, tmp: Path) -> AsyncIterator[str]:
    """``adk api_server`` exactly as the README's ``adk-cli`` snippet runs it, on an agents directory
    holding the README's ``services.py`` and a helper agent; yields its base URL."""
    agents = tmp / "agents"
    (agents / "helper").mkdir(parents=True)
    (agents / "services.py").write_text(snippet("adk-services-py")[1] + "\n")
    (agents / "helper" / "__init__.py").write_text("from . import agent\n")
    (agents / "helper" / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    exports, command = org.fill(snippet("adk-cli")[1]).splitlines()
    assert exports.startswith("export ")
    env = dict(kv.split("=", 1) for kv in shlex.split(exports)[1:])
    argv = [a.replace("path/to/agents", str(agents)) for a in shlex.split(command)]
    assert argv[:2] == ["adk", "api_server"]
    port = _ephemeral_port()
    log = tmp / "adk-api-server.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / "adk"),
            *argv[1:],
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            cwd=tmp,
            env={"PYTHONPATH": str(SDK_DIR), "PATH": os.environ["PATH"], "HOME": str(tmp)} | env,
            stdout=sink,
            stderr=sink,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = asyncio.get_running_loop().time() + 100
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            while True:
                if proc.returncode is not None:
                    raise AssertionError(f"adk api_server exited {proc.returncode}:\n{log.read_text()[-4000:]}")
                try:
                    answer = await http.get("/list-apps")
                    if answer.status_code == 200:
                        break
                    last = f"{answer.status_code} {answer.text[:300]}"
                except httpx.TransportError as exc:
                    last = repr(exc)
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"adk api_server: /list-apps {last}:\n{log.read_text()[-4000:]}")
                await asyncio.sleep(0.25)
        yield base
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _adk_turn(base: str, user_id: str) -> str:
    """One turn of the helper agent through the ADK API server; every function response's text."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        r = await http.post(f"/apps/helper/users/{user_id}/sessions", json={})
        assert r.status_code == 200, r.text
        body = {
            "app_name": "helper",
            "user_id": user_id,
            "session_id": r.json()["id"],
            "new_message": {"role": "user", "parts": [{"text": "who owns billing?"}]},
        }
        r = await http.post("/run", json=body)
        assert r.status_code == 200, r.text
    return json.dumps([p for e in r.json() for p in (e.get("content") or {}).get("parts", [])])


async def test_adk_cli_path_with_a_builders_services_py(org: Org, tmp_path: Path) -> None:
    async with adk_api_server(org, tmp_path) as base:
        async with httpx.AsyncClient(base_url=base) as http:
            assert "helper" in (await http.get("/list-apps")).json()
        seen = await _adk_turn(base, str(MATE_ID))  # a bare uuid: the teammate, groups from the directory
        assert FACT in seen and "load_memory" in seen
        outsider = await _adk_turn(base, str(uuid.uuid4()))
        assert "load_memory" in outsider and FACT not in outsider


async def _exec_top_level(code: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    ns: dict[str, Any] = {}
    compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, ns)
    if asyncio.iscoroutine(result):
        await result
    return ns


async def test_adk_runner_and_mcp_toolset_snippets(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    from google.genai import types

    from tests.integration.test_agents_adk import ScriptedLlm

    exports = org.fill(snippet("adk-cli")[1]).splitlines()[0]
    env = dict(kv.split("=", 1) for kv in shlex.split(exports)[1:]) | {"ORGMEM_AGENT_KEY": KEY}

    # adk-runner (Path 2): the snippet's runner, with a scripted model in place of Gemini
    ns = await _exec_top_level(org.fill(snippet("adk-runner")[1]), env, monkeypatch)
    assert ns["memory"] is not None
    ns["agent"].model = ScriptedLlm(model="scripted")
    runner = ns["runner"]
    session = await runner.session_service.create_session(app_name="helper", user_id=MATE)
    msg = types.Content(role="user", parts=[types.Part.from_text(text="who owns billing?")])
    texts = [
        str(p.function_response.response)
        async for event in runner.run_async(user_id=MATE, session_id=session.id, new_message=msg)
        for p in ((event.content.parts or []) if event.content else [])
        if p.function_response
    ]
    assert any(FACT in t for t in texts)
    await ns["memory"].aclose()

    # adk-mcp-toolset: both ADK user id forms list our tools (a doubled prefix would list none)
    ns = await _exec_top_level(org.fill(snippet("adk-mcp-toolset")[1]), env, monkeypatch)
    toolset: McpToolset = ns["orgmem_tools"]
    try:
        for user_id in (MATE, str(MATE_ID)):
            ctx = _Ctx(user_id)
            names = {t.name for t in await toolset.get_tools(ctx)}
            assert {"retrieve_context", "remember"} <= names, user_id
    finally:
        await toolset.close()


class _Ctx:
    """What ``McpToolset`` reads of a ``ReadonlyContext`` (its ``header_provider`` gets this object)."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.state: dict[str, Any] = {}
        self.session = None


async def test_mcp_http_and_stdio_snippets(org: Org, tmp_path: Path) -> None:
    # mcp-http: the client config, as written, with the teammate's user id only
    config = json.loads(org.fill(snippet("mcp-http")[1], user=MATE))
    server = config["mcpServers"]["orgmem"]
    async with mcp_session(server["url"].removesuffix("/mcp"), server["headers"]) as s:
        assert "retrieve_context" in {t.name for t in (await s.list_tools()).tools}
        result = await s.call_tool("retrieve_context", {"query": "who owns billing?"})
        assert not result.is_error and FACT in json.dumps(result.structured_content)

    # mcp-stdio: the command, args and env as written (database/Kafka settings: this test's isolated ones)
    stdio = json.loads(org.fill(snippet("mcp-stdio")[1], user=MATE))["mcpServers"]["orgmem"]
    env = (
        stdio["env"]
        | org.settings.to_env()
        | {"PYTHONPATH": f"{REPO}:{SDK_DIR}", "ORG_HIERARCHY_PATH": str(org.hierarchy)}
    )
    env.pop("SERVICE_API_KEY", None)
    params = StdioServerParameters(
        command=stdio["command"].replace("/path/to/.venv/bin/orgmem", str(BIN / "orgmem")),
        args=stdio["args"],
        env=env,
        cwd=REPO,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        result = await s.call_tool("retrieve_context", {"query": "who owns billing?"})
        assert not result.is_error and FACT in json.dumps(result.structured_content)


async def test_mcp_inspector_cli_lists_and_calls_our_tools(org: Org, tmp_path: Path) -> None:
    """The README's Inspector check on the README's stdio config. Needs the npm package installed in
    ``$ORGMEM_MCP_INSPECTOR_DIR`` (default /tmp/sdk-inspector):
    ``npm install --prefix /tmp/sdk-inspector @modelcontextprotocol/inspector@0.15.0``."""
    cli = INSPECTOR_DIR / "node_modules" / ".bin" / "mcp-inspector"
    if not cli.exists() or shutil.which("node") is None:
        pytest.skip(f"MCP Inspector {INSPECTOR_VERSION} not installed in {INSPECTOR_DIR} (npm install, see docstring)")
    config = json.loads(org.fill(snippet("mcp-stdio")[1], user=MATE))
    server = config["mcpServers"]["orgmem"]
    server["command"] = server["command"].replace("/path/to/.venv/bin/orgmem", str(BIN / "orgmem"))
    server["env"] |= org.settings.to_env() | {"PYTHONPATH": str(REPO), "ORG_HIERARCHY_PATH": str(org.hierarchy)}
    server["env"].pop("SERVICE_API_KEY", None)
    cfg = tmp_path / "mcp.json"
    cfg.write_text(json.dumps(config))

    async def inspector(*args: str) -> Any:
        proc = await asyncio.create_subprocess_exec(
            str(cli),
            "--cli",
            "--config",
            str(cfg),
            "--server",
            "orgmem",
            *args,
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 100)
        assert proc.returncode == 0, err.decode()[-3000:] + out.decode()[-3000:]
        return json.loads(out)

    listed = await inspector("--method", "tools/list")
    assert {"retrieve_context", "remember", "forget"} <= {t["name"] for t in listed["tools"]}
    called = await inspector(
        "--method", "tools/call", "--tool-name", "retrieve_context", "--tool-arg", "query=who owns billing?"
    )
    assert FACT in json.dumps(called)
