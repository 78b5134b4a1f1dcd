"""Consolidation runs (``orgmem consolidate [--apply]``, the schedule in ``orgmem up``) and the merge records'
reads and undo (``GET /v1/consolidations``, ``POST /v1/consolidations/{id}/undo``)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from schemas.consolidation import Consolidation, ConsolidationList, ConsolidationReport, PlannedMerge, UndoResult
from services.consolidation import repository as repo
from services.consolidation.rules import plan
from services.errors import RefusedError
from services.settings import Settings

log = logging.getLogger("orgmem.consolidation")


class ConsolidationError(RefusedError):
    """A refused consolidation call: an unseen source, an unknown consolidation, one already undone, a caller
    who is neither its author nor an admin."""


async def consolidate(
    pool: asyncpg.Pool,
    workspace: str,
    *,
    sim: float,
    source_systems: Sequence[str] = ("agent",),
    apply: bool,
    actor: str,
) -> ConsolidationReport:
    """Plan (and with ``apply`` carry out) the merges of every owner's memories in ``workspace``."""
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        loaded = await repo.load(conn, workspace, source_systems)
    planned: list[PlannedMerge] = []
    skipped = 0
    for memories in loaded.memories.values():
        for merge in plan(memories, sim=sim):
            cid = None
            if apply:
                async with pool.acquire() as conn, conn.transaction():
                    cid = await repo.apply(conn, workspace, run_id, merge, loaded, actor)
                if cid is None:
                    skipped += 1
                    continue
            planned.append(
                PlannedMerge(
                    survivor_id=uuid.UUID(merge.survivor),
                    absorbed_ids=[uuid.UUID(a) for a in merge.absorbed],
                    reason=merge.reason,
                    similarity=merge.similarity,
                    consolidation_id=cid,
                )
            )
    count = sum(len(m) for m in loaded.memories.values())
    return ConsolidationReport(
        run_id=run_id, workspace=workspace, applied=apply, memories=count, merges=planned, skipped_changed=skipped
    )


def record(row: Any) -> Consolidation:
    return Consolidation(
        id=row["id"],
        survivor_id=row["survivor_id"],
        absorbed_ids=list(row["absorbed_ids"]),
        reason=row["reason"],
        similarity=row["similarity"],
        facts_closed=len(json.loads(row["fact_changes"])),
        created_at=row["created_at"],
        created_by=row["created_by"],
        undone_at=row["undone_at"],
        undone_by=row["undone_by"],
    )


async def list_consolidations(
    pool: asyncpg.Pool,
    workspace: str,
    principals: Sequence[str] | None,
    *,
    limit: int,
    before: datetime | None,
) -> ConsolidationList:
    async with pool.acquire() as conn:
        rows = await repo.listing(conn, workspace, principals, limit=limit + 1, before=before)
    page = [record(r) for r in rows[:limit]]
    return ConsolidationList(consolidations=page, next_before=page[-1].created_at if len(rows) > limit else None)


async def undo_consolidation(
    pool: asyncpg.Pool, cid: uuid.UUID, *, principal_id: str | None, principals: Sequence[str], is_admin: bool
) -> UndoResult:
    """The memories' author (or an admin) undoes a merge it can see; anyone else gets the answer an unknown id gets."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT * FROM memory_consolidations WHERE id = $1", cid)
        seen = row is not None and (is_admin or await repo.visible(conn, cid, principals))
        if row is None or not seen:
            raise ConsolidationError(f"no consolidation {cid}", status=404, field="consolidation_id")
        if not is_admin and principal_id not in await repo.author_principals(conn, row["survivor_id"]):
            raise ConsolidationError(
                "only the memories' author or an admin may undo a consolidation", status=403, field="consolidation_id"
            )
        if row["undone_at"] is not None:
            raise ConsolidationError(f"consolidation {cid} is already undone", status=409, field="consolidation_id")
        done = await repo.undo(conn, cid, principal_id or "admin")
        assert done is not None  # the row was locked active above
        after = await conn.fetchrow("SELECT * FROM memory_consolidations WHERE id = $1", cid)
    return UndoResult(
        consolidation=record(after),
        restored_chunks=done["restored_chunks"],
        skipped=[uuid.UUID(s) for s in done["skipped"]],
    )


async def periodic_consolidation(settings: Settings, pool_of: Callable[[], asyncpg.Pool]) -> None:
    """Inside ``orgmem up`` when ``CONSOLIDATION_ENABLED``: every ``CONSOLIDATION_INTERVAL`` seconds, apply."""
    while True:
        await asyncio.sleep(settings.consolidation_interval_s)
        try:
            pool = pool_of()
            workspaces = [
                r["workspace"]
                for r in await pool.fetch("SELECT DISTINCT workspace FROM documents WHERE source_system = 'agent'")
            ]
            for ws in workspaces:
                report = await consolidate(
                    pool, ws, sim=settings.consolidation_sim, apply=True, actor="orgmem-up:schedule"
                )
                log.info("consolidation %s: %d memories, %d merges", ws, report.memories, len(report.merges))
        except asyncio.CancelledError:
            raise
        except Exception:  # the next interval tries again; a failed run changed nothing it did not record
            log.exception("scheduled consolidation failed")
