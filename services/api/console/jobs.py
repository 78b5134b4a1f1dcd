"""The console's jobs: ``services.ops.replay.replay`` / ``services.ops.rebuild.rebuild`` / ``services.ops.dlq.redrive``
run as tasks of the API process, their progress reported from the lag as the CLI's progress bar is; and the
active generation they act on."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, HTTPException, status

from services import generations
from services.api.console.ops import SCAN_LIMIT, dead_letter_page, state_of
from services.settings import Settings

log = logging.getLogger("services.api.console.ops")  # the console's one logger
MAX_JOBS = 50


@dataclass
class Job:
    id: uuid.UUID
    kind: str
    stage: str | None
    state: str = "running"
    done: int = 0
    total: int | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    detail: dict[str, str | int | float | None] = field(default_factory=dict)
    error: str | None = None
    task: asyncio.Task[None] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "stage": self.stage,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "detail": dict(self.detail),
            "error": self.error,
        }

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total


def start_job(
    app: FastAPI, kind: str, stage: str | None, work: Callable[[Job], Awaitable[None]], *, exclusive: bool
) -> Job:
    st = state_of(app)
    if exclusive:
        busy = [j for j in st.jobs.values() if j.state == "running" and j.kind in ("replay", "rebuild")]
        if busy:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                detail={"field": "kind", "msg": f"a {busy[0].kind} is running (job {busy[0].id}); wait for it"},
            )
    job = Job(uuid.uuid4(), kind, stage)

    async def run() -> None:
        try:
            await work(job)
            job.state = "done"
        except asyncio.CancelledError:
            job.state, job.error = "failed", "cancelled (the API process stopped)"
            raise
        except BaseException as exc:  # a job reports its failure; SystemExit is how the ops functions refuse
            job.state, job.error = "failed", f"{type(exc).__name__}: {exc}"[:500]
            log.warning("console job %s %s failed: %s", kind, job.id, job.error)
        finally:
            job.finished_at = datetime.now(UTC)

    job.task = asyncio.create_task(run())
    st.jobs[job.id] = job
    for old in sorted(st.jobs.values(), key=lambda j: j.started_at)[: max(0, len(st.jobs) - MAX_JOBS)]:
        if old.state != "running":
            st.jobs.pop(old.id, None)
    return job


def get_job(app: FastAPI, job_id: uuid.UUID) -> Job:
    job = state_of(app).jobs.get(job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "job_id", "msg": "no such job"})
    return job


async def redrive_job(
    app: FastAPI, settings: Settings, stage: str, *, error_class: str | None, position: str | None, dry_run: bool
) -> Job:
    from services.ops.dlq import redrive

    page = await dead_letter_page(settings, stage, error_class=error_class, limit=SCAN_LIMIT, include_redriven=False)
    matching = [i for i in page["items"] if position in (None, i["position"])]
    if position and not matching:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, detail={"field": "position", "msg": "no dead letter waiting at this position"}
        )

    async def work(job: Job) -> None:
        job.total = len(matching)
        job.detail = {"error_class": error_class, "position": position, "dry_run": int(dry_run)}
        sent = await redrive(settings, stage, error_class=error_class, dry_run=dry_run, position=position)
        job.done = sent
        job.detail["sent"] = sent
        if not dry_run:
            for item in matching:
                state_of(app).redriven[item["position"]] = datetime.now(UTC)

    return start_job(app, "redrive", stage, work, exclusive=False)


async def replay_job(app: FastAPI, settings: Settings, stage: str, start: datetime | None) -> Job:
    from services.ops.replay import replay

    async def work(job: Job) -> None:
        job.detail = {"from": start.isoformat() if start else "earliest"}
        result = await replay(settings, stage, start=start, progress=job.progress)
        job.done = result.records
        job.detail |= {
            "records": result.records,
            "seconds": round(result.seconds, 2),
            "per_second": round(result.per_second, 1),
            "dead_lettered": result.dead_lettered,
        }

    return start_job(app, "replay", stage, work, exclusive=True)


async def base_settings(settings: Settings) -> Settings:
    """The deployment's base settings (``rebuild`` picks the next generation from them)."""
    if not settings.generation:
        return settings
    import asyncpg

    conn = await asyncpg.connect(settings.database_url)
    try:
        row = await conn.fetchrow(
            "SELECT base_schema FROM public.orgmem_generations WHERE db_schema = $1", settings.db_schema
        )
    finally:
        await conn.close()
    if row is None:
        raise HTTPException(status.HTTP_409_CONFLICT, detail={"field": "generation", "msg": "unknown base schema"})
    return settings.model_copy(
        update={
            "db_schema": row["base_schema"],
            "group_prefix": settings.group_prefix.removesuffix(f"{settings.generation}-"),
            "generation": "",
        }
    )


async def rebuild_job(app: FastAPI, settings: Settings) -> Job:
    from services.ops.rebuild import rebuild

    base = await base_settings(settings)

    async def work(job: Job) -> None:
        result = await rebuild(base, progress=job.progress)
        job.detail = {
            "generation": result.generation,
            "db_schema": result.db_schema,
            "envelopes": result.envelopes,
            "seconds": round(result.seconds, 1),
        }

    return start_job(app, "rebuild", None, work, exclusive=True)


async def active_generation(settings: Settings) -> dict[str, str]:
    resolved = await generations.resolve(settings)
    return {"generation": resolved.generation, "db_schema": resolved.db_schema}
