"""What the operator console's admin routes compute, from the functions the CLI uses.

- pipeline status: ``services.governance.health.stage_health`` (lag, records/s, oldest unprocessed age, dead
  letters waiting — as ``GET /v1/admin/health``), the ``/readyz`` checks, the paused stages of this process,
  spend against budgets; every computation appends a lag sample to a ring buffer kept in the API process
  (15 minutes), sampled in the background while the console is in use;
- dead letters: ``services.ops.dlq`` (``orgmem dlq list|redrive``);
- jobs: ``services.ops.replay.replay`` / ``services.ops.rebuild.rebuild`` / ``services.ops.dlq.redrive`` run as
  tasks of the API process, their progress reported from the lag as the CLI's progress bar is;
- why-not: the permission history (``services.governance.access``) and the retriever's own diagnostics
  from searches run as the viewer (no search ever runs with more than the viewer's principals).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, HTTPException, status

from retriever.wiring import get_service
from schemas.tools import MAX_LIMIT, RetrieveContextRequest, SearchKnowledgeBaseRequest
from services import generations
from services.governance import access
from services.governance.health import stage_health
from services.health import readiness
from services.runtime import Runtime
from services.settings import Settings
from services.stages import CATALOGUE
from services.viewer import Viewer

log = logging.getLogger(__name__)

HISTORY_S = 15 * 60
LIVE_S = 2.0  # sampling period while a console is open (polled in the last minute)
WATCHING_S = 60.0
IDLE_SAMPLE_S = 10.0  # afterwards, until 15 minutes after the last visit
CACHE_S = 1.0
PAYLOAD_CHARS = 4_000
MAX_JOBS = 50
SCAN_LIMIT = 5_000  # dead letters read per listing (topic and Postgres each)


# --- pipeline status and the lag ring buffer --------------------------------------------------------------


@dataclass
class ConsoleState:
    """Per app: lag samples (oldest first), the last status, jobs, and when the console was last used."""

    history: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=int(HISTORY_S / 2) + 1))
    last: dict[str, Any] | None = None
    last_at: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    seen_at: float = float("-inf")
    sampling: bool = False
    jobs: dict[uuid.UUID, Job] = field(default_factory=dict)
    redriven: dict[str, datetime] = field(default_factory=dict)


def state_of(app: FastAPI) -> ConsoleState:
    st: ConsoleState | None = getattr(app.state, "console", None)
    if st is None:
        st = app.state.console = ConsoleState()
    return st


async def _budget_use(rt: Runtime) -> list[dict[str, Any]]:
    from services.governance.budgets import alert_level

    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT b.workspace, b.model, b.daily_tokens,"
            " (SELECT COALESCE(sum(s.tokens), 0) FROM spend s WHERE s.day = current_date AND s.workspace = b.workspace"
            "  AND s.purpose <> 'embed' AND (b.model = '*' OR s.model = b.model)) AS tokens"
            " FROM budgets b ORDER BY b.workspace, b.model"
        )
    out = []
    for r in rows:
        budget, used = int(r["daily_tokens"]), int(r["tokens"])
        out.append(
            {
                "workspace": r["workspace"],
                "model": r["model"],
                "daily_tokens": budget,
                "tokens_today": used,
                "ratio": round(used / budget, 4) if budget else 1.0,
                "level": alert_level(used, budget),
            }
        )
    return out


async def _compute(rt: Runtime) -> dict[str, Any]:
    checks = await readiness(rt.pool, rt.store, rt.settings.kafka_bootstrap_servers)
    infra = [{"name": c.name, "ok": c.ok, "detail": c.detail, "latency_ms": round(c.latency_ms, 1)} for c in checks]
    ok = {c.name: c.ok for c in checks}
    stages: list[dict[str, Any]] = []
    if ok.get("kafka") and ok.get("postgres"):
        stages = await asyncio.wait_for(stage_health(rt.settings, rt.pool, {s.name: s.topic for s in CATALOGUE}), 20)
    paused = [
        {
            "stage": name,
            "down": [str(d) for d in st["down"]],  # type: ignore[attr-defined]
            "detail": {str(k): str(v) for k, v in st["detail"].items()},  # type: ignore[attr-defined]
            "paused_for_s": float(st["paused_for_s"]),  # type: ignore[arg-type]
        }
        for name, w in rt.watches.items()
        if w.paused
        for st in [w.state()]
    ]
    return {
        "checked_at": datetime.now(UTC),
        "generation": rt.settings.generation,
        "db_schema": rt.settings.db_schema,
        "stages": stages,
        "infrastructure": infra,
        "paused": paused,
        "budgets": await _budget_use(rt) if ok.get("postgres") else [],
    }


async def pipeline_status(app: FastAPI, *, visit: bool = True) -> dict[str, Any]:
    """The status plus the lag history. While the background sampler runs (it refreshes every ``LIVE_S`` while
    a console polls) a visit gets its latest sample at once; otherwise one computation at most every ``CACHE_S``
    (several open consoles share it)."""
    st = state_of(app)
    fresh_enough = LIVE_S + 1.0 if (visit and st.sampling) else CACHE_S
    if visit:
        st.seen_at = time.monotonic()
    if st.last is not None and time.monotonic() - st.last_at < fresh_enough:  # no wait for a sample under way
        return {**st.last, "history": list(st.history)}
    async with st.lock:
        if st.last is None or time.monotonic() - st.last_at >= fresh_enough:
            st.last = await _compute(app.state.runtime)
            st.last_at = time.monotonic()
            lags = {s["stage"]: int(s["lag"]) for s in st.last["stages"] if s["lag"] is not None}
            if lags:
                st.history.append({"at": st.last["checked_at"], "lag": lags})
        cutoff = datetime.now(UTC).timestamp() - HISTORY_S
        while st.history and st.history[0]["at"].timestamp() < cutoff:
            st.history.popleft()
        return {**st.last, "history": list(st.history)}


async def _sampler(app: FastAPI) -> None:
    """Sample every ``LIVE_S`` while a console polls, every ``IDLE_SAMPLE_S`` until 15 minutes after the last
    visit (the sparkline goes on filling), not at all otherwise."""
    st = state_of(app)
    try:
        while True:
            idle = time.monotonic() - st.seen_at
            st.sampling = idle <= WATCHING_S
            if idle > HISTORY_S:
                await asyncio.sleep(LIVE_S)
                continue
            wait = (LIVE_S if st.sampling else IDLE_SAMPLE_S) - (time.monotonic() - st.last_at)
            if wait > 0:
                await asyncio.sleep(min(wait, LIVE_S))  # re-check soon: a console may open meanwhile
                continue
            try:
                await pipeline_status(app, visit=False)
            except Exception as exc:  # a failed sample is skipped; the page shows the failure itself
                st.last_at = time.monotonic()
                log.debug("console lag sample failed: %s", exc)
    finally:
        st.sampling = False


@contextlib.asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[None]:
    """The console's background work (the lag sampler, jobs) lives as long as the app's lifespan."""
    task = asyncio.create_task(_sampler(app))
    try:
        yield
    finally:
        task.cancel()
        st = state_of(app)
        pending = [task, *(j.task for j in st.jobs.values() if j.task is not None and not j.task.done())]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def sparkline(history: list[dict[str, Any]], stage: str, width: int = 160, height: int = 28) -> dict[str, Any]:
    """SVG polyline points of one stage's lag over the kept history (no inline style: CSP-friendly)."""
    values = [int(h["lag"].get(stage, 0)) for h in history]
    if not values:
        return {"points": "", "max": 0, "width": width, "height": height, "n": 0}
    top = max(values) or 1
    step = width / max(1, len(values) - 1)
    pts = " ".join(
        f"{round(i * step, 1)},{round(height - 2 - (v / top) * (height - 4), 1)}" for i, v in enumerate(values)
    )
    return {"points": pts, "max": max(values), "width": width, "height": height, "n": len(values)}


