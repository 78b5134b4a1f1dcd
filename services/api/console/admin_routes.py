"""The JSON admin routes the console needed and the API lacked: ``/v1/admin/pipeline``,
``/v1/admin/dead-letters/<stage>`` (+ ``/redrive``), ``/v1/admin/replay``, ``/v1/admin/rebuild``, ``/v1/admin/jobs``,
``/v1/admin/why-not``; contracts in ``schemas/admin.py``."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, status

from schemas.admin import DeadLetterPage, Job, PipelineStatus, RedriveRequest, ReplayRequest, WhyNot
from services.api.console import jobs, ops, whynot
from services.api.console.params import WORKSPACE, Mode, _as_viewer, _aware, _replay_start, _unprocessable
from services.api.deps import AdminDep, runtime_of
from services.stages import replayable_stages

admin = APIRouter(prefix="/v1/admin", tags=["admin"])


@admin.get("/pipeline", response_model=PipelineStatus)
async def pipeline(request: Request, _: AdminDep) -> dict[str, Any]:
    """Per stage lag, records/s, oldest unprocessed age and dead letters waiting; lag samples of the last 15 min
    kept by this API process; the /readyz checks; paused stages and why; spend today against each budget."""
    return await ops.pipeline_status(request.app)


@admin.get("/dead-letters/{stage}", response_model=DeadLetterPage)
async def dead_letters(
    request: Request,
    _: AdminDep,
    stage: Annotated[str, Path(pattern=r"^[a-z_]{1,40}$")],
    error_class: Annotated[str | None, Query(max_length=200)] = None,
    include_redriven: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """``orgmem dlq list``: the stage's dead letters not yet redriven (``include_redriven`` for all), payloads
    pretty-printed and truncated; ``classes`` counts them per error class."""
    return await ops.dead_letter_page(
        runtime_of(request).settings,
        ops.known_stage(stage),
        error_class=error_class,
        limit=limit,
        include_redriven=include_redriven,
    )


@admin.post("/dead-letters/{stage}/redrive", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def redrive_dead_letters(
    request: Request, _: AdminDep, stage: Annotated[str, Path(pattern=r"^[a-z_]{1,40}$")], body: RedriveRequest
) -> dict[str, Any]:
    """``orgmem dlq redrive``: all of the stage's waiting dead letters, those of one class, or the one at
    ``position``; a job (poll ``/v1/admin/jobs/{id}``)."""
    job = await jobs.redrive_job(
        request.app,
        runtime_of(request).settings,
        ops.known_stage(stage),
        error_class=body.error_class or None,
        position=body.position or None,
        dry_run=body.dry_run,
    )
    return job.as_dict()


@admin.post("/replay", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def start_replay(request: Request, _: AdminDep, body: ReplayRequest) -> dict[str, Any]:
    """``orgmem replay <stage> --from earliest|<ISO time>`` as a job of this API process (one replay or rebuild
    at a time: 409 otherwise)."""
    if body.stage not in replayable_stages():
        raise _unprocessable("stage", f"cannot replay {body.stage!r}; stages: {', '.join(replayable_stages())}")
    job = await jobs.replay_job(request.app, runtime_of(request).settings, body.stage, _replay_start(body.start))
    return job.as_dict()


@admin.post("/rebuild", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def start_rebuild(request: Request, _: AdminDep) -> dict[str, Any]:
    """``orgmem rebuild`` as a job of this API process: a fresh generation, switched in once caught up."""
    return (await jobs.rebuild_job(request.app, runtime_of(request).settings)).as_dict()


@admin.get("/jobs", response_model=list[Job])
async def list_jobs(request: Request, _: AdminDep) -> list[dict[str, Any]]:
    """Redrive, replay and rebuild jobs of this API process, newest first."""
    listed = sorted(ops.state_of(request.app).jobs.values(), key=lambda j: j.started_at, reverse=True)
    return [j.as_dict() for j in listed]


@admin.get("/jobs/{job_id}", response_model=Job)
async def get_job(request: Request, _: AdminDep, job_id: uuid.UUID) -> dict[str, Any]:
    return jobs.get_job(request.app, job_id).as_dict()


@admin.get("/why-not", response_model=WhyNot)
async def why_not(
    request: Request,
    _: AdminDep,
    external_id: Annotated[str, Query(min_length=1, max_length=1000)],
    query: Annotated[str, Query(min_length=1, max_length=2000)],
    viewer: Annotated[str | None, Query(max_length=200)] = None,
    groups: Annotated[str | None, Query(max_length=30_000)] = None,
    source_system: Annotated[str | None, Query(max_length=200)] = None,
    workspace: Annotated[str, Query(pattern=WORKSPACE)] = "default",
    mode: Mode = "vector_first",
    as_of: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> dict[str, Any]:
    """ "Why not this document?": may the viewer see it (since when, from the permission history), did an arm find
    it, at which rank did it fall out and which step dropped it. Searches run as the viewer (and are audited)."""
    return await whynot.why_not(
        runtime_of(request),
        await _as_viewer(request, viewer, groups),
        external_id=external_id,
        source_system=source_system,
        workspace=workspace,
        query=query,
        mode=mode,
        as_of=_aware(as_of, "as_of"),
        limit=limit,
    )
