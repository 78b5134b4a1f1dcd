"""Taxonomy write-back: field-value proposals for registry slots with a ``platform_binding`` (title,
manager, team), the host's decisions on them, promotions, and the signed webhook.

Rules (seed 001, "Taxonomy write-back"):
- The host's ground truth for a slot is its latest ``structured_fields`` value (facts with source
  ``structured``) or, when more recent, the value of a proposal the host APPLIED.
- Knowledge in Org Memory — a current extracted fact, or a promotion by an agent — that differs from it
  becomes a proposal: slot, subject, current host value, proposed value, evidence, confidence, status.
  One proposal per (subject, slot, value): an open one is refreshed, an applied or rejected one is never
  re-opened (a rejected value is not proposed again); an open one whose value is no longer current in
  Org Memory, or that the host now holds, is ``superseded``.
- Conflict rule: login / permissions / assignment are host-owned and never proposed (no binding);
  inferred knowledge wins inside Org Memory (reads keep serving it) until the host applies or rejects.
- Webhook: ``TAXONOMY_PROPOSAL_WEBHOOK_URL`` gets every new proposal as JSON; with
  ``TAXONOMY_PROPOSAL_WEBHOOK_SECRET`` each delivery carries ``X-Org-Memory-Signature: sha256=<hex
  HMAC-SHA256 of the body>``. Bounded attempts with exponential backoff; every attempt is logged in
  ``taxonomy_proposal_deliveries``; a proposal is delivered once (``delivered_at``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

import asyncpg
import httpx

from services.sources import alias_visible_sql, all_visible_sql, array_sources, fact_sources
from services.taxonomy.registry import Registry

log = logging.getLogger("orgmem.taxonomy.proposals")
NAMESPACE = uuid.UUID("0d6a3c5e-41f4-4d0e-9b7a-5e1f0a2c9b11")
SIGNATURE_HEADER = "X-Org-Memory-Signature"
BACKOFF_S = 0.2


def norm(value: str) -> str:
    return " ".join(value.casefold().split())


def proposal_id(workspace: str, subject: uuid.UUID, slot: str, value: str) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, f"{workspace}|{subject}|{slot}|{norm(value)}")


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _target_sql() -> str:
    return "COALESCE(o.name, f.value)"


async def host_values(
    conn: asyncpg.Connection, workspace: str, subject: uuid.UUID, slot: str, predicate: str
) -> list[str]:
    """The host's ground truth for the slot: latest structured value(s), or a more recent applied value."""
    rows = await conn.fetch(
        f"SELECT {_target_sql()} AS v, f.valid_from AS at FROM facts f LEFT JOIN entities o ON o.id = f.object_id"
        " WHERE f.workspace = $1 AND f.subject_id = $2 AND f.predicate = $3 AND f.source = 'structured'"
        " AND f.status <> 'retracted' AND f.invalidated_at IS NULL ORDER BY f.valid_from DESC",
        workspace,
        subject,
        predicate,
    )
    applied = await conn.fetchrow(
        "SELECT proposed_value AS v, decided_at AS at FROM taxonomy_proposals WHERE workspace = $1 AND subject_id = $2"
        " AND slot = $3 AND status = 'applied' ORDER BY decided_at DESC LIMIT 1",
        workspace,
        subject,
        slot,
    )
    latest = rows[0]["at"] if rows else None
    if applied is not None and (latest is None or applied["at"] >= latest):
        return [applied["v"]]
    if not rows:
        return []
    return [r["v"] for r in rows if r["at"] == latest]


def host_visible_sql(viewer: str, *, workspace: str, subject: str, predicate: str, slot: str) -> str:
    """The host's value of a slot is derived from documents too (the structured fields of the subject's
    directory records, or an applied proposal's evidence): a viewer sees it only when EVERY fact and applied
    proposal it may come from passes the all-visible rule (``services.sources``) for ``viewer``."""
    structured = (
        f"SELECT 1 FROM facts hf WHERE hf.workspace = {workspace} AND hf.subject_id = {subject}"
        f" AND hf.predicate = {predicate} AND hf.source = 'structured' AND hf.status <> 'retracted'"
        f" AND hf.invalidated_at IS NULL AND NOT ({all_visible_sql(fact_sources('hf.id'), viewer)})"
    )
    applied = (
        f"SELECT 1 FROM taxonomy_proposals hp WHERE hp.workspace = {workspace} AND hp.subject_id = {subject}"
        f" AND hp.slot = {slot} AND hp.status = 'applied'"
        f" AND NOT ({all_visible_sql(array_sources('hp.evidence'), viewer)})"
    )
    return f"(NOT EXISTS ({structured}) AND NOT EXISTS ({applied}))"