# --- dead letters -----------------------------------------------------------------------------------------


def redrive_group(settings: Settings, stage: str) -> str:
    return f"{settings.group_prefix}om-dlq-redrive-{stage}"


def _pretty(value: bytes) -> tuple[str, bool]:
    text = value.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    return text[:PAYLOAD_CHARS], len(text) > PAYLOAD_CHARS


def known_stage(stage: str) -> str:
    names = [s.name for s in CATALOGUE if s.name != "retrieve"]
    if stage not in names:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, detail={"field": "stage", "msg": f"no such stage; stages: {', '.join(names)}"}
        )
    return stage


async def dead_letter_page(
    settings: Settings, stage: str, *, error_class: str | None, limit: int, include_redriven: bool
) -> dict[str, Any]:
    """``orgmem dlq list``: the topic's letters (those not redriven yet, unless ``include_redriven``) and the
    ones kept in Postgres, each with its payload."""
    from services.ops.dlq import read_dead_letters, read_stored_letters

    group = None if include_redriven else redrive_group(settings, stage)
    topic = await read_dead_letters(settings, stage, group=group, limit=SCAN_LIMIT)
    stored = await read_stored_letters(settings, stage, limit=SCAN_LIMIT)
    letters = topic + stored
    classes: dict[str, int] = {}
    for letter in letters:
        classes[letter.error_class] = classes.get(letter.error_class, 0) + 1
    chosen = [x for x in letters if error_class in (None, "", x.error_class)]
    items = []
    for letter in chosen[:limit]:
        payload, cut = _pretty(letter.record.value)
        s = letter.summary()
        items.append(
            {
                "stage": stage,
                "position": str(s["position"]),
                "key": str(s["key"]),
                "error_class": str(s["error_class"]),
                "error_field": s["error_field"],
                "message": str(s["message"]),
                "original": str(s["original"]),
                "failed_at": s["failed_at"],
                "stored_in": s["stored_in"],
                "payload": payload,
                "payload_truncated": cut,
            }
        )
    scanned_all = len(topic) < SCAN_LIMIT and len(stored) < SCAN_LIMIT
    return {"stage": stage, "items": items, "classes": classes, "total": len(chosen), "scanned_all": scanned_all}


