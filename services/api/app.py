"""FastAPI application factory. Clients come from the process ``Runtime``; routes never build clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from services.api import errors, graph, health, ingress, openapi, procedures, taxonomy, tools, worldbuilder
from services.api.limits import RequestLimits
from services.metrics import HTTP_LATENCY, HTTP_REQUESTS
from services.runtime import Runtime


def create_app(rt: Runtime) -> FastAPI:
    api_key = rt.settings.require_api_key().get_secret_value()
    app = FastAPI(
        title="Org Memory",
        version="0.1.0",
        description="Workplace memory for AI agents: viewer-scoped passages, facts and relationship paths.",
    )
    app.state.runtime = rt
    app.state.api_key = api_key
    app.state.graph_walk_slots = asyncio.Semaphore(rt.settings.graph_walk_concurrency)  # see graph.query_paths
    errors.install(app)

    @app.middleware("http")
    async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        HTTP_LATENCY.labels(path).observe(time.perf_counter() - start)
        HTTP_REQUESTS.labels(path, request.method, str(response.status_code)).inc()
        return response

    app.include_router(health.router)
    app.include_router(ingress.router, responses=errors.responses(409))
    app.include_router(tools.router, responses=errors.responses(502))
    app.include_router(graph.router, responses=errors.responses(404))
    app.include_router(worldbuilder.router, responses=errors.responses(404))
    app.include_router(procedures.router, responses=errors.responses(404))
    app.include_router(taxonomy.router, responses=errors.responses(404, 409))
    openapi.install(app)
    # outermost: authenticate and bound the body before anything reads it
    app.add_middleware(
        RequestLimits,
        api_key=api_key,
        max_bytes=rt.settings.max_request_bytes,
        statement_ms=rt.settings.api_statement_timeout_ms,
    )
    return app
