"""Procedural memory on the runtime floor: identity, the versions table ingest maintains, viewer reads.

A procedure is a document of kind ``procedure`` (source system ``procedural_memory``) whose external id
is derived from (workspace, normalised name, scope principals), so a re-post of the same name in the same
scope is a new version of the same document. Ingest records every version in ``procedure_versions``
(superseded ones keep their steps) and marks them deleted on a tombstone. Visibility follows the
document's ACL (any of its principals), like passages.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from schemas.envelope import ChangeEnvelope, DocumentKind
from schemas.procedures import ProcedureSpec, ProcedureVersion
from services.errors import OrgMemoryError
from services.ids import document_id
from services.memories import PRINCIPAL_NAMESPACE
from services.viewer import Principals

if TYPE_CHECKING:
    from services.runtime import Runtime

SOURCE_SYSTEM = "procedural_memory"


def normalize(name: str) -> str:
    return " ".join(name.casefold().split())


def external_id(workspace: str, name: str, scope: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{workspace}|{normalize(name)}|{','.join(sorted(scope))}".encode()).hexdigest()
    return f"proc-{digest[:32]}"


def procedure_id(workspace: str, name: str, scope: Sequence[str]) -> uuid.UUID:
    return document_id(f"{workspace}/{SOURCE_SYSTEM}/{external_id(workspace, name, scope)}")


class ProcedureScopeError(OrgMemoryError):
    """A procedure scope the caller may not write (422 naming ``scope``)."""

    status = 422
    field = "scope"


def caller_scope(held: frozenset[str], principal_id: str | None, asked: Sequence[str]) -> list[str]:
    """The scope of a procedure (or proposal) the caller writes: ``asked``, or the caller itself; every principal
    must be one the caller holds (``held``: its principals, groups expanded) — nobody writes into a scope it lacks."""
    scope = list(asked) or ([principal_id] if principal_id else [])
    if not scope:
        raise ProcedureScopeError("give a scope, or call with X-Principal-Id (default scope)")
    foreign = [p for p in scope if p not in held]
    if foreign:
        raise ProcedureScopeError(f"the caller does not hold {foreign[0]}")
    return sorted(scope)


def author(principal_id: str | None) -> dict[str, Any] | None:
    """The author of a procedure, keyed like agent memory writes (``services.memories``): a verified
    ``principal`` identity ``user:<uuid>``."""
    if not principal_id:
        return None
    return {"identities": [{"namespace": PRINCIPAL_NAMESPACE, "value": principal_id, "verified": True}]}


def upsert_envelope(
    workspace: str,
    spec: ProcedureSpec,
    scope: Sequence[str],
    *,
    author_principal: str | None,
    envelope_id: uuid.UUID | None = None,
    event_time: datetime | None = None,
) -> ChangeEnvelope:
    """The ``procedure`` envelope that creates (or versions) the procedure (workspace, name, scope): what
    ``POST /v1/procedural-memories`` and an approved proposal produce."""
    return ChangeEnvelope.model_validate(
        {
            "envelope_id": str(envelope_id or uuid.uuid4()),
            "workspace": workspace,
            "op": "upsert",
            "source": {"system": SOURCE_SYSTEM, "external_id": external_id(workspace, spec.name, scope)},
            "event_time": (event_time or datetime.now(UTC)).isoformat(),
            "document": {"kind": "procedure", "title": spec.name, "text": spec.render(), "procedure": spec},
            "author": author(author_principal),
            "acl": {"principals": list(scope)},
        }
    )


async def publish(rt: Runtime, env: ChangeEnvelope) -> Any:
    """Produce a procedure envelope to ``om.envelopes.v1`` (ingest versions it); the record metadata."""
    return await rt.publisher.send(
        rt.settings.topic("envelopes"),
        env.model_dump_json().encode(),
        key=env.key.encode(),
        headers={"x-event-type": "envelope", "x-envelope-id": str(env.envelope_id)},
    )


async def record_versions(
    conn: asyncpg.Connection, changes: Sequence[tuple[ChangeEnvelope, uuid.UUID, int, bool]]
) -> None:
    """Called by ingest inside its transaction. changes: (envelope, document id, version after it, is
    the document deleted now). A new content version of a procedure is recorded and supersedes the older
    ones; a tombstone marks every version deleted."""
    tombstones = [doc_id for _, doc_id, _, deleted in changes if deleted]
    if tombstones:  # one statement for the batch (most tombstones are not procedures)
        await conn.execute(
            "UPDATE procedure_versions SET deleted_at = COALESCE(deleted_at, now())"
            " WHERE document_id = ANY($1::uuid[])",
            tombstones,
        )
    for env, doc_id, version, deleted in changes:
        if deleted:
            continue
        d = env.document
        if d is None or d.kind is not DocumentKind.PROCEDURE or d.procedure is None:
            continue
        spec = d.procedure
        await conn.execute(
            "INSERT INTO procedure_versions (document_id, version, workspace, name, norm_name, spec, principals,"
            " event_time) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::text[], $8)"
            " ON CONFLICT (document_id, version) DO NOTHING",
            doc_id,
            version,
            env.workspace,
            spec.name,
            normalize(spec.name),
            spec.model_dump_json(),
            list(env.acl.principals),
            env.event_time,
        )
        await conn.execute(
            "UPDATE procedure_versions SET superseded_at = COALESCE(superseded_at, now()), deleted_at = NULL"
            " WHERE document_id = $1 AND version < $2 AND superseded_at IS NULL",
            doc_id,
            version,
        )
        await conn.execute(
            "UPDATE procedure_versions SET deleted_at = NULL WHERE document_id = $1 AND version = $2", doc_id, version
        )


def _version(r: asyncpg.Record, current: int | None, deleted: bool) -> ProcedureVersion:
    spec = ProcedureSpec.model_validate(json.loads(r["spec"]))
    status = "deleted" if deleted or r["deleted_at"] else ("current" if r["version"] == current else "superseded")
    return ProcedureVersion(
        procedure_id=r["document_id"],
        version=r["version"],
        name=spec.name,
        description=spec.description,
        steps=list(spec.steps),
        when_to_use=spec.when_to_use,
        tools=list(spec.tools),
        subjects=list(spec.subjects),
        scope=list(r["principals"]),
        status=status,
        recorded_at=r["recorded_at"],
        superseded_at=r["superseded_at"],
    )


async def visible_versions(
    conn: asyncpg.Connection, *, workspace: str, viewer: Principals, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[ProcedureVersion | None, list[ProcedureVersion]]]:
    """id -> (current version or None when deleted, every version newest first), for procedures whose
    document the viewer can see (tombstoned ones included, so a delete can be confirmed)."""
    if not viewer or not ids:
        return {}
    rows = await conn.fetch(
        "SELECT v.*, d.current_version, d.deleted_at AS doc_deleted FROM procedure_versions v"
        " JOIN documents d ON d.id = v.document_id"
        " WHERE v.workspace = $1 AND v.document_id = ANY($2::uuid[]) AND d.principals && $3::text[]"
        " ORDER BY v.document_id, v.version DESC",
        workspace,
        list(ids),
        list(viewer),
    )
    out: dict[uuid.UUID, tuple[ProcedureVersion | None, list[ProcedureVersion]]] = {}
    for r in rows:
        deleted = r["doc_deleted"] is not None
        v = _version(r, r["current_version"], deleted)
        cur, versions = out.get(r["document_id"], (None, []))
        versions.append(v)
        if v.status == "current":
            cur = v
        out[r["document_id"]] = (cur, versions)
    return out


def last_recorded(versions: Sequence[ProcedureVersion]) -> datetime | None:
    return max((v.recorded_at for v in versions), default=None)


def as_json(v: ProcedureVersion) -> dict[str, Any]:
    return v.model_dump(mode="json")
