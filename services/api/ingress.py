"""HTTP ingress: validate a ChangeEnvelope, produce it to ``om.envelopes.v1``, answer 202 with its offset.

Validation is ``schemas.envelope.validate_envelope`` — the very function the ingest stage applies to the
record — on the JSON parsed the way ingest parses it, so a 202 means the envelope will be ingested.
Invalid input -> 422 naming the field at fault, and nothing is produced; an ``envelope_id`` already bound
to different content -> 409 (``services.idempotency``). The batch form validates
every envelope first and produces nothing unless all are valid.

The door needs a key with the ``ingest`` scope; an envelope with ``op: membership`` (an org directory
change: who is in which group, hence who sees what) needs the ``directory`` scope too — else 403 naming
``op`` (and the batch index), nothing produced. A workspace-bound key ingests into its workspace only
(``services.api.limits``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, status

from schemas.envelope import PRINCIPAL_RE, ChangeEnvelope, Op, validate_envelope
from schemas.validation import Rejected, load_json
from services import tracing
from services.api.auth import CREDENTIAL_STATE, credential_of, require_service
from services.credentials import Credential
from services.governance.audits import record_ingress
from services.idempotency import bind_at_door, release_door_binding
from services.metrics import INGRESS_ENVELOPES

T = TypeVar("T")
log = logging.getLogger("orgmem.api.ingress")
router = APIRouter(prefix="/ingress", tags=["ingress"], dependencies=[Depends(require_service)])
MAX_BATCH = 1000
ENVELOPE_SCHEMA: dict[str, Any] = {"$ref": "#/components/schemas/ChangeEnvelope"}


class ProduceTimeout(HTTPException):
    """The broker did not acknowledge in time; the record may still land (resend the same content: idempotent)."""

    def __init__(self, seconds: float) -> None:
        msg = f"the broker did not acknowledge within {seconds:g} s; resend the same envelope (idempotent)"
        super().__init__(
            503, detail={"field": "broker", "msg": msg, "type": "unavailable"}, headers={"Retry-After": "1"}
        )


def _rejected(exc: Rejected, index: int | None = None) -> HTTPException:
    INGRESS_ENVELOPES.labels("rejected").inc()
    detail: dict[str, Any] = {"field": exc.field, "errors": exc.errors}
    if index is not None:
        detail["index"] = index
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)


async def _body(request: Request) -> Any:
    """The body as the door parsed it (``services.api.limits``), else parsed here the same way."""
    parsed = getattr(request.state, "json_body", None)
    if parsed is not None:
        return parsed
    try:
        return load_json(await request.body())
    except Rejected as exc:
        raise _rejected(exc) from None


def _validate(raw: Any, index: int | None = None) -> ChangeEnvelope:
    try:
        return validate_envelope(raw, prefix="" if index is None else str(index))
    except Rejected as exc:
        raise _rejected(exc, index) from None


async def _produce(request: Request, env: ChangeEnvelope) -> dict[str, Any]:
    rt = request.app.state.runtime
    limit = rt.settings.ingress_produce_timeout_s
    try:
        meta = await asyncio.wait_for(
            rt.publisher.send(
                rt.settings.topic("envelopes"),
                env.model_dump_json().encode(),
                key=env.key.encode(),
                headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
            ),
            limit,
        )
    except TimeoutError:  # a broker that does not answer: fail fast instead of the client's own timeout
        raise ProduceTimeout(limit) from None
    INGRESS_ENVELOPES.labels("accepted").inc()
    request.state.ingress_rows = [*getattr(request.state, "ingress_rows", []), (env, meta)]
    return {
        "envelope_id": str(env.envelope_id),
        "key": env.key,
        "topic": meta.topic,
        "partition": meta.partition,
        "offset": meta.offset,
    }


async def _refuse_unscoped(request: Request, envs: list[ChangeEnvelope], batch: bool) -> None:
    """403 naming ``op`` for a membership envelope from a key without the ``directory`` scope."""
    cred = await credential_of(request, request.headers.get("x-api-key"))
    if cred.has("directory"):
        return
    for i, env in enumerate(envs):
        if env.op is Op.MEMBERSHIP:
            INGRESS_ENVELOPES.labels("rejected").inc()
            msg = "op 'membership' changes the org directory: it needs an API key with the 'directory' scope"
            field = f"{i}.op" if batch else "op"
            detail: dict[str, Any] = {"field": field, "msg": msg, "type": "missing_scope"}
            if batch:
                detail["index"] = i
            raise HTTPException(status.HTTP_403_FORBIDDEN, detail=detail)


async def _refuse_reused_ids(request: Request, envs: list[ChangeEnvelope]) -> None:
    """409 if an envelope_id (the idempotency key) is already bound to different content — ingested, or
    accepted here before and not ingested yet; else the ids are bound to this content now."""
    async with request.app.state.runtime.pool.acquire() as conn:
        clashes, bound = await bind_at_door(conn, envs)
    request.state.door_bound = bound
    if clashes:
        INGRESS_ENVELOPES.labels("rejected").inc()
        msg = "envelope_id was already used for different content (an idempotency key: resend the same content)"
        errors = [{"field": "envelope_id", "msg": msg, "type": "idempotency_conflict", "index": i} for i in clashes]
        detail: dict[str, Any] = {"field": "envelope_id", "errors": errors}
        if len(envs) > 1:
            detail["index"] = clashes[0]
        raise HTTPException(status.HTTP_409_CONFLICT, detail=detail)


async def _released_on_failure(request: Request, produce: Awaitable[T]) -> T:
    """Run ``produce``; if it fails, the ids bound for envelopes that were not produced are released (a
    resend with other content is then not a conflict with something that never reached the log)."""
    try:
        return await produce
    except ProduceTimeout:
        raise  # maybe produced after all: the ids stay bound to this content
    except BaseException:
        produced = {str(e.envelope_id) for e, _ in getattr(request.state, "ingress_rows", [])}
        orphans = [k for k in getattr(request.state, "door_bound", []) if k not in produced]
        if orphans:
            try:
                async with request.app.state.runtime.pool.acquire() as conn:
                    await release_door_binding(conn, orphans)
            except Exception:  # the database may be what failed; the binding then stays (same content still 202)
                log.warning("could not release %d door bindings", len(orphans))
        raise


def _caller(request: Request) -> str:
    """The calling service — ``service`` for the dev key, ``key:<id>`` for a scoped key — and the human it
    acts for when the gateway named one (audited)."""
    cred = (request.scope.get("state") or {}).get(CREDENTIAL_STATE)
    who = f"key:{cred.key_id}" if isinstance(cred, Credential) and not cred.dev else "service"
    pid = (request.headers.get("x-principal-id") or "").strip().lower()
    return f"{who}:{pid}" if PRINCIPAL_RE.match(pid) else who


async def _audit(request: Request) -> None:
    """One ``ingress_audit`` row per produced envelope (``GET /v1/admin/audits/ingress``)."""
    caller = _caller(request)
    rows = [
        (
            caller,
            e.envelope_id,
            e.workspace,
            e.source.system,
            e.source.external_id,
            e.op.value,
            m.topic,
            m.partition,
            m.offset,
        )
        for e, m in getattr(request.state, "ingress_rows", [])
    ]
    async with request.app.state.runtime.pool.acquire() as conn:
        await record_ingress(conn, rows)


@router.post(
    "/envelope",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": ENVELOPE_SCHEMA}}}},
)
async def post_envelope(request: Request) -> dict[str, Any]:
    with tracing.span("ingress.envelope") as sp:
        env = _validate(await _body(request))
        tracing.set_attributes(sp, envelope_id=str(env.envelope_id), workspace=env.workspace, key=env.key)
        await _refuse_unscoped(request, [env], batch=False)
        await _refuse_reused_ids(request, [env])
        result = await _released_on_failure(request, _produce(request, env))
    await _audit(request)
    return result


@router.post(
    "/envelopes",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "array", "items": ENVELOPE_SCHEMA, "minItems": 0, "maxItems": MAX_BATCH}
                }
            },
        }
    },
)
async def post_envelopes(request: Request) -> dict[str, Any]:
    body = await _body(request)
    if not isinstance(body, list):
        raise _rejected(Rejected([{"field": "body", "msg": "expected a JSON array", "type": "list_type"}]))
    if len(body) > MAX_BATCH:
        raise _rejected(Rejected([{"field": "body", "msg": f"at most {MAX_BATCH} envelopes", "type": "too_long"}]))
    envs = [_validate(raw, i) for i, raw in enumerate(body)]
    await _refuse_unscoped(request, envs, batch=True)
    await _refuse_reused_ids(request, envs)
    with tracing.span("ingress.envelopes") as sp:
        tracing.set_attributes(sp, count=len(envs))
        results = await _released_on_failure(request, asyncio.gather(*(_produce(request, e) for e in envs)))
    await _audit(request)
    return {"accepted": len(results), "results": results}