def host_entity_visible_sql(viewer: str, alias: str = "t") -> str:
    """The host's user id on a proposal is the subject's ``platform_user`` alias: shown under its sources."""
    return (
        f"EXISTS (SELECT 1 FROM person_aliases a WHERE a.workspace = {alias}.workspace"
        f" AND a.namespace = 'platform_user' AND a.value = {alias}.host_entity_id AND {alias_visible_sql(viewer)})"
    )


async def upsert_proposal(
    conn: asyncpg.Connection,
    *,
    workspace: str,
    subject: uuid.UUID,
    slot: str,
    predicate: str,
    host: Sequence[str],
    value: str,
    entity: uuid.UUID | None,
    evidence: Sequence[uuid.UUID],
    confidence: float,
    origin: str,
    fact_id: uuid.UUID | None,
) -> tuple[uuid.UUID, bool]:
    """(proposal id, created now). Never re-opens an applied/rejected proposal."""
    pid = proposal_id(workspace, subject, slot, value)
    host_entity = await conn.fetchval(
        "SELECT a.value FROM person_aliases a JOIN people p ON p.id = a.person_id"
        " WHERE a.namespace = 'platform_user' AND COALESCE(p.merged_into, p.id) = $1 ORDER BY a.value LIMIT 1",
        subject,
    )
    row = await conn.fetchrow(
        "INSERT INTO taxonomy_proposals (id, workspace, subject_id, slot, predicate, host_value, proposed_value,"
        " proposed_norm, proposed_entity_id, evidence, confidence, origin, fact_id, host_entity_id)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::uuid[], $11, $12, $13, $14)"
        " ON CONFLICT (id) DO UPDATE SET host_value = EXCLUDED.host_value, evidence = EXCLUDED.evidence,"
        " confidence = GREATEST(taxonomy_proposals.confidence, EXCLUDED.confidence),"
        " host_entity_id = COALESCE(EXCLUDED.host_entity_id, taxonomy_proposals.host_entity_id),"
        " status = CASE WHEN taxonomy_proposals.status = 'superseded' THEN 'open' ELSE taxonomy_proposals.status END,"
        " updated_at = now()"
        " WHERE taxonomy_proposals.status IN ('open', 'superseded')"
        " RETURNING (xmax = 0) AS created",
        pid,
        workspace,
        subject,
        slot,
        predicate,
        ", ".join(host) or None,
        value,
        norm(value),
        entity,
        sorted(set(evidence), key=str),
        confidence,
        origin,
        fact_id,
        host_entity,
    )
    return pid, bool(row and row["created"])


