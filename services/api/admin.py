"""Admin API (``/v1/admin/*``): health, spend and budgets, retention and legal holds, audits and
permission history. Every route needs ``X-Api-Key`` and ``X-Principal-Roles: admin`` (403 otherwise);
the acting admin recorded in audits is the ``X-Principal-Id`` of the call."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, status

from schemas.admin import (
    AdminHealth,
    Budget,
    BudgetRequest,
    DocumentAccess,
    HeldDocument,
    IngressAuditPage,
    LegalHold,
    LegalHoldRequest,
    PurgeAuditPage,
    RetentionPolicy,
    RetentionReport,
    RetrievalAuditPage,
    SpendReport,
    ViewerAccess,
)
from schemas.validation import AwareBoundedDatetime, SafeStr, bigint_cursor
from services.api.auth import checked_principal
from services.api.deps import AdminDep, runtime_of
from services.governance import access, audits, budgets, holds, retention, retention_policies
from services.governance.health import admin_health
from services.ops.retention import PURGE_HOOKS
from services.stages import CATALOGUE
from services.viewer import Viewer

router = APIRouter(prefix="/v1/admin", tags=["admin"])
NAME = r"^[A-Za-z0-9_.:\-]{1,200}$"


def _actor(viewer: Viewer) -> str:
    return viewer.principal_id or "admin"


# query-parameter types: bounded so that nothing Postgres (or asyncpg) cannot take gets that far
Since = Annotated[AwareBoundedDatetime | None, Query(description="with a timezone offset; years 1000-9000 (UTC)")]
Text = Annotated[SafeStr | None, Query(max_length=1000)]


def _cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    value = bigint_cursor(cursor)
    if value is None:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail={"field": "cursor", "msg": "invalid cursor"})
    return value


# --- health and spend ----------------------------------------------------------------------------


@router.get("/health", response_model=AdminHealth)
async def health(request: Request, _: AdminDep) -> dict[str, Any]:
    rt = runtime_of(request)
    return await admin_health(rt.settings, rt.pool, rt.store, {s.name: s.topic for s in CATALOGUE})


@router.get("/spend", response_model=SpendReport)
async def spend(
    request: Request,
    _: AdminDep,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
    since: date | None = None,
    until: date | None = None,
) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        return {
            "rows": await budgets.spend_rows(conn, workspace=workspace, since=since, until=until),
            "budgets": await budgets.budgets(conn, workspace),
            "refusals": await budgets.refusals(conn, workspace=workspace, since=since, until=until),
        }


@router.put("/budgets/{workspace}", response_model=Budget)
async def put_budget(
    request: Request, viewer: AdminDep, workspace: Annotated[str, Path(pattern=NAME)], body: BudgetRequest
) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        await budgets.set_budget(conn, workspace, body.model, body.daily_tokens, _actor(viewer))
    return {"workspace": workspace, "model": body.model, "daily_tokens": body.daily_tokens}


# --- retention -----------------------------------------------------------------------------------


@router.get("/retention/policies", response_model=list[RetentionPolicy])
async def list_policies(
    request: Request, _: AdminDep, workspace: Annotated[str | None, Query(pattern=NAME)] = None
) -> list[dict[str, Any]]:
    async with runtime_of(request).pool.acquire() as conn:
        return await retention_policies.policies(conn, workspace)


@router.put("/retention/policies", response_model=RetentionPolicy)
async def put_policy(request: Request, viewer: AdminDep, body: RetentionPolicy) -> RetentionPolicy:
    async with runtime_of(request).pool.acquire() as conn:
        await retention_policies.put_policy(conn, body.model_dump(), _actor(viewer))
    return body


@router.delete("/retention/policies", status_code=status.HTTP_204_NO_CONTENT)
async def delete_policy(
    request: Request,
    _: AdminDep,
    workspace: Annotated[str, Query(pattern=NAME)],
    source_system: Annotated[str, Query(pattern=r"^[A-Za-z0-9_.:\-*]{1,200}$")] = "*",
    kind: Annotated[str, Query(pattern=r"^[A-Za-z0-9_.:\-*]{1,200}$")] = "*",
) -> None:
    async with runtime_of(request).pool.acquire() as conn:
        if not await retention_policies.delete_policy(conn, workspace, source_system, kind):
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "workspace", "msg": "no such policy"})


@router.post("/retention/run", response_model=RetentionReport)
async def run_retention(
    request: Request,
    viewer: AdminDep,
    apply: bool = False,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
    batch_size: Annotated[int, Query(ge=1, le=5000)] = retention.DEFAULT_BATCH,
) -> dict[str, Any]:
    """Dry run by default (what would be purged); ``apply=true`` purges, audited per batch."""
    rt = runtime_of(request)
    report = await retention.run_retention(
        rt.pool,
        rt.store,
        actor=_actor(viewer),
        apply=apply,
        workspace=workspace,
        batch_size=batch_size,
        hooks=PURGE_HOOKS,
    )
    return report.as_dict()


# --- legal holds ---------------------------------------------------------------------------------


@router.post("/legal-holds", response_model=LegalHold, status_code=status.HTTP_201_CREATED)
async def create_hold(request: Request, viewer: AdminDep, body: LegalHoldRequest) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        return await holds.create_hold(conn, body.model_dump(), _actor(viewer))


@router.get("/legal-holds", response_model=list[LegalHold])
async def list_holds(
    request: Request,
    _: AdminDep,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
    include_released: bool = False,
) -> list[dict[str, Any]]:
    async with runtime_of(request).pool.acquire() as conn:
        return await holds.list_holds(conn, workspace=workspace, include_released=include_released)


@router.get("/legal-holds/{hold_id}", response_model=LegalHold)
async def get_hold(request: Request, _: AdminDep, hold_id: uuid.UUID) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        found = await holds.get_hold(conn, hold_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "hold_id", "msg": "no such legal hold"})
    return found


@router.post("/legal-holds/{hold_id}/release", response_model=LegalHold)
async def release_hold(request: Request, viewer: AdminDep, hold_id: uuid.UUID) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        found = await holds.release_hold(conn, hold_id, _actor(viewer))
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "hold_id", "msg": "no such legal hold"})
    return found


@router.get("/legal-holds/{hold_id}/documents", response_model=list[HeldDocument])
async def held_documents(
    request: Request,
    _: AdminDep,
    hold_id: uuid.UUID,
    include_envelope: bool = False,
    after: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[dict[str, Any]]:
    """What a hold keeps — tombstoned documents included, with their archived envelope on request."""
    rt = runtime_of(request)
    async with rt.pool.acquire() as conn:
        if await holds.get_hold(conn, hold_id) is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "hold_id", "msg": "no such legal hold"})
        docs = await holds.held_documents(conn, hold_id, limit=limit, after=after)
    if include_envelope:
        objects: dict[str, bytes] = {}
        for d in docs:
            key = d["blob_key"]
            if key:
                obj = key.partition("#")[0]
                if obj not in objects:
                    objects[obj] = await rt.store.get(obj)
                d["envelope"] = holds.archived_line(objects[obj], key)
    return docs


# --- audits --------------------------------------------------------------------------------------


def _window(
    since: Since = None,
    until: Since = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=audits.MAX_PAGE)] = 100,
) -> audits.Window:
    """The query parameters every audit page shares."""
    return audits.Window(since=since, until=until, before_id=_cursor(cursor), limit=limit)


Page = Annotated[audits.Window, Depends(_window)]


def _page(rows: list[dict[str, Any]], window: audits.Window) -> dict[str, Any]:
    return {"items": rows, "next_cursor": audits.next_cursor(rows, window.limit)}


@router.get("/audits/retrievals", response_model=RetrievalAuditPage)
async def retrieval_audits(
    request: Request,
    _: AdminDep,
    page: Page,
    viewer: Text = None,
    document: uuid.UUID | None = None,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
) -> dict[str, Any]:
    """Who retrieved what, newest first. ``?document=D`` answers "who saw document D, and when"."""
    async with runtime_of(request).pool.acquire() as conn:
        rows = await audits.retrievals(conn, page, viewer=viewer, document=document, workspace=workspace)
    return _page(rows, page)


@router.get("/audits/ingress", response_model=IngressAuditPage)
async def ingress_audits(
    request: Request,
    _: AdminDep,
    page: Page,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
    source_system: Annotated[str | None, Query(pattern=NAME)] = None,
    external_id: Text = None,
) -> dict[str, Any]:
    async with runtime_of(request).pool.acquire() as conn:
        rows = await audits.ingress(
            conn, page, workspace=workspace, source_system=source_system, external_id=external_id
        )
    return _page(rows, page)


@router.get("/audits/retention", response_model=PurgeAuditPage)
async def retention_audits(
    request: Request,
    _: AdminDep,
    page: Page,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
    document: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Every purge batch: who ran it, under which policy, what it removed."""
    async with runtime_of(request).pool.acquire() as conn:
        rows = await audits.purges(conn, page, workspace=workspace, document=document)
    return _page(rows, page)


