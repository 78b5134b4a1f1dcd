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
from datetime import datetime
from typing import Any

import asyncpg

from schemas.envelope import ChangeEnvelope, DocumentKind
from schemas.procedures import ProcedureSpec, ProcedureVersion
from services.ids import document_id
from services.viewer import Principals

SOURCE_SYSTEM = "procedural_memory"


def normalize(name: str) -> str:
    return " ".join(name.casefold().split())


def external_id(workspace: str, name: str, scope: Sequence[str]) -> str:
    digest = hashlib.sha256(f"{workspace}|{normalize(name)}|{','.join(sorted(scope))}".encode()).hexdigest()
    return f"proc-{digest[:32]}"


def procedure_id(workspace: str, name: str, scope: Sequence[str]) -> uuid.UUID:
    return document_id(f"{workspace}/{SOURCE_SYSTEM}/{external_id(workspace, name, scope)}")


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