async def refresh_subjects(
    conn: asyncpg.Connection, registry: Registry, workspace: str, subjects: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """Recompute extracted-knowledge proposals of these subjects; returns the ids of new proposals."""
    created: list[uuid.UUID] = []
    for slot, spec in sorted(registry.platform_bound().items()):
        for subject in sorted(set(subjects), key=str):
            host = await host_values(conn, workspace, subject, slot, spec.name)
            held = {norm(h) for h in host}
            current = await conn.fetch(
                f"SELECT f.id, {_target_sql()} AS v, f.object_id, f.confidence,"
                " ARRAY(SELECT DISTINCT e.document_id FROM fact_evidence e WHERE e.fact_id = f.id) AS docs"
                " FROM facts f LEFT JOIN entities o ON o.id = f.object_id"
                " WHERE f.workspace = $1 AND f.subject_id = $2 AND f.predicate = $3 AND f.source <> 'structured'"
                " AND f.status = 'active' AND f.invalidated_at IS NULL AND f.valid_to IS NULL"
                " AND f.valid_from <= now()",
                workspace,
                subject,
                spec.name,
            )
            live: set[uuid.UUID] = set()
            for r in current:
                if not r["v"] or norm(r["v"]) in held or not r["docs"]:
                    continue
                pid, new = await upsert_proposal(
                    conn,
                    workspace=workspace,
                    subject=subject,
                    slot=slot,
                    predicate=spec.name,
                    host=host,
                    value=r["v"],
                    entity=r["object_id"],
                    evidence=r["docs"],
                    confidence=float(r["confidence"]),
                    origin="extracted",
                    fact_id=r["id"],
                )
                live.add(pid)
                if new:
                    created.append(pid)
            await conn.execute(
                "UPDATE taxonomy_proposals SET status = 'superseded', updated_at = now()"
                " WHERE workspace = $1 AND subject_id = $2 AND slot = $3 AND status = 'open' AND origin = 'extracted'"
                " AND NOT (id = ANY($4::uuid[]))",
                workspace,
                subject,
                slot,
                list(live),
            )
    return created


async def subjects_of_documents(
    conn: asyncpg.Connection, registry: Registry, workspace: str, documents: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """Subjects whose bound slots these documents touch (as evidence now, or behind an open proposal)."""
    preds = [p.name for p in registry.platform_bound().values()]
    rows = await conn.fetch(
        "SELECT DISTINCT f.subject_id FROM fact_evidence e JOIN facts f ON f.id = e.fact_id"
        " WHERE e.document_id = ANY($1::uuid[]) AND f.workspace = $2 AND f.predicate = ANY($3::text[])"
        " UNION SELECT subject_id FROM taxonomy_proposals WHERE workspace = $2 AND status = 'open'"
        " AND evidence && $1::uuid[]",
        list(documents),
        workspace,
        preds,
    )
    return [r["subject_id"] for r in rows]


# --- webhook -----------------------------------------------------------------------------------


def payload(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "proposal_id": str(row["id"]),
        "workspace": row["workspace"],
        "slot": row["slot"],
        "subject_id": str(row["subject_id"]),
        "host_entity_id": row["host_entity_id"],
        "current_host_value": row["host_value"],
        "proposed_value": row["proposed_value"],
        "evidence": [str(d) for d in row["evidence"]],
        "confidence": float(row["confidence"]),
        "origin": row["origin"],
        "status": row["status"],
    }


@dataclass
class Webhook:
    """Where open proposals are delivered (``TAXONOMY_PROPOSAL_WEBHOOK_URL``), signed with ``secret``."""

    url: str
    _: KW_ONLY
    secret: str | None
    attempts: int = 3
    backoff_s: float = BACKOFF_S
    timeout: float = 5.0

    async def deliver_pending(self, pool: asyncpg.Pool, limit: int = 100) -> int:
        """Deliver open, undelivered proposals; returns how many were delivered."""
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT * FROM taxonomy_proposals WHERE delivered_at IS NULL AND status = 'open'"
                " AND delivery_attempts < $1 ORDER BY created_at LIMIT $2",
                self.attempts,
                limit,
            )
        done = 0
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for row in rows:
                if await self._deliver(pool, client, row):
                    done += 1
        return done

    async def _deliver(self, pool: asyncpg.Pool, client: httpx.AsyncClient, row: asyncpg.Record) -> bool:
        body = json.dumps({"event": "taxonomy_proposal.created", "proposal": payload(row)}, sort_keys=True).encode()
        headers = {"content-type": "application/json", "X-Org-Memory-Proposal-Id": str(row["id"])}
        if self.secret:
            headers[SIGNATURE_HEADER] = sign(self.secret, body)
        for attempt in range(int(row["delivery_attempts"]) + 1, self.attempts + 1):
            code: int | None = None
            error: str | None = None
            try:
                resp = await client.post(self.url, content=body, headers=headers)
                code = resp.status_code
                ok = 200 <= code < 300
                if not ok:
                    error = f"HTTP {code}"
            except httpx.HTTPError as exc:
                ok, error = False, f"{type(exc).__name__}: {exc}"[:500]
            async with pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO taxonomy_proposal_deliveries (proposal_id, attempt, url, status_code, ok, error)"
                    " VALUES ($1, $2, $3, $4, $5, $6)",
                    row["id"],
                    attempt,
                    self.url,
                    code,
                    ok,
                    error,
                )
                await conn.execute(
                    "UPDATE taxonomy_proposals SET delivery_attempts = $2,"
                    " delivered_at = CASE WHEN $3 THEN now() ELSE delivered_at END WHERE id = $1",
                    row["id"],
                    attempt,
                    ok,
                )
            if ok:
                return True
            log.warning("proposal webhook attempt %d/%d failed: %s", attempt, self.attempts, error)
            if attempt < self.attempts:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        return False


def webhook_from_settings(settings: Any) -> Webhook | None:
    if not settings.taxonomy_proposal_webhook_url:
        return None
    secret = settings.taxonomy_proposal_webhook_secret
    return Webhook(
        settings.taxonomy_proposal_webhook_url,
        secret=secret.get_secret_value() if secret else None,
        attempts=settings.taxonomy_proposal_webhook_attempts,
    )
