"""Agent memory writes: a ``RememberRequest`` becomes a ``ChangeEnvelope`` produced to ``om.envelopes.v1``.

- ``source.system = "agent"``; ``source.external_id`` = the memory id, a uuid5 of (workspace, author,
  agent, session id, event id) — or of the text when no event id is given — so a retried write is one
  memory (same document, same version content).
- author = the caller: a verified ``principal`` identity ``user:<uuid>`` (so ``forget`` can check it).
- the kind is kept in the title (``decision: <title>``, or ``decision from <agent>`` without one).
- ACL: scope ``user`` -> ``[caller]``; scope ``group:<uuid>`` -> ``[group]``, allowed only when the
  caller holds the group (directly, through the directory, or as an ancestor in the hierarchy).
- ``forget`` is a tombstone (op ``delete``), allowed to the memory's author and to admins.
Identity always comes from the authenticated caller, never from the request body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from schemas.envelope import ChangeEnvelope
from schemas.memory import (
    ForgetResponse,
    GetMemoryRequest,
    ListMemoriesRequest,
    Memory,
    MemoryDetail,
    MemoryList,
    MemoryVersion,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
    WhoAmIRequest,
    WhoAmIResponse,
)
from services.errors import OrgMemoryError
from services.hierarchy import OrgHierarchy
from services.kafka.app import BrokerPublisher
from services.metrics import MEMORY_WRITES
from services.runtime import Runtime
from services.throttle import Refusal, WriteThrottle
from services.viewer import Viewer

log = logging.getLogger("orgmem.memories")
AGENT_SYSTEM = "agent"
PRINCIPAL_NAMESPACE = "principal"
_NS = uuid.UUID("6f1c2a9e-3b7d-5e4f-9a8b-0c1d2e3f4a5b")


class MemoryWriteError(OrgMemoryError):
    """A refused memory write: ``status`` is the HTTP status (403 scope, 404 unknown, 429 throttled)."""

    def __init__(
        self, message: str, *, status: int, field: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, status=status, field=field)
        self.status = status
        self.field = field
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Caller:
    principal_id: str | None
    holds: frozenset[str]  # every principal the caller holds, groups expanded
    is_admin: bool = False


def memory_id(workspace: str, author: str, req: RememberRequest) -> str:
    src = req.source
    basis = (
        f"event:{src.event_id}"
        if src.event_id
        else "text:" + hashlib.sha256(f"{req.title or ''}\n{req.text}".encode()).hexdigest()
    )
    return str(uuid.uuid5(_NS, "|".join((workspace, author, src.agent, src.session_id or "-", basis))))


def memory_envelope(req: RememberRequest, caller: Caller, *, now: datetime | None = None) -> ChangeEnvelope:
    """The envelope for a memory write, or ``MemoryWriteError`` (403) for a scope the caller lacks."""
    if not caller.principal_id:
        raise MemoryWriteError(
            "memory writes need the caller's user principal (X-Principal-Id)", status=403, field="X-Principal-Id"
        )
    if req.scope == "user":
        principals = [caller.principal_id]
    elif req.scope in caller.holds:
        principals = [req.scope]
    else:
        raise MemoryWriteError(f"scope {req.scope} is not a group the caller holds", status=403, field="scope")
    mid = memory_id(req.workspace, caller.principal_id, req)
    event_time = now or datetime.now(UTC)
    body: dict[str, Any] = {
        # a retried write is a new envelope for the same document (same memory id, same content hash)
        "envelope_id": str(uuid.uuid4()),
        "workspace": req.workspace,
        "op": "upsert",
        "source": {"system": AGENT_SYSTEM, "external_id": mid, "url": None},
        "event_time": event_time.isoformat(),
        "document": {
            "kind": "document",
            "title": f"{req.kind}: {req.title}" if req.title else f"{req.kind} from {req.source.agent}",
            "text": req.text,
            "thread_external_id": req.source.session_id,
        },
        "author": {
            "display_name": req.source.agent,
            "identities": [{"namespace": PRINCIPAL_NAMESPACE, "value": caller.principal_id, "verified": True}],
        },
        "acl": {"principals": principals, "acl_event_time": event_time.isoformat()},
    }
    return ChangeEnvelope.model_validate(body)


class MemoryService:
    """Shared by ``POST/DELETE /v1/memories``, MCP ``remember``/``forget`` and the ADK adapter (via HTTP)."""

    def __init__(self, *, pool: asyncpg.Pool, publisher: BrokerPublisher, topic: str, throttle: WriteThrottle):
        self.pool = pool
        self.publisher = publisher
        self.topic = topic
        self.throttle = throttle

    def _check_throttle(self, caller: Caller, session: str | None) -> None:
        refusal: Refusal | None = self.throttle.try_claim(caller.principal_id or "-", session)
        if refusal is not None:
            MEMORY_WRITES.labels(f"throttled_{refusal.reason}").inc()
            raise MemoryWriteError(
                refusal.message, status=429, field="source.session_id", retry_after_s=refusal.retry_after_s
            )

    async def remember(self, req: RememberRequest, caller: Caller) -> RememberResponse:
        try:
            env = memory_envelope(req, caller)
        except MemoryWriteError:
            MEMORY_WRITES.labels("forbidden").inc()
            raise
        self._check_throttle(caller, req.source.session_id)
        written = await self._publish(req, env)
        MEMORY_WRITES.labels("accepted").inc()
        return written

    async def remember_batch(self, batch: RememberBatchRequest, caller: Caller) -> RememberBatchResponse:
        """Every memory checked (scope) before any is written; ONE throttle claim per session in the batch
        (a session's events are one write), then the envelopes are produced in order."""
        try:
            envs = [(req, memory_envelope(req, caller)) for req in batch.memories]
        except MemoryWriteError as exc:
            MEMORY_WRITES.labels("forbidden").inc()
            index = next(i for i, r in enumerate(batch.memories) if _refused(r, caller))
            raise MemoryWriteError(
                exc.message, status=exc.status, field=f"memories.{index}.{exc.field}" if exc.field else None
            ) from None
        for session in dict.fromkeys(r.source.session_id for r in batch.memories):
            self._check_throttle(caller, session)
        out = [await self._publish(req, env) for req, env in envs]
        MEMORY_WRITES.labels("accepted").inc(len(out))
        return RememberBatchResponse(memories=out)

    async def _publish(self, req: RememberRequest, env: ChangeEnvelope) -> RememberResponse:
        meta = await self.publisher.send(
            self.topic,
            env.model_dump_json().encode(),
            key=env.key.encode(),
            headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
        )
        return RememberResponse(
            memory_id=env.source.external_id,
            scope=req.scope,
            principals=list(env.acl.principals),
            key=env.key,
            envelope_id=env.envelope_id,
            topic=meta.topic,
            partition=meta.partition,
            offset=meta.offset,
        )

    async def update(
        self, req: UpdateMemoryRequest, caller: Caller, viewer_principals: list[str]
    ) -> UpdateMemoryResponse:
        """A new version of a memory the caller authored and may still see: same id, ACL, title and session;
        the new text; ``event_time`` now. The old versions stay in ``document_versions`` and the archive."""
        if not caller.principal_id:
            raise MemoryWriteError(
                "memory writes need the caller's user principal (X-Principal-Id)", status=403, field="X-Principal-Id"
            )
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                f"SELECT d.title, d.thread_external_id, d.principals, d.current_version, {_AUTHOR_SQL} AS author"
                " FROM documents d WHERE d.workspace = $1 AND d.source_system = $2 AND d.external_id = $3"
                " AND d.deleted_at IS NULL AND d.principals && $4::text[]",
                req.workspace,
                AGENT_SYSTEM,
                req.memory_id,
                viewer_principals,
                PRINCIPAL_NAMESPACE,
            )
        if row is None:
            raise MemoryWriteError(
                f"no memory {req.memory_id} in workspace {req.workspace}", status=404, field="memory_id"
            )
        if row["author"] != caller.principal_id:
            MEMORY_WRITES.labels("forbidden").inc()
            raise MemoryWriteError("only the memory's author may update it", status=403, field="memory_id")
        self._check_throttle(caller, row["thread_external_id"])
        now = datetime.now(UTC)
        env = ChangeEnvelope.model_validate(
            {
                "envelope_id": str(uuid.uuid4()),
                "workspace": req.workspace,
                "op": "upsert",
                "source": {"system": AGENT_SYSTEM, "external_id": req.memory_id, "url": None},
                "event_time": now.isoformat(),
                "document": {
                    "kind": "document",
                    "title": row["title"],
                    "text": req.text,
                    "thread_external_id": row["thread_external_id"],
                },
                "author": {
                    "display_name": (row["title"] or "agent").split(" from ")[-1][:128],
                    "identities": [{"namespace": PRINCIPAL_NAMESPACE, "value": caller.principal_id, "verified": True}],
                },
                "acl": {"principals": list(row["principals"]), "acl_event_time": now.isoformat()},
            }
        )
        meta = await self.publisher.send(
            self.topic,
            env.model_dump_json().encode(),
            key=env.key.encode(),
            headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
        )
        MEMORY_WRITES.labels("updated").inc()
        return UpdateMemoryResponse(
            memory_id=req.memory_id,
            supersedes_version=row["current_version"],
            version=row["current_version"] + 1,
            principals=list(row["principals"]),
            envelope_id=env.envelope_id,
            topic=meta.topic,
            partition=meta.partition,
            offset=meta.offset,
        )

    async def forget(self, mid: str, caller: Caller, *, workspace: str = "default") -> ForgetResponse:
        try:
            uuid.UUID(mid)
        except ValueError:
            raise MemoryWriteError("memory id must be a uuid", status=422, field="memory_id") from None
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT d.deleted_at, array_remove(array_agg(a.value), NULL) AS authors FROM documents d"
                " LEFT JOIN person_aliases a ON a.person_id = d.author_person_id AND a.workspace = d.workspace"
                " AND a.namespace = $4"
                " WHERE d.workspace = $1 AND d.source_system = $2 AND d.external_id = $3 GROUP BY d.id",
                workspace,
                AGENT_SYSTEM,
                mid,
                PRINCIPAL_NAMESPACE,
            )
        if row is None:
            raise MemoryWriteError(f"no memory {mid} in workspace {workspace}", status=404, field="memory_id")
        authors: Iterable[str] = row["authors"] or []
        if not caller.is_admin and caller.principal_id not in set(authors):
            MEMORY_WRITES.labels("forbidden").inc()
            raise MemoryWriteError("only the memory's author or an admin may forget it", status=403, field="memory_id")
        now = datetime.now(UTC)
        env = ChangeEnvelope.model_validate(
            {
                "envelope_id": str(uuid.uuid4()),
                "workspace": workspace,
                "op": "delete",
                "source": {"system": AGENT_SYSTEM, "external_id": mid},
                "event_time": now.isoformat(),
            }
        )
        meta = await self.publisher.send(
            self.topic,
            env.model_dump_json().encode(),
            key=env.key.encode(),
            headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
        )
        MEMORY_WRITES.labels("forgotten").inc()
        return ForgetResponse(
            memory_id=mid,
            forgotten=row["deleted_at"] is None,
            envelope_id=env.envelope_id,
            topic=meta.topic,
            partition=meta.partition,
            offset=meta.offset,
        )


