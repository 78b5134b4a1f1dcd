"""Taxonomy write-back routes: ``GET /v1/taxonomy-proposals``, ``POST /v1/taxonomy-proposals/{id}/applied``
and ``/rejected`` (admin: the host's decision; idempotent on the proposal id), ``POST /v1/promotions``.

A proposal is derived from facts, so a viewer sees (and an admin decides) it only when every evidence
document is visible to the caller's principals — the admin role grants the decision, not visibility;
an id the viewer cannot see is a 404."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Annotated, Literal

import asyncpg
from fastapi import APIRouter, HTTPException, Query, Request, status

from retriever.graph.temporal import entity_acl_sql
from schemas.taxonomy import PromotionRequest, Proposal, ProposalList, ProposalStatus
from schemas.validation import SafeStr
from services.api.deps import AdminDep, ViewerDep, WorkspaceQuery, runtime_of
from services.runtime import Runtime
from services.sources import all_visible_sql, array_sources
from services.taxonomy import Registry, default_registry, load_registry, proposals
from services.viewer import Viewer

log = logging.getLogger("orgmem.api.taxonomy")
router = APIRouter(tags=["taxonomy write-back"])
_TASKS: set[asyncio.Task[int]] = set()


def _registry(rt: Runtime) -> Registry:
    s = rt.settings
    return load_registry(s.taxonomy_registry_path) if s.taxonomy_registry_path else default_registry()


def _visible_sql() -> str:
    """All-visible rule on the proposal's evidence ($2 = the viewer's principals). Derived from facts, so
    the admin role does not widen it: a role header is not a principal."""
    return all_visible_sql(array_sources("t.evidence"), "$2")


def _columns(viewer: str = "$2") -> str:
    """The proposal row as ``viewer`` may see it: the host's current value and user id are derived from
    documents of their own (directory records, identity keys) and shown only under their all-visible rule."""
    host = proposals.host_visible_sql(
        viewer, workspace="t.workspace", subject="t.subject_id", predicate="t.predicate", slot="t.slot"
    )
    return (
        f"t.*, CASE WHEN {host} THEN t.host_value END AS visible_host_value,"
        f" CASE WHEN {proposals.host_entity_visible_sql(viewer)} THEN t.host_entity_id END AS visible_host_entity_id,"
        " COALESCE(e.name, p.display_name) AS subject_name FROM taxonomy_proposals t"
        " LEFT JOIN entities e ON e.id = t.subject_id LEFT JOIN people p ON p.id = t.subject_id"
    )


def _proposal(r: asyncpg.Record) -> Proposal:
    """A proposal row (``_columns``) as the contract: the host's value and user id only as the viewer may see them."""
    row = dict(r) | {"host_entity_id": r["visible_host_entity_id"], "current_host_value": r["visible_host_value"]}
    return Proposal.model_validate({k: row[k] for k in Proposal.model_fields})


def _deliver_soon(rt: Runtime) -> None:
    hook = proposals.webhook_from_settings(rt.settings)
    if hook is None:
        return
    task = asyncio.get_running_loop().create_task(hook.deliver_pending(rt.pool))
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


@router.get("/v1/taxonomy-proposals", response_model=ProposalList)
async def list_proposals(
    request: Request,
    viewer: ViewerDep,
    workspace: WorkspaceQuery = "default",
    status_: Annotated[ProposalStatus | None, Query(alias="status")] = None,
    slot: Annotated[SafeStr | None, Query(max_length=64)] = None,
    subject: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> ProposalList:
    rt = runtime_of(request)
    principals = sorted(rt.hierarchy.expand(viewer.principals))
    if not principals:
        return ProposalList(proposals=[])
    sql = f"SELECT {_columns()} WHERE t.workspace = $1 AND {_visible_sql()}"
    args: list[object] = [workspace, principals]
    for col, val in (("t.status", status_), ("t.slot", slot), ("t.subject_id", subject)):
        if val is not None:
            args.append(val)
            sql += f" AND {col} = ${len(args)}"
    args += [limit + 1, offset]
    sql += f" ORDER BY t.created_at, t.id LIMIT ${len(args) - 1} OFFSET ${len(args)}"
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(sql, *args)
    items = [_proposal(r) for r in rows[:limit]]
    return ProposalList(proposals=items, next_offset=offset + limit if len(rows) > limit else None)


async def _decide(
    request: Request, viewer: Viewer, pid: uuid.UUID, decision: Literal["applied", "rejected"]
) -> Proposal:
    rt = runtime_of(request)
    principals = sorted(rt.hierarchy.expand(viewer.principals))
    async with rt.pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            f"SELECT {_columns()} WHERE t.id = $1 AND {_visible_sql()} FOR UPDATE OF t", pid, principals
        )
        if row is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail="no visible proposal with this id")
        if row["status"] == decision:
            return _proposal(row)  # idempotent: the same decision again changes nothing
        if row["status"] in ("applied", "rejected"):
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                detail={"field": "status", "msg": f"proposal already {row['status']}"},
            )
        await conn.execute(
            "UPDATE taxonomy_proposals SET status = $2, decided_at = now(), updated_at = now() WHERE id = $1",
            pid,
            decision,
        )
        if decision == "applied":  # the applied value is the host's ground truth now: re-derive the slot
            await proposals.refresh_subjects(conn, _registry(rt), row["workspace"], [row["subject_id"]])
        row = await conn.fetchrow(f"SELECT {_columns()} WHERE t.id = $1", pid, principals)
    return _proposal(row)


