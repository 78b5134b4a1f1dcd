"""Memory verbs: list / get / update / whoami, plain async functions ``(runtime, viewer, request) -> response``
(the HTTP routes call them; a tool catalogue registers them as they are). Reads filter in SQL on the viewer's
EXPANDED principals, like every viewer-scoped read: a memory the viewer may not see is 404, never "exists but
forbidden". Writes go through :class:`services.memories.MemoryService` (the throttle, the envelope).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import uuid
from datetime import datetime
from typing import Any

import asyncpg

from schemas.memory import (
    GetMemoryRequest,
    ListMemoriesRequest,
    Memory,
    MemoryDetail,
    MemoryList,
    MemoryVersion,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIRequest,
    WhoAmIResponse,
)
from services.memories import (
    AGENT_SYSTEM,
    AUTHOR_SQL,
    PRINCIPAL_NAMESPACE,
    MemoryWriteError,
    caller_of,
    get_memory_service,
)
from services.runtime import Runtime
from services.viewer import Viewer

log = logging.getLogger("orgmem.memories")
MEMORY_COLUMNS = (
    "d.id, d.external_id, d.title, d.principals, d.thread_external_id, d.event_time, d.current_version,"
    f" {AUTHOR_SQL} AS author,"
    " (SELECT array_agg(c.char_start ORDER BY c.char_start) FROM chunks c"
    "   WHERE c.document_id = d.id AND c.is_parent AND NOT c.deleted) AS starts,"
    " (SELECT array_agg(c.text ORDER BY c.char_start) FROM chunks c"
    "   WHERE c.document_id = d.id AND c.is_parent AND NOT c.deleted) AS texts"
)
KINDS = ("note", "decision", "preference", "fact", "procedure")


def _refuse(message: str, *, status: int, field: str | None) -> MemoryWriteError:
    return MemoryWriteError(message, status=status, field=field)


def _joined(starts: list[int] | None, texts: list[str] | None) -> str:
    """The memory's text from its parent chunks (ordered by offset; an overlap is not repeated)."""
    out, end = "", 0
    for start, text in zip(starts or [], texts or [], strict=True):
        if start >= end:
            out += ("\n" if out and start > end else "") + text
        else:
            out += text[end - start :]
        end = max(end, start + len(text))
    return out


def _kind_title(stored: str | None) -> tuple[str, str | None]:
    """``decision: <title>`` or ``decision from <agent>`` (how ``memory_envelope`` stores the kind)."""
    stored = stored or ""
    for kind in KINDS:
        if stored.startswith(f"{kind}: "):
            return kind, stored[len(kind) + 2 :] or None
        if stored.startswith(f"{kind} from "):
            return kind, None
    return "note", stored or None


def _memory(row: asyncpg.Record) -> dict[str, Any]:
    principals = list(row["principals"])
    author = row["author"]
    scope = (
        "user" if author and principals == [author] else next((p for p in principals if p.startswith("group:")), "user")
    )
    kind, title = _kind_title(row["title"])
    return {
        "memory_id": row["external_id"],
        "kind": kind,
        "title": title,
        "text": _joined(row["starts"], row["texts"]),
        "scope": scope,
        "principals": principals,
        "author": author,
        "session_id": row["thread_external_id"],
        "event_time": row["event_time"],
        "version": row["current_version"],
    }


