"""HTTP ingress: validate a ChangeEnvelope, produce it to ``om.envelopes.v1``, answer 202 with its offset.

Invalid input -> 422 naming the field at fault, and nothing is produced. The batch form validates
every envelope first and produces nothing unless all are valid.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request, status
from pydantic import ValidationError

from schemas.envelope import PRINCIPAL_RE, ChangeEnvelope
from services import tracing
from services.api.auth import require_service
from services.governance.audits import record_ingress
from services.metrics import INGRESS_ENVELOPES

router = APIRouter(prefix="/ingress", tags=["ingress"], dependencies=[Depends(require_service)])
MAX_BATCH = 1000


def _validate(raw: Any, index: int | None = None) -> ChangeEnvelope:
    try:
        env = ChangeEnvelope.model_validate(raw)
    except ValidationError as exc:
        INGRESS_ENVELOPES.labels("rejected").inc()
        errors = [
            {"field": ".".join(str(p) for p in e["loc"]) or "body", "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        detail: dict[str, Any] = {"field": errors[0]["field"], "errors": errors}
        if index is not None:
            detail["index"] = index
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail) from None
    if env.structured_fields and (env.author is None or not env.author.identity_keys()):
        INGRESS_ENVELOPES.labels("rejected").inc()
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={
                "field": "author",
                "index": index,
                "errors": [
                    {
                        "field": "author",
                        "msg": "structured_fields need an author with an email or identity key (unresolved author)",
                        "type": "unresolved_author",
                    }
                ],
            },
        )
    return env


async def _produce(request: Request, env: ChangeEnvelope) -> dict[str, Any]:
    rt = request.app.state.runtime
    meta = await rt.publisher.send(
        rt.settings.topic("envelopes"),
        env.model_dump_json().encode(),
        key=env.key.encode(),
        headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
    )
    INGRESS_ENVELOPES.labels("accepted").inc()
    meta_row = (env, meta.topic, meta.partition, meta.offset)
    request.state.ingress_rows = [*getattr(request.state, "ingress_rows", []), meta_row]
    return {
        "envelope_id": str(env.envelope_id),
        "key": env.key,
        "topic": meta.topic,
        "partition": meta.partition,
        "offset": meta.offset,
    }


def _caller(request: Request) -> str:
    """The calling service, and the human it acts for when the gateway named one (audited)."""
    pid = (request.headers.get("x-principal-id") or "").strip().lower()
    return f"service:{pid}" if PRINCIPAL_RE.match(pid) else "service"


async def _audit(request: Request) -> None:
    rows = getattr(request.state, "ingress_rows", [])
    caller = _caller(request)
    async with request.app.state.runtime.pool.acquire() as conn:
        await record_ingress(
            conn,
            [
                (
                    caller,
                    env.envelope_id,
                    env.workspace,
                    env.source.system,
                    env.source.external_id,
                    str(env.op.value),
                    t,
                    p,
                    o,
                )
                for env, t, p, o in rows
            ],
        )


@router.post("/envelope", status_code=status.HTTP_202_ACCEPTED)
async def post_envelope(request: Request, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    with tracing.span("ingress.envelope") as sp:
        env = _validate(body)
        tracing.set_attributes(sp, envelope_id=str(env.envelope_id), workspace=env.workspace, key=env.key)
        result = await _produce(request, env)
    await _audit(request)
    return result


@router.post("/envelopes", status_code=status.HTTP_202_ACCEPTED)
async def post_envelopes(
    request: Request, body: list[dict[str, Any]] = Body(..., max_length=MAX_BATCH)
) -> dict[str, Any]:
    envs = [_validate(raw, i) for i, raw in enumerate(body)]
    with tracing.span("ingress.envelopes") as sp:
        tracing.set_attributes(sp, count=len(envs))
        results = await asyncio.gather(*(_produce(request, e) for e in envs))
    await _audit(request)
    return {"accepted": len(results), "results": results}
