"""``/v1/admin/console/*``: the console's data rendered as HTML fragments for its pages (pipeline, dead letters,
jobs, playground, why-not, governance, who-saw, graph)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from services.api.console import jobs, ops, whynot
from services.api.console.params import WORKSPACE, Mode, _as_of, _as_viewer, _replay_start, _unprocessable
from services.api.console.render import HTML, _fragment, graph_layout, timeline
from services.api.deps import AdminDep, runtime_of
from services.governance import access, audits, holds, retention_policies
from services.stages import replayable_stages

fragments = APIRouter(prefix="/v1/admin/console", tags=["console"])


@fragments.get("/pipeline", **HTML)
async def pipeline_fragment(request: Request, _: AdminDep) -> HTMLResponse:
    data = await ops.pipeline_status(request.app)
    lines = {s["stage"]: ops.sparkline(data["history"], s["stage"]) for s in data["stages"]}
    return _fragment("pipeline.html", d=data, lines=lines)


@fragments.get("/dead-letters", **HTML)
async def dead_letters_fragment(
    request: Request,
    _: AdminDep,
    stage: Annotated[str, Query(pattern=r"^[a-z_]{1,40}$")] = "ingest",
    error_class: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    page = await ops.dead_letter_page(
        runtime_of(request).settings,
        ops.known_stage(stage),
        error_class=error_class or None,
        limit=100,
        include_redriven=False,
    )
    redriven = ops.state_of(request.app).redriven
    return _fragment("dead_letters.html", p=page, error_class=error_class or "", redriven=redriven)


class RedriveForm(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stage: str = Field(pattern=r"^[a-z_]{1,40}$")
    error_class: str | None = Field(default=None, max_length=200)
    position: str | None = Field(default=None, max_length=400)


@fragments.post("/redrive", **HTML)
async def redrive_fragment(request: Request, _: AdminDep, body: RedriveForm) -> HTMLResponse:
    job = await jobs.redrive_job(
        request.app,
        runtime_of(request).settings,
        ops.known_stage(body.stage),
        error_class=body.error_class or None,
        position=body.position or None,
        dry_run=False,
    )
    return _fragment("job.html", job=job.as_dict())


class ReplayForm(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stage: str = Field(pattern=r"^[a-z_]{1,40}$")
    start: str = Field(default="earliest", max_length=64)


@fragments.post("/replay", **HTML)
async def replay_fragment(request: Request, _: AdminDep, body: ReplayForm) -> HTMLResponse:
    if body.stage not in replayable_stages():
        raise _unprocessable("stage", f"cannot replay {body.stage!r}")
    job = await jobs.replay_job(
        request.app, runtime_of(request).settings, body.stage, _replay_start(body.start or "earliest")
    )
    return _fragment("job.html", job=job.as_dict())


@fragments.post("/rebuild", **HTML)
async def rebuild_fragment(request: Request, _: AdminDep) -> HTMLResponse:
    job = await jobs.rebuild_job(request.app, runtime_of(request).settings)
    return _fragment("job.html", job=job.as_dict())


@fragments.get("/jobs/{job_id}", **HTML)
async def job_fragment(request: Request, _: AdminDep, job_id: uuid.UUID) -> HTMLResponse:
    return _fragment("job.html", job=jobs.get_job(request.app, job_id).as_dict())


@fragments.get("/jobs", **HTML)
async def jobs_fragment(request: Request, _: AdminDep) -> HTMLResponse:
    listed = sorted(ops.state_of(request.app).jobs.values(), key=lambda j: j.started_at, reverse=True)
    generation = await jobs.active_generation(runtime_of(request).settings)
    return _fragment("jobs.html", jobs=[j.as_dict() for j in listed], generation=generation)


class PlaygroundForm(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=2000)
    viewer: str | None = Field(default=None, max_length=200)
    groups: str | None = Field(default=None, max_length=30_000)
    workspace: str = Field(default="default", pattern=WORKSPACE)
    mode: Mode = "vector_first"
    as_of: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=10, ge=1, le=50)
    external_id: str | None = Field(default=None, max_length=1000)
    about: str | None = Field(default=None, max_length=200, description="a graph seed by name")


@fragments.post("/playground", **HTML)
async def playground_fragment(request: Request, _: AdminDep, body: PlaygroundForm) -> HTMLResponse:
    """``retrieve_context`` as the viewer given in the form, rendered with its diagnostics."""
    from retriever.rpc import error_status
    from retriever.wiring import get_service
    from services.errors import OrgMemoryError

    viewer = await _as_viewer(request, body.viewer, body.groups)
    req = whynot.with_diagnostics(
        query=body.query,
        workspace=body.workspace,
        mode=body.mode,
        as_of=_as_of(body.as_of),
        limit=body.limit,
        **({"about": body.about.strip()} if body.about and body.about.strip() else {}),
    )
    try:
        resp = await get_service(runtime_of(request)).retrieve_context(req, viewer)
    except OrgMemoryError as exc:
        code, detail = error_status(exc)
        raise HTTPException(code, detail=detail) from exc
    diag = resp.diagnostics
    fusion = diag.get("fusion") or {}
    rows = [
        {
            "rank": i,
            "p": p,
            "ranks": (fusion.get("arm_ranks") or {}).get(str(p.chunk_id), p.channel_ranks),
            "fused": (fusion.get("fused") or {}).get(str(p.chunk_id)),
            "boosts": (fusion.get("boosts") or {}).get(str(p.chunk_id), {}),
        }
        for i, p in enumerate(resp.passages, start=1)
    ]
    return _fragment(
        "playground.html",
        resp=resp,
        rows=rows,
        diag=diag,
        fusion=fusion,
        packing=diag.get("packing") or {},
        graph=graph_layout(resp.structured_facts, resp.paths),
        viewer=viewer,
    )


@fragments.post("/why-not", **HTML)
async def why_not_fragment(request: Request, _: AdminDep, body: PlaygroundForm) -> HTMLResponse:
    if not body.external_id:
        raise _unprocessable("external_id", "give the external id of the document")
    result = await whynot.why_not(
        runtime_of(request),
        await _as_viewer(request, body.viewer, body.groups),
        external_id=body.external_id,
        source_system=None,
        workspace=body.workspace,
        query=body.query,
        mode=body.mode,
        as_of=_as_of(body.as_of),
        limit=body.limit,
    )
    return _fragment("why_not.html", w=result)


@fragments.get("/governance", **HTML)
async def governance_fragment(
    request: Request, _: AdminDep, workspace: Annotated[str | None, Query(pattern=WORKSPACE)] = None
) -> HTMLResponse:
    async with runtime_of(request).pool.acquire() as conn:
        policies = await retention_policies.policies(conn, workspace or None)
        held = await holds.list_holds(conn, workspace=workspace or None, include_released=True)
    return _fragment("governance.html", policies=policies, holds=held)


@fragments.get("/who-saw", **HTML)
async def who_saw_fragment(
    request: Request,
    _: AdminDep,
    external_id: Annotated[str, Query(min_length=1, max_length=1000)],
    workspace: Annotated[str, Query(pattern=WORKSPACE)] = "default",
) -> HTMLResponse:
    """ "Who saw D" (retrieval audits naming the document) and its permission history, by external id."""
    at = datetime.now(UTC)
    async with runtime_of(request).pool.acquire() as conn:
        docs = await conn.fetch(
            "SELECT id, source_system, title FROM documents WHERE workspace = $1 AND external_id = $2 LIMIT 5",
            workspace,
            external_id,
        )
        found = []
        for d in docs:
            found.append(
                {
                    "doc": dict(d),
                    "access": await access.document_access(conn, d["id"], at),
                    "audits": await audits.retrievals(conn, audits.Window(), document=d["id"], workspace=workspace),
                }
            )
    return _fragment("who_saw.html", found=found, external_id=external_id)


@fragments.get("/graph", **HTML)
async def graph_fragment(
    request: Request,
    _: AdminDep,
    entity: uuid.UUID,
    kind: Literal["person", "entity"] = "person",
    viewer: Annotated[str | None, Query(max_length=200)] = None,
    groups: Annotated[str | None, Query(max_length=30_000)] = None,
    workspace: Annotated[str, Query(pattern=WORKSPACE)] = "default",
) -> HTMLResponse:
    """A person or entity card as the viewer sees it, its facts on a valid_from/valid_to timeline."""
    from retriever.graph import cards

    rt = runtime_of(request)
    principals = (await _as_viewer(request, viewer, groups)).expand(rt.hierarchy)
    load = cards.person_card if kind == "person" else cards.entity_card
    key = "person_id" if kind == "person" else "entity_id"
    async with rt.pool.acquire() as conn:
        card = await load(
            conn, workspace=workspace, viewer=principals, as_of=None, believed_as_of=None, as_of_grain=None,
            **{key: entity},
        )  # fmt: skip
    if card is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "entity", "msg": "no visible " + kind})
    return _fragment("graph.html", card=card, timeline=timeline([*card.facts, *card.incoming]))
