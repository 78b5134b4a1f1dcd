"""FastAPI application factory. Clients come from the process ``Runtime``; routes never build clients."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from services.api import (
    admin,
    console,
    consolidations,
    errors,
    graph,
    health,
    ingress,
    mcp,
    memories,
    openapi,
    procedure_proposals,
    procedures,
    readconsistency,
    taxonomy,
    tools,
    worldbuilder,
)
from services.api.limits import RequestLimits
from services.credentials import KeyStore
from services.directory import load_static_members
from services.metrics import HTTP_LATENCY, HTTP_REQUESTS
from services.runtime import Runtime

log = logging.getLogger("orgmem.api")


def key_store(rt_of: Callable[[], Runtime]) -> KeyStore:
    """The process's keys: ``api_keys`` rows, plus ``SERVICE_API_KEY`` in single-key development mode (logged)."""
    s = rt_of().settings
    dev = s.service_api_key.get_secret_value() if s.service_api_key else None
    if dev:
        log.warning(
            "single-key development mode: SERVICE_API_KEY has every scope (ingest, directory, agent, admin) in "
            "every workspace; for anything but local development unset it and create scoped keys (orgmem keys)"
        )
    else:
        log.info("API keys: scoped keys from the api_keys table (orgmem keys create|list|revoke)")
    return KeyStore(lambda: rt_of().pool, dev, ttl_s=s.api_key_cache_s)


def create_app(rt: Runtime) -> FastAPI:
    api_key = rt.settings.service_api_key.get_secret_value() if rt.settings.service_api_key else ""
    mcp_server = mcp.build_mcp_server(lambda: app.state.runtime, mcp.http_viewer)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # the MCP transport's sessions and the console's background work (lag sampler, jobs) live in the host app
        async with mcp_server.session_manager.run(), console.ops.running(app):
            yield

    docs = rt.settings.api_docs_mode()  # API_DOCS: public | keyed (X-Api-Key, checked at the door) | off
    served = docs != "off"
    app = FastAPI(
        title="Org Memory",
        version="0.1.0",
        description="Workplace memory for AI agents: viewer-scoped passages, facts and relationship paths.",
        lifespan=lifespan,
        openapi_url="/openapi.json" if served else None,
        docs_url="/docs" if served else None,
        redoc_url="/redoc" if served else None,
    )
    app.state.runtime = rt
    app.state.api_key = api_key  # "" without SERVICE_API_KEY (then only METRICS_TOKEN reads /metrics)
    keys = key_store(lambda: app.state.runtime)
    app.state.keys = keys
    app.state.api_docs = docs
    app.state.mcp_tokens = tuple(mcp.load_tokens(rt.settings.mcp_tokens_path))  # the door's pre-body check
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
    app.include_router(tools.router, responses=errors.responses(403, 404, 502))  # every catalogue tool
    app.include_router(graph.router, responses=errors.responses(404))
    app.include_router(admin.router, responses=errors.responses(403, 404))
    app.include_router(worldbuilder.router, responses=errors.responses(404))
    app.include_router(procedures.router, responses=errors.responses(403, 404))
    app.include_router(procedure_proposals.router, responses=errors.responses(403, 404, 409))
    app.include_router(taxonomy.router, responses=errors.responses(403, 404, 409))
    console.install(app)
    openapi.install(app)
    # outermost: authenticate and bound the body before anything reads it
    app.add_middleware(
        RequestLimits,
        keys=keys,
        max_bytes=rt.settings.max_request_bytes,
        statement_ms=rt.settings.api_statement_timeout_ms,
        body_timeout_s=rt.settings.request_body_timeout_s,
        docs_keyed=docs == "keyed",
    )
    return app
