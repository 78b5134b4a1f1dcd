"""The operator console at ``/console``: server-rendered pages (Jinja2, autoescaped) and one small script.

Three routers:
- ``pages``: ``/console/<page>`` (the HTML shells, no data — public) and ``/console/static/<file>``;
- ``admin``: the JSON admin routes the console needed and the API lacked (``/v1/admin/pipeline``,
  ``/v1/admin/dead-letters/<stage>`` (+ ``/redrive``), ``/v1/admin/replay``, ``/v1/admin/rebuild``,
  ``/v1/admin/jobs``, ``/v1/admin/why-not``), contracts in ``schemas/admin.py``;
- ``fragments``: ``/v1/admin/console/*``, the same data rendered as HTML fragments for the pages.

Every data route needs ``X-Api-Key`` and ``X-Principal-Roles: admin`` (the admin dependency of ``/v1/admin/*``);
the page keeps the key in a JavaScript variable and sends it as a header — never in a URL, a cookie or storage.
Every state-changing call is a POST. Pages carry a Content-Security-Policy without inline scripts or styles.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import BaseModel, ConfigDict, Field

from schemas.admin import DeadLetterPage, Job, PipelineStatus, RedriveRequest, ReplayRequest, WhyNot
from schemas.envelope import PRINCIPAL_RE
from services.api.auth import directory_groups, require_admin
from services.api.console import ops
from services.governance import access, audits, holds, retention
from services.stages import CATALOGUE, replayable_stages
from services.viewer import Viewer

Admin = Annotated[Viewer, Depends(require_admin)]
PAGES = {
    "pipeline": "Pipeline",
    "dead-letters": "Dead letters",
    "replay": "Replay / rebuild",
    "playground": "Search playground",
    "governance": "Governance",
    "graph": "Graph cards",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
STATIC = {"console.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8"}
WORKSPACE = r"^[A-Za-z0-9_.:\-]{1,128}$"

env = Environment(
    loader=PackageLoader("services.api.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)

pages = APIRouter(prefix="/console", include_in_schema=False)
admin = APIRouter(prefix="/v1/admin", tags=["admin"])
fragments = APIRouter(prefix="/v1/admin/console", tags=["console"])


def _html(template: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(env.get_template(template).render(**context), headers=SECURITY_HEADERS)


def _rt(request: Request) -> Any:
    return request.app.state.runtime


def _unprocessable(field: str, msg: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail={"field": field, "msg": msg})


# --- pages --------------------------------------------------------------------------------------------------


@pages.get("")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/pipeline", headers=SECURITY_HEADERS)


@pages.get("/static/{name}")
async def console_static(name: str) -> Response:
    if name not in STATIC:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "name", "msg": "no such file"})
    body = resources.files("services.api.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name], headers=SECURITY_HEADERS | {"Cache-Control": "no-cache"})


@pages.get("/{page}")
async def console_page(page: str) -> HTMLResponse:
    if page not in PAGES:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "page", "msg": "no such console page"})
    stages = [s.name for s in CATALOGUE if s.name != "retrieve"]
    return _html(
        f"{page}.html", page=page, pages=PAGES, stages=stages, replayable=replayable_stages(), title=PAGES[page]
    )


# --- JSON admin routes --------------------------------------------------------------------------------------


@admin.get("/pipeline", response_model=PipelineStatus)
async def pipeline(request: Request, _: Admin) -> dict[str, Any]:
    """Per stage lag, records/s, oldest unprocessed age and dead letters waiting; lag samples of the last 15 min
    kept by this API process; the /readyz checks; paused stages and why; spend today against each budget."""
    return await ops.pipeline_status(request.app)


@admin.get("/dead-letters/{stage}", response_model=DeadLetterPage)
async def dead_letters(
    request: Request,
    _: Admin,
    stage: Annotated[str, Path(pattern=r"^[a-z_]{1,40}$")],
    error_class: Annotated[str | None, Query(max_length=200)] = None,
    include_redriven: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """``orgmem dlq list``: the stage's dead letters not yet redriven (``include_redriven`` for all), payloads
    pretty-printed and truncated; ``classes`` counts them per error class."""
    return await ops.dead_letter_page(
        _rt(request).settings,
        ops.known_stage(stage),
        error_class=error_class,
        limit=limit,
        include_redriven=include_redriven,
    )


@admin.post("/dead-letters/{stage}/redrive", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def redrive_dead_letters(
    request: Request, _: Admin, stage: Annotated[str, Path(pattern=r"^[a-z_]{1,40}$")], body: RedriveRequest
) -> dict[str, Any]:
    """``orgmem dlq redrive``: all of the stage's waiting dead letters, those of one class, or the one at
    ``position``; a job (poll ``/v1/admin/jobs/{id}``)."""
    job = await ops.redrive_job(
        request.app,
        _rt(request).settings,
        ops.known_stage(stage),
        error_class=body.error_class or None,
        position=body.position or None,
        dry_run=body.dry_run,
    )
    return job.as_dict()


def _replay_start(value: str) -> datetime | None:
    from services.ops.replay import parse_from

    try:
        return parse_from(value.strip())
    except ValueError as exc:
        raise _unprocessable("from", str(exc)) from exc


@admin.post("/replay", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def start_replay(request: Request, _: Admin, body: ReplayRequest) -> dict[str, Any]:
    """``orgmem replay <stage> --from earliest|<ISO time>`` as a job of this API process (one replay or rebuild
    at a time: 409 otherwise)."""
    if body.stage not in replayable_stages():
        raise _unprocessable("stage", f"cannot replay {body.stage!r}; stages: {', '.join(replayable_stages())}")
    job = await ops.replay_job(request.app, _rt(request).settings, body.stage, _replay_start(body.start))
    return job.as_dict()


@admin.post("/rebuild", response_model=Job, status_code=status.HTTP_202_ACCEPTED)
async def start_rebuild(request: Request, _: Admin) -> dict[str, Any]:
    """``orgmem rebuild`` as a job of this API process: a fresh generation, switched in once caught up."""
    return (await ops.rebuild_job(request.app, _rt(request).settings)).as_dict()


@admin.get("/jobs", response_model=list[Job])
async def list_jobs(request: Request, _: Admin) -> list[dict[str, Any]]:
    """Redrive, replay and rebuild jobs of this API process, newest first."""
    jobs = sorted(ops.state_of(request.app).jobs.values(), key=lambda j: j.started_at, reverse=True)
    return [j.as_dict() for j in jobs]


@admin.get("/jobs/{job_id}", response_model=Job)
async def get_job(request: Request, _: Admin, job_id: uuid.UUID) -> dict[str, Any]:
    return ops.get_job(request.app, job_id).as_dict()


def _principal(value: str | None, field: str, kind: str) -> str | None:
    if value is None or not value.strip():
        return None
    v = value.strip().lower()
    if not PRINCIPAL_RE.match(v) or not v.startswith(kind + ":"):
        raise _unprocessable(field, f"expected {kind}:<uuid>, got {value[:80]!r}")
    return v


async def _as_viewer(request: Request, viewer: str | None, groups: str | None) -> Viewer:
    """The viewer the admin asks about: ``viewer`` (user:<uuid>) with ``groups``, or the directory's groups."""
    pid = _principal(viewer, "viewer", "user")
    given = [g for g in (groups or "").split(",") if g.strip()]
    if len(given) > 512:
        raise _unprocessable("groups", "at most 512 groups")
    held = tuple(sorted({str(_principal(g, "groups", "group")) for g in given}))
    if pid and not given:
        held = await directory_groups(request, pid)
    return Viewer(pid, held, frozenset())


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise _unprocessable(field, "timestamp needs a timezone offset")
    return value