# --- jobs: redrive, replay, rebuild -----------------------------------------------------------------------


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


# --- why not this document? -------------------------------------------------------------------------------


def visible_since(history: list[dict[str, Any]], principals: set[str], at: datetime) -> datetime | None:
    """Start of the uninterrupted run of ACL states granting one of ``principals`` that covers ``at``."""
    since: datetime | None = None
    for state in history:
        if state["valid_from"] > at:
            break
        grants = not state["deleted"] and bool(principals & set(state["principals"]))
        since = (since or state["valid_from"]) if grants else None
    return since


def with_diagnostics(**fields: Any) -> RetrieveContextRequest:
    """A ``retrieve_context`` request that asks for diagnostics where the contract makes them opt-in."""
    opt_in = {"diagnostics": True} if "diagnostics" in RetrieveContextRequest.model_fields else {}
    return RetrieveContextRequest(**fields, **opt_in)


def _first_rank(passages: list[Any], document_id: uuid.UUID) -> int | None:
    for i, p in enumerate(passages, start=1):
        if p.document_id == document_id:
            return i
    return None


async def why_not(
    rt: Runtime,
    viewer: Viewer,
    *,
    external_id: str,
    source_system: str | None,
    workspace: str,
    query: str,
    mode: str,
    as_of: datetime | None,
    limit: int,
) -> dict[str, Any]:
    principals = list(viewer.expand(rt.hierarchy))
    at = as_of or datetime.now(UTC)
    steps: list[dict[str, Any]] = []
    out: dict[str, Any] = {
        "external_id": external_id,
        "workspace": workspace,
        "document_id": None,
        "title": None,
        "viewer": principals,
        "visible": False,
        "visible_since": None,
        "arms": [],
        "fused_rank": None,
        "returned_rank": None,
        "steps": steps,
    }

    def done(dropped_by: str) -> dict[str, Any]:
        return out | {"dropped_by": dropped_by}

    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, title, source_system, event_time, deleted_at FROM documents"
            " WHERE workspace = $1 AND external_id = $2 AND ($3::text IS NULL OR source_system = $3)"
            " ORDER BY source_system LIMIT 2",
            workspace,
            external_id,
            source_system,
        )
        if not rows:
            steps.append({"step": "document", "ok": False, "detail": f"no document {external_id!r} in {workspace}"})
            return done("not_found")
        doc = rows[0]
        out["document_id"], out["title"] = doc["id"], doc["title"]
        note = " (another source system has this external id too; give source_system)" if len(rows) > 1 else ""
        steps.append({"step": "document", "ok": True, "detail": f"{doc['source_system']}:{external_id}{note}"})
        acl = await access.document_access(conn, doc["id"], at)
        chunk_ids = {str(r["id"]) for r in await conn.fetch("SELECT id FROM chunks WHERE document_id = $1", doc["id"])}
    history = (acl or {}).get("history", [])
    state = access.state_at(history, at)
    if doc["deleted_at"] is not None or (state is not None and state["deleted"]):
        steps.append({"step": "deleted", "ok": False, "detail": f"deleted at {doc['deleted_at']}"})
        return done("deleted")
    held = set(state["principals"]) if state else set()
    shared = sorted(held & set(principals))
    out["visible"] = bool(shared)
    out["visible_since"] = visible_since(history, set(principals), at) if shared else None
    if not shared:
        when = "at " + at.isoformat() if as_of else "now"
        steps.append(
            {
                "step": "acl",
                "ok": False,
                "detail": f"the viewer may not see it {when}: it is shared with {', '.join(sorted(held)) or 'nobody'}"
                "; every arm filters by ACL, so no arm can return it",
            }
        )
        return done("acl")
    steps.append(
        {"step": "acl", "ok": True, "detail": f"visible through {', '.join(shared)} since {out['visible_since']}"}
    )
    if as_of is not None and doc["event_time"] > as_of:
        steps.append({"step": "time", "ok": False, "detail": f"event time {doc['event_time']} is after as_of"})
        return done("time")
    svc = get_service(rt)
    for arm in ("lexical", "dense"):
        found = await svc.search_knowledge_base(
            SearchKnowledgeBaseRequest(query=query, workspace=workspace, limit=MAX_LIMIT, arms=arm, as_of=as_of),
            viewer,
        )
        out["arms"].append({"arm": arm, "rank": _first_rank(found.passages, doc["id"])})
    deep = await svc.retrieve_context(
        with_diagnostics(query=query, workspace=workspace, limit=MAX_LIMIT, mode=mode, as_of=as_of),
        viewer,
    )
    out["fused_rank"] = _first_rank(deep.passages, doc["id"])
    asked = await svc.retrieve_context(
        with_diagnostics(query=query, workspace=workspace, limit=limit, mode=mode, as_of=as_of),
        viewer,
    )
    out["returned_rank"] = _first_rank(asked.passages, doc["id"])
    arms = ", ".join(f"{a['arm']} #{a['rank']}" if a["rank"] else f"{a['arm']}: not in its top 50" for a in out["arms"])
    steps.append({"step": "arms", "ok": any(a["rank"] for a in out["arms"]), "detail": arms})
    fusion = asked.diagnostics.get("fusion") or {}
    decisions = (asked.diagnostics.get("packing") or {}).get("decisions") or []
    dropped_packing = [d for d in decisions if d.get("key") in chunk_ids and d.get("action") != "kept"]
    below = [c for c in fusion.get("below_floor") or [] if c in chunk_ids]
    dups = [d for d in fusion.get("dropped_duplicates") or [] if d.get("chunk_id") in chunk_ids]
    if out["returned_rank"] is not None:
        steps.append({"step": "returned", "ok": True, "detail": f"returned at rank {out['returned_rank']}"})
        return done("returned")
    if dropped_packing:
        d = dropped_packing[0]
        steps.append({"step": "packing", "ok": False, "detail": f"{d.get('action')}: {d.get('reason')}"})
        return done("packing")
    if dups:
        steps.append({"step": "dedup", "ok": False, "detail": f"dropped as a duplicate of chunk {dups[0]['kept']}"})
        return done("duplicate")
    if out["fused_rank"] is not None:
        why = f"fused rank {out['fused_rank']}, past the limit of {limit}"
        if below:
            why += "; below the score floor (no boosts), then cut by autocut"
        elif fusion.get("autocut_index") is not None:
            why += f"; autocut kept {fusion.get('autocut_index')}"
        steps.append({"step": "limit", "ok": False, "detail": why})
        return done("floor" if below else "limit")
    if below:
        steps.append({"step": "floor", "ok": False, "detail": "below the score floor, cut by autocut"})
        return done("floor")
    steps.append({"step": "fusion", "ok": False, "detail": "no arm ranked it in its top 50 for this query"})
    return done("no_arm")