def get_memory_service(rt: Runtime) -> MemoryService:
    """The runtime's memory-write service, built on first use: one throttle per process, whichever door
    (HTTP, MCP, Kafka request/reply) the write comes through."""
    s = rt.settings
    return rt.owned(
        MemoryService,
        lambda: MemoryService(
            pool=rt.pool,
            publisher=rt.publisher,
            topic=s.topic("envelopes"),
            throttle=WriteThrottle(cooldown_s=s.memory_write_cooldown_s, cap=s.memory_write_cap),
        ),
    )


def caller_for(viewer: Viewer, hierarchy: OrgHierarchy, *, admin_door: bool = True) -> Caller:
    """The caller of a memory write: its user principal and every group it holds (hierarchy expanded).
    ``admin_door=False`` (Kafka request/reply, where no API key names an admin) never grants admin."""
    return Caller(viewer.principal_id, hierarchy.expand(viewer.principals), viewer.is_admin and admin_door)


def caller_of(rt: Runtime, viewer: Viewer) -> Caller:
    return caller_for(viewer, rt.hierarchy)


def _refused(req: RememberRequest, caller: Caller) -> bool:
    try:
        memory_envelope(req, caller)
    except MemoryWriteError:
        return True
    return False


# ---- memory verbs: list / get / update / whoami --------------------------------------------------------
# Plain async functions ``(runtime, viewer, request) -> response`` (the HTTP routes call them; a tool
# catalogue registers them as they are). Reads filter in SQL on the viewer's EXPANDED principals, like
# every viewer-scoped read: a memory the viewer may not see is 404, never "exists but forbidden".

_AUTHOR_SQL = (
    "(SELECT a.value FROM person_aliases a WHERE a.person_id = d.author_person_id AND a.workspace = d.workspace"
    " AND a.namespace = $5 ORDER BY a.value LIMIT 1)"
)
_MEMORY_COLUMNS = (
    "d.id, d.external_id, d.title, d.principals, d.thread_external_id, d.event_time, d.current_version,"
    f" {_AUTHOR_SQL} AS author,"
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
        where.append(f"{_AUTHOR_SQL} = ${len(args)}")
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
        f"SELECT {_MEMORY_COLUMNS} FROM documents d WHERE {' AND '.join(where)}"
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
            f"SELECT {_MEMORY_COLUMNS} FROM documents d WHERE d.workspace = $1 AND d.source_system = $2"
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