@router.post("/v1/taxonomy-proposals/{proposal_id}/applied", response_model=Proposal)
async def applied(proposal_id: uuid.UUID, request: Request, viewer: AdminDep) -> Proposal:
    return await _decide(request, viewer, proposal_id, "applied")


@router.post("/v1/taxonomy-proposals/{proposal_id}/rejected", response_model=Proposal)
async def rejected(proposal_id: uuid.UUID, request: Request, viewer: AdminDep) -> Proposal:
    return await _decide(request, viewer, proposal_id, "rejected")


@router.post("/v1/promotions", status_code=status.HTTP_201_CREATED, response_model=Proposal)
async def promote(body: PromotionRequest, request: Request, viewer: ViewerDep) -> Proposal:
    rt = runtime_of(request)
    bound = _registry(rt).platform_bound()
    spec = bound.get(body.slot)
    if spec is None:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            detail={"field": "slot", "msg": f"not a platform-bound slot; expected one of {sorted(bound)}"},
        )
    principals = sorted(rt.hierarchy.expand(viewer.principals))
    async with rt.pool.acquire() as conn, conn.transaction():
        # Not an oracle: a person the caller cannot see answers as a nonexistent one, the host's value is
        # compared only when the caller sees where it comes from, a decided value only when that proposal is
        # visible to the caller (services.sources); the evidence must be visible in full.
        subject = await conn.fetchval(
            "SELECT COALESCE(p.merged_into, p.id) FROM people p WHERE p.id = $1 AND p.workspace = $2",
            body.subject.id,
            body.workspace,
        )
        if subject is not None and principals:
            seen = await conn.fetchval(
                f"SELECT 1 FROM entities e WHERE e.id = $1 AND e.workspace = $2 AND {entity_acl_sql('$3')}",
                subject,
                body.workspace,
                principals,
            )
            subject = subject if seen else None
        visible = await conn.fetchval(
            "SELECT count(*) FROM documents WHERE id = ANY($1::uuid[]) AND workspace = $2 AND deleted_at IS NULL"
            " AND principals && $3::text[]",
            list(set(body.evidence)),
            body.workspace,
            principals,
        )
        if subject is None or not principals:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail={"field": "subject.id", "msg": "no such person"})
        if visible != len(set(body.evidence)):
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, detail={"field": "evidence", "msg": "an evidence document is not visible"}
            )
        host = await proposals.host_values(conn, body.workspace, subject, body.slot, spec.name)
        host_seen = await conn.fetchval(
            "SELECT " + proposals.host_visible_sql("$5", workspace="$1", subject="$2", predicate="$3", slot="$4"),
            body.workspace,
            subject,
            spec.name,
            body.slot,
            principals,
        )
        if host_seen and proposals.norm(body.value) in {proposals.norm(h) for h in host}:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                detail={"field": "value", "msg": "this is already the host's value"},
            )
        prior = await conn.fetchrow(
            f"SELECT t.status, {_visible_sql()} AS seen FROM taxonomy_proposals t WHERE t.id = $1",
            proposals.proposal_id(body.workspace, subject, body.slot, body.value),
            principals,
        )
        if prior is not None and prior["status"] in ("applied", "rejected"):
            msg = f"the host already {prior['status']} this value" if prior["seen"] else "this value cannot be promoted"
            raise HTTPException(status.HTTP_409_CONFLICT, detail={"field": "value", "msg": msg})
        pid, _ = await proposals.upsert_proposal(
            conn,
            workspace=body.workspace,
            subject=subject,
            slot=body.slot,
            predicate=spec.name,
            host=host,
            value=body.value,
            entity=None,
            evidence=body.evidence,
            confidence=body.confidence,
            origin="promoted",
            fact_id=None,
        )
        row = await conn.fetchrow(f"SELECT {_columns()} WHERE t.id = $1", pid, principals)
    _deliver_soon(rt)
    return _proposal(row)
