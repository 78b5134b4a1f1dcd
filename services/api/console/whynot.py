"""Why-not: why a document is not returned for a query, from the permission history (``services.governance.access``)
and the retriever's own diagnostics from searches run as the viewer (no search ever runs with more than the
viewer's principals). Steps in order: the document, deletion, ACL, time, the arms' ranks, then the verdict."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from retriever.wiring import get_service
from schemas.tools import MAX_LIMIT, RetrieveContextRequest, SearchKnowledgeBaseRequest
from services.governance import access
from services.runtime import Runtime
from services.viewer import Viewer


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
    found = await _document(rt, out, workspace, external_id, source_system, at)
    if found is None:
        return out | {"dropped_by": "not_found"}
    doc, history, chunk_ids = found
    dropped = _visibility(out, doc, history, principals, at, as_of)
    if dropped is not None:
        return out | {"dropped_by": dropped}
    diagnostics = await _ranks(rt, viewer, out, doc["id"], query, workspace, mode, as_of, limit)
    return out | {"dropped_by": _verdict(out, diagnostics, chunk_ids, limit)}


async def _document(
    rt: Runtime, out: dict[str, Any], workspace: str, external_id: str, source_system: str | None, at: datetime
) -> tuple[Any, list[dict[str, Any]], set[str]] | None:
    """Step 1: the document (None when there is none), its ACL history and its chunk ids."""
    steps = out["steps"]
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
            return None
        doc = rows[0]
        out["document_id"], out["title"] = doc["id"], doc["title"]
        note = " (another source system has this external id too; give source_system)" if len(rows) > 1 else ""
        steps.append({"step": "document", "ok": True, "detail": f"{doc['source_system']}:{external_id}{note}"})
        acl = await access.document_access(conn, doc["id"], at)
        chunk_ids = {str(r["id"]) for r in await conn.fetch("SELECT id FROM chunks WHERE document_id = $1", doc["id"])}
    return doc, (acl or {}).get("history", []), chunk_ids


def _visibility(
    out: dict[str, Any],
    doc: Any,
    history: list[dict[str, Any]],
    principals: list[str],
    at: datetime,
    as_of: datetime | None,
) -> str | None:
    """Steps 2-4: deleted, not visible to the viewer, or after ``as_of`` (what dropped it), else None."""
    steps = out["steps"]
    state = access.state_at(history, at)
    if doc["deleted_at"] is not None or (state is not None and state["deleted"]):
        steps.append({"step": "deleted", "ok": False, "detail": f"deleted at {doc['deleted_at']}"})
        return "deleted"
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
        return "acl"
    steps.append(
        {"step": "acl", "ok": True, "detail": f"visible through {', '.join(shared)} since {out['visible_since']}"}
    )
    if as_of is not None and doc["event_time"] > as_of:
        steps.append({"step": "time", "ok": False, "detail": f"event time {doc['event_time']} is after as_of"})
        return "time"
    return None


async def _ranks(
    rt: Runtime,
    viewer: Viewer,
    out: dict[str, Any],
    document_id: uuid.UUID,
    query: str,
    workspace: str,
    mode: str,
    as_of: datetime | None,
    limit: int,
) -> dict[str, Any]:
    """Step 5: the document's rank in each arm, fused, and as returned (searches run as the viewer); returns the
    diagnostics of the search as asked."""
    svc = get_service(rt)
    for arm in ("lexical", "dense"):
        found = await svc.search_knowledge_base(
            SearchKnowledgeBaseRequest(query=query, workspace=workspace, limit=MAX_LIMIT, arms=arm, as_of=as_of),
            viewer,
        )
        out["arms"].append({"arm": arm, "rank": _first_rank(found.passages, document_id)})
    deep = await svc.retrieve_context(
        with_diagnostics(query=query, workspace=workspace, limit=MAX_LIMIT, mode=mode, as_of=as_of),
        viewer,
    )
    out["fused_rank"] = _first_rank(deep.passages, document_id)
    asked = await svc.retrieve_context(
        with_diagnostics(query=query, workspace=workspace, limit=limit, mode=mode, as_of=as_of),
        viewer,
    )
    out["returned_rank"] = _first_rank(asked.passages, document_id)
    arms = ", ".join(f"{a['arm']} #{a['rank']}" if a["rank"] else f"{a['arm']}: not in its top 50" for a in out["arms"])
    out["steps"].append({"step": "arms", "ok": any(a["rank"] for a in out["arms"]), "detail": arms})
    return asked.diagnostics


def _verdict(out: dict[str, Any], diagnostics: dict[str, Any], chunk_ids: set[str], limit: int) -> str:
    """Step 6: what dropped it after the arms (packing, dedup, the limit, the floor) or ``returned``."""
    steps = out["steps"]
    fusion = diagnostics.get("fusion") or {}
    decisions = (diagnostics.get("packing") or {}).get("decisions") or []
    dropped_packing = [d for d in decisions if d.get("key") in chunk_ids and d.get("action") != "kept"]
    below = [c for c in fusion.get("below_floor") or [] if c in chunk_ids]
    dups = [d for d in fusion.get("dropped_duplicates") or [] if d.get("chunk_id") in chunk_ids]
    if out["returned_rank"] is not None:
        steps.append({"step": "returned", "ok": True, "detail": f"returned at rank {out['returned_rank']}"})
        return "returned"
    if dropped_packing:
        d = dropped_packing[0]
        steps.append({"step": "packing", "ok": False, "detail": f"{d.get('action')}: {d.get('reason')}"})
        return "packing"
    if dups:
        steps.append({"step": "dedup", "ok": False, "detail": f"dropped as a duplicate of chunk {dups[0]['kept']}"})
        return "duplicate"
    if out["fused_rank"] is not None:
        why = f"fused rank {out['fused_rank']}, past the limit of {limit}"
        if below:
            why += "; below the score floor (no boosts), then cut by autocut"
        elif fusion.get("autocut_index") is not None:
            why += f"; autocut kept {fusion.get('autocut_index')}"
        steps.append({"step": "limit", "ok": False, "detail": why})
        return "floor" if below else "limit"
    if below:
        steps.append({"step": "floor", "ok": False, "detail": "below the score floor, cut by autocut"})
        return "floor"
    steps.append({"step": "fusion", "ok": False, "detail": "no arm ranked it in its top 50 for this query"})
    return "no_arm"
