"""FastAPI application factory. Clients come from the process ``Runtime``; routes never build clients."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from services.api import admin, graph, health, ingress, tools
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
    max_bytes = rt.settings.max_request_bytes

    @app.middleware("http")
    async def bound_and_measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > max_bytes:
            return JSONResponse(
                {"detail": {"field": "body", "msg": f"request body over {max_bytes} bytes"}}, status_code=413
            )
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        HTTP_LATENCY.labels(path).observe(time.perf_counter() - start)
        HTTP_REQUESTS.labels(path, request.method, str(response.status_code)).inc()
        return response

    app.include_router(health.router)
    app.include_router(ingress.router)
    app.include_router(tools.router)
    app.include_router(graph.router)
    app.include_router(admin.router)
    return app
