"""The agent tool catalogue: one entry per tool, from which the three doors are generated.

- HTTP: ``POST /tools/<name>`` (``http_router``) takes the tool's full request model — the operator /
  evaluation door: it also accepts the operator-only fields (``workspace``, evaluation knobs such as
  ``arms``) and always returns ``diagnostics``.
- MCP: one MCP tool per entry (``services/api/mcp.py`` builds them from ``TOOLS``) whose ``inputSchema`` is
  the MODEL-facing schema (``model_schema``).
- Kafka request/reply: the retriever stage's ``RpcHandler`` dispatches on ``rpc_tools(rt)`` (injected by
  the stage catalogue ``services/stages.py``), validating with the same model-facing rules.

Adding a tool is ONE entry in ``TOOLS``::

    CatalogueTool(
        name="whoami",                      # the tool name on every door; HTTP path /tools/whoami
        request=WhoamiRequest,              # pydantic request model (extra="forbid")
        response=WhoamiResponse,            # pydantic response model
        run=run_whoami,                     # async (runtime, viewer, request) -> response
        description="...",                  # what a model reads: when to call it and what comes back
        read_only=True,                     # False for writes (MCP annotation)
        operator_only=frozenset(),          # request fields only operators/eval may set (never a model)
        arg_notes={"field": "..."},         # descriptions for request properties the model lacks
        http_status=200,                    # status of a successful HTTP answer
    )

The model-facing schema of a tool is its request model's JSON Schema minus ``IDENTITY_FIELDS`` (the
workspace comes from the credential, like identity: ``workspace_for``) and minus the entry's
``operator_only`` fields, plus a ``diagnostics`` flag when the response carries diagnostics (left out of
the answer unless asked). A model-facing call that sets a hidden field to anything but the server's own
value is refused naming the field (422), so a model can never choose its workspace or an evaluation arm.

Errors carry their own status (``services.errors``): a tool raises ``OrgMemoryError`` subclasses, and each
door renders ``status`` / ``field`` / message in its own envelope — HTTP the project's error body (one
exception handler, ``services/api/errors.py``), MCP a tool error ``"<field>: <msg> (status <n>)"``, RPC an
``RpcError``. Identity never comes from arguments: every door hands ``run`` a ``Viewer`` it authenticated.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from retriever.preload import preload
from retriever.wiring import get_service
from schemas.graph import DiffFactsRequest, FactDiff, FactsResponse, PathsResponse, QueryFactsRequest, QueryPathsRequest
from schemas.memory import (
    ForgetRequest,
    ForgetResponse,
    GetMemoryRequest,
    ListMemoriesRequest,
    MemoryDetail,
    MemoryList,
    RememberRequest,
    RememberResponse,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIRequest,
    WhoAmIResponse,
)
from schemas.memory_profile import MemoryProfile, MemoryProfileRequest
from schemas.preload import PreloadRequest, PreloadResponse
from schemas.procedure_proposals import ProcedureProposal, ProposeProcedureRequest
from schemas.procedures import SearchProceduralMemoryRequest, SearchProceduralMemoryResponse
from schemas.tools import (
    RetrieveContextRequest,
    RetrieveContextResponse,
    SearchKnowledgeBaseRequest,
    SearchKnowledgeBaseResponse,
)
from schemas.worldbuilder import (
    WorldbuilderKbRequest,
    WorldbuilderKbResponse,
    WorldbuilderLookupRequest,
    WorldbuilderLookupResponse,
)
from services.api import graph, procedure_proposals, procedures, worldbuilder
from services.api.auth import require_viewer
from services.api.deps import runtime_of
from services.api.tool_contract import ANSWER_OVERHEAD, BYTES_PER_TOKEN, CatalogueTool, dump, parse
from services.memories import caller_of, get_memory_service
from services.memory_profile import memory_profile
from services.memory_verbs import get_memory, list_memories, update_memory, whoami
from services.metrics import RETRIEVALS
from services.runtime import Runtime
from services.viewer import Viewer


# ---- the tools' implementations that live nowhere else -------------------------------------------------
def _token_budget(req: RetrieveContextRequest) -> int | None:
    return None if req.max_tokens is None else BYTES_PER_TOKEN * req.max_tokens + ANSWER_OVERHEAD


async def _retrieve(rt: Runtime, viewer: Viewer, req: RetrieveContextRequest) -> RetrieveContextResponse:
    return await get_service(rt).retrieve_context(req, viewer)


async def _search(rt: Runtime, viewer: Viewer, req: SearchKnowledgeBaseRequest) -> SearchKnowledgeBaseResponse:
    return await get_service(rt).search_knowledge_base(req, viewer)


async def _remember(rt: Runtime, viewer: Viewer, req: RememberRequest) -> RememberResponse:
    return await get_memory_service(rt).remember(req, caller_of(rt, viewer))


async def _preload(rt: Runtime, viewer: Viewer, req: PreloadRequest) -> PreloadResponse:
    return await preload(get_service(rt), viewer, req, default_top_k=rt.settings.preload_top_k)


async def _forget(rt: Runtime, viewer: Viewer, req: ForgetRequest) -> ForgetResponse:
    return await get_memory_service(rt).forget(req.memory_id, caller_of(rt, viewer), workspace=req.workspace)


TOOLS: tuple[CatalogueTool[Any, Any], ...] = (
    CatalogueTool(
        "retrieve_context",
        RetrieveContextRequest,
        RetrieveContextResponse,
        _retrieve,
        "DEFAULT TOOL — call this first for any question about the organisation's work: people, teams, "
        "projects, decisions, documents, messages, tickets, who owns or knows what, and what changed when. "
        "One call returns the passages you are allowed to see, structured facts and relationship paths from "
        "the knowledge graph, packed to max_tokens, each with a numbered citation (source system, external "
        'id, url, event time) you can quote. Time phrases in the query ("as of March 2024", "last quarter", '
        '"what changed since …") are understood; use subjects/about to anchor on an entity. Results are '
        "already limited to what the current user may see.",
        operator_only=frozenset({"arms"}),
        budget=_token_budget,
    ),
    CatalogueTool(
        "search_knowledge_base",
        SearchKnowledgeBaseRequest,
        SearchKnowledgeBaseResponse,
        _search,
        "Passage search only (no graph facts): the best matching passages with citations. Prefer "
        "retrieve_context unless you need raw ranked passages, filters (source_systems, kinds, date range, "
        "author) or more results.",
        operator_only=frozenset({"arms"}),
    ),
    CatalogueTool(
        "query_facts",
        QueryFactsRequest,
        FactsResponse,
        graph.run_query_facts,
        "Structured facts (claims with evidence) about given entities — a person, team or project given by "
        "subjects [{type, id}] or by name in about — optionally as of a time (as_of) or as believed at a "
        "time (believed_as_of).",
    ),
    CatalogueTool(
        "diff_facts",
        DiffFactsRequest,
        FactDiff,
        graph.run_diff_facts,
        "What changed about given entities between from_time and to_time: facts added, removed and changed.",
    ),
    CatalogueTool(
        "query_paths",
        QueryPathsRequest,
        PathsResponse,
        graph.run_query_paths,
        "Relationship paths from seed entities through the knowledge graph (who works with whom, which "
        "team owns which project), bounded by max_depth and max_fanout.",
    ),
    CatalogueTool(
        "worldbuilder_lookup",
        WorldbuilderLookupRequest,
        WorldbuilderLookupResponse,
        worldbuilder.run_worldbuilder_lookup,
        "A profile of one person, team, project or glossary term by name (type optional) or subject: "
        "summary, title, team, manager, reports, current projects, key collaborators, members, definition, "
        "recent activity, aliases — every field with its evidence document ids and as_of, limited to what "
        "the current user may see.",
    ),
    CatalogueTool(
        "search_procedural_memory",
        SearchProceduralMemoryRequest,
        SearchProceduralMemoryResponse,
        procedures.run_search_procedural_memory,
        "Find saved procedures (how-tos, runbooks: name, when to use, numbered steps, tools) matching a task "
        "description; returns each procedure's current version with its steps.",
    ),
    CatalogueTool(
        "remember",
        RememberRequest,
        RememberResponse,
        _remember,
        "Save a memory for later retrieval: a note, decision, preference, fact or procedure, written as a "
        'self-contained statement. scope "user" keeps it private to the current user; a group principal '
        "(group:<uuid>, a team/division/org the user belongs to) shares it with every member beneath it. "
        "Returns memory_id (pass it to forget). Give source.session_id and source.event_id so a retry is "
        "one memory.",
        read_only=False,
        arg_notes={
            "title": "optional short headline for the memory (up to 256 characters)",
            "kind": "what sort of memory this is: note, decision, preference, fact or procedure",
            "source": "where the memory comes from: agent name, session_id and event_id (a retry with the "
            "same session_id and event_id is the same memory)",
        },
        http_status=202,
    ),
    CatalogueTool(
        "forget",
        ForgetRequest,
        ForgetResponse,
        _forget,
        "Delete a memory you (the current user) wrote earlier, by the memory_id remember returned.",
        read_only=False,
        http_status=202,
    ),
    CatalogueTool(
        "worldbuilder_kb",
        WorldbuilderKbRequest,
        WorldbuilderKbResponse,
        worldbuilder.run_worldbuilder_kb,
        "Search the knowledge base grouped per document, with the people who took part; about = only "
        "documents a person participates in, author = only documents they wrote.",
    ),
)
TOOLS += (
    CatalogueTool(
        "preload",
        PreloadRequest,
        PreloadResponse,
        _preload,
        "Before answering a turn: the current user's most relevant saved memories, then the most relevant "
        "passages, deduplicated and packed to max_tokens as one block with numbered citations. Pass the "
        "user's message as text; put the block in your context instead of a whole memory file.",
    ),
    CatalogueTool(
        "list_memories",
        ListMemoriesRequest,
        MemoryList,
        list_memories,
        'List saved memories, newest first: without scope the ones you wrote; scope "user" your private '
        "ones; scope group:<uuid> the ones shared with a group you belong to. Paginate with next_cursor.",
        arg_notes={"cursor": "next_cursor of the previous page", "limit": "memories per page, 1..100"},
    ),
    CatalogueTool(
        "get_memory",
        GetMemoryRequest,
        MemoryDetail,
        get_memory,
        "One saved memory by memory_id, with its version history (if you may see it).",
    ),
    CatalogueTool(
        "update_memory",
        UpdateMemoryRequest,
        UpdateMemoryResponse,
        update_memory,
        "Replace the text of a memory you wrote: a new version supersedes the old one (same id, scope and "
        "kind); the history is kept and get_memory shows it.",
        read_only=False,
        http_status=202,
    ),
    CatalogueTool(
        "whoami",
        WhoAmIRequest,
        WhoAmIResponse,
        whoami,
        "Who you are acting for: the user principal, the groups it belongs to (from the org directory), and "
        "the scopes remember accepts from it — use one of writable_scopes to share a memory with a team.",
    ),
)
TOOLS += (
    CatalogueTool(
        "propose_procedure",
        ProposeProcedureRequest,
        ProcedureProposal,
        procedure_proposals.run_propose_procedure,
        "Propose a reusable procedure (title and ordered steps) you worked out in this conversation. It is a "
        "draft: nobody can search it until a person approves it. scope: who would see it once approved "
        "(default: the current user); source_ids: the documents or memories it is based on.",
        read_only=False,
        arg_notes={
            "description": "optional: what the procedure achieves",
            "when_to_use": "optional: the situation it is for",
            "tools": "optional: the tools the steps use",
            "source": "where the proposal comes from: agent name, session_id and event_id (a retry with the "
            "same session_id and event_id is the same proposal)",
        },
        http_status=201,
    ),
    CatalogueTool(
        "memory_profile",
        MemoryProfileRequest,
        MemoryProfile,
        memory_profile,
        "A distilled profile of the current user: a one-line summary, role (titles), interests (projects, "
        "teams, stated preferences) and durable facts (saved facts and decisions, reporting lines), each item "
        "citing the memories and documents it came from.",
        arg_notes={"limit": "items per section at most (1 to 50)"},
    ),
)
BY_NAME: Mapping[str, CatalogueTool[Any, Any]] = {t.name: t for t in TOOLS}


async def call(
    tool: CatalogueTool[Any, Any],
    rt: Runtime,
    viewer: Viewer,
    arguments: Mapping[str, Any],
    door: str,
    workspace: str | None = None,
) -> dict[str, Any]:
    """One model-facing call (MCP, RPC): parse, run, dump. ``workspace`` is the credential's (None: the
    default). Raises ``OrgMemoryError`` with its status."""
    req, diagnostics = parse(tool, arguments, viewer, workspace)
    RETRIEVALS.labels(tool.name, door).inc()
    return dump(tool, await tool.run(rt, viewer, req), diagnostics, req)


ToolCall = Callable[[Viewer, Mapping[str, Any], str | None], Awaitable[dict[str, Any]]]


def rpc_tools(rt: Runtime) -> dict[str, ToolCall]:
    """The Kafka request/reply door's dispatch table (``retriever.handler.RpcHandler(tools=...)``)."""

    def bind(tool: CatalogueTool[Any, Any]) -> ToolCall:
        async def run(viewer: Viewer, arguments: Mapping[str, Any], workspace: str | None) -> dict[str, Any]:
            return await call(tool, rt, viewer, arguments, "kafka", workspace)

        return run

    return {t.name: bind(t) for t in TOOLS}


