"""``/healthz`` (process up), ``/readyz`` (dependencies), ``/metrics`` (Prometheus), ``/asyncapi``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.health import readiness
from services.metrics import REGISTRY
from services.stages import specification_broker

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    rt = request.app.state.runtime
    checks = await readiness(rt.pool, rt.store, rt.settings.kafka_bootstrap_servers)
    down = [c.name for c in checks if not c.ok]
    paused = {stage: w.state() for stage, w in rt.watches.items() if w.paused}
    body: dict[str, Any] = {
        "status": "ready" if not down and not paused else "unavailable",
        "down": down,
        "checks": {c.name: {"ok": c.ok, "detail": c.detail, "latency_ms": round(c.latency_ms, 1)} for c in checks},
        "stages": rt.stages,
        # a stage whose dependency is down waits it out (no offset moves, nothing dead-lettered), then resumes
        "paused": paused,
    }
    return JSONResponse(body, status_code=200 if not down and not paused else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition",
            "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
        }
    },
)
async def metrics() -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/asyncapi")
async def asyncapi(request: Request) -> JSONResponse:
    """FastStream's AsyncAPI 3.0 document of every topic and payload this deployment knows (the catalogue's)."""
    from faststream.specification import AsyncAPI

    rt = request.app.state.runtime
    spec = AsyncAPI(
        specification_broker(rt.settings),
        title="Org Memory",
        version="0.1.0",
        description="Topics and payloads of the Org Memory pipeline",
    ).to_specification()
    return JSONResponse(spec.to_jsonable())