Mode = Literal["vector_first", "graph_first", "joint"]


@admin.get("/why-not", response_model=WhyNot)
async def why_not(
    request: Request,
    _: Admin,
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
    return await ops.why_not(
        _rt(request),
        await _as_viewer(request, viewer, groups),
        external_id=external_id,
        source_system=source_system,
        workspace=workspace,
        query=query,
        mode=mode,
        as_of=_aware(as_of, "as_of"),
        limit=limit,
    )


# --- HTML fragments -----------------------------------------------------------------------------------------


# an HTML fragment on success; errors keep the project's JSON shape (a response_class of HTMLResponse would
# declare them text/html in the OpenAPI document)
HTML: dict[str, Any] = {
    "response_class": Response,
    "responses": {200: {"description": "An HTML fragment", "content": {"text/html": {"schema": {"type": "string"}}}}},
}


def _fragment(template: str, **context: Any) -> HTMLResponse:
    return _html(f"fragments/{template}", **context)


@fragments.get("/pipeline", **HTML)
async def pipeline_fragment(request: Request, _: Admin) -> HTMLResponse:
    data = await ops.pipeline_status(request.app)
    lines = {s["stage"]: ops.sparkline(data["history"], s["stage"]) for s in data["stages"]}
    return _fragment("pipeline.html", d=data, lines=lines)


@fragments.get("/dead-letters", **HTML)
async def dead_letters_fragment(
    request: Request,
    _: Admin,
    stage: Annotated[str, Query(pattern=r"^[a-z_]{1,40}$")] = "ingest",
    error_class: Annotated[str | None, Query(max_length=200)] = None,
) -> HTMLResponse:
    page = await ops.dead_letter_page(
        _rt(request).settings,
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
async def redrive_fragment(request: Request, _: Admin, body: RedriveForm) -> HTMLResponse:
    job = await ops.redrive_job(
        request.app,
        _rt(request).settings,
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
async def replay_fragment(request: Request, _: Admin, body: ReplayForm) -> HTMLResponse:
    if body.stage not in replayable_stages():
        raise _unprocessable("stage", f"cannot replay {body.stage!r}")
    job = await ops.replay_job(request.app, _rt(request).settings, body.stage, _replay_start(body.start or "earliest"))
    return _fragment("job.html", job=job.as_dict())


@fragments.post("/rebuild", **HTML)
async def rebuild_fragment(request: Request, _: Admin) -> HTMLResponse:
    job = await ops.rebuild_job(request.app, _rt(request).settings)
    return _fragment("job.html", job=job.as_dict())


@fragments.get("/jobs/{job_id}", **HTML)
async def job_fragment(request: Request, _: Admin, job_id: uuid.UUID) -> HTMLResponse:
    return _fragment("job.html", job=ops.get_job(request.app, job_id).as_dict())


@fragments.get("/jobs", **HTML)
async def jobs_fragment(request: Request, _: Admin) -> HTMLResponse:
    jobs = sorted(ops.state_of(request.app).jobs.values(), key=lambda j: j.started_at, reverse=True)
    generation = await ops.active_generation(_rt(request).settings)
    return _fragment("jobs.html", jobs=[j.as_dict() for j in jobs], generation=generation)


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


def _as_of(value: str | None) -> datetime | None:
    if not value or not value.strip():
        return None
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise _unprocessable("as_of", "not an ISO time") from exc
    return _aware(t, "as_of")


def graph_layout(facts: list[dict[str, Any]], paths: list[dict[str, Any]], size: int = 420) -> dict[str, Any]:
    """Nodes on a circle and labelled edges of the facts and paths (relationships between two entities)."""
    names: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []

    def node(e: Any) -> str | None:
        if isinstance(e, dict) and e.get("id"):
            names.setdefault(str(e["id"]), str(e.get("name") or e["id"]))
            return str(e["id"])
        return None

    for f in facts:
        s, o = node(f.get("subject")), node(f.get("object"))
        if s and o:
            edges.append((s, o, str(f.get("predicate", ""))))
        elif s and f.get("value") is not None:
            vid = f"value:{s}:{f.get('predicate')}:{f.get('value')}"
            names[vid] = str(f.get("value"))[:40]
            edges.append((s, vid, str(f.get("predicate", ""))))
    for p in paths:
        for step in p.get("steps") or []:
            s, t = node(step.get("source")), node(step.get("target"))
            if s and t:
                edges.append((s, t, str(step.get("predicate", ""))))
    ids = list(names)[:40]
    c, r = size / 2, size / 2 - 60
    pos = {
        n: (round(c + r * math.cos(2 * math.pi * i / max(1, len(ids))), 1),
            round(c + r * math.sin(2 * math.pi * i / max(1, len(ids))), 1))
        for i, n in enumerate(ids)
    }  # fmt: skip
    drawn = [
        {"x1": pos[a][0], "y1": pos[a][1], "x2": pos[b][0], "y2": pos[b][1], "label": label,
         "lx": round((pos[a][0] + pos[b][0]) / 2, 1), "ly": round((pos[a][1] + pos[b][1]) / 2, 1)}
        for a, b, label in dict.fromkeys(edges) if a in pos and b in pos
    ]  # fmt: skip
    return {
        "size": size,
        "nodes": [
            {"x": pos[n][0], "y": pos[n][1], "name": names[n][:40], "anchor": "end" if pos[n][0] > c + 1 else "start"}
            for n in ids
        ],
        "edges": drawn,
    }


@fragments.post("/playground", **HTML)
async def playground_fragment(request: Request, _: Admin, body: PlaygroundForm) -> HTMLResponse:
    """``retrieve_context`` as the viewer given in the form, rendered with its diagnostics."""
    from retriever.rpc import error_status
    from retriever.wiring import get_service
    from services.errors import OrgMemoryError

    viewer = await _as_viewer(request, body.viewer, body.groups)
    req = ops.with_diagnostics(
        query=body.query,
        workspace=body.workspace,
        mode=body.mode,
        as_of=_as_of(body.as_of),
        limit=body.limit,
        **({"about": body.about.strip()} if body.about and body.about.strip() else {}),
    )
    try:
        resp = await get_service(_rt(request)).retrieve_context(req, viewer)
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
async def why_not_fragment(request: Request, _: Admin, body: PlaygroundForm) -> HTMLResponse:
    if not body.external_id:
        raise _unprocessable("external_id", "give the external id of the document")
    result = await ops.why_not(
        _rt(request),
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
    request: Request, _: Admin, workspace: Annotated[str | None, Query(pattern=WORKSPACE)] = None
) -> HTMLResponse:
    async with _rt(request).pool.acquire() as conn:
        policies = await retention.policies(conn, workspace or None)
        held = await holds.list_holds(conn, workspace=workspace or None, include_released=True)
    return _fragment("governance.html", policies=policies, holds=held)


@fragments.get("/who-saw", **HTML)
async def who_saw_fragment(
    request: Request,
    _: Admin,
    external_id: Annotated[str, Query(min_length=1, max_length=1000)],
    workspace: Annotated[str, Query(pattern=WORKSPACE)] = "default",
) -> HTMLResponse:
    """ "Who saw D" (retrieval audits naming the document) and its permission history, by external id."""
    at = datetime.now(UTC)
    async with _rt(request).pool.acquire() as conn:
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
                    "audits": await audits.retrievals(
                        conn,
                        viewer=None,
                        document=d["id"],
                        workspace=workspace,
                        since=None,
                        until=None,
                        before_id=None,
                        limit=100,
                    ),
                }
            )
    return _fragment("who_saw.html", found=found, external_id=external_id)


@fragments.get("/graph", **HTML)
async def graph_fragment(
    request: Request,
    _: Admin,
    entity: uuid.UUID,
    kind: Literal["person", "entity"] = "person",
    viewer: Annotated[str | None, Query(max_length=200)] = None,
    groups: Annotated[str | None, Query(max_length=30_000)] = None,
    workspace: Annotated[str, Query(pattern=WORKSPACE)] = "default",
) -> HTMLResponse:
    """A person or entity card as the viewer sees it, its facts on a valid_from/valid_to timeline."""
    from services.graph import cards

    rt = _rt(request)
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


def timeline(facts: list[Any], width: int = 640) -> dict[str, Any]:
    """Facts as bars from valid_from to valid_to (open-ended facts run to now), one row each."""
    now = datetime.now(UTC)
    if not facts:
        return {"rows": [], "width": width, "height": 0, "start": None, "end": None}
    start = min(f.valid_from for f in facts)
    end = max([now, *[f.valid_to for f in facts if f.valid_to]])
    span = max(1.0, (end - start).total_seconds())
    rows = []
    for i, f in enumerate(sorted(facts, key=lambda f: f.valid_from)):
        x1 = (f.valid_from - start).total_seconds() / span * (width - 20) + 10
        x2 = ((f.valid_to or now) - start).total_seconds() / span * (width - 20) + 10
        label = f"{f.subject.name} {f.predicate} {f.object.name if f.object else f.value}"
        rows.append({"y": 10 + i * 26, "x": round(x1, 1), "w": round(max(3.0, x2 - x1), 1), "label": label, "f": f})
    return {"rows": rows, "width": width, "height": 20 + len(rows) * 26, "start": start, "end": end}


def install(app: FastAPI) -> None:
    from services.api import errors

    app.include_router(pages)
    app.include_router(admin, responses=errors.responses(403, 404, 409))
    app.include_router(fragments, responses=errors.responses(403, 404, 409))
