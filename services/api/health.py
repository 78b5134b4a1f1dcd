"""``/healthz`` (process up), ``/readyz`` (dependencies), ``/metrics`` (Prometheus), ``/asyncapi``."""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.api.errors import ErrorBody, error_response
from services.health import readiness
from services.metrics import CONSUMER_LAG, REGISTRY
from services.stages import available_stages, specification_broker, stage_lag

LAG_TTL_S = 15.0

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
    if rt.read_pool is not None and rt.read_pool.replica is not None:
        try:
            body["checks"]["read_replica"] = {"ok": True, "detail": await rt.read_pool.check()}
        except Exception as exc:  # the replica being down degrades reads to the primary; ready, and says so
            body["checks"]["read_replica"] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}
        body["reads"] = rt.read_pool.status()
    return JSONResponse(body, status_code=200 if not down and not paused else 503)


async def _metrics_caller_ok(request: Request) -> bool:
    """``X-Api-Key`` with the ``admin`` scope (the dev key has it), or ``Authorization: Bearer <METRICS_TOKEN>``
    (which needs no database: scrapes keep working while the key table is unreachable)."""
    try:
        cred = await request.app.state.keys.authenticate(request.headers.get("x-api-key"))
    except Exception:  # the key table is down: only the metrics token can still be checked
        cred = None
    if cred is not None and cred.has("admin"):
        return True
    token = request.app.state.runtime.settings.metrics_token
    auth = request.headers.get("authorization", "")
    if token is not None and auth.lower().startswith("bearer "):
        return hmac.compare_digest(auth[7:].strip().encode(), token.get_secret_value().encode())
    return False


async def _refresh_lag(state: Any) -> None:
    """Consumer lag per stage of this deployment, at most every ``LAG_TTL_S`` per app (a scrape never waits
    long); the time of the last sample lives on the app, so two apps in one process do not share it."""
    rt = state.runtime
    if time.monotonic() - getattr(state, "lag_sampled_at", float("-inf")) < LAG_TTL_S:
        return
    state.lag_sampled_at = time.monotonic()
    for stage in rt.stages or available_stages():
        try:
            lag = await asyncio.wait_for(stage_lag(rt.settings, stage), 5)
        except Exception:  # a scrape reports what it can; the gauge keeps its last value
            continue
        CONSUMER_LAG.labels(stage).set(lag.lag)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition",
            "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
        },
        401: {"model": ErrorBody, "description": "neither X-Api-Key nor Authorization: Bearer $METRICS_TOKEN"},
    },
)
async def metrics(request: Request) -> Response:
    if not await _metrics_caller_ok(request):
        msg = "missing or invalid X-Api-Key or METRICS_TOKEN bearer"
        return error_response(401, {"field": "X-Api-Key", "msg": msg})
    await _refresh_lag(request.app.state)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/asyncapi")
async def asyncapi(request: Request) -> JSONResponse:
    """FastStream's AsyncAPI 3.0 document of every topic and payload this deployment knows (the catalogue's).
    Not served with ``API_DOCS=off``; behind ``X-Api-Key`` with ``keyed`` (checked at the door)."""
    from faststream.specification import AsyncAPI

    if getattr(request.app.state, "api_docs", "public") == "off":
        return error_response(404, {"field": "path", "msg": "API documents are not served (API_DOCS=off)"})
    rt = request.app.state.runtime
    spec = AsyncAPI(
        specification_broker(rt.settings),
        title="Org Memory",
        version="0.1.0",
        description="Topics and payloads of the Org Memory pipeline",
    ).to_specification()
    return JSONResponse(spec.to_jsonable())
