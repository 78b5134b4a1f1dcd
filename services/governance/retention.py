"""Retention: policies per workspace x source system x kind, and the purge.

A purge physically removes expired (``max_age_days`` past their event time) and long-tombstoned
(``purge_tombstoned_after_days`` past their tombstone) documents in bounded batches. One transaction
per batch removes the rows — evidence links (facts left without evidence are deleted, value and all),
every derived row whose last source is purged (identity aliases, taxonomy proposals, cached profiles:
``purged_derived``), entity evidence, collaboration contributions (``hooks``: the edges they fed are
recomputed), participants, chunks
(text and vectors), versions, ACL history, the document — records it as purged, queues the
document's archived envelope lines, and writes one ``retention_audit`` row (who, which policy,
counts). After the commit the queued lines are blanked in their batch objects (an object whose
lines are all purged is deleted); the queue survives a crash and the next run drains it. Documents
under an active legal hold are never selected.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from services.governance import purged
from services.governance import purged_derived as derived
from services.governance.holds import HELD_BY
from services.governance.retention_policies import DUE, forget_due_summary
from services.objectstore.port import ObjectStore

log = logging.getLogger("orgmem.retention")


DEFAULT_BATCH = 200


MAX_BATCHES = 1000


@dataclass
class PurgeBatch:
    workspace: str
    reason: str
    policy: dict[str, Any]
    document_ids: list[uuid.UUID]
    counts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "reason": self.reason,
            "policy": self.policy,
            "document_ids": self.document_ids,
            **{k: self.counts.get(k, 0) for k in COUNT_KEYS},
        }


COUNT_KEYS = ("documents", "chunks", "versions", "evidence_links", "facts_retracted", "blobs")


@dataclass
class RetentionReport:
    run_id: uuid.UUID
    applied: bool
    due: int = 0
    held: int = 0
    batches: list[PurgeBatch] = field(default_factory=list)
    blobs_pending: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "applied": self.applied,
            "due": self.due,
            "held": self.held,
            "batches": [b.as_dict() for b in self.batches],
            "blobs_pending": self.blobs_pending,
        }


async def blob_queue_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM retention_blob_queue"))


def _policy_of(row: Any) -> dict[str, Any]:
    return {
        "workspace": row["workspace"],
        "source_system": row["p_source"],
        "kind": row["p_kind"],
        "max_age_days": row["max_age_days"],
        "purge_tombstoned_after_days": row["purge_tombstoned_after_days"],
    }


def group_batches(rows: list[asyncpg.Record] | list[dict[str, Any]], batch_size: int) -> list[PurgeBatch]:
    """Split due documents into batches of one workspace, reason and policy, at most ``batch_size`` each."""
    groups: dict[str, PurgeBatch] = {}
    out: list[PurgeBatch] = []
    for r in rows:
        policy = _policy_of(r)
        key = json.dumps([r["reason"], policy], sort_keys=True)
        batch = groups.get(key)
        if batch is None or len(batch.document_ids) >= batch_size:
            batch = PurgeBatch(str(r["workspace"]), str(r["reason"]), policy, [])
            groups[key] = batch
            out.append(batch)
        batch.document_ids.append(r["id"])
    return out


async def _referencing(conn: asyncpg.Connection, table: str) -> list[tuple[str, str]]:
    """(table, column) of every single-column foreign key in this schema that references ``table``."""
    rows = await conn.fetch(
        "SELECT c.conrelid::regclass::text AS tbl, a.attname AS col FROM pg_constraint c"
        " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
        " WHERE c.contype = 'f' AND c.confrelid = to_regclass($1) AND cardinality(c.conkey) = 1",
        table,
    )
    return [(str(r["tbl"]), str(r["col"])) for r in rows]


KNOWN = {
    "fact_evidence",
    "person_alias_sources",
    "entity_evidence",
    "chunks",
    "document_versions",
    "acl_history",
    "documents",
}


PurgeHook = Callable[[asyncpg.Connection, list[uuid.UUID]], Awaitable[None]]


"""Runs inside a purge transaction before the rows go (the top floor passes the stages' own cleanups)."""


async def _purge_rows(
    conn: asyncpg.Connection, ids: list[uuid.UUID], hooks: Sequence[PurgeHook] = ()
) -> dict[str, int]:
    """Remove every row of these documents (inside the caller's transaction); returns the counts."""
    counts: dict[str, int] = {}
    blob_keys = await conn.fetch(
        "SELECT DISTINCT blob_key FROM (SELECT blob_key FROM documents WHERE id = ANY($1::uuid[])"
        " UNION ALL SELECT blob_key FROM document_versions WHERE document_id = ANY($1::uuid[])) k"
        " WHERE blob_key IS NOT NULL AND blob_key LIKE '%#%'",
        ids,
    )
    lines = [(k.partition("#")[0], int(k.partition("#")[2])) for k in (r["blob_key"] for r in blob_keys)]
    if lines:
        await conn.executemany(
            "INSERT INTO retention_blob_queue (object_key, line) VALUES ($1, $2) ON CONFLICT DO NOTHING", lines
        )
    counts["blobs"] = len(lines)
    affected = [
        r["fact_id"]
        for r in await conn.fetch("SELECT DISTINCT fact_id FROM fact_evidence WHERE document_id = ANY($1::uuid[])", ids)
    ]
    counts["evidence_links"] = _n(
        await conn.execute("DELETE FROM fact_evidence WHERE document_id = ANY($1::uuid[])", ids)
    )
    # A fact whose last evidence is purged is derived from nothing any more: the row goes, value and all
    # (a tombstone only retracts it; a purge must not leave the purged value in facts.value).
    gone_facts = await conn.fetch(
        "DELETE FROM facts f WHERE f.id = ANY($1::uuid[])"
        " AND NOT EXISTS (SELECT 1 FROM fact_evidence e WHERE e.fact_id = f.id) RETURNING f.workspace, f.subject_id",
        affected,
    )
    counts["facts_retracted"] = len(gone_facts)
    await conn.execute("DELETE FROM entity_evidence WHERE document_id = ANY($1::uuid[])", ids)
    subjects = await derived.purge_derived(conn, ids, {(r["workspace"], r["subject_id"]) for r in gone_facts})
    for hook in hooks:  # stages that derive their own rows from documents (collaboration edges)
        await hook(conn, ids)
    # A document's own entity row (id = document id) keeps no name once its document is gone.
    await conn.execute("DELETE FROM entity_aliases WHERE entity_id = ANY($1::uuid[])", ids)
    await conn.execute(
        "UPDATE entities SET name = '', norm_name = '', updated_at = now() WHERE id = ANY($1::uuid[])"
        " AND type = 'document'",
        ids,
    )
    # Any other table that references chunks or documents (added by later migrations) goes too.
    chunk_ids = [r["id"] for r in await conn.fetch("SELECT id FROM chunks WHERE document_id = ANY($1::uuid[])", ids)]
    for tbl, col in await _referencing(conn, "chunks"):
        await conn.execute(f'DELETE FROM {tbl} WHERE "{col}" = ANY($1::uuid[])', chunk_ids)
    for tbl, col in await _referencing(conn, "documents"):
        if tbl.split(".")[-1].strip('"') not in KNOWN:
            await conn.execute(f'DELETE FROM {tbl} WHERE "{col}" = ANY($1::uuid[])', ids)
    counts["chunks"] = _n(await conn.execute("DELETE FROM chunks WHERE document_id = ANY($1::uuid[])", ids))
    counts["versions"] = _n(
        await conn.execute("DELETE FROM document_versions WHERE document_id = ANY($1::uuid[])", ids)
    )
    await conn.execute("DELETE FROM acl_history WHERE document_id = ANY($1::uuid[])", ids)
    counts["documents"] = _n(await conn.execute("DELETE FROM documents WHERE id = ANY($1::uuid[])", ids))
    await derived.refresh_host_values(conn, subjects)
    return counts


def _n(status: str) -> int:
    """Row count of an asyncpg command status (``DELETE 3``, ``UPDATE 1``)."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


async def run_retention(
    pool: asyncpg.Pool,
    store: ObjectStore,
    *,
    actor: str,
    apply: bool,
    workspace: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    max_batches: int = MAX_BATCHES,
    hooks: Sequence[PurgeHook] = (),
) -> RetentionReport:
    """Select what the policies make due (holds excluded); with ``apply`` purge it batch by batch."""
    report = RetentionReport(run_id=uuid.uuid4(), applied=apply)
    async with pool.acquire() as conn:
        rows = await conn.fetch(f"{DUE} ORDER BY d.workspace, d.id", workspace)
    report.held = sum(1 for r in rows if r["held"])
    due = [r for r in rows if not r["held"]]
    report.due = len(due)
    planned = group_batches(due, batch_size)[:max_batches]
    if not apply:
        for batch in planned:  # a dry run counts what it would remove, nothing else
            batch.counts = {"documents": len(batch.document_ids)}
        report.batches = planned
    else:
        for batch in planned:
            async with pool.acquire() as conn, conn.transaction():
                # Re-check under the transaction: a hold placed since the selection wins.
                still = await conn.fetch(
                    f"SELECT d.id FROM documents d WHERE d.id = ANY($1::uuid[]) AND NOT EXISTS"
                    f" (SELECT 1 FROM legal_holds h WHERE h.released_at IS NULL AND {HELD_BY}) FOR UPDATE OF d",
                    batch.document_ids,
                )
                batch.document_ids = [r["id"] for r in still]
                if not batch.document_ids:
                    continue
                await purged.remember(conn, batch.document_ids, report.run_id)
                batch.counts = await _purge_rows(conn, batch.document_ids, hooks)
                await conn.execute(
                    "INSERT INTO retention_audit (run_id, actor, workspace, policy, reason, documents, chunks,"
                    " versions, evidence_links, facts_retracted, blobs, document_ids)"
                    " VALUES ($1,$2,$3,$4::jsonb,$5,$6,$7,$8,$9,$10,$11,$12)",
                    report.run_id,
                    actor,
                    batch.workspace,
                    json.dumps(batch.policy),
                    batch.reason,
                    *(batch.counts[k] for k in COUNT_KEYS),
                    batch.document_ids,
                )
            report.batches.append(batch)
            log.info(
                "retention purge %s: %s documents of %s (%s) by %s",
                report.run_id,
                batch.counts["documents"],
                batch.workspace,
                batch.reason,
                actor,
            )
        await drain_blob_queue(pool, store)
        forget_due_summary()
    async with pool.acquire() as conn:
        report.blobs_pending = await blob_queue_size(conn)
    return report


async def drain_blob_queue(pool: asyncpg.Pool, store: ObjectStore, *, limit: int = 10_000) -> int:
    """Blank the queued envelope lines in their batch objects; delete objects left with no line.

    Lines still referenced by a live document version are never blanked (a hold, or a neighbour that
    shares the object, keeps its own line). Returns the number of objects rewritten or deleted.
    """
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT q.object_key, q.line FROM retention_blob_queue q WHERE NOT EXISTS ("
            " SELECT 1 FROM document_versions v WHERE v.blob_key = q.object_key || '#' || q.line"
            " UNION ALL SELECT 1 FROM documents d WHERE d.blob_key = q.object_key || '#' || q.line)"
            " ORDER BY q.object_key, q.line LIMIT $1",
            limit,
        )
    by_key: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        by_key[r["object_key"]].add(int(r["line"]))
    done = 0
    for key, lines in by_key.items():
        try:
            data = await store.get(key)
        except Exception as exc:  # missing already (a previous drain deleted it) or unreachable: see below
            if not await _missing(store, key):
                log.warning("retention: cannot read %s (%s); left queued", key, exc)
                continue
            data = None
        if data is not None:
            parts = data.split(b"\n")
            for i in lines:
                if i < len(parts):
                    parts[i] = b""
            if any(p.strip() for p in parts):
                await store.put(key, b"\n".join(parts), "application/x-ndjson")
            else:
                await store.delete(key)
        async with pool.acquire() as conn:
            await conn.execute(
                "DELETE FROM retention_blob_queue WHERE object_key = $1 AND line = ANY($2::int[])", key, sorted(lines)
            )
        done += 1
    return done


async def _missing(store: ObjectStore, key: str) -> bool:
    """True when ``key`` is absent but the store answers (so there is nothing left to blank)."""
    try:
        await store.ping()
    except Exception:  # the store is down: the line stays queued
        return False
    try:
        await store.get(key)
    except Exception:  # the store answers and the key is gone
        return True
    return False