# --- permission history --------------------------------------------------------------------------


@router.get("/access", response_model=DocumentAccess | ViewerAccess)
async def access_history(
    request: Request,
    _: AdminDep,
    document: uuid.UUID | None = None,
    viewer: Text = None,
    groups: Annotated[SafeStr | None, Query(max_length=20_000)] = None,
    as_of: Since = None,
    query: Annotated[SafeStr | None, Query(min_length=1, max_length=2000)] = None,
    workspace: Annotated[str | None, Query(pattern=NAME)] = None,
) -> dict[str, Any]:
    """``?document=D&as_of=T``: who could see D at T (with its ACL history). ``?viewer=user:U&as_of=T
    [&query=…]``: what U could have retrieved at T, from U's groups at T (``groups=`` adds groups)."""
    if (document is None) == (viewer is None):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": "document", "msg": "give exactly one of document= or viewer="},
        )
    at = as_of or datetime.now(UTC)
    rt = runtime_of(request)
    async with rt.pool.acquire() as conn:
        if document is not None:
            found = await access.document_access(conn, document, at)
            if found is None:
                raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "document", "msg": "no such document"})
            return found
        assert viewer is not None
        pid = checked_principal(viewer, "viewer", "user")
        given = [checked_principal(g, "groups", "group") for g in (groups or "").split(",") if g.strip()]
        held, source = await access.viewer_groups(conn, pid, at)
        principals = sorted(rt.hierarchy.expand([pid, *held, *given]))
        docs = await access.viewer_documents(conn, principals=principals, as_of=at, query=query, workspace=workspace)
    return {
        "viewer": pid,
        "as_of": at,
        "principals": principals,
        "membership_source": source if not given else f"{source}+request",
        "query": query,
        "documents": docs,
    }