# ---- the HTTP door --------------------------------------------------------------------------------------
def _route(tool: CatalogueTool[Any, Any]) -> Callable[..., Awaitable[BaseModel]]:
    async def endpoint(body: BaseModel, request: Request, viewer: Viewer) -> BaseModel:
        RETRIEVALS.labels(tool.name, "http").inc()
        result: BaseModel = await tool.run(runtime_of(request), viewer, body)
        return result

    endpoint.__name__ = tool.name
    endpoint.__doc__ = tool.description
    # FastAPI reads the signature: the body is the tool's full request model, the viewer authenticated
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("body", inspect.Parameter.KEYWORD_ONLY, annotation=tool.request),
            inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request),
            inspect.Parameter(
                "viewer", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Viewer, Depends(require_viewer)]
            ),
        ],
        return_annotation=tool.response,
    )
    return endpoint


def http_router() -> APIRouter:
    """``POST /tools/<name>`` for every catalogue tool (the operator door: full request, diagnostics)."""
    router = APIRouter(tags=["tools"])
    for tool in TOOLS:
        router.add_api_route(
            tool.http_path,
            _route(tool),
            methods=["POST"],
            response_model=tool.response,
            status_code=tool.http_status,
            name=tool.name,
            summary=tool.name,
            description=tool.description,
        )
    return router
