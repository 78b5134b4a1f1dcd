"""Every tool of the catalogue on all three doors (HTTP ``/tools/<name>``, MCP over streamable HTTP, Kafka
request/reply) with the same schema, the same ACL and the same error shape; and what a tool returns to a
model stays within its budget (diagnostics only when asked)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.api import catalogue, tool_contract
from services.api.app import create_app
from services.db.migrate import migrate
from services.serve import start_runtime, stop_runtime
from services.settings import Settings
from tests.integration.agents_helpers import mcp_session, serve_app
from tests.integration.conftest import _teardown, make_settings
from tests.integration.doors import Answer, RpcDoor, Who, http_call, mcp_calls, rpc_door, rpc_viewer
from tests.integration.helpers import envelope, later, produce
from tests.integration.retriever_fixtures import ALICE, T1, hierarchy_file, load_corpus, wait_embedded

KEY = {"X-Api-Key": "test-key"}
OUTSIDER = Who(
    "outsider", KEY | {"X-Principal-Id": f"user:{uuid.uuid4()}", "X-Principal-Groups": f"group:{uuid.uuid4()}"}
)
ALICE_W = Who("alice", KEY | {"X-Principal-Id": f"user:{ALICE}", "X-Principal-Groups": f"group:{T1}"})
# one valid call per tool: the test fails for a catalogue tool without one, so a new tool gets covered here
SAMPLES: dict[str, dict[str, Any]] = {
    "retrieve_context": {"query": "quasar migration codename rollout", "limit": 5},
    "search_knowledge_base": {"query": "quasar migration codename rollout", "limit": 5},
    "query_facts": {"about": "Zorblax Quint"},
    "diff_facts": {"about": "Zorblax Quint", "from_time": later(-600).isoformat(), "to_time": later(600).isoformat()},
    "query_paths": {"about": "Zorblax Quint"},
    "worldbuilder_lookup": {"name": "Zorblax Quint"},
    "worldbuilder_kb": {"query": "quasar migration"},
    "search_procedural_memory": {"query": "quasar migration"},
    "remember": {"text": "The doors test remembers this.", "source": {"session_id": "doors", "event_id": "e1"}},
    "forget": {"memory_id": str(uuid.uuid4())},
    "preload": {"text": "quasar migration codename rollout"},
    "list_memories": {},
    "get_memory": {"memory_id": str(uuid.uuid4())},
    "update_memory": {"memory_id": str(uuid.uuid4()), "text": "The doors test rewrites this."},
    "whoami": {},
    "propose_procedure": {
        "title": "Doors drill",
        "steps": ["knock"],
        "source": {"session_id": "doors", "event_id": "p"},
    },
    "memory_profile": {},
}
VOLATILE = {"diagnostics", "temporal_plan", "offset", "partition", "envelope_id", "topic", "forgotten"}


def stable(body: Any) -> Any:
    """What a result lets its viewer see, as a set: every id, external id, name and text in it (not the
    scores, timings and offsets that differ between two identical calls)."""
    if body is None:
        return None
    seen: set[str] = set()

    def walk(v: Any, key: str = "") -> None:
        if key in VOLATILE or key in ("score", "channel_ranks", "scores", "rank"):
            return
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str):
            seen.add(f"{key}={v}")

    walk(body)
    return seen


def ok(status: int) -> int:
    return 200 if 200 <= status < 300 else status


@dataclass
class Stack:
    settings: Settings
    url: str
    http: httpx.AsyncClient
    rpc: RpcDoor
    openapi: dict[str, Any]


@pytest.fixture(scope="module")
async def stack(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """One running API + retriever for the module (each catalogue tool is its own test case)."""
    s = make_settings(stack_env, org_hierarchy_path=hierarchy_file(tmp_path_factory.mktemp("doors")))
    await migrate(s.database_url, s.db_schema)
    rt = await start_runtime(s, ["ingest", "embed", "retrieve"])
    try:
        await load_corpus(s)
        app = create_app(rt)
        async with (
            serve_app(app) as url,
            httpx.AsyncClient(base_url=url, timeout=60) as http,
            rpc_door(s) as rpc,
        ):
            yield Stack(s, url, http, rpc, app.openapi())
    finally:
        await stop_runtime(rt)
        await _teardown(stack_env, s)


async def three(st: Stack, tool: str, args: dict[str, Any], who: Who) -> tuple[Answer, Answer, Answer]:
    h = await http_call(st.http, "POST", f"/tools/{tool}", args, who)
    (m,) = await mcp_calls(st.url, who, [(tool, args)])
    r = await st.rpc.call(tool, args, rpc_viewer(who.headers))
    return h, m, r


def test_every_catalogue_tool_has_a_sample_call() -> None:
    assert set(SAMPLES) == set(catalogue.BY_NAME), "every catalogue tool needs a sample call here"


@pytest.mark.parametrize("tool", catalogue.TOOLS, ids=lambda t: t.name)
async def test_the_tool_is_on_all_three_doors_with_one_schema_acl_and_error_shape(
    stack: Stack, tool: tool_contract.CatalogueTool[Any, Any]
) -> None:
    # schema: MCP lists the model-facing schema; HTTP documents the tool's full request model
    async with mcp_session(stack.url, dict(ALICE_W.headers)) as s:
        listed = {t.name: t for t in (await s.list_tools()).tools}
    assert set(listed) == set(catalogue.BY_NAME)
    assert listed[tool.name].input_schema == tool_contract.model_schema(tool), tool.name
    op = stack.openapi["paths"][tool.http_path]["post"]
    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/" + tool.request.__name__), (tool.name, ref)

    # error shape: the same status and field on every door (the RPC door dispatched the tool: not "tool")
    bad = await three(stack, tool.name, SAMPLES[tool.name] | {"bogus": 1}, ALICE_W)
    assert [(a.status, a.field) for a in bad] == [(422, "bogus")] * 3, (tool.name, bad)
    if tool.hidden:  # a model-facing door refuses a workspace the credential did not give
        h, m, r = await three(stack, tool.name, SAMPLES[tool.name] | {"workspace": "elsewhere"}, ALICE_W)
        assert (m.status, m.field, r.status, r.field) == (422, "workspace", 422, "workspace"), (tool.name, m, r)

    # the same ACL: an outsider and an insider get the same answer through each door
    table: list[str] = []
    for who in (OUTSIDER, ALICE_W):
        h, m, r = await three(stack, tool.name, SAMPLES[tool.name], who)
        assert ok(h.status) == m.status == r.status, (tool.name, who.label, h, m, r)
        assert h.status < 500
        assert stable(m.body) == stable(r.body), (tool.name, who.label)
        assert stable(h.body) == stable(m.body), (tool.name, who.label)
        table.append(
            f"{tool.name:26} {who.label:9} http {h.status} {len(h.text):6} B | mcp {m.status} {len(m.text):6} B"
            f" | rpc {r.status} {len(r.text):6} B"
        )
    print("\n" + "\n".join(table))


async def test_unknown_rpc_tool_names_the_tool_field(stack: Stack) -> None:
    r = await stack.rpc.call("drop_tables", {}, rpc_viewer(ALICE_W.headers))
    assert (r.status, r.field) == (422, "tool")


BUDGETS = (200, 1000, 4000)


def bound(max_tokens: int) -> int:
    """What a model may receive for a budget: 4 bytes per token plus the answer's fixed fields and one
    citation (``tool_contract.ANSWER_OVERHEAD``), once as structured content and at most once more as text."""
    return 2 * (tool_contract.BYTES_PER_TOKEN * max_tokens + tool_contract.ANSWER_OVERHEAD)


async def test_retrieve_context_over_mcp_stays_within_its_budget(stack: Stack) -> None:
    words = " ".join(f"budgetword{i} lorem ipsum dolor sit amet consectetur" for i in range(120))
    await produce(
        stack.settings,
        *(
            envelope(f"long-{i}", f"Long note {i} on the quasar rollout. {words}", principals=[f"group:{T1}"])
            for i in range(8)
        ),
    )
    await wait_embedded(stack.settings, 12)
    sizes: dict[tuple[str, int], int] = {}
    async with mcp_session(stack.url, dict(ALICE_W.headers)) as s:
        for max_tokens in BUDGETS:
            for diagnostics in (False, True):
                r = await s.call_tool(
                    "retrieve_context",
                    {"query": "quasar rollout budgetword7", "max_tokens": max_tokens, "diagnostics": diagnostics},
                )
                assert not r.is_error
                size = sum(len(getattr(c, "text", "").encode()) for c in r.content) + len(
                    json.dumps(r.structured_content).encode()
                )
                sizes[("diag" if diagnostics else "plain", max_tokens)] = size
                assert ("diagnostics" in (r.structured_content or {})) is diagnostics
                assert r.structured_content and r.structured_content["passages"], "the budget still returns passages"
    print(f"retrieve_context over MCP, bytes per answer: {sizes}")
    for max_tokens in BUDGETS:
        assert sizes[("plain", max_tokens)] <= bound(max_tokens), (max_tokens, sizes)
    assert sizes[("diag", 200)] > sizes[("plain", 200)]
