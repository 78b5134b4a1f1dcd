"""The MCP server (``mcp`` 2.x ``MCPServer``): our agent tools for MCP clients, over streamable HTTP at
``/mcp`` in the API process and over stdio (``orgmem mcp``).

One implementation: every tool calls the same service functions as the HTTP routes
(``RetrieverService``, ``services.api.graph.run_*``, ``MemoryService``). Input schemas are the pydantic
contracts' JSON Schemas; arguments are validated by those contracts (a bad argument is a tool error
naming the field). Results are structured content plus a compact text rendering with numbered
citations.

Identity never comes from tool arguments. HTTP: ``McpAuth`` authenticates every request before the
MCP transport sees it — ``X-Api-Key`` (constant time) with ``X-Principal-Id`` / ``X-Principal-Groups``
(the same trust model and code as ``/tools/*``), or ``Authorization: Bearer <token>`` mapped by
``MCP_TOKENS_PATH`` to a principal — and 401s otherwise; tools read the viewer from the request's
ASGI state. stdio: the principal is fixed when the process starts.
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fastapi import HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from retriever.rpc import error_status
from retriever.wiring import get_service
from schemas.envelope import Principal
from schemas.graph import DiffFactsRequest, QueryFactsRequest, QueryPathsRequest
from schemas.memory import ForgetRequest, RememberRequest
from schemas.procedures import SearchProceduralMemoryRequest
from schemas.tools import RetrieveContextRequest, SearchKnowledgeBaseRequest
from schemas.worldbuilder import WorldbuilderKbRequest, WorldbuilderLookupRequest
from services.api import graph, procedures, worldbuilder
from services.api.auth import require_viewer
from services.api.errors import error_response
from services.errors import ConfigurationError, OrgMemoryError
from services.memories import MemoryWriteError, caller_of, get_memory_service
from services.metrics import RETRIEVALS
from services.runtime import Runtime
from services.viewer import Viewer

log = logging.getLogger("orgmem.mcp")
VIEWER_STATE = "orgmem_viewer"
M = TypeVar("M", bound=BaseModel)
SNIPPET_CHARS = 400

ViewerOf = Callable[[Context], Viewer]
RuntimeOf = Callable[[], Runtime]


# ---- text renderings (what a model reads) ---------------------------------------------------------
def _cite(n: int, p: dict[str, Any]) -> str:
    where = f"{p.get('source_system')} {p.get('external_id')}"
    if p.get("url"):
        where += f" {p['url']}"
    title = f"{p['title']}: " if p.get("title") else ""
    text = " ".join(str(p.get("text") or p.get("snippet") or "").split())
    if len(text) > SNIPPET_CHARS:
        text = text[: SNIPPET_CHARS - 1] + "…"
    return f"[{n}] {title}{text}\n    — {where}, {p.get('event_time')}"


def render(tool: str, data: dict[str, Any]) -> str:
    """A compact rendering with numbered citations (source system, external id, url, event time)."""
    lines: list[str] = []
    passages = data.get("passages") or []
    for i, p in enumerate(passages, 1):
        lines.append(_cite(i, p))
    for key in ("structured_facts", "facts", "search_facts"):
        for f in data.get(key) or []:
            lines.append("fact: " + json.dumps(f, default=str, separators=(",", ":"))[:600])
    for p in data.get("paths") or []:
        lines.append("path: " + json.dumps(p, default=str, separators=(",", ":"))[:600])
    if tool in ("remember", "forget"):
        lines.append(json.dumps({k: v for k, v in data.items() if k != "key"}, default=str))
    if tool in JSON_RENDERED:
        lines.append(json.dumps(data, default=str, separators=(",", ":"))[:4000])
    if tool == "worldbuilder_lookup":
        lines += _render_profile(data.get("profile") or {})
    for hit in data.get("results") or []:
        if tool == "search_procedural_memory":
            proc = hit.get("procedure") or {}
            steps = "; ".join(f"{i}. {st}" for i, st in enumerate(proc.get("steps") or [], 1))
            lines.append(
                f"procedure {proc.get('name')} (v{proc.get('version')}, id {proc.get('procedure_id')}): {steps}"
            )
    if data.get("answer"):
        lines.insert(0, f"answer: {data['answer']}")
    if not lines:
        lines.append("no results visible to you")
    return "\n".join(lines)


def _render_profile(profile: dict[str, Any]) -> list[str]:
    """A Worldbuilder profile as lines of ``field: value [evidence document ids]``."""
    lines: list[str] = []
    subject = profile.get("subject") or {}
    if subject:
        lines.append(f"profile of {subject.get('name')} ({profile.get('kind')})")
    for name, value in profile.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict) and "value" in item:
                evidence = ",".join(str(e) for e in item.get("evidence") or [])
                lines.append(f"{name}: {item['value']}" + (f" [evidence {evidence}]" if evidence else ""))
    return lines


def _result(tool: str, response: BaseModel) -> CallToolResult:
    data = response.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=render(tool, data))], structured_content=data)


# ---- tools ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    model: type[BaseModel]
    description: str
    run: Callable[[Runtime, Viewer, Any], Awaitable[BaseModel]]
    read_only: bool = True


async def _retrieve(rt: Runtime, viewer: Viewer, req: RetrieveContextRequest) -> BaseModel:
    RETRIEVALS.labels("retrieve_context", "mcp").inc()
    return await get_service(rt).retrieve_context(req, viewer)


async def _search(rt: Runtime, viewer: Viewer, req: SearchKnowledgeBaseRequest) -> BaseModel:
    RETRIEVALS.labels("search_knowledge_base", "mcp").inc()
    return await get_service(rt).search_knowledge_base(req, viewer)


async def _remember(rt: Runtime, viewer: Viewer, req: RememberRequest) -> BaseModel:
    return await get_memory_service(rt).remember(req, caller_of(rt, viewer))


async def _lookup(rt: Runtime, viewer: Viewer, req: WorldbuilderLookupRequest) -> BaseModel:
    return await worldbuilder.run_worldbuilder_lookup(rt, viewer, req)


async def _procedures(rt: Runtime, viewer: Viewer, req: SearchProceduralMemoryRequest) -> BaseModel:
    return await procedures.run_search_procedural_memory(rt, viewer, req)


async def _forget(rt: Runtime, viewer: Viewer, req: ForgetRequest) -> BaseModel:
    return await get_memory_service(rt).forget(req.memory_id, caller_of(rt, viewer), workspace=req.workspace)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "retrieve_context",
        RetrieveContextRequest,
        "DEFAULT TOOL — call this first for any question about the organisation's work: people, teams, "
        "projects, decisions, documents, messages, tickets, who owns or knows what, and what changed when. "
        "One call returns the passages you are allowed to see (hybrid search), structured facts and "
        "relationship paths from the knowledge graph, packed to max_tokens, each with a numbered citation "
        "(source system, external id, url, event time) you can quote. Time phrases in the query "
        '("as of March 2024", "last quarter", "what changed since …") are understood; use subjects/about '
        "to anchor on an entity. Results are already limited to what the current user may see.",
        _retrieve,
    ),
    ToolSpec(
        "search_knowledge_base",
        SearchKnowledgeBaseRequest,
        "Passage search only (no graph facts): the best matching passages with citations. Prefer "
        "retrieve_context unless you need raw ranked passages, filters (source_systems, kinds, date range, "
        "author) or more results.",
        _search,
    ),
    ToolSpec(
        "query_facts",
        QueryFactsRequest,
        "Structured facts (claims with evidence) about given entities — a person, team or project given by "
        "subjects [{type, id}] or by name in about — optionally as of a time (as_of) or as believed at a "
        "time (believed_as_of).",
        lambda rt, v, req: graph.run_query_facts(rt, v, req),
    ),
    ToolSpec(
        "diff_facts",
        DiffFactsRequest,
        "What changed about given entities between from_time and to_time: facts added, removed and changed.",
        lambda rt, v, req: graph.run_diff_facts(rt, v, req),
    ),
    ToolSpec(
        "query_paths",
        QueryPathsRequest,
        "Relationship paths from seed entities through the knowledge graph (who works with whom, which "
        "team owns which project), bounded by max_depth and max_fanout.",
        lambda rt, v, req: graph.run_query_paths(rt, v, req),
    ),
    ToolSpec(
        "worldbuilder_lookup",
        WorldbuilderLookupRequest,
        "A profile of one person, team, project or glossary term by name (type optional) or subject: "
        "summary, title, team, manager, reports, current projects, key collaborators, members, definition, "
        "recent activity, aliases — every field with its evidence document ids and as_of, limited to what "
        "the current user may see.",
        _lookup,
    ),
    ToolSpec(
        "search_procedural_memory",
        SearchProceduralMemoryRequest,
        "Find saved procedures (how-tos, runbooks: name, when to use, numbered steps, tools) matching a task "
        "description; returns each procedure's current version with its steps.",
        _procedures,
    ),
    ToolSpec(
        "remember",
        RememberRequest,
        "Save a memory for later retrieval: a note, decision, preference, fact or procedure, written as a "
        'self-contained statement. scope "user" keeps it private to the current user; a group principal '
        "(group:<uuid>, a team/division/org the user belongs to) shares it with every member beneath it. "
        "Returns memory_id (pass it to forget). Give source.session_id and source.event_id so a retry is "
        "one memory.",
        _remember,
        read_only=False,
    ),
    ToolSpec(
        "forget",
        ForgetRequest,
        "Delete a memory you (the current user) wrote earlier, by the memory_id remember returned.",
        _forget,
        read_only=False,
    ),
    ToolSpec(
        "worldbuilder_kb",
        WorldbuilderKbRequest,
        "Search the knowledge base grouped per document, with the people who took part; about = only "
        "documents a person participates in, author = only documents they wrote.",
        lambda rt, v, req: worldbuilder.run_worldbuilder_kb(rt, v, req),
    ),
)
JSON_RENDERED = frozenset({"diff_facts", "worldbuilder_kb"})  # the others have their own rendering above


def _tool(spec: ToolSpec, runtime_of: RuntimeOf, viewer_of: ViewerOf) -> Tool:
    async def call(ctx: Context, **arguments: Any) -> CallToolResult:
        viewer = viewer_of(ctx)
        try:
            req = spec.model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ToolError(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from exc
        try:
            response = await spec.run(runtime_of(), viewer, req)
        except MemoryWriteError as exc:
            raise ToolError(f"{exc.field or 'request'}: {exc.message} (status {exc.status})") from exc
        except OrgMemoryError as exc:
            code, detail = error_status(exc)
            field = detail.get("field")
            raise ToolError(f"{field + ': ' if field else ''}{detail.get('msg')} (status {code})") from exc
        return _result(spec.name, response)

    call.__name__ = spec.name
    # the SDK reads the signature for the context parameter; arguments come from the contract model
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)],
        return_annotation=CallToolResult,
    )
    call.__annotations__ = {"ctx": Context, "return": CallToolResult}
    tool = Tool.from_function(
        call,
        name=spec.name,
        description=spec.description,
        annotations=ToolAnnotations(read_only_hint=spec.read_only, open_world_hint=False),
    )
    args_model = type(f"{spec.model.__name__}Arguments", (spec.model, ArgModelBase), {})
    tool.fn_metadata.arg_model = args_model
    tool.parameters = spec.model.model_json_schema(by_alias=True)
    return tool


def build_mcp_server(runtime_of: RuntimeOf, viewer_of: ViewerOf) -> MCPServer[Any]:
    return MCPServer(
        "orgmem",
        title="Org Memory",
        instructions="Workplace memory. Call retrieve_context first for questions about the organisation; "
        "results are limited to what the current user may see. Use remember/forget to write memories.",
        version="0.1.0",
        tools=[_tool(spec, runtime_of, viewer_of) for spec in TOOLS],
        log_level="WARNING",
    )


# ---- identity -----------------------------------------------------------------------------------------
def http_viewer(ctx: Context) -> Viewer:
    """The viewer ``McpAuth`` attached to this HTTP request; refuses when there is none."""
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state") or {}
    viewer = state.get(VIEWER_STATE)
    if not isinstance(viewer, Viewer):
        raise ToolError("unauthenticated request")
    return viewer


class TokenPrincipal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    principal_id: Principal
    groups: list[Principal] | None = None
    roles: list[str] = Field(default_factory=list)


def load_tokens(path: Path | None) -> dict[str, TokenPrincipal]:
    """``{"<token>": {"principal_id": "user:…", "groups": [...]}}``; ConfigurationError naming the setting."""
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
        if not isinstance(raw, dict):
            raise ValueError("expected an object of token -> principal")
        tokens = {str(k): TokenPrincipal.model_validate(v) for k, v in raw.items()}
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"invalid MCP token file: {exc}", setting="MCP_TOKENS_PATH") from exc
    for t in tokens.values():
        if not t.principal_id.startswith("user:"):
            raise ConfigurationError("token principal_id must be user:<uuid>", setting="MCP_TOKENS_PATH")
    return tokens


class McpAuth:
    """ASGI guard in front of the MCP transport: 401 before any tool runs, else the viewer in scope state."""

    def __init__(self, app: ASGIApp, tokens: dict[str, TokenPrincipal]) -> None:
        self.app = app
        self.tokens = [(t.encode(), p) for t, p in tokens.items()]

    def _bearer(self, token: str) -> TokenPrincipal | None:
        found = None
        for known, principal in self.tokens:  # constant time per token, every token compared
            if hmac.compare_digest(known, token.encode()):
                found = principal
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        h = request.headers
        try:
            auth = h.get("authorization", "")
            if auth.lower().startswith("bearer ") and not h.get("x-api-key"):
                principal = self._bearer(auth[len("bearer ") :].strip())
                if principal is None:
                    raise HTTPException(401, detail="invalid bearer token")
                groups = None if principal.groups is None else ",".join(principal.groups)
                viewer = await require_viewer(
                    request,
                    request.app.state.api_key,
                    principal.principal_id,
                    groups,
                    ",".join(principal.roles) or None,
                )
            else:
                viewer = await require_viewer(
                    request,
                    h.get("x-api-key"),
                    h.get("x-principal-id"),
                    h.get("x-principal-groups"),
                    h.get("x-principal-roles"),
                )
        except HTTPException as exc:
            headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
            await error_response(exc.status_code, exc.detail, headers)(scope, receive, send)  # the common shape
            return
        scope.setdefault("state", {})[VIEWER_STATE] = viewer
        await self.app(scope, receive, send)


def transport_security(hosts: str, origins: str) -> TransportSecuritySettings:
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h.strip() for h in hosts.split(",") if h.strip()],
        allowed_origins=[o.strip() for o in origins.split(",") if o.strip()],
    )


def mount(app: Any, server: MCPServer[Any], settings: Any) -> None:
    """Streamable HTTP at ``/mcp`` behind ``McpAuth``; the host app's lifespan runs the session manager."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from starlette.routing import Route

    server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=transport_security(settings.mcp_allowed_hosts, settings.mcp_allowed_origins),
        host=settings.api_host,
    )
    guarded = McpAuth(StreamableHTTPASGIApp(server.session_manager), load_tokens(settings.mcp_tokens_path))
    app.router.routes.append(Route("/mcp", endpoint=guarded, methods=["GET", "POST", "DELETE"]))


def parse_stdio_principal(principal: str | None, groups: str | None) -> tuple[str, tuple[str, ...] | None]:
    """The fixed stdio viewer; ``ConfigurationError`` (the process refuses to start) without a valid one."""
    from schemas.envelope import PRINCIPAL_RE

    if not principal:
        raise ConfigurationError(
            "orgmem mcp needs the principal it acts for: --principal user:<uuid> (or ORGMEM_MCP_PRINCIPAL)",
            setting="ORGMEM_MCP_PRINCIPAL",
        )
    pid = principal.strip().lower()
    if not PRINCIPAL_RE.match(pid) or not pid.startswith("user:"):
        raise ConfigurationError(f"--principal must be user:<uuid>, got {principal[:80]!r}", setting="--principal")
    if groups is None:
        return pid, None
    parsed = tuple(sorted({g.strip().lower() for g in groups.split(",") if g.strip()}))
    bad = [g for g in parsed if not PRINCIPAL_RE.match(g) or not g.startswith("group:")]
    if bad:
        raise ConfigurationError(f"--groups must be group:<uuid>, got {bad[0][:80]!r}", setting="--groups")
    return pid, parsed
