"""Agent memory writes: a ``RememberRequest`` becomes a ``ChangeEnvelope`` produced to ``om.envelopes.v1``.

- ``source.system = "agent"``; ``source.external_id`` = the memory id, a uuid5 of (workspace, author,
  agent, session id, event id) — or of the text when no event id is given — so a retried write is one
  memory (same document, same version content).
- author = the caller: a verified ``principal`` identity ``user:<uuid>`` (so ``forget`` can check it).
- the kind is kept in the title (``decision: <title>``, or ``decision from <agent>`` without one).
- ACL: scope ``user`` -> ``[caller]``; scope ``group:<uuid>`` -> ``[group]``, allowed only when the
  caller holds the group (directly, through the directory, or as an ancestor in the hierarchy).
- ``forget`` is a tombstone (op ``delete``), allowed to the memory's author and to admins.
Identity always comes from the authenticated caller, never from the request body. The read verbs (list, get,
update, whoami) are :mod:`services.memory_verbs`.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiokafka.structs import RecordMetadata

from schemas.envelope import ChangeEnvelope
from schemas.memory import (
    ForgetResponse,
    RememberBatchRequest,
    RememberBatchResponse,
    RememberRequest,
    RememberResponse,
    UpdateMemoryRequest,
    UpdateMemoryResponse,
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

    async def _send(self, env: ChangeEnvelope) -> RecordMetadata:
        """Publish one envelope on the ingest topic the way the HTTP door does (key, ``x-envelope-id``), so a
        memory write is an ordinary envelope to the pipeline."""
        return await self.publisher.send(
            self.topic,
            env.model_dump_json().encode(),
            key=env.key.encode(),
            headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
        )

    async def _publish(self, req: RememberRequest, env: ChangeEnvelope) -> RememberResponse:
        meta = await self._send(env)
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
                f"SELECT d.title, d.thread_external_id, d.principals, d.current_version, {AUTHOR_SQL} AS author"
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
        meta = await self._send(env)
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
        meta = await self._send(env)
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


AUTHOR_SQL = (
    "(SELECT a.value FROM person_aliases a WHERE a.person_id = d.author_person_id AND a.workspace = d.workspace"
    " AND a.namespace = $5 ORDER BY a.value LIMIT 1)"
)
