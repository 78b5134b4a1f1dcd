"""HTTP ingress: validate a ChangeEnvelope, produce it to ``om.envelopes.v1``, answer 202 with its offset.

Invalid input -> 422 naming the field at fault, and nothing is produced; an ``envelope_id`` already bound
to different content -> 409 (``services.idempotency``). The batch form validates
every envelope first and produces nothing unless all are valid.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Request, status
from pydantic import ValidationError

from schemas.envelope import ChangeEnvelope
from services.api.auth import require_service
from services.idempotency import conflicting_envelopes
from services.metrics import INGRESS_ENVELOPES
from services.payload_errors import field_errors

router = APIRouter(prefix="/ingress", tags=["ingress"], dependencies=[Depends(require_service)])
MAX_BATCH = 1000


def _validate(raw: Any, index: int | None = None) -> ChangeEnvelope:
    try:
        env = ChangeEnvelope.model_validate(raw)
    except ValidationError as exc:
        INGRESS_ENVELOPES.labels("rejected").inc()
        errors = field_errors(exc)
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
    return {
        "envelope_id": str(env.envelope_id),
        "key": env.key,
        "topic": meta.topic,
        "partition": meta.partition,
        "offset": meta.offset,
    }


async def _refuse_reused_ids(request: Request, envs: list[ChangeEnvelope]) -> None:
    """409 if an envelope_id (the idempotency key) is already bound to different content."""
    async with request.app.state.runtime.pool.acquire() as conn:
        clashes = await conflicting_envelopes(conn, envs)
    if clashes:
        INGRESS_ENVELOPES.labels("rejected").inc()
        msg = "envelope_id was already used for different content (an idempotency key: resend the same content)"
        errors = [{"field": "envelope_id", "msg": msg, "type": "idempotency_conflict", "index": i} for i in clashes]
        detail: dict[str, Any] = {"field": "envelope_id", "errors": errors}
        if len(envs) > 1:
            detail["index"] = clashes[0]
        raise HTTPException(status.HTTP_409_CONFLICT, detail=detail)


@router.post("/envelope", status_code=status.HTTP_202_ACCEPTED)
async def post_envelope(request: Request, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    env = _validate(body)
    await _refuse_reused_ids(request, [env])
    return await _produce(request, env)


@router.post("/envelopes", status_code=status.HTTP_202_ACCEPTED)
async def post_envelopes(
    request: Request, body: list[dict[str, Any]] = Body(..., max_length=MAX_BATCH)
) -> dict[str, Any]:
    envs = [_validate(raw, i) for i, raw in enumerate(body)]
    await _refuse_reused_ids(request, envs)
    results = await asyncio.gather(*(_produce(request, e) for e in envs))
    return {"accepted": len(results), "results": results}
