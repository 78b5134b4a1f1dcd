"""The MCP server (``mcp`` 2.x ``MCPServer``): our agent tools for MCP clients, over streamable HTTP at
``/mcp`` in the API process and over stdio (``orgmem mcp``).

One implementation: the tools are the tool catalogue's (``services/api/catalogue.py``), the same
entries the HTTP routes and the Kafka request/reply door are generated from. Input schemas are the
catalogue's model-facing schemas (no workspace, no evaluation knob, a description on every property);
arguments are validated by the catalogue (a bad argument is a tool error ``<field>: <msg> (status
422)``). Results are structured content (diagnostics only with ``diagnostics: true``) plus a compact
text rendering with numbered citations.

Identity never comes from tool arguments. HTTP: ``McpAuth`` authenticates every request before the
MCP transport sees it — ``X-Api-Key`` (constant time) with ``X-Principal-Id`` / ``X-Principal-Groups``
(the same trust model and code as ``/tools/*``), or ``Authorization: Bearer <token>`` mapped by
``MCP_TOKENS_PATH`` to a principal — and 401s otherwise (403 for a key without the ``agent`` scope); tools
read the viewer and the credential from the request's ASGI state, and run in the credential's workspace
(``services.credentials.bind_workspace``: an argument naming another workspace is a tool error). stdio: the
principal is fixed when the process starts; its groups are re-read from the directory on every call.
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from fastapi import HTTPException
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from retriever.rpc import error_status
from schemas.envelope import Principal
from services.api import catalogue, tool_contract
from services.api.auth import CREDENTIAL_STATE, CallerHeaders, credential_of, viewer_for
from services.api.errors import error_response
from services.api.mcp_render import render
from services.api.tool_contract import CatalogueTool
from services.credentials import Credential
from services.errors import ConfigurationError, OrgMemoryError
from services.runtime import Runtime
from services.viewer import Viewer

log = logging.getLogger("orgmem.mcp")
VIEWER_STATE = "orgmem_viewer"
M = TypeVar("M", bound=BaseModel)

ViewerOf = Callable[[Context], Viewer | Awaitable[Viewer]]
RuntimeOf = Callable[[], Runtime]


# ---- tools ------------------------------------------------------------------------------------------


def tool_error(exc: OrgMemoryError) -> CallToolResult:
    """The MCP form of the error every door reports: a tool error whose text is ``<field>: <msg> (status
    <n>)`` and whose structured content is ``{"error": {"type", "message", "status", "field"}}`` — the
    Kafka door's ``RpcError``."""
    code, detail = error_status(exc)
    field = detail.get("field")
    msg = str(detail.get("msg", ""))
    if field and msg.startswith(f"{field}: "):
        msg = msg[len(field) + 2 :]
    error = {"type": type(exc).__name__, "message": msg, "status": code, "field": field}
    text = f"{field + ': ' if field else ''}{msg} (status {code})"
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content={"error": error}, is_error=True
    )


def _tool(spec: CatalogueTool[Any, Any], runtime_of: RuntimeOf, viewer_of: ViewerOf) -> Tool:
    async def call(ctx: Context, **arguments: Any) -> CallToolResult:
        found = viewer_of(ctx)
        viewer = await found if inspect.isawaitable(found) else found
        workspace = credential_workspace(ctx)  # a key bound to a workspace runs its calls there
        try:
            data = await catalogue.call(spec, runtime_of(), viewer, arguments, "mcp", workspace)
        except OrgMemoryError as exc:
            return tool_error(exc)
        return CallToolResult(content=[TextContent(type="text", text=render(spec.name, data))], structured_content=data)

    call.__name__ = spec.name
    # the SDK reads the signature for the context parameter; arguments are the catalogue's model-facing ones
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
    tool.fn_metadata.arg_model = _PassThrough  # validation is the catalogue's (one rule set for MCP and RPC)
    tool.parameters = tool_contract.model_schema(spec)
    return tool


class _PassThrough(ArgModelBase):
    """Hands every argument on untouched; ``tool_contract.parse`` validates them."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def build_mcp_server(runtime_of: RuntimeOf, viewer_of: ViewerOf) -> MCPServer[Any]:
    return MCPServer(
        "orgmem",
        title="Org Memory",
        instructions="Workplace memory. Call retrieve_context first for questions about the organisation; "
        "results are limited to what the current user may see. Use remember/forget to write memories.",
        version="0.1.0",
        tools=[_tool(spec, runtime_of, viewer_of) for spec in catalogue.TOOLS],
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


def credential_workspace(ctx: Context) -> str | None:
    """The workspace of the HTTP request's credential (``None``: any, and for stdio)."""
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state") or {}
    cred = state.get(CREDENTIAL_STATE)
    return cred.workspace if isinstance(cred, Credential) else None


class TokenPrincipal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    principal_id: Principal
    groups: list[Principal] | None = None
    roles: list[str] = Field(default_factory=list)
    workspace: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\-]{1,64}$")


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
                roles = ",".join(principal.roles) or None
                scopes = frozenset({"agent"} | ({"admin"} if "admin" in principal.roles else set()))
                cred = Credential("mcp-token", "MCP_TOKENS_PATH bearer token", scopes, principal.workspace)
                viewer = await viewer_for(request, cred, principal.principal_id, groups, roles)
            else:
                caller = CallerHeaders(
                    h.get("x-api-key"), h.get("x-principal-id"), h.get("x-principal-groups"), h.get("x-principal-roles")
                )
                viewer = await caller.viewer(request, "agent")
                cred = await credential_of(request, h.get("x-api-key"))
        except HTTPException as exc:
            headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
            await error_response(exc.status_code, exc.detail, headers)(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state[VIEWER_STATE], state[CREDENTIAL_STATE] = viewer, cred
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
