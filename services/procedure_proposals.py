"""Procedure proposals (migration 0015): drafts an agent files that become procedures only when a human approves.

- ``propose``: the caller's user principal is the proposer; the scope (who would see the procedure) is principals
  the caller holds (``procedures.caller_scope``); every source (a document id or a memory id) must be visible to
  the caller AND to every principal of the scope — a procedure derived from a private document is never proposed
  into a wider audience than the document's.
- Visibility (list, get, decide): the viewer holds one principal of the scope and, for a proposal derived from
  documents, sees every live one of them (``services.sources.all_visible_sql``). An admin role does not widen
  this: a draft's steps may quote the documents it came from.
- ``decide``: an admin, or a viewer holding every principal of the scope (who could already write that procedure
  through ``POST /v1/procedural-memories``: approving grants no more than that). Approve produces the
  ``procedure`` envelope (``procedures.upsert_envelope``, author = the proposer) inside the row's transaction, so
  a failed produce leaves the proposal pending; approve and reject are idempotent; the other verb after a
  decision is 409.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from schemas.procedure_proposals import ProcedureProposal, ProcedureProposalList, ProposeProcedureRequest
from schemas.procedures import ProcedureSpec
from services import procedures
from services.errors import RefusedError
from services.hierarchy import OrgHierarchy
from services.ids import document_id
from services.memories import AGENT_SYSTEM
from services.runtime import Runtime
from services.sources import all_visible_sql, array_sources
from services.viewer import Viewer

_NS = uuid.UUID("6f7d1c3e-2b0a-4c55-9a51-0f6c2b7e9d15")
_VISIBLE = (
    "p.scope && $2::text[] AND (cardinality(p.source_document_ids) = 0 OR "
    + all_visible_sql(array_sources("p.source_document_ids"), "$2")
    + ")"
)


class ProposalError(RefusedError):
    """A refused proposal call: no user principal, a scope that cannot see a source, an unknown or already
    decided proposal, a decider without the whole scope."""


def _proposal(r: Mapping[str, Any], *, created: bool = True) -> ProcedureProposal:
    spec = json.loads(r["spec"])
    origin = json.loads(r["origin"])
    return ProcedureProposal(
        proposal_id=r["id"],
        workspace=r["workspace"],
        status=r["status"],
        proposer=r["proposer"],
        title=r["title"],
        steps=spec["steps"],
        description=spec.get("description", ""),
        when_to_use=spec.get("when_to_use", ""),
        tools=spec.get("tools", []),
        scope=list(r["scope"]),
        source_document_ids=list(r["source_document_ids"]),
        agent=origin.get("agent", "agent"),
        session_id=origin.get("session_id"),
        created_at=r["created_at"],
        decided_by=r["decided_by"],
        decided_at=r["decided_at"],
        reason=r["reason"],
        procedure_id=r["procedure_id"],
        created=created,
    )


async def _sources(
    conn: asyncpg.Connection, workspace: str, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, list[str]]]:
    """Requested id (a document id or a memory id) -> (document id, its principals), for the live ones."""
    if not ids:
        return {}
    as_memory = {document_id(f"{workspace}/{AGENT_SYSTEM}/{i}"): i for i in ids}
    rows = await conn.fetch(
        "SELECT id, principals FROM documents WHERE workspace = $1 AND id = ANY($2::uuid[]) AND deleted_at IS NULL",
        workspace,
        [*ids, *as_memory],
    )
    return {as_memory.get(r["id"], r["id"]): (r["id"], list(r["principals"])) for r in rows}


def _uncovered(
    hierarchy: OrgHierarchy,
    scope: Iterable[str],
    sources: Mapping[uuid.UUID, Sequence[str]],
    caller: tuple[str, frozenset[str]] | None,
) -> tuple[str, uuid.UUID] | None:
    """(scope principal, source) when a principal of the scope could not see a source: the caller's own principal
    sees what the caller sees; a group sees what is shared with it or a group above it."""
    for p in scope:
        sees = caller[1] if caller and p == caller[0] else hierarchy.expand([p])
        for sid, principals in sources.items():
            if not sees.intersection(principals):
                return p, sid
    return None


async def propose(rt: Runtime, viewer: Viewer, req: ProposeProcedureRequest) -> ProcedureProposal:
    """File a draft (not searchable); a retry with the same ``source.session_id`` + ``event_id`` is the same one."""
    pid = viewer.principal_id
    if not pid:
        raise ProposalError("a proposal needs the caller's user principal", status=403, field="X-Principal-Id")
    held = rt.hierarchy.expand(viewer.principals)
    scope = procedures.caller_scope(held, pid, req.scope)
    spec = ProcedureSpec(
        name=req.title, steps=req.steps, description=req.description, when_to_use=req.when_to_use, tools=req.tools
    )
    o = req.source
    key = f"{o.agent}|{o.session_id}|{o.event_id}" if o.session_id and o.event_id else None
    async with rt.pool.acquire() as conn:
        found = await _sources(conn, req.workspace, req.source_ids)
        unseen = [i for i in req.source_ids if i not in found or not held.intersection(found[i][1])]
        if unseen:
            raise ProposalError(f"no visible document or memory {unseen[0]}", status=422, field="source_ids")
        docs = dict(found.values())
        gap = _uncovered(rt.hierarchy, scope, docs, (pid, held))
        if gap:
            raise ProposalError(
                f"{gap[0]} cannot see source {gap[1]}: a proposal's scope must see every source",
                status=422,
                field="scope",
            )
        row = await conn.fetchrow(
            "INSERT INTO procedure_proposals (id, workspace, proposer, title, spec, scope, source_document_ids, origin,"
            " origin_key) VALUES ($1, $2, $3, $4, $5::jsonb, $6::text[], $7::uuid[], $8::jsonb, $9)"
            " ON CONFLICT (workspace, proposer, origin_key) WHERE origin_key IS NOT NULL DO NOTHING RETURNING *",
            uuid.uuid4(),
            req.workspace,
            pid,
            spec.name,
            spec.model_dump_json(),
            scope,
            sorted(docs),
            o.model_dump_json(),
            key,
        )
        if row is not None:
            return _proposal(row)
        again = await conn.fetchrow(
            "SELECT * FROM procedure_proposals WHERE workspace = $1 AND proposer = $2 AND origin_key = $3",
            req.workspace,
            pid,
            key,
        )
    assert again is not None  # the conflicting row exists
    return _proposal(again, created=False)


async def list_proposals(
    pool: asyncpg.Pool,
    workspace: str,
    principals: Sequence[str],
    *,
    status: str | None,
    limit: int,
    before: datetime | None,
) -> ProcedureProposalList:
    """Newest first, only the proposals the viewer may see (admins included: see the module docstring)."""
    rows = await pool.fetch(
        f"SELECT p.* FROM procedure_proposals p WHERE p.workspace = $1 AND {_VISIBLE}"
        " AND ($3::text IS NULL OR p.status = $3) AND ($4::timestamptz IS NULL OR p.created_at < $4)"
        " ORDER BY p.created_at DESC, p.id LIMIT $5",
        workspace,
        list(principals),
        status,
        before,
        limit + 1,
    )
    page = [_proposal(r) for r in rows[:limit]]
    return ProcedureProposalList(proposals=page, next_before=page[-1].created_at if len(rows) > limit else None)


async def _visible_row(
    conn: asyncpg.Connection, workspace: str, pid: uuid.UUID, principals: Sequence[str], *, lock: bool = False
) -> asyncpg.Record:
    row = await conn.fetchrow(
        f"SELECT p.* FROM procedure_proposals p WHERE p.workspace = $1 AND {_VISIBLE} AND p.id = $3"
        + (" FOR UPDATE OF p" if lock else ""),
        workspace,
        list(principals),
        pid,
    )
    if row is None:  # unknown and invisible answer alike
        raise ProposalError(f"no visible procedure proposal {pid}", status=404, field="proposal_id")
    return row


async def get_proposal(
    pool: asyncpg.Pool, workspace: str, pid: uuid.UUID, principals: Sequence[str]
) -> ProcedureProposal:
    async with pool.acquire() as conn:
        return _proposal(await _visible_row(conn, workspace, pid, principals))


async def decide(
    rt: Runtime, viewer: Viewer, workspace: str, pid: uuid.UUID, *, approve: bool, reason: str | None
) -> ProcedureProposal:
    """Approve (publish the procedure) or reject (keep the row, nothing published); idempotent per verb."""
    held = rt.hierarchy.expand(viewer.principals)
    target = "approved" if approve else "rejected"
    async with rt.pool.acquire() as conn, conn.transaction():
        row = await _visible_row(conn, workspace, pid, sorted(held), lock=True)
        if not viewer.is_admin and not set(row["scope"]) <= held:
            raise ProposalError(
                "only an admin or a viewer holding every principal of the proposal's scope may decide it",
                status=403,
                field="proposal_id",
            )
        if row["status"] == target:
            return _proposal(row, created=False)
        if row["status"] != "pending":
            raise ProposalError(f"proposal {pid} is already {row['status']}", status=409, field="status")
        now = datetime.now(UTC)
        env_id = procedure_id = None
        if approve:
            env_id, procedure_id = await _publish(rt, conn, row, now)
        done = await conn.fetchrow(
            "UPDATE procedure_proposals SET status = $2, reason = $3, decided_by = $4, decided_at = $5,"
            " procedure_id = $6, envelope_id = $7 WHERE id = $1 RETURNING *",
            pid,
            target,
            reason,
            viewer.principal_id or "admin",
            now,
            procedure_id,
            env_id,
        )
    assert done is not None
    return _proposal(done)


async def _publish(
    rt: Runtime, conn: asyncpg.Connection, row: asyncpg.Record, now: datetime
) -> tuple[uuid.UUID, uuid.UUID]:
    """Produce the approved draft as a procedure (inside the caller's transaction). Sources are re-checked against
    the scope's groups as they are now (the proposer's own principal was checked when it proposed)."""
    ws, scope = row["workspace"], list(row["scope"])
    live = {
        r["id"]: list(r["principals"])
        for r in await conn.fetch(
            "SELECT id, principals FROM documents WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL",
            list(row["source_document_ids"]),
        )
    }
    groups = [p for p in scope if p != row["proposer"]]
    gap = _uncovered(rt.hierarchy, groups, live, None)
    if gap:
        raise ProposalError(f"{gap[0]} can no longer see source {gap[1]}", status=409, field="scope")
    spec = ProcedureSpec.model_validate(json.loads(row["spec"]))
    env = procedures.upsert_envelope(
        ws, spec, scope, author_principal=row["proposer"], envelope_id=uuid.uuid5(_NS, str(row["id"])), event_time=now
    )
    await procedures.publish(rt, env)
    return env.envelope_id, procedures.procedure_id(ws, spec.name, scope)
