"""Collaboration handler: ``om.documents.v1`` batch -> documents' contributions replaced, edges refreshed.

Idempotent per document: a document's contributions are recomputed from its current state and replace the
previous ones (keyed by document id), then only the touched edges are re-aggregated — replays and
redeliveries never double count, deletes remove the document's share. One transaction per batch, together
with the processed events. Nothing is published downstream.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from schemas.events import DocumentEvent
from services.collaboration import repository as repo
from services.collaboration.weights import document_pairs
from services.decay import HALF_LIFE_DAYS
from services.kafka.decode import decode_or_dead_letter
from services.kafka.delivery import DeadLetters
from services.kafka.records import Record


class CollabHandler:
    def __init__(
        self, *, pool: asyncpg.Pool, dead_letters: DeadLetters, half_life_days: float = HALF_LIFE_DAYS
    ) -> None:
        self.pool = pool
        self.dead_letters = dead_letters
        self.half_life_days = half_life_days
        self.documents = 0

    async def __call__(self, records: Sequence[Record]) -> None:
        events = [ev for _, ev in await decode_or_dead_letter(records, DocumentEvent, self.dead_letters)]
        if not events:
            return
        ids = list(dict.fromkeys(e.document_id for e in events))
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('collab-edges', 0))")
            docs = await repo.load_documents(conn, ids)
            rows: list[tuple[Any, ...]] = []
            for d in sorted(docs, key=lambda r: r["event_time"]):
                if d["deleted_at"] is not None:
                    continue
                thread = await repo.thread_authors(conn, d)
                participants: list[uuid.UUID] = list(d["participants"])
                for a, b, reason, w in document_pairs(d["author"], participants, thread):
                    rows.append((d["id"], d["workspace"], a, b, reason, w, d["event_time"]))
            pairs = await repo.replace_contributions(conn, [d["id"] for d in docs], rows)
            await repo.refresh_edges(conn, pairs, self.half_life_days)
            await repo.claim_events(conn, [str(e.event_id) for e in events])
        self.documents += len(docs)
