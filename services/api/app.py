"""FastAPI application factory. Clients come from the process ``Runtime``; routes never build clients."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from services.api import (
    admin,
    consolidations,
    errors,
    graph,
    health,
    ingress,
    mcp,
    memories,
    openapi,
    preload,
    procedures,
    readconsistency,
    taxonomy,
    tools,
    worldbuilder,
)
from services.api.limits import RequestLimits
from services.directory import load_static_members
from services.metrics import HTTP_LATENCY, HTTP_REQUESTS
from services.runtime import Runtime


def create_app(rt: Runtime) -> FastAPI:
    api_key = rt.settings.require_api_key().get_secret_value()
    mcp_server = mcp.build_mcp_server(lambda: app.state.runtime, mcp.http_viewer)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp_server.session_manager.run():  # the MCP transport's sessions live in the host app
            yield

    app = FastAPI(
        title="Org Memory",
        version="0.1.0",
        description="Workplace memory for AI agents: viewer-scoped passages, facts and relationship paths.",
        lifespan=lifespan,
    )
    app.state.runtime = rt
    app.state.api_key = api_key
    errors.install(app)
    app.state.static_members = load_static_members(rt.settings.org_hierarchy_path)

    @app.middleware("http")
    async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        HTTP_LATENCY.labels(path).observe(time.perf_counter() - start)
        HTTP_REQUESTS.labels(path, request.method, str(response.status_code)).inc()
        return response

    readconsistency.install(app)  # X-Min-Lsn / X-Primary-Lsn (services.db.readpool)
    app.include_router(health.router)
    app.include_router(ingress.router, responses=errors.responses(409))
    app.include_router(memories.router, responses=errors.responses(403, 404, 429))
    app.include_router(consolidations.router, responses=errors.responses(403, 404, 409))
    mcp.mount(app, mcp_server, rt.settings)
    app.include_router(tools.router, responses=errors.responses(502))
    app.include_router(preload.router, responses=errors.responses(502))
    app.include_router(graph.router, responses=errors.responses(404))
    app.include_router(admin.router, responses=errors.responses(403, 404))
    app.include_router(worldbuilder.router, responses=errors.responses(404))
    app.include_router(procedures.router, responses=errors.responses(403, 404))
    app.include_router(taxonomy.router, responses=errors.responses(403, 404, 409))
    openapi.install(app)
    # outermost: authenticate and bound the body before anything reads it
    app.add_middleware(
        RequestLimits,
        api_key=api_key,
        max_bytes=rt.settings.max_request_bytes,
        statement_ms=rt.settings.api_statement_timeout_ms,
    )
    return app