def _cursor(event_time: datetime, doc_id: uuid.UUID) -> str:
    raw = json.dumps([event_time.isoformat(), str(doc_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _uncursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        at, did = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return datetime.fromisoformat(at), uuid.UUID(did)
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise _refuse("cursor is not one this API returned", status=422, field="cursor") from None


def _need_principal(viewer: Viewer) -> str:
    if not viewer.principal_id:
        raise _refuse(
            "memory reads need the caller's user principal (X-Principal-Id)", status=403, field="X-Principal-Id"
        )
    return viewer.principal_id


async def list_memories(rt: Runtime, viewer: Viewer, req: ListMemoriesRequest) -> MemoryList:
    """Mine (no scope: every memory I authored that I may still see), my private ones (``user``), or the
    ones shared with a group I hold (``group:<uuid>``, 403 for a group I do not hold); newest first."""
    me = _need_principal(viewer)
    seen = list(viewer.expand(rt.hierarchy))
    args: list[Any] = [req.workspace, AGENT_SYSTEM, seen, req.limit + 1, PRINCIPAL_NAMESPACE]
    where = [
        "d.workspace = $1",
        "d.source_system = $2",
        "d.deleted_at IS NULL",
        "d.principals && $3::text[]",
    ]
    if req.scope is None or req.scope == "user":
        args.append(me)
        where.append(f"{AUTHOR_SQL} = ${len(args)}")
        if req.scope == "user":
            where.append(f"d.principals = ARRAY[${len(args)}]::text[]")
    else:
        if req.scope not in seen:
            raise _refuse(f"scope {req.scope} is not a group the caller holds", status=403, field="scope")
        args.append(req.scope)
        where.append(f"${len(args)} = ANY(d.principals)")
    if req.cursor:
        at, did = _uncursor(req.cursor)
        args += [at, did]
        where.append(f"(d.event_time, d.id) < (${len(args) - 1}, ${len(args)})")
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM documents d WHERE {' AND '.join(where)}"
        " ORDER BY d.event_time DESC, d.id DESC LIMIT $4"
    )
    async with rt.pool.acquire() as conn:
        rows = await conn.fetch(sql, *args)
    page = rows[: req.limit]
    more = len(rows) > req.limit
    return MemoryList(
        memories=[Memory.model_validate(_memory(r)) for r in page],
        next_cursor=_cursor(page[-1]["event_time"], page[-1]["id"]) if more and page else None,
    )


async def get_memory(rt: Runtime, viewer: Viewer, req: GetMemoryRequest) -> MemoryDetail:
    """One memory the viewer may see, with every version (oldest first; texts from the archive)."""
    _need_principal(viewer)
    seen = list(viewer.expand(rt.hierarchy))
    async with rt.pool.acquire() as conn:
        row = await conn.fetchrow(
            f"SELECT {MEMORY_COLUMNS} FROM documents d WHERE d.workspace = $1 AND d.source_system = $2"
            " AND d.external_id = $4 AND d.deleted_at IS NULL AND d.principals && $3::text[]",
            req.workspace,
            AGENT_SYSTEM,
            seen,
            req.memory_id,
            PRINCIPAL_NAMESPACE,
        )
        if row is None:
            raise _refuse(f"no memory {req.memory_id} in workspace {req.workspace}", status=404, field="memory_id")
        versions = await conn.fetch(
            "SELECT version, op, event_time, envelope_id, blob_key FROM document_versions"
            " WHERE document_id = $1 ORDER BY version",
            row["id"],
        )
    current = _memory(row)
    history = [
        MemoryVersion(
            version=v["version"],
            op=v["op"],
            event_time=v["event_time"],
            envelope_id=v["envelope_id"],
            text=current["text"] if v["version"] == row["current_version"] else await _archived_text(rt, v["blob_key"]),
        )
        for v in versions
    ]
    return MemoryDetail.model_validate({**current, "versions": history})


async def _archived_text(rt: Runtime, blob_key: str | None) -> str | None:
    """A past version's text from its archived envelope (``<object key>#<line>``); None when it is gone."""
    if not blob_key:
        return None
    key, _, line = blob_key.partition("#")
    try:
        raw = (await rt.store.get(key)).split(b"\n")[int(line or 0)]
        text = json.loads(raw).get("document", {}).get("text")
    except Exception as exc:  # a purged or unreachable archive: the history row stays, its text is unknown
        log.info("memory version text unavailable (%s): %s", blob_key, exc)
        return None
    return text if isinstance(text, str) else None


async def update_memory(rt: Runtime, viewer: Viewer, req: UpdateMemoryRequest) -> UpdateMemoryResponse:
    """A new version superseding the current one (the author only; one write for the throttle)."""
    return await get_memory_service(rt).update(req, caller_of(rt, viewer), list(viewer.expand(rt.hierarchy)))


async def whoami(rt: Runtime, viewer: Viewer, req: WhoAmIRequest) -> WhoAmIResponse:
    """The authenticated caller: principal, groups held (gateway header, else the directory), the same
    expanded up the hierarchy, and the scopes ``remember`` accepts from it."""
    expanded = sorted(g for g in rt.hierarchy.expand(viewer.principals) if g.startswith("group:"))
    return WhoAmIResponse(
        principal_id=viewer.principal_id,
        groups=list(viewer.groups),
        expanded_groups=expanded,
        writable_scopes=(["user"] if viewer.principal_id else []) + expanded,
        is_admin=viewer.is_admin,
    )
